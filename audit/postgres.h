/* The audit log in PostgreSQL (libpq), for several replicas sharing one:
 * the same tables, indexes and hash chains as the SQLite log, a schema
 * version in medic_schema, and `medic audit migrate` to move an SQLite log
 * there with its chains intact. */
#ifndef MEDIC_AUDIT_POSTGRES_H
#define MEDIC_AUDIT_POSTGRES_H

#include "audit.h"
#include "error.h"

#include <libpq-fe.h>

/* err set to "postgresql: WHAT: libpq's message" (MEDIC_E_STORE); returns
 * the code. */
int audit_pg_error(struct medic_error *err, PGconn *c, const char *what);

/* Whether an audit location names PostgreSQL (postgresql:// or postgres://). */
int audit_pg_is_url(const char *location);

/* location for a log line: a URL's password replaced by "***". */
void audit_location_redacted(const char *location, char *out, size_t size);

/* Connects (10 s at most) with lock_timeout and
 * idle_in_transaction_session_timeout set, so that a replica stopped
 * mid-transaction cannot hold the others' writes for long. err never
 * carries the password. */
int audit_pg_connect(const char *url, PGconn **out, struct medic_error *err);

/* Creates the schema in an empty database, or checks the version of an
 * existing one (refusing one newer than this build). */
int audit_pg_schema(PGconn *c, struct medic_error *err);

/* Recomputes the hash chains, as audit_verify does for SQLite. */
int audit_pg_verify(PGconn *c, struct audit_verify_result *out, struct medic_error *err);

/* Copies the SQLite audit log at path into the empty PostgreSQL one at url
 * in one transaction, table by table in id order, then verifies the
 * chains there; progress lines go to progress (NULL: none). */
#define AUDIT_PG_TABLES 7
extern const char *const audit_pg_tables[AUDIT_PG_TABLES];
struct audit_pg_migrated {
    long long rows[AUDIT_PG_TABLES]; /* per table, in audit_pg_tables order */
    struct audit_verify_result verified;
};
int audit_pg_migrate(const char *path, const char *url, void (*progress)(const char *line),
                     struct audit_pg_migrated *out, struct medic_error *err);

#endif

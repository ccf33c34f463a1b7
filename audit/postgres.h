/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log in PostgreSQL (libpq), for several replicas sharing one
 * (private to audit/ and its test probes):
 * the same tables, indexes and hash chains as the SQLite log, a schema
 * version in medic_schema, and `medic audit migrate` to move an SQLite log
 * there with its chains intact. */
#ifndef MEDIC_AUDIT_POSTGRES_H
#define MEDIC_AUDIT_POSTGRES_H

#include "audit.h"
#include "error.h"

#include <libpq-fe.h>

/* Connects (10 s at most) with lock_timeout and
 * idle_in_transaction_session_timeout set, so that a replica stopped
 * mid-transaction cannot hold the others' writes for long. err never
 * carries the password. */
int audit_pg_connect(const char *url, PGconn **out, struct medic_error *err);

/* Creates the schema in an empty database, or checks the version of an
 * existing one (refusing one newer than this build). */
int audit_pg_schema(PGconn *c, struct medic_error *err);

#endif

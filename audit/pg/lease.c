/* SPDX-License-Identifier: Apache-2.0 */
/* The leader's lease on PostgreSQL (pg.h): the lease row, its fence in
 * the writer's transactions, and the daemon's and an operator's view of
 * it through the backend's table (audit/lease.c). */
#include "pg.h"
#include "schema.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs sql with $1 the replica and $2 the epoch. */
static PGresult *with_replica_epoch(PGconn *c, const char *sql, const char *replica, int64_t epoch)
{
    char e[32];
    snprintf(e, sizeof(e), "%lld", (long long)epoch);
    const char *params[] = {replica, e};
    return PQexecParams(c, sql, 2, NULL, params, NULL, NULL, 0);
}

/* epoch, holder, config_hash, forced, last_forced, live: into out. */
static void lease_from(PGresult *r, struct audit_lease *out)
{
    out->epoch = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    snprintf(out->holder, sizeof(out->holder), "%s", PQgetvalue(r, 0, 1));
    snprintf(out->config_hash, sizeof(out->config_hash), "%s", PQgetvalue(r, 0, 2));
    snprintf(out->forced, sizeof(out->forced), "%s", PQgetvalue(r, 0, 3));
    snprintf(out->last_forced, sizeof(out->last_forced), "%s", PQgetvalue(r, 0, 4));
    out->live = PQgetvalue(r, 0, 5)[0] == 't';
}

#define LEASE_COLUMNS                                                                              \
    "epoch, holder, config_hash, forced, last_forced, expires_at > clock_timestamp()"

/* The stored lease; 0 with out->epoch 0 when there is none. */
static int read_lease(PGconn *c, struct audit_lease *out, struct medic_error *err)
{
    PGresult *r = PQexec(c, "SELECT " LEASE_COLUMNS " FROM medic_lease WHERE id = 1");
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = audit_pg_error(err, c, "cannot read the lease");
    else if (PQntuples(r) == 1)
        lease_from(r, out);
    PQclear(r);
    return rc;
}

int audit_lease_renew(PGconn *c, const char *replica, const char *config_hash, int64_t lease_ms,
                      struct audit_lease *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    int rc = 0;
    char ms[32];
    snprintf(ms, sizeof(ms), "%lld", (long long)lease_ms);
    const char *params[] = {replica, ms, config_hash};
    /* renew our own live lease (same epoch), or take an expired one (the
     * next epoch) when its last holder ran the same configuration, or an
     * operator forced it (the word is used up, and kept as the last one);
     * a live lease of another replica is left alone. The expiry counts
     * from when the row is updated: a statement that waited for the row's
     * lock must not start its term already spent. */
    PGresult *r = PQexecParams(
        c,
        "INSERT INTO medic_lease AS l (id, holder, epoch, expires_at, config_hash) "
        "VALUES (1, $1, 1, clock_timestamp() + $2::bigint * interval '1 millisecond', $3) "
        "ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, "
        "  epoch = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() "
        "          THEN l.epoch ELSE l.epoch + 1 END, "
        "  expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond', "
        "  config_hash = EXCLUDED.config_hash, "
        "  forced = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() "
        "           THEN l.forced ELSE '' END, "
        "  last_forced = CASE WHEN l.expires_at <= clock_timestamp() AND l.forced <> '' "
        "                AND l.config_hash NOT IN ('', EXCLUDED.config_hash) "
        "                THEN l.forced || ' (taken by ' || EXCLUDED.holder || ' at ' || "
        "                     to_char(clock_timestamp() AT TIME ZONE 'UTC', "
        "                             'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') || ')' "
        "                ELSE l.last_forced END "
        "WHERE (l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp()) "
        "   OR (l.expires_at <= clock_timestamp() "
        "       AND (l.config_hash IN ('', EXCLUDED.config_hash) OR l.forced <> '')) "
        "RETURNING " LEASE_COLUMNS,
        3, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = audit_pg_error(err, c, "cannot renew the lease");
    else if (PQntuples(r) == 1) {
        lease_from(r, out);
        out->ours = 1;
    }
    PQclear(r);
    if (rc || out->ours)
        return rc;
    return read_lease(c, out, err);
}

int audit_lease_fence(struct db *d, struct db_stmt **cached, const char *replica, int64_t epoch,
                      struct medic_error *err)
{
    int rc = *cached ? 0
                     : db_prepare_cached(d,
                                         "SELECT 1 FROM medic_lease WHERE id = 1 AND holder = ?1"
                                         " AND epoch = ?2 AND expires_at > clock_timestamp()"
                                         " FOR SHARE",
                                         cached, err);
    if (rc)
        return rc;
    db_bind_text(*cached, 1, replica);
    db_bind_int64(*cached, 2, epoch);
    int r = db_step(*cached, err);
    db_clear(*cached);
    if (r < 0) {
        medic_error_prefix(err, "cannot check the lease");
        return r;
    }
    if (r == 0)
        return medic_error_set(err, MEDIC_E_FENCED,
                               "replica %s no longer holds the lease of epoch %lld", replica,
                               (long long)epoch);
    return 0;
}

int audit_lease_release(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err)
{
    PGresult *r = with_replica_epoch(c,
                                     "UPDATE medic_lease SET expires_at = clock_timestamp() "
                                     "WHERE id = 1 AND holder = $1 AND epoch = $2::bigint",
                                     replica, epoch);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : audit_pg_error(err, c, "cannot release");
    PQclear(r);
    return rc;
}

/* ---- the daemon's view: a connection of its own ---- */

struct pg_lease {
    char *url;
    char replica[64];
    PGconn *conn;
    int held; /* this replica held the lease at its last renewal */
};

int audit_pg_lease_open(const char *location, const char *replica, void **out,
                        struct medic_error *err)
{
    struct pg_lease *c = calloc(1, sizeof(*c));
    if (!c || !(c->url = strdup(location))) {
        free(c);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    snprintf(c->replica, sizeof(c->replica), "%s", replica);
    *out = c;
    return 0;
}

void audit_pg_lease_free(void *lease)
{
    struct pg_lease *c = lease;
    PQfinish(c->conn);
    free(c->url);
    free(c);
}

/* Connected, or connected again after a break. */
static int client_conn(struct pg_lease *c, struct medic_error *err)
{
    if (!c->conn)
        return audit_pg_connect(c->url, &c->conn, err);
    if (PQstatus(c->conn) != CONNECTION_OK)
        PQreset(c->conn);
    return 0;
}

int audit_pg_lease_renew(void *lease, const char *config_hash, int64_t lease_ms,
                         struct audit_lease *out, struct medic_error *err)
{
    struct pg_lease *c = lease;
    memset(out, 0, sizeof(*out));
    int rc = client_conn(c, err);
    /* a replica that may take the lease reads it first: a new term over
     * another configuration was an operator's word, to be told */
    struct audit_lease before = {0};
    if (rc == 0 && !c->held)
        rc = read_lease(c->conn, &before, err);
    if (rc == 0)
        rc = audit_lease_renew(c->conn, c->replica, config_hash, lease_ms, out, err);
    if (rc)
        return rc;
    out->took_forced = out->ours && before.epoch && out->epoch != before.epoch &&
                       before.config_hash[0] && strcmp(before.config_hash, config_hash) != 0;
    c->held = out->ours;
    return 0;
}

int audit_pg_lease_clock(void *lease, int64_t *db_now, int64_t *mono_at, struct medic_error *err)
{
    struct pg_lease *c = lease;
    int rc = client_conn(c, err);
    if (rc)
        return rc;
    int64_t before = medic_time_monotonic();
    PGresult *r =
        PQexec(c->conn, "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint");
    int64_t after = medic_time_monotonic();
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        rc = audit_pg_error(err, c->conn, "cannot read the database's clock");
    else {
        *db_now = strtoll(PQgetvalue(r, 0, 0), NULL, 10) * 1000;
        *mono_at = before + (after - before) / 2;
    }
    PQclear(r);
    return rc;
}

int audit_pg_lease_release(void *lease, int64_t epoch, struct medic_error *err)
{
    struct pg_lease *c = lease;
    int rc = client_conn(c, err);
    return rc ? rc : audit_lease_release(c->conn, c->replica, epoch, err);
}

/* ---- an operator's tools ---- */

/* The schema from which the lease holds configurations and forces. */
#define AUDIT_LEASE_SCHEMA 8

static int operator_conn(const char *location, PGconn **out, struct medic_error *err)
{
    int rc = audit_pg_connect(location, out, err);
    if (rc)
        return rc;
    /* an operator's command reads the schema, never migrates it */
    PGresult *v = PQexec(*out, "SELECT max(version) FROM medic_schema");
    int version = PQresultStatus(v) == PGRES_TUPLES_OK && !PQgetisnull(v, 0, 0)
                      ? atoi(PQgetvalue(v, 0, 0))
                      : 0;
    PQclear(v);
    if (version < AUDIT_LEASE_SCHEMA || version > AUDIT_SCHEMA_VERSION) {
        PQfinish(*out);
        *out = NULL;
        return medic_error_set(
            err, MEDIC_E_STORE,
            version <= 0 ? "postgresql: no medic audit log in this database"
            : version < AUDIT_LEASE_SCHEMA
                ? "postgresql: the audit log is at schema %d, before the "
                  "lease kept configurations (%d): start a replica of this "
                  "medic first"
                : "postgresql: the audit log's schema %d is newer than this "
                  "medic's (%d): upgrade medic",
            version, version < AUDIT_LEASE_SCHEMA ? AUDIT_LEASE_SCHEMA : AUDIT_SCHEMA_VERSION);
    }
    return 0;
}

int audit_pg_lease_read(const char *location, struct audit_lease *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    PGconn *c = NULL;
    int rc = operator_conn(location, &c, err);
    if (rc == 0)
        rc = read_lease(c, out, err);
    if (rc == 0 && out->epoch == 0)
        rc = medic_error_set(err, MEDIC_E_NOTFOUND, "no replica has taken the lease yet");
    PQfinish(c);
    return rc;
}

int audit_pg_lease_force(const char *location, const char *reason, struct medic_error *err)
{
    if (!reason || !reason[0])
        return medic_error_set(err, MEDIC_E_INVALID, "say why: a reason is recorded");
    PGconn *c = NULL;
    int rc = operator_conn(location, &c, err);
    if (rc == 0) {
        const char *params[] = {reason};
        PGresult *r = PQexecParams(
            c,
            "UPDATE medic_lease SET forced = left($1, 400) || ' (forced at ' || "
            "  to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
            "  || ' by ' || session_user || ')' WHERE id = 1",
            1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = audit_pg_error(err, c, "cannot record the force");
        else if (strcmp(PQcmdTuples(r), "1") != 0)
            rc = medic_error_set(err, MEDIC_E_NOTFOUND, "no replica has taken the lease yet");
        PQclear(r);
    }
    PQfinish(c);
    return rc;
}

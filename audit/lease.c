#include "lease.h"
#include "postgres.h"

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

int audit_lease_renew(PGconn *c, const char *replica, int64_t lease_ms, struct audit_lease *out,
                      struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    char ms[32];
    snprintf(ms, sizeof(ms), "%lld", (long long)lease_ms);
    const char *params[] = {replica, ms};
    /* renew our own live lease (same epoch), or take an expired one (the
     * next epoch); a live lease of another replica is left alone. The
     * expiry counts from when the row is updated: a statement that waited
     * for the row's lock must not start its term already spent. */
    PGresult *r = PQexecParams(
        c,
        "INSERT INTO medic_lease AS l (id, holder, epoch, expires_at) "
        "VALUES (1, $1, 1, clock_timestamp() + $2::bigint * interval '1 millisecond') "
        "ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, "
        "  epoch = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() "
        "          THEN l.epoch ELSE l.epoch + 1 END, "
        "  expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond' "
        "WHERE (l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp()) "
        "   OR l.expires_at <= clock_timestamp() "
        "RETURNING epoch, holder",
        2, NULL, params, NULL, NULL, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = audit_pg_error(err, c, "cannot renew the lease");
    else if (PQntuples(r) == 1) {
        out->epoch = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(out->holder, sizeof(out->holder), "%s", PQgetvalue(r, 0, 1));
        out->ours = 1;
    }
    PQclear(r);
    if (rc || out->ours)
        return rc;
    r = PQexec(c, "SELECT epoch, holder FROM medic_lease WHERE id = 1");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = audit_pg_error(err, c, "cannot read the lease");
    else if (PQntuples(r) == 1) {
        out->epoch = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        snprintf(out->holder, sizeof(out->holder), "%s", PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

int audit_lease_fence(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err)
{
    PGresult *r = with_replica_epoch(c,
                                     "SELECT 1 FROM medic_lease WHERE id = 1 AND holder = $1 "
                                     "AND epoch = $2::bigint AND expires_at > clock_timestamp() "
                                     "FOR SHARE",
                                     replica, epoch);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = audit_pg_error(err, c, "cannot check the lease");
    else if (PQntuples(r) != 1)
        rc = medic_error_set(err, MEDIC_E_FENCED,
                             "replica %s no longer holds the lease of epoch %lld", replica,
                             (long long)epoch);
    PQclear(r);
    return rc;
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

/* SPDX-License-Identifier: Apache-2.0 */
/* A TEST PROBE for the leader lease (audit/pg/lease.c), not part of medic:
 * one replica that renews the lease every INTERVAL_MS and, while it leads,
 * writes a row into probe_writes in a fenced transaction each time, the
 * way a leader writes a decision. It prints a line when it gains, keeps or
 * loses the lead, or is fenced:
 *
 *   pg_lease_probe URL REPLICA LEASE_MS INTERVAL_MS
 *
 * tests/integration/test_ha_lease.py runs several against one PostgreSQL
 * and stops, pauses and kills them. A file named `stall` in the working
 * directory makes the next fenced transaction stall for that many
 * milliseconds between its lease check and its write (the file is removed
 * first): a leader frozen while it holds the lease row's lock. */
#include "pg/pg.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* "REPLICA EVENT EPOCH DETAIL" */
static void say(const char *replica, const char *event, long long epoch, const char *detail)
{
    printf("%s %s %lld %s\n", replica, event, epoch, detail);
    fflush(stdout);
}

/* One fenced write: the lease checked and share-locked, the row, commit. */
static int fenced_write(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err)
{
    PQclear(PQexec(c, "BEGIN"));
    struct db *d = audit_pg_db(c);
    struct db_stmt *fence = NULL;
    int rc = d ? audit_lease_fence(d, &fence, replica, epoch, err)
               : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    db_finalize(fence);
    db_free(d);
    FILE *stall = rc == 0 ? fopen("stall", "r") : NULL;
    if (stall) {
        long ms = 0;
        if (fscanf(stall, "%ld", &ms) != 1)
            ms = 0;
        fclose(stall);
        remove("stall");
        say(replica, "stalling", (long long)epoch, "inside its fenced transaction");
        sleep_ms(ms);
    }
    if (rc == 0) {
        char e[32];
        snprintf(e, sizeof(e), "%lld", (long long)epoch);
        const char *params[] = {replica, e};
        PGresult *r = PQexecParams(c,
                                   "INSERT INTO probe_writes (replica, epoch) "
                                   "VALUES ($1, $2::bigint)",
                                   2, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = medic_error_set(err, MEDIC_E_STORE, "%s", PQerrorMessage(c));
        PQclear(r);
    }
    PGresult *end = PQexec(c, rc == 0 ? "COMMIT" : "ROLLBACK");
    if (rc == 0 && PQresultStatus(end) != PGRES_COMMAND_OK)
        rc = medic_error_set(err, MEDIC_E_STORE, "%s", PQerrorMessage(c));
    PQclear(end);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: pg_lease_probe URL REPLICA LEASE_MS INTERVAL_MS\n");
        return 2;
    }
    const char *url = argv[1], *replica = argv[2];
    const long long lease_ms = atoll(argv[3]);
    const long interval = atol(argv[4]);
    struct medic_error err = {0};
    PGconn *c = NULL;
    int64_t leading = 0; /* the epoch this replica leads in, or 0 */
    signal(SIGTERM, on_term);
    while (!stopping) {
        if (!c || PQstatus(c) != CONNECTION_OK) {
            PQfinish(c);
            c = NULL;
            int rc = audit_pg_connect(url, &c, &err) || audit_pg_schema(c, &err);
            if (!rc) {
                PGresult *r = PQexec(c, "CREATE TABLE IF NOT EXISTS probe_writes ("
                                        " id BIGSERIAL PRIMARY KEY, replica TEXT NOT NULL,"
                                        " epoch BIGINT NOT NULL,"
                                        " at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())");
                if (PQresultStatus(r) != PGRES_COMMAND_OK)
                    rc = medic_error_set(&err, MEDIC_E_STORE, "%s", PQerrorMessage(c));
                PQclear(r);
            }
            if (rc) {
                say(replica, "error", 0, err.msg);
                PQfinish(c);
                c = NULL;
                sleep_ms(interval);
                continue;
            }
        }
        struct audit_lease l;
        if (audit_lease_renew(c, replica, "probe", lease_ms, &l, &err)) {
            say(replica, "error", leading, err.msg);
        } else if (l.ours) {
            if (leading != l.epoch)
                say(replica, "lead", l.epoch, "");
            leading = l.epoch;
            int rc = fenced_write(c, replica, leading, &err);
            if (rc == MEDIC_E_FENCED) {
                say(replica, "fenced", leading, err.msg);
                leading = 0;
            } else if (rc) {
                say(replica, "error", leading, err.msg);
            }
        } else if (leading) {
            say(replica, "lost", leading, l.holder);
            leading = 0;
        }
        sleep_ms(interval);
    }
    /* a clean stop gives the lease up: the next leader need not wait */
    if (leading && c && audit_lease_release(c, replica, leading, &err) == 0)
        say(replica, "released", leading, "");
    PQfinish(c);
    return 0;
}

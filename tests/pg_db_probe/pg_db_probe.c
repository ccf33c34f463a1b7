/* SPDX-License-Identifier: Apache-2.0 */
/* A TEST PROBE for the audit's SQL layer on PostgreSQL (audit/db.h), not
 * part of medic: over two connections to URL it runs the cases below and
 * prints one line each, "CASE ok" or "CASE failed: why":
 *
 *   pg_db_probe URL
 *
 * - rows: a statement of rows (db_prepare_rows) stores NULLs, quotes,
 *   backslashes, a bytea with zero bytes, a double and the int64 extremes,
 *   read back as given; none at all is an empty batch.
 * - mistyped: a value bound to a column of another type is refused and
 *   nothing is written.
 * - pipelined: BEGIN, a statement that waits (db_exec_later) and the lock
 *   go in the round trip of the first answered statement; they commit.
 * - failed-releases-lock: a failed insert between a session lock and its
 *   release leaves the lock held until the rollback, which releases it
 *   (the other connection can take it).
 * - aborted: a waiting statement that fails fails the one it went with,
 *   and the connection works after the rollback.
 * - heard: a listener (audit_listener) waiting hears nothing while no
 *   requests are taken, wakes for its wake-up descriptor, and hears a
 *   transaction that marks requests taken once it commits, not before.
 *
 * tests/integration/test_pg_db.py runs it against a real PostgreSQL 15. */
#include "audit.h"
#include "db.h"
#include "pg/pg.h"
#include "timeutil.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;
static struct medic_error err; /* the last error, kept for its message */

static void say(const char *name, const char *why)
{
    printf("%s %s%s\n", name, why ? "failed: " : "ok", why ? why : "");
    failures += why != NULL;
}

/* The first column of sql's first row as an int64; -1 when none. */
static int64_t one(struct db *d, const char *sql)
{
    struct db_stmt *st = NULL;
    struct medic_error ignored = {0};
    int64_t v = -1;
    if (db_prepare(d, sql, &st, &ignored) == 0 && db_step(st, &ignored) == 1)
        v = db_column_int64(st, 0);
    db_finalize(st);
    return v;
}

static const char *rows(struct db *d)
{
    static const char *const texts[] = {NULL, "it's \"quoted\" \\ {a,b}", "", "é ✓"};
    static const unsigned char bytes[] = {0, 1, 0, 255};
    const int64_t ints[] = {INT64_MIN, 0, INT64_MAX, 42};
    if (db_exec(d, "CREATE TABLE probe_rows (i BIGINT, t TEXT, b BYTEA, r DOUBLE PRECISION)", &err))
        return err.msg;
    struct db_stmt *st = NULL;
    if (db_prepare_rows(d,
                        "INSERT INTO probe_rows SELECT * FROM unnest(?1::bigint[], ?2::text[],"
                        " ?3::bytea[], ?4::double precision[])",
                        "itbr", 1, &st, &err))
        return err.msg;
    for (int k = 0; k < 4; k++) {
        db_bind_int64(st, 4 * k + 1, ints[k]);
        db_bind_text(st, 4 * k + 2, texts[k]);
        if (k == 2)
            db_bind_null(st, 4 * k + 3);
        else
            db_bind_blob(st, 4 * k + 3, bytes, sizeof(bytes));
        db_bind_double(st, 4 * k + 4, k == 3 ? -0.125 : 1e300 * k);
    }
    int rc = db_step(st, &err);
    db_clear(st);
    if (rc == 0)
        rc = db_step(st, &err); /* no rows at all */
    db_finalize(st);
    if (rc)
        return err.msg;
    if (db_prepare(d, "SELECT i, t, b, r FROM probe_rows ORDER BY i", &st, &err))
        return err.msg;
    static const int order[] = {0, 1, 3, 2}; /* by i */
    const char *why = NULL;
    int got = 0;
    while (!why && db_step(st, &err) == 1) {
        int k = order[got++];
        size_t len = 0;
        const void *b = db_column_blob(st, 2, &len);
        const char *t = db_column_text(st, 1);
        if (db_column_int64(st, 0) != ints[k])
            why = "an int64 came back changed";
        else if (texts[k] ? !t || strcmp(t, texts[k]) : t != NULL)
            why = "a text came back changed";
        else if (k == 2 ? b != NULL : len != sizeof(bytes) || memcmp(b, bytes, len))
            why = "a bytea came back changed";
        else if (db_column_double(st, 3) != (k == 3 ? -0.125 : 1e300 * k))
            why = "a double came back changed";
    }
    db_finalize(st);
    return why ? why : got != 4 ? "not every row came back" : NULL;
}

static const char *mistyped(struct db *d)
{
    struct db_stmt *st = NULL;
    if (db_prepare_rows(
            d, "INSERT INTO probe_rows (i, t) SELECT * FROM unnest(?1::bigint[], ?2::text[])", "it",
            0, &st, &err))
        return err.msg;
    db_bind_text(st, 1, "not a number");
    db_bind_text(st, 2, "x");
    int rc = db_step(st, &err);
    db_finalize(st);
    if (rc != MEDIC_E_INVALID)
        return "a text bound to a bigint column was not refused";
    return one(d, "SELECT count(*) FROM probe_rows") == 4 ? NULL : "a mistyped row was written";
}

static const char *pipelined(struct db *d, struct db *other)
{
    if (db_begin(d, &err) || db_exec_later(d, "INSERT INTO probe_rows (i) VALUES (7)", &err) ||
        db_lock_session(d, 77, 0, &err) || db_unlock_session(d, 77, 0, &err))
        return err.msg;
    if (one(d, "SELECT count(*) FROM probe_rows WHERE i = 7") != 1)
        return "the waiting insert did not run before the statement it went with";
    if (one(other, "SELECT count(*) FROM probe_rows WHERE i = 7") != 0)
        return "the other connection saw the row before the commit: no transaction";
    if (db_commit(d, &err))
        return err.msg;
    if (one(other, "SELECT count(*) FROM probe_rows WHERE i = 7") != 1)
        return "the row was not committed";
    return one(other, "SELECT pg_try_advisory_lock(77)::int") == 1 &&
                   one(other, "SELECT pg_advisory_unlock(77)::int") == 1
               ? NULL
               : "the lock released with the statement is still held";
}

static const char *failed_releases_lock(struct db *d, struct db *other)
{
    if (db_exec(d, "CREATE UNIQUE INDEX probe_rows_i ON probe_rows(i)", &err) ||
        db_begin(d, &err) || db_lock_session(d, 78, 0, &err) || db_unlock_session(d, 78, 0, &err))
        return err.msg;
    if (db_exec(d, "INSERT INTO probe_rows (i) VALUES (42)", &err) == 0) /* a duplicate */
        return "a duplicate key was inserted";
    if (db_last_failure(d) != DB_FAIL_UNIQUE)
        return "the failure is not named a unique violation";
    if (one(other, "SELECT pg_try_advisory_lock(78)::int") != 0)
        return "the lock was not taken before the statement";
    db_rollback(d);
    if (one(other, "SELECT pg_try_advisory_lock(78)::int") != 1)
        return "the rollback did not release the lock";
    one(other, "SELECT pg_advisory_unlock(78)::int");
    return NULL;
}

static const char *aborted(struct db *d)
{
    if (db_begin(d, &err) || db_exec_later(d, "SELECT no_such_column FROM probe_rows", &err))
        return err.msg;
    if (one(d, "SELECT 1") != -1)
        return "a statement after a failed one ran";
    db_rollback(d);
    return one(d, "SELECT count(*) FROM probe_rows") == 5 ? NULL
                                                          : "the connection is not usable after it";
}

/* The word that requests were taken: not before the commit, at it. */
static const char *heard(const char *url, struct db *d)
{
    struct audit_listener *l = NULL;
    if (audit_listener_open(url, &l, &err))
        return err.msg;
    const char *why = NULL;
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        audit_listener_free(l);
        return "no pipe";
    }
    int64_t t0 = medic_time_monotonic();
    if (audit_listener_wait(l, pipefd[0], 200, &err) != 0)
        why = "heard something while nothing was taken";
    else if (medic_time_monotonic() - t0 < 150 * MEDIC_NS_PER_MS)
        why = "did not wait its time";
    if (!why && (write(pipefd[1], "w", 1) != 1 || audit_listener_wait(l, pipefd[0], 5000, &err) ||
                 medic_time_monotonic() - t0 > 3 * MEDIC_NS_PER_SEC))
        why = "its wake-up did not wake it";
    /* an engine's transaction: the word waits for its commit */
    if (!why && (db_begin(d, &err) || db_exec_later(d, audit_backend_pg.taken_sql, &err) ||
                 one(d, "SELECT 1") != 1))
        why = err.msg;
    char drain[8];
    if (read(pipefd[0], drain, sizeof(drain)) < 0)
        why = why ? why : "cannot drain the pipe";
    if (!why && audit_listener_wait(l, -1, 300, &err) != 0)
        why = "heard the word before the commit";
    if (!why && db_commit(d, &err))
        why = err.msg;
    if (!why && audit_listener_wait(l, -1, 5000, &err) != AUDIT_LISTEN_SAID)
        why = "did not hear the committed word";
    close(pipefd[0]);
    close(pipefd[1]);
    audit_listener_free(l);
    return why;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pg_db_probe URL\n");
        return 2;
    }
    PGconn *a = NULL, *b = NULL;
    if (audit_pg_connect(argv[1], &a, &err) || audit_pg_connect(argv[1], &b, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    struct db *d = audit_pg_db(a), *other = audit_pg_db(b);
    say("rows", rows(d));
    say("mistyped", mistyped(d));
    say("pipelined", pipelined(d, other));
    say("failed-releases-lock", failed_releases_lock(d, other));
    say("aborted", aborted(d));
    say("heard", heard(argv[1], d));
    db_free(d);
    db_free(other);
    PQfinish(a);
    PQfinish(b);
    return failures ? 1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The rows an archive holds taken out of the live log: in short
 * transactions, so that the daemon's writer waits for each only briefly,
 * and in the order of their references (what refers to a row goes first).
 * A stopped run leaves its record at "removing"; the next finishes it from
 * the same file, since every step deletes only what is still there. */
#include "archive.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_CHUNK 2000
/* Ids named in one statement: a transaction short enough that the
 * daemon's writer, waiting for it, still answers in milliseconds. */
#define MAX_LIST 100

static void say(void (*progress)(const char *), const char *table, long long n)
{
    if (!progress)
        return;
    char line[160];
    snprintf(line, sizeof(line), "%s: %lld rows taken out of the log", table, n);
    progress(line);
}

/* After a transaction that began at started: on a log one process
 * writes (SQLite), as long a pause as it took (10 ms at least), so that
 * the daemon's writer, which waits for the lock in sleeps of up to 100 ms,
 * finds it free; without, back-to-back transactions kept it waiting half a
 * second. Rows locked one by one (PostgreSQL) need none. */
static void give_way(int yield, int64_t started)
{
    if (!yield)
        return;
    int64_t took = medic_time_monotonic() - started;
    int64_t ns = took > 10000000 ? took : 10000000;
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    nanosleep(&ts, NULL);
}

static int run_in_tx(struct db *d, int yield, struct db_stmt *st, struct medic_error *err)
{
    int64_t started = medic_time_monotonic();
    int rc = db_begin(d, err);
    if (rc == 0 && db_step(st, err) < 0)
        rc = err->code ? err->code : MEDIC_E_STORE;
    if (rc == 0)
        rc = db_commit(d, err);
    else
        db_rollback(d);
    give_way(yield, started);
    return rc;
}

/* A chain's rows up to last, a window of ids at a time. */
static int remove_chain(struct db *live, int yield, const char *table, int64_t last, size_t chunk,
                        void (*progress)(const char *), struct medic_error *err)
{
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT min(id) FROM %s", table);
    struct db_stmt *st = NULL;
    int64_t lo = 0;
    int rc = db_prepare(live, sql, &st, err);
    if (rc == 0 && (rc = db_step(st, err)) == 1) {
        lo = db_column_type(st, 0) == DB_NULL ? last : db_column_int64(st, 0) - 1;
        rc = 0;
    }
    db_finalize(st);
    if (rc < 0)
        return rc;
    snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE id > ?1 AND id <= ?2", table);
    long long done = 0;
    while (rc == 0 && lo < last) {
        int64_t hi = lo + (int64_t)chunk < last ? lo + (int64_t)chunk : last;
        if ((rc = db_prepare(live, sql, &st, err)))
            break;
        db_bind_int64(st, 1, lo);
        db_bind_int64(st, 2, hi);
        rc = run_in_tx(live, yield, st, err);
        db_finalize(st);
        done += hi - lo;
        lo = hi;
        if (done % 100000 < (long long)chunk)
            say(progress, table, done);
    }
    if (rc)
        medic_error_prefix(err, table);
    return rc;
}

/* "?1, ?2, ..., ?n" */
static void placeholders(char *out, size_t size, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(out + at, size - at, "%s?%zu", i ? ", " : "", i + 1);
}

/* tmpl with each '@' replaced by list; NULL when out of memory. */
static char *expand(const char *tmpl, const char *list)
{
    size_t n = 0;
    for (const char *p = tmpl; *p; p++)
        n += *p == '@';
    size_t size = strlen(tmpl) + n * strlen(list) + 1;
    char *out = malloc(size), *at = out;
    for (const char *p = tmpl; out && *p; p++) {
        if (*p == '@') {
            memcpy(at, list, strlen(list));
            at += strlen(list);
        } else {
            *at++ = *p;
        }
    }
    if (out)
        *at = '\0';
    return out;
}

/* Deletes, in one transaction, what each statement removes for the ids
 * given (each '@' in it names them as ?1..?n). */
static int remove_ids(struct db *live, int yield, const char *const *templates, size_t nt,
                      const int64_t *ids, size_t n, struct medic_error *err)
{
    int64_t started = medic_time_monotonic();
    char list[MAX_LIST * 8];
    placeholders(list, sizeof(list), n);
    int rc = db_begin(live, err);
    for (size_t t = 0; rc == 0 && t < nt; t++) {
        char *sql = expand(templates[t], list);
        if (!sql) {
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        struct db_stmt *st = NULL;
        rc = db_prepare(live, sql, &st, err);
        free(sql);
        for (size_t i = 0; rc == 0 && i < n; i++)
            db_bind_int64(st, (int)i + 1, ids[i]);
        if (rc == 0 && db_step(st, err) < 0)
            rc = err->code ? err->code : MEDIC_E_STORE;
        db_finalize(st);
    }
    if (rc == 0)
        rc = db_commit(live, err);
    else
        db_rollback(live);
    give_way(yield, started);
    return rc;
}

/* The rows of table the archive holds, MAX_LIST ids at a time (newest
 * first, so that a duplicate goes before the notification it names),
 * through the templates. */
static int remove_listed(struct db *live, int yield, struct db *archive, const char *table,
                         const char *const *templates, size_t nt, void (*progress)(const char *),
                         struct medic_error *err)
{
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT id FROM %s ORDER BY id DESC", table);
    struct db_stmt *st = NULL;
    int rc = db_prepare(archive, sql, &st, err), step = 0;
    int64_t ids[MAX_LIST];
    size_t n = 0;
    long long done = 0;
    while (rc == 0 && (step = db_step(st, err)) == 1) {
        ids[n++] = db_column_int64(st, 0);
        if (n == MAX_LIST) {
            rc = remove_ids(live, yield, templates, nt, ids, n, err);
            done += (long long)n;
            n = 0;
            if (done % 100000 < MAX_LIST)
                say(progress, table, done);
        }
    }
    if (rc == 0 && step < 0)
        rc = step;
    if (rc == 0 && n)
        rc = remove_ids(live, yield, templates, nt, ids, n, err);
    db_finalize(st);
    if (rc)
        medic_error_prefix(err, table);
    return rc;
}

int audit__archive_remove(struct db *live, int yield, struct db *archive,
                          const struct archive_record *r, size_t chunk,
                          void (*progress)(const char *line), struct medic_error *err)
{
    if (!chunk)
        chunk = DEFAULT_CHUNK;
    /* what refers to a decision first: actions, changes, requests */
    int rc =
        remove_chain(live, yield, "actions", r->last_id[ARCHIVE_ACTIONS], chunk, progress, err);
    if (rc == 0)
        rc = remove_chain(live, yield, "incident_changes", r->last_id[ARCHIVE_CHANGES], chunk,
                          progress, err);
    static const char *const requests[] = {"approvals", "pause_requests", "release_requests"};
    for (size_t i = 0; rc == 0 && i < sizeof(requests) / sizeof(requests[0]); i++) {
        char tmpl[160];
        snprintf(tmpl, sizeof(tmpl), "DELETE FROM %s WHERE id IN (@)", requests[i]);
        const char *t[] = {tmpl};
        rc = remove_listed(live, yield, archive, requests[i], t, 1, progress, err);
    }
    if (rc == 0)
        rc = remove_chain(live, yield, "decisions", r->last_id[ARCHIVE_DECISIONS], chunk, progress,
                          err);
        /* a notification that a newer duplicate names stays, and its alerts */
#define STAYS "SELECT duplicate_of FROM notifications WHERE duplicate_of IN (@) AND id NOT IN (@)"
    static const char *const notifications[] = {
        "DELETE FROM alerts WHERE notification_id IN (@) AND notification_id NOT IN (" STAYS ")",
        "DELETE FROM notifications WHERE id IN (@) AND id NOT IN (" STAYS ")",
    };
#undef STAYS
    if (rc == 0)
        rc = remove_listed(live, yield, archive, "notifications", notifications, 2, progress, err);
    return rc;
}

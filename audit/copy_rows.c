/* SPDX-License-Identifier: Apache-2.0 */
#include "copy_rows.h"

#include <stdio.h>

#define COPY_MAX_COLUMNS 32

/* Copies the rows st gives (bound, not yet stepped) through *ins (prepared
 * at the first row), counting them in *rows and *got; the first column of
 * the last in *last. */
static int copy_from(struct db_stmt *st, struct db *to, const char *table, struct db_stmt **insp,
                     long long *rows, long long *got, int64_t *last,
                     void (*progress)(const char *line), struct medic_error *err)
{
    struct db_stmt *ins = *insp;
    int rc = 0, step = 0;
    /* the columns are known once a row is read; an empty table copies
     * nothing */
    while (rc == 0 && (step = db_step(st, err)) == 1) {
        const int n = db_column_count(st);
        if (!ins) {
            if (n > COPY_MAX_COLUMNS) {
                rc = medic_error_set(err, MEDIC_E_STORE, "%s has %d columns", table, n);
                break;
            }
            char insert[2048];
            size_t at = (size_t)snprintf(insert, sizeof(insert), "INSERT INTO %s (", table);
            for (int i = 0; i < n && at < sizeof(insert); i++)
                at += (size_t)snprintf(insert + at, sizeof(insert) - at, "%s%s", i ? ", " : "",
                                       db_column_name(st, i));
            for (int i = 0; i < n && at < sizeof(insert); i++)
                at += (size_t)snprintf(insert + at, sizeof(insert) - at, "%s?%d",
                                       i ? ", " : ") VALUES (", i + 1);
            if (at + 2 >= sizeof(insert)) {
                rc = medic_error_set(err, MEDIC_E_STORE, "%s: too many columns", table);
                break;
            }
            snprintf(insert + at, sizeof(insert) - at, ")");
            if ((rc = db_prepare_cached(to, insert, &ins, err)))
                break;
            *insp = ins;
        }
        *last = db_column_int64(st, 0);
        ++*got;
        for (int i = 0; i < n; i++) {
            size_t len = 0;
            const void *blob;
            switch (db_column_type(st, i)) {
            case DB_NULL:
                db_bind_null(ins, i + 1);
                break;
            case DB_INT:
                db_bind_int64(ins, i + 1, db_column_int64(st, i));
                break;
            case DB_REAL: /* every bit of it, so that the hash comes out the same */
                db_bind_double(ins, i + 1, db_column_double(st, i));
                break;
            case DB_BLOB:
                blob = db_column_blob(st, i, &len);
                db_bind_blob(ins, i + 1, blob ? blob : "", len);
                break;
            default:
                db_bind_text_len(ins, i + 1, db_column_text(st, i), db_column_bytes(st, i));
            }
        }
        int r = db_step(ins, err);
        db_clear(ins);
        if (r < 0) {
            char what[96];
            snprintf(what, sizeof(what), "%s row %lld", table, *rows + 1);
            medic_error_prefix(err, what);
            rc = r;
        }
        if (rc == 0 && ++*rows % 10000 == 0 && progress) {
            char line[160];
            snprintf(line, sizeof(line), "%s: %lld rows", table, *rows);
            progress(line);
        }
    }
    if (rc == 0 && step < 0) {
        medic_error_prefix(err, table);
        rc = step;
    }
    return rc;
}

int audit__copy_rows(struct db *from, struct db *to, const char *table, const char *where,
                     const char *order, const int64_t *args, int nargs, size_t page,
                     long long *rows, void (*progress)(const char *line), struct medic_error *err)
{
    char sql[1024];
    if (page) /* a page at a time, from the id after the last row copied */
        snprintf(sql, sizeof(sql), "SELECT * FROM %s WHERE %s%sid > ?%d ORDER BY id LIMIT %zu",
                 table, where ? where : "", where ? " AND " : "", nargs + 1, page);
    else
        snprintf(sql, sizeof(sql), "SELECT * FROM %s%s%s ORDER BY %s", table,
                 where ? " WHERE " : "", where ? where : "", order);
    struct db_stmt *ins = NULL;
    int64_t last = 0;
    int rc = 0;
    for (long long got = page; rc == 0 && got == (long long)page;) {
        struct db_stmt *st = NULL;
        if ((rc = db_prepare(from, sql, &st, err))) {
            medic_error_prefix(err, table);
            break;
        }
        for (int i = 0; i < nargs; i++)
            db_bind_int64(st, i + 1, args[i]);
        if (page)
            db_bind_int64(st, nargs + 1, last);
        got = 0;
        rc = copy_from(st, to, table, &ins, rows, &got, &last, progress, err);
        db_finalize(st);
        if (!page)
            break;
        /* a page's rows made durable at once: the target's disk written a
         * little at a time, not in one flush at the end that would stall
         * every other writer of that disk (the daemon's syncs) */
        if (rc == 0 && got == (long long)page && (rc = db_commit(to, err)) == 0)
            rc = db_begin(to, err);
    }
    db_finalize(ins);
    return rc;
}

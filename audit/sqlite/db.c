/* SPDX-License-Identifier: Apache-2.0 */
/* The SQL layer on SQLite (db.h): statements straight onto sqlite3's,
 * the transaction statements prepared once; the backend's table
 * (backend.c) lists these operations. */
#include "sqlite.h"

#include <stdlib.h>

struct lite_db {
    struct db base;
    sqlite3 *h;
    sqlite3_stmt *begin, *commit; /* prepared once, run per transaction */
};

struct lite_stmt {
    struct db_stmt base;
    sqlite3_stmt *st;
};

#define LITE(d) ((struct lite_db *)(d))
#define STMT(s) (((struct lite_stmt *)(s))->st)

int64_t audit_lite_int(sqlite3 *db, const char *sql, int64_t otherwise)
{
    sqlite3_stmt *st = NULL;
    int64_t v = otherwise;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

struct db *audit_lite_db(sqlite3 *handle)
{
    struct lite_db *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->base.backend = &audit_backend_sqlite;
    d->h = handle;
    return &d->base;
}

void lite_free(struct db *d)
{
    sqlite3_finalize(LITE(d)->begin);
    sqlite3_finalize(LITE(d)->commit);
    free(d);
}

static int lite_fail(struct db *d, struct medic_error *err)
{
    sqlite3 *h = LITE(d)->h;
    int code = sqlite3_extended_errcode(h);
    d->failure = code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY
                     ? DB_FAIL_UNIQUE
                 : (code & 0xff) == SQLITE_BUSY ? DB_FAIL_RETRY
                                                : DB_FAIL_OTHER;
    return medic_error_set(err, MEDIC_E_STORE, "sqlite: %s", sqlite3_errmsg(h));
}

int lite_exec(struct db *d, const char *sql, struct medic_error *err)
{
    if (sqlite3_exec(LITE(d)->h, sql, NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    return lite_fail(d, err);
}

/* No advisory locks: one process writes the file. */
int lite_no_lock(struct db *d, int64_t key, int shared, struct medic_error *err)
{
    (void)d;
    (void)key;
    (void)shared;
    (void)err;
    return 0;
}

/* Runs one of the transaction statements, prepared on first use. */
static int lite_tx(struct db *d, sqlite3_stmt **st, const char *sql, struct medic_error *err)
{
    if (!*st &&
        sqlite3_prepare_v3(LITE(d)->h, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return lite_fail(d, err);
    int rc = sqlite3_step(*st);
    sqlite3_reset(*st);
    return rc == SQLITE_DONE ? 0 : lite_fail(d, err);
}

int lite_begin(struct db *d, struct medic_error *err)
{
    return lite_tx(d, &LITE(d)->begin, "BEGIN IMMEDIATE", err);
}

int lite_begin_snapshot(struct db *d, struct medic_error *err)
{
    return lite_exec(d, "BEGIN", err);
}

void lite_rollback(struct db *d)
{
    sqlite3_exec(LITE(d)->h, "ROLLBACK", NULL, NULL, NULL);
}

int lite_commit(struct db *d, struct medic_error *err)
{
    int rc = lite_tx(d, &LITE(d)->commit, "COMMIT", err);
    if (rc)
        lite_rollback(d);
    return rc;
}

int64_t lite_last_insert_id(struct db *d)
{
    return sqlite3_last_insert_rowid(LITE(d)->h);
}

int lite_prepare(struct db *d, const char *sql, int cached, struct db_stmt **out,
                 struct medic_error *err)
{
    struct lite_stmt *st = calloc(1, sizeof(*st));
    if (!st)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    st->base.backend = &audit_backend_sqlite;
    st->base.d = d;
    if (sqlite3_prepare_v3(LITE(d)->h, sql, -1, cached ? SQLITE_PREPARE_PERSISTENT : 0, &st->st,
                           NULL) != SQLITE_OK) {
        lite_fail(d, err);
        free(st);
        return MEDIC_E_STORE;
    }
    *out = &st->base;
    return 0;
}

void lite_bind_int64(struct db_stmt *st, int i, int64_t v)
{
    sqlite3_bind_int64(STMT(st), i, v);
}

void lite_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len)
{
    if (v)
        sqlite3_bind_text64(STMT(st), i, v, len, SQLITE_STATIC, SQLITE_UTF8);
    else
        sqlite3_bind_null(STMT(st), i);
}

void lite_bind_double(struct db_stmt *st, int i, double v)
{
    sqlite3_bind_double(STMT(st), i, v);
}

void lite_bind_blob(struct db_stmt *st, int i, const void *data, size_t len)
{
    sqlite3_bind_blob64(STMT(st), i, data, len, SQLITE_STATIC);
}

int lite_step(struct db_stmt *st, struct medic_error *err)
{
    int rc = sqlite3_step(STMT(st));
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return lite_fail(st->d, err);
}

int lite_column_count(struct db_stmt *st)
{
    return sqlite3_column_count(STMT(st));
}

const char *lite_column_name(struct db_stmt *st, int i)
{
    return sqlite3_column_name(STMT(st), i);
}

enum db_type lite_column_type(struct db_stmt *st, int i)
{
    switch (sqlite3_column_type(STMT(st), i)) {
    case SQLITE_NULL:
        return DB_NULL;
    case SQLITE_INTEGER:
        return DB_INT;
    case SQLITE_FLOAT:
        return DB_REAL;
    case SQLITE_BLOB:
        return DB_BLOB;
    default:
        return DB_TEXT;
    }
}

int64_t lite_column_int64(struct db_stmt *st, int i)
{
    return sqlite3_column_int64(STMT(st), i);
}

double lite_column_double(struct db_stmt *st, int i)
{
    return sqlite3_column_double(STMT(st), i);
}

const char *lite_column_text(struct db_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(STMT(st), i);
}

size_t lite_column_bytes(struct db_stmt *st, int i)
{
    return (size_t)sqlite3_column_bytes(STMT(st), i);
}

const void *lite_column_blob(struct db_stmt *st, int i, size_t *len)
{
    *len = (size_t)sqlite3_column_bytes(STMT(st), i);
    return sqlite3_column_blob(STMT(st), i);
}

void lite_reset(struct db_stmt *st)
{
    sqlite3_reset(STMT(st));
}

void lite_clear(struct db_stmt *st)
{
    sqlite3_reset(STMT(st));
    sqlite3_clear_bindings(STMT(st));
}

void lite_finalize(struct db_stmt *st)
{
    sqlite3_finalize(STMT(st));
    free(st);
}

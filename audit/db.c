/* SPDX-License-Identifier: Apache-2.0 */
#include "db.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libpq's message, its trailing newline removed. */
int audit_pg_error(struct medic_error *err, PGconn *c, const char *what)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "%s", c ? PQerrorMessage(c) : "out of memory");
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = 0;
    return medic_error_set(err, MEDIC_E_STORE, "postgresql: %s: %s", what, msg);
}

/* PostgreSQL's own limit on a statement's parameters (a 16-bit count). */
#define DB_MAX_PARAMS 65535

/* PostgreSQL's type OIDs (catalog/pg_type_d.h) */
enum {
    PG_BOOL = 16,
    PG_BYTEA = 17,
    PG_INT8 = 20,
    PG_INT2 = 21,
    PG_INT4 = 23,
    PG_FLOAT4 = 700,
    PG_FLOAT8 = 701
};

struct db {
    sqlite3 *lite;
    sqlite3_stmt *begin, *commit; /* SQLite: prepared once, run per transaction */
    PGconn *pg;
    int in_tx;      /* a transaction is open: a broken connection is not reopened */
    unsigned epoch; /* PostgreSQL: bumped when the connection is reopened */
    unsigned names; /* PostgreSQL: cached statements named so far */
    enum db_failure failure;
};

struct db_stmt {
    struct db *d;
    sqlite3_stmt *lite;
    int borrowed; /* lite belongs to the caller */
    /* PostgreSQL: the rewritten SQL, the bound values as text, the result
     * of the last run and the row stepped to */
    char *sql;
    int nparams;
    char **params; /* nparams of each */
    int *lengths;
    int *formats;            /* 1: binary, a blob's bytes */
    char *owned;             /* params[i] is ours to free */
    int cached;              /* prepared on the server once per connection */
    unsigned prepared_epoch; /* the connection it was prepared on, plus one */
    char name[24];
    PGresult *res;
    int row;
    unsigned char *blob; /* the last blob decoded from PostgreSQL's text form */
};

struct db *db_over_sqlite(sqlite3 *handle)
{
    struct db *d = calloc(1, sizeof(*d));
    if (d)
        d->lite = handle;
    return d;
}

int64_t db_last_insert_id(struct db *d)
{
    if (!d->lite)
        MEDIC_BUG("db_last_insert_id on PostgreSQL");
    return sqlite3_last_insert_rowid(d->lite);
}

struct db *db_over_pg(PGconn *conn)
{
    struct db *d = calloc(1, sizeof(*d));
    if (d)
        d->pg = conn;
    return d;
}

void db_free(struct db *d)
{
    if (!d)
        return;
    sqlite3_finalize(d->begin);
    sqlite3_finalize(d->commit);
    free(d);
}

int db_is_pg(const struct db *d)
{
    return d->pg != NULL;
}

static void classify_pg(struct db *d, const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (PQstatus(d->pg) == CONNECTION_BAD)
        d->failure = DB_FAIL_CONNECTION;
    else if (state && strcmp(state, "23505") == 0)
        d->failure = DB_FAIL_UNIQUE;
    else if (state && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0 ||
                       strcmp(state, "55P03") == 0))
        d->failure = DB_FAIL_RETRY;
    else if (state && strncmp(state, "08", 2) == 0)
        d->failure = DB_FAIL_CONNECTION;
    else
        d->failure = DB_FAIL_OTHER;
}

static int pg_fail(struct db *d, const PGresult *r, struct medic_error *err)
{
    classify_pg(d, r);
    return audit_pg_error(err, d->pg, "query failed");
}

static int lite_fail(struct db *d, struct medic_error *err)
{
    int code = sqlite3_extended_errcode(d->lite);
    d->failure = code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY
                     ? DB_FAIL_UNIQUE
                 : (code & 0xff) == SQLITE_BUSY ? DB_FAIL_RETRY
                                                : DB_FAIL_OTHER;
    return medic_error_set(err, MEDIC_E_STORE, "sqlite: %s", sqlite3_errmsg(d->lite));
}

enum db_failure db_last_failure(struct db *d)
{
    return d->failure;
}

/* Before a PostgreSQL statement: a connection that broke is opened again,
 * outside a transaction only. */
static int pg_ready(struct db *d, struct medic_error *err)
{
    if (PQstatus(d->pg) == CONNECTION_OK)
        return 0;
    if (!d->in_tx) {
        PQreset(d->pg);
        d->epoch++;
        if (PQstatus(d->pg) == CONNECTION_OK)
            return 0;
    }
    d->failure = DB_FAIL_CONNECTION;
    return audit_pg_error(err, d->pg, "the connection is lost");
}

int db_exec(struct db *d, const char *sql, struct medic_error *err)
{
    if (d->lite) {
        if (sqlite3_exec(d->lite, sql, NULL, NULL, NULL) == SQLITE_OK)
            return 0;
        return lite_fail(d, err);
    }
    if (pg_ready(d, err))
        return MEDIC_E_STORE;
    PGresult *r = PQexec(d->pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    int rc = ok ? 0 : pg_fail(d, r, err);
    PQclear(r);
    return rc;
}

/* SQLite: runs one of the transaction statements, prepared on first use. */
static int lite_tx(struct db *d, sqlite3_stmt **st, const char *sql, struct medic_error *err)
{
    if (!*st &&
        sqlite3_prepare_v3(d->lite, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return lite_fail(d, err);
    int rc = sqlite3_step(*st);
    sqlite3_reset(*st);
    return rc == SQLITE_DONE ? 0 : lite_fail(d, err);
}

int db_begin(struct db *d, struct medic_error *err)
{
    int rc = d->lite ? lite_tx(d, &d->begin, "BEGIN IMMEDIATE", err) : db_exec(d, "BEGIN", err);
    d->in_tx = rc == 0;
    return rc;
}

int db_begin_snapshot(struct db *d, struct medic_error *err)
{
    /* a read snapshot holds no lock a writer waits for, so it may stay open
     * while a long chain is hashed client-side: no idle-in-transaction cut */
    int rc = db_exec(d,
                     d->lite ? "BEGIN"
                             : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                               "SET LOCAL idle_in_transaction_session_timeout = 0",
                     err);
    d->in_tx = rc == 0;
    return rc;
}

int db_commit(struct db *d, struct medic_error *err)
{
    int rc = d->lite ? lite_tx(d, &d->commit, "COMMIT", err) : db_exec(d, "COMMIT", err);
    if (rc)
        db_rollback(d);
    d->in_tx = 0;
    return rc;
}

void db_rollback(struct db *d)
{
    if (d->lite)
        sqlite3_exec(d->lite, "ROLLBACK", NULL, NULL, NULL);
    else if (PQstatus(d->pg) == CONNECTION_OK)
        PQclear(PQexec(d->pg, "ROLLBACK"));
    d->in_tx = 0;
}

/* ?N to $N outside quoted literals; the highest N in *nparams. */
static char *pg_sql(const char *sql, int *nparams)
{
    char *out = malloc(strlen(sql) + 1);
    if (!out)
        return NULL;
    char *o = out;
    int quoted = 0;
    *nparams = 0;
    for (const char *p = sql; *p; p++) {
        if (*p == '\'')
            quoted = !quoted;
        if (*p == '?' && !quoted && isdigit((unsigned char)p[1])) {
            *o++ = '$';
            int n = atoi(p + 1);
            if (n > *nparams)
                *nparams = n;
            continue;
        }
        *o++ = *p;
    }
    *o = 0;
    return out;
}

static int prepare(struct db *d, const char *sql, int cached, struct db_stmt **out,
                   struct medic_error *err)
{
    struct db_stmt *st = calloc(1, sizeof(*st));
    if (!st)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    st->d = d;
    st->row = -1;
    if (d->lite) {
        if (sqlite3_prepare_v3(d->lite, sql, -1, cached ? SQLITE_PREPARE_PERSISTENT : 0, &st->lite,
                               NULL) != SQLITE_OK) {
            lite_fail(d, err);
            free(st);
            return MEDIC_E_STORE;
        }
    } else if (!(st->sql = pg_sql(sql, &st->nparams)) || st->nparams > DB_MAX_PARAMS) {
        free(st->sql);
        free(st);
        return medic_error_set(err, MEDIC_E_INVALID, "a statement with too many parameters");
    } else {
        size_t n = (size_t)st->nparams + 1;
        st->params = calloc(n, sizeof(*st->params));
        st->lengths = calloc(n, sizeof(*st->lengths));
        st->formats = calloc(n, sizeof(*st->formats));
        st->owned = calloc(n, sizeof(*st->owned));
        if (!st->params || !st->lengths || !st->formats || !st->owned) {
            free(st->params);
            free(st->lengths);
            free(st->formats);
            free(st->owned);
            free(st->sql);
            free(st);
            return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        }
        if (cached) {
            st->cached = 1;
            snprintf(st->name, sizeof(st->name), "medic_%u", ++d->names);
        }
    }
    *out = st;
    return 0;
}

int db_prepare(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err)
{
    return prepare(d, sql, 0, out, err);
}

int db_prepare_cached(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err)
{
    return prepare(d, sql, 1, out, err);
}

struct db_stmt *db_stmt_over_sqlite(sqlite3_stmt *st)
{
    struct db_stmt *w = calloc(1, sizeof(*w));
    if (w) {
        w->lite = st;
        w->borrowed = 1;
        w->row = -1;
    }
    return w;
}

/* Sets parameter i to v: text (owned, len -1) or a blob's bytes (not). */
static void pg_bind(struct db_stmt *st, int i, char *v, int len)
{
    if (i < 1 || i > st->nparams) {
        if (len < 0)
            free(v);
        return;
    }
    if (st->owned[i - 1])
        free(st->params[i - 1]);
    st->params[i - 1] = v;
    st->owned[i - 1] = len < 0;
    st->lengths[i - 1] = len < 0 ? 0 : len;
    st->formats[i - 1] = len >= 0;
}

void db_bind_int64(struct db_stmt *st, int i, int64_t v)
{
    if (st->lite) {
        sqlite3_bind_int64(st->lite, i, v);
        return;
    }
    char *s = malloc(24);
    if (s)
        snprintf(s, 24, "%lld", (long long)v);
    pg_bind(st, i, s, -1);
}

void db_bind_text(struct db_stmt *st, int i, const char *v)
{
    if (st->lite)
        sqlite3_bind_text(st->lite, i, v, -1, SQLITE_STATIC);
    else
        pg_bind(st, i, v ? strdup(v) : NULL, -1);
}

void db_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len)
{
    if (st->lite) {
        sqlite3_bind_text64(st->lite, i, v, len, SQLITE_STATIC, SQLITE_UTF8);
        return;
    }
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, v, len);
        s[len] = 0;
    }
    pg_bind(st, i, s, -1);
}

void db_bind_double(struct db_stmt *st, int i, double v)
{
    if (st->lite) {
        sqlite3_bind_double(st->lite, i, v);
        return;
    }
    char *s = malloc(32);
    if (s)
        snprintf(s, 32, "%.17g", v);
    pg_bind(st, i, s, -1);
}

void db_bind_null(struct db_stmt *st, int i)
{
    if (st->lite)
        sqlite3_bind_null(st->lite, i);
    else
        pg_bind(st, i, NULL, -1);
}

void db_bind_blob(struct db_stmt *st, int i, const void *data, size_t len)
{
    if (st->lite)
        sqlite3_bind_blob64(st->lite, i, data, len, SQLITE_STATIC);
    else
        pg_bind(st, i, (char *)data, (int)len);
}

int db_step(struct db_stmt *st, struct medic_error *err)
{
    if (st->lite) {
        int rc = sqlite3_step(st->lite);
        if (rc == SQLITE_ROW)
            return 1;
        if (rc == SQLITE_DONE)
            return 0;
        if (!st->d) /* borrowed: no struct db to remember the failure in */
            return medic_error_set(err, MEDIC_E_STORE, "sqlite: %s",
                                   sqlite3_errmsg(sqlite3_db_handle(st->lite)));
        return lite_fail(st->d, err);
    }
    if (!st->res) {
        struct db *d = st->d;
        if (pg_ready(d, err))
            return MEDIC_E_STORE;
        const char *const *values = (const char *const *)st->params;
        if (st->cached && st->prepared_epoch != d->epoch + 1) {
            PGresult *p = PQprepare(d->pg, st->name, st->sql, st->nparams, NULL);
            int ok = PQresultStatus(p) == PGRES_COMMAND_OK;
            int rc = ok ? 0 : pg_fail(d, p, err);
            PQclear(p);
            if (rc)
                return rc;
            st->prepared_epoch = d->epoch + 1;
        }
        st->res = st->cached ? PQexecPrepared(d->pg, st->name, st->nparams, values, st->lengths,
                                              st->formats, 0)
                             : PQexecParams(d->pg, st->sql, st->nparams, NULL, values, st->lengths,
                                            st->formats, 0);
        ExecStatusType s = PQresultStatus(st->res);
        if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
            int rc = pg_fail(d, st->res, err);
            PQclear(st->res);
            st->res = NULL;
            return rc;
        }
        st->row = -1;
    }
    return ++st->row < PQntuples(st->res) ? 1 : 0;
}

int db_column_count(struct db_stmt *st)
{
    return st->lite ? sqlite3_column_count(st->lite) : st->res ? PQnfields(st->res) : 0;
}

enum db_type db_column_type(struct db_stmt *st, int i)
{
    if (st->lite) {
        switch (sqlite3_column_type(st->lite, i)) {
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
    if (PQgetisnull(st->res, st->row, i))
        return DB_NULL;
    switch ((int)PQftype(st->res, i)) {
    case PG_BOOL:
    case PG_INT8:
    case PG_INT4:
    case PG_INT2:
        return DB_INT;
    case PG_FLOAT8:
    case PG_FLOAT4:
        return DB_REAL;
    case PG_BYTEA:
        return DB_BLOB;
    default:
        return DB_TEXT;
    }
}

int64_t db_column_int64(struct db_stmt *st, int i)
{
    if (st->lite)
        return sqlite3_column_int64(st->lite, i);
    const char *v = PQgetvalue(st->res, st->row, i);
    if (PQftype(st->res, i) == PG_BOOL)
        return v[0] == 't';
    return strtoll(v, NULL, 10);
}

double db_column_double(struct db_stmt *st, int i)
{
    if (st->lite)
        return sqlite3_column_double(st->lite, i);
    return strtod(PQgetvalue(st->res, st->row, i), NULL);
}

const char *db_column_text(struct db_stmt *st, int i)
{
    if (st->lite)
        return (const char *)sqlite3_column_text(st->lite, i);
    return PQgetisnull(st->res, st->row, i) ? NULL : PQgetvalue(st->res, st->row, i);
}

size_t db_column_bytes(struct db_stmt *st, int i)
{
    if (st->lite)
        return (size_t)sqlite3_column_bytes(st->lite, i);
    return (size_t)PQgetlength(st->res, st->row, i);
}

const void *db_column_blob(struct db_stmt *st, int i, size_t *len)
{
    if (st->lite) {
        *len = (size_t)sqlite3_column_bytes(st->lite, i);
        return sqlite3_column_blob(st->lite, i);
    }
    PQfreemem(st->blob);
    st->blob = NULL;
    *len = 0;
    if (PQgetisnull(st->res, st->row, i))
        return NULL;
    st->blob = PQunescapeBytea((const unsigned char *)PQgetvalue(st->res, st->row, i), len);
    return st->blob;
}

void db_reset(struct db_stmt *st)
{
    if (st->lite) {
        sqlite3_reset(st->lite);
        return;
    }
    PQclear(st->res);
    st->res = NULL;
    st->row = -1;
}

void db_clear(struct db_stmt *st)
{
    db_reset(st);
    if (st->lite) {
        sqlite3_clear_bindings(st->lite);
        return;
    }
    for (int i = 1; i <= st->nparams; i++)
        pg_bind(st, i, NULL, -1);
}

void db_finalize(struct db_stmt *st)
{
    if (!st)
        return;
    if (st->lite && !st->borrowed)
        sqlite3_finalize(st->lite);
    PQclear(st->res);
    PQfreemem(st->blob);
    for (int i = 0; st->owned && i < st->nparams; i++)
        if (st->owned[i])
            free(st->params[i]);
    free(st->params);
    free(st->lengths);
    free(st->formats);
    free(st->owned);
    if (st->cached && st->prepared_epoch == st->d->epoch + 1 &&
        PQstatus(st->d->pg) == CONNECTION_OK) {
        char sql[48];
        snprintf(sql, sizeof(sql), "DEALLOCATE %s", st->name);
        PQclear(PQexec(st->d->pg, sql));
    }
    free(st->sql);
    free(st);
}

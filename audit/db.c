#include "db.h"
#include "postgres.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_MAX_PARAMS 16

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
    PGconn *pg;
};

struct db_stmt {
    struct db *d;
    sqlite3_stmt *lite;
    int borrowed; /* lite belongs to the caller */
    /* PostgreSQL: the rewritten SQL, the bound values as text, the result
     * of the last run and the row stepped to */
    char *sql;
    int nparams;
    char *params[DB_MAX_PARAMS];
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

struct db *db_over_pg(PGconn *conn)
{
    struct db *d = calloc(1, sizeof(*d));
    if (d)
        d->pg = conn;
    return d;
}

void db_free(struct db *d)
{
    free(d);
}

int db_is_pg(const struct db *d)
{
    return d->pg != NULL;
}

static int pg_fail(struct db *d, struct medic_error *err)
{
    return audit_pg_error(err, d->pg, "query failed");
}

int db_exec(struct db *d, const char *sql, struct medic_error *err)
{
    if (d->lite) {
        char *msg = NULL;
        if (sqlite3_exec(d->lite, sql, NULL, NULL, &msg) == SQLITE_OK)
            return 0;
        medic_error_set(err, MEDIC_E_STORE, "sqlite: %s", msg ? msg : "failed");
        sqlite3_free(msg);
        return MEDIC_E_STORE;
    }
    PGresult *r = PQexec(d->pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return ok ? 0 : pg_fail(d, err);
}

int db_begin_snapshot(struct db *d, struct medic_error *err)
{
    /* a read snapshot holds no lock a writer waits for, so it may stay open
     * while a long chain is hashed client-side: no idle-in-transaction cut */
    return db_exec(d,
                   d->lite ? "BEGIN"
                           : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                             "SET LOCAL idle_in_transaction_session_timeout = 0",
                   err);
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

int db_prepare(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err)
{
    struct db_stmt *st = calloc(1, sizeof(*st));
    if (!st)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    st->d = d;
    st->row = -1;
    if (d->lite) {
        if (sqlite3_prepare_v2(d->lite, sql, -1, &st->lite, NULL) != SQLITE_OK) {
            medic_error_set(err, MEDIC_E_STORE, "sqlite: %s", sqlite3_errmsg(d->lite));
            free(st);
            return MEDIC_E_STORE;
        }
    } else if (!(st->sql = pg_sql(sql, &st->nparams)) || st->nparams > DB_MAX_PARAMS) {
        free(st->sql);
        free(st);
        return medic_error_set(err, MEDIC_E_INVALID, "a statement with too many parameters");
    }
    *out = st;
    return 0;
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

static void pg_bind(struct db_stmt *st, int i, char *v)
{
    if (i < 1 || i > st->nparams) {
        free(v);
        return;
    }
    free(st->params[i - 1]);
    st->params[i - 1] = v;
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
    pg_bind(st, i, s);
}

void db_bind_text(struct db_stmt *st, int i, const char *v)
{
    if (st->lite)
        sqlite3_bind_text(st->lite, i, v, -1, SQLITE_TRANSIENT);
    else
        pg_bind(st, i, v ? strdup(v) : NULL);
}

int db_step(struct db_stmt *st, struct medic_error *err)
{
    if (st->lite) {
        int rc = sqlite3_step(st->lite);
        if (rc == SQLITE_ROW)
            return 1;
        if (rc == SQLITE_DONE)
            return 0;
        return medic_error_set(err, MEDIC_E_STORE, "sqlite: %s",
                               sqlite3_errmsg(sqlite3_db_handle(st->lite)));
    }
    if (!st->res) {
        st->res = PQexecParams(st->d->pg, st->sql, st->nparams, NULL,
                               (const char *const *)st->params, NULL, NULL, 0);
        ExecStatusType s = PQresultStatus(st->res);
        if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
            PQclear(st->res);
            st->res = NULL;
            return pg_fail(st->d, err);
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

void db_finalize(struct db_stmt *st)
{
    if (!st)
        return;
    if (st->lite && !st->borrowed)
        sqlite3_finalize(st->lite);
    PQclear(st->res);
    PQfreemem(st->blob);
    for (int i = 0; i < DB_MAX_PARAMS; i++)
        free(st->params[i]);
    free(st->sql);
    free(st);
}

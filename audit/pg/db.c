/* SPDX-License-Identifier: Apache-2.0 */
/* The SQL layer on PostgreSQL (db.h). Each statement is a round trip, so
 * what needs no answer of its own (BEGIN, an advisory lock, its release)
 * waits in a short queue and goes with the next statement that does, in
 * libpq's pipeline mode: one round trip for all of them. A connection
 * that broke is opened again before the next statement outside a
 * transaction. */
#include "pg.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PostgreSQL's own limit on a statement's parameters (a 16-bit count). */
#define DB_MAX_PARAMS 65535

#define PG(d) ((struct pg_db *)(d))
#define STMT(s) ((struct pg_stmt *)(s))

/* libpq's message, its trailing newline removed. */
static int pg_message(struct medic_error *err, const char *msg, const char *what)
{
    char text[300];
    snprintf(text, sizeof(text), "%s", msg);
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = 0;
    return medic_error_set(err, MEDIC_E_STORE, "postgresql: %s: %s", what, text);
}

int audit_pg_error(struct medic_error *err, PGconn *c, const char *what)
{
    return pg_message(err, c ? PQerrorMessage(c) : "out of memory", what);
}

struct db *audit_pg_db(PGconn *conn)
{
    struct pg_db *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->base.backend = &audit_backend_pg;
    d->c = conn;
    return &d->base;
}

void pg_free(struct db *d)
{
    free(d);
}

static void classify(struct pg_db *d, const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    enum db_failure *f = &d->base.failure;
    if (PQstatus(d->c) == CONNECTION_BAD)
        *f = DB_FAIL_CONNECTION;
    else if (state && strcmp(state, "23505") == 0)
        *f = DB_FAIL_UNIQUE;
    else if (state && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0 ||
                       strcmp(state, "55P03") == 0))
        *f = DB_FAIL_RETRY;
    else if (state && strncmp(state, "08", 2) == 0)
        *f = DB_FAIL_CONNECTION;
    else
        *f = DB_FAIL_OTHER;
}

/* A failed statement: its result's message where it has one. */
static int pg_fail(struct pg_db *d, const PGresult *r, struct medic_error *err)
{
    classify(d, r);
    const char *msg = r ? PQresultErrorMessage(r) : "";
    return pg_message(err, msg && *msg ? msg : PQerrorMessage(d->c), "query failed");
}

/* Before a statement: a connection that broke is opened again, outside a
 * transaction only. */
static int pg_ready(struct pg_db *d, struct medic_error *err)
{
    if (PQstatus(d->c) == CONNECTION_OK)
        return 0;
    if (!d->in_tx) {
        PQreset(d->c);
        d->epoch++;
        d->session_lock = 0; /* the server let it go with the session */
        d->nlater = 0;
        if (PQpipelineStatus(d->c) != PQ_PIPELINE_OFF)
            PQexitPipelineMode(d->c);
        if (PQstatus(d->c) == CONNECTION_OK)
            return 0;
    }
    d->base.failure = DB_FAIL_CONNECTION;
    return audit_pg_error(err, d->c, "the connection is lost");
}

static int ok_status(const PGresult *r)
{
    ExecStatusType s = PQresultStatus(r);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

/* Sends st (its statement prepared first when this connection has not
 * got it yet), or sql; 0 when libpq could not. */
static int send_one(struct pg_db *d, struct pg_stmt *st, const char *sql, int *prepared)
{
    if (!st)
        return PQsendQueryParams(d->c, sql, 0, NULL, NULL, NULL, NULL, 0);
    const char *const *values = (const char *const *)st->params;
    if (!st->cached)
        return PQsendQueryParams(d->c, st->sql, st->nparams, NULL, values, st->lengths, st->formats,
                                 0);
    if (st->prepared_epoch != d->epoch + 1) {
        if (!PQsendPrepare(d->c, st->name, st->sql, st->nparams, NULL))
            return 0;
        *prepared = 1;
    }
    return PQsendQueryPrepared(d->c, st->name, st->nparams, values, st->lengths, st->formats, 0);
}

/* What a waiting statement's success means for the session lock. */
static void took(struct pg_db *d, const struct pg_later *l)
{
    if (l->lock > 0) {
        d->session_lock = l->key;
        d->session_shared = l->shared;
    } else if (l->lock < 0) {
        d->session_lock = 0;
    }
}

/* The statements waiting to go before it, then st or sql (or neither),
 * then those waiting to go after it, in one round trip; *out the answered
 * statement's result (NULL when there is none). The first failure is the
 * error, and what followed it did not run. */
static int pg_pipeline(struct pg_db *d, struct pg_stmt *st, const char *sql, PGresult **out,
                       struct medic_error *err)
{
    /* in the order sent: an index into later, or -1 the statement's
     * preparation, or -2 the statement */
    int order[PG_LATER + 2], n = 0, prepared = 0;
    int sent = PQenterPipelineMode(d->c);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; sent && i < d->nlater; i++)
            if (d->later[i].after == pass) {
                sent = PQsendQueryParams(d->c, d->later[i].sql, 0, NULL, NULL, NULL, NULL, 0);
                order[n++] = i;
            }
        if (pass == 0 && sent && (st || sql)) {
            sent = send_one(d, st, sql, &prepared);
            if (prepared)
                order[n++] = -1;
            order[n++] = -2;
        }
    }
    if (sent)
        sent = PQpipelineSync(d->c);
    int rc = sent ? 0 : pg_fail(d, NULL, err);
    for (int k = 0; sent && k < n; k++) {
        PGresult *r = PQgetResult(d->c);
        if (!r) {
            if (!rc)
                rc = pg_fail(d, NULL, err);
            break;
        }
        if (!ok_status(r)) {
            if (!rc)
                rc = pg_fail(d, r, err);
            PQclear(r);
        } else if (order[k] == -2) {
            *out = r;
        } else {
            if (order[k] >= 0)
                took(d, &d->later[order[k]]);
            PQclear(r);
        }
        while ((r = PQgetResult(d->c))) /* the end of this statement's results */
            PQclear(r);
    }
    if (sent) /* the sync's own result */
        PQclear(PQgetResult(d->c));
    if (!PQexitPipelineMode(d->c) && !rc)
        rc = pg_fail(d, NULL, err);
    if (rc == 0 && prepared)
        st->prepared_epoch = d->epoch + 1;
    if (rc) {
        PQclear(*out);
        *out = NULL;
    }
    d->nlater = 0;
    return rc;
}

/* Runs st or sql (or only what waits), with the statements waiting before
 * it; *out its result. */
static int pg_run(struct pg_db *d, struct pg_stmt *st, const char *sql, PGresult **out,
                  struct medic_error *err)
{
    *out = NULL;
    if (pg_ready(d, err))
        return MEDIC_E_STORE;
    if (d->nlater)
        return pg_pipeline(d, st, sql, out, err);
    PGresult *r;
    if (!st) {
        if (!sql)
            return 0;
        r = PQexec(d->c, sql);
    } else {
        const char *const *values = (const char *const *)st->params;
        if (st->cached && st->prepared_epoch != d->epoch + 1) {
            PGresult *p = PQprepare(d->c, st->name, st->sql, st->nparams, NULL);
            int rc = ok_status(p) ? 0 : pg_fail(d, p, err);
            PQclear(p);
            if (rc)
                return rc;
            st->prepared_epoch = d->epoch + 1;
        }
        r = st->cached
                ? PQexecPrepared(d->c, st->name, st->nparams, values, st->lengths, st->formats, 0)
                : PQexecParams(d->c, st->sql, st->nparams, NULL, values, st->lengths, st->formats,
                               0);
    }
    if (!ok_status(r)) {
        int rc = pg_fail(d, r, err);
        PQclear(r);
        return rc;
    }
    *out = r;
    return 0;
}

int pg_exec(struct db *db, const char *sql, struct medic_error *err)
{
    struct pg_db *d = PG(db);
    PGresult *r = NULL;
    int rc = 0;
    /* several statements in one string cannot go in a pipeline */
    if (d->nlater && strchr(sql, ';'))
        rc = pg_run(d, NULL, NULL, &r, err);
    if (rc == 0)
        rc = pg_run(d, NULL, sql, &r, err);
    PQclear(r);
    return rc;
}

static int queue(struct pg_db *d, const struct pg_later *l, struct medic_error *err)
{
    if (!d->in_tx || d->nlater == PG_LATER) {
        /* outside a transaction nothing may follow to carry it */
        PGresult *r = NULL;
        int rc = pg_run(d, NULL, l->sql, &r, err);
        PQclear(r);
        if (rc == 0)
            took(d, l);
        return rc;
    }
    d->later[d->nlater++] = *l;
    return 0;
}

int pg_exec_later(struct db *d, const char *sql, struct medic_error *err)
{
    struct pg_later l = {0};
    if (strlen(sql) >= sizeof(l.sql))
        return pg_exec(d, sql, err);
    snprintf(l.sql, sizeof(l.sql), "%s", sql);
    return queue(PG(d), &l, err);
}

int pg_lock_session(struct db *d, int64_t key, int shared, struct medic_error *err)
{
    struct pg_later l = {.lock = 1, .key = key, .shared = shared};
    snprintf(l.sql, sizeof(l.sql), "SELECT pg_advisory_lock%s(%" PRId64 ")",
             shared ? "_shared" : "", key);
    return queue(PG(d), &l, err);
}

int pg_unlock_session(struct db *d, int64_t key, int shared, struct medic_error *err)
{
    struct pg_later l = {.lock = -1, .after = 1, .key = key, .shared = shared};
    snprintf(l.sql, sizeof(l.sql), "SELECT pg_advisory_unlock%s(%" PRId64 ")",
             shared ? "_shared" : "", key);
    return queue(PG(d), &l, err);
}

int pg_begin(struct db *db, struct medic_error *err)
{
    struct pg_db *d = PG(db);
    if (pg_ready(d, err))
        return MEDIC_E_STORE;
    d->in_tx = 1;
    d->nlater = 0;
    struct pg_later l = {.sql = "BEGIN"};
    return queue(d, &l, err);
}

int pg_begin_snapshot(struct db *db, struct medic_error *err)
{
    /* a read snapshot holds no lock a writer waits for, so it may stay open
     * while a long chain is hashed client-side: no idle-in-transaction cut */
    int rc = pg_exec(db,
                     "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                     "SET LOCAL idle_in_transaction_session_timeout = 0",
                     err);
    PG(db)->in_tx = rc == 0;
    return rc;
}

void pg_rollback(struct db *db)
{
    struct pg_db *d = PG(db);
    /* a BEGIN still waiting: nothing reached the server */
    int sent = !(d->nlater && strcmp(d->later[0].sql, "BEGIN") == 0);
    d->nlater = 0;
    if (PQpipelineStatus(d->c) != PQ_PIPELINE_OFF)
        PQexitPipelineMode(d->c);
    if (sent && PQstatus(d->c) == CONNECTION_OK)
        PQclear(PQexec(d->c, "ROLLBACK"));
    d->in_tx = 0;
    if (d->session_lock && PQstatus(d->c) == CONNECTION_OK) {
        char sql[64];
        snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock%s(%" PRId64 ")",
                 d->session_shared ? "_shared" : "", d->session_lock);
        PQclear(PQexec(d->c, sql));
    }
    d->session_lock = 0;
}

int pg_commit(struct db *db, struct medic_error *err)
{
    struct pg_db *d = PG(db);
    int rc = 0;
    if (d->nlater == 1 && strcmp(d->later[0].sql, "BEGIN") == 0) {
        d->nlater = 0; /* nothing ran */
    } else {
        PGresult *r = NULL;
        rc = pg_run(d, NULL, "COMMIT", &r, err);
        PQclear(r);
    }
    if (rc)
        pg_rollback(db);
    d->in_tx = 0;
    return rc;
}

int64_t pg_last_insert_id(struct db *d)
{
    (void)d;
    MEDIC_BUG("db_last_insert_id on PostgreSQL");
    return 0;
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

static void free_stmt(struct pg_stmt *st)
{
    db_pg_rows_free(st);
    free(st->params);
    free(st->lengths);
    free(st->formats);
    free(st->owned);
    free(st->sql);
    free(st);
}

int pg_prepare(struct db *db, const char *sql, int cached, struct db_stmt **out,
               struct medic_error *err)
{
    struct pg_db *d = PG(db);
    struct pg_stmt *st = calloc(1, sizeof(*st));
    if (!st)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    st->base.backend = &audit_backend_pg;
    st->base.d = db;
    st->row = -1;
    if (!(st->sql = pg_sql(sql, &st->nparams)) || st->nparams > DB_MAX_PARAMS) {
        free_stmt(st);
        return medic_error_set(err, MEDIC_E_INVALID, "a statement with too many parameters");
    }
    size_t n = (size_t)st->nparams + 1;
    st->params = calloc(n, sizeof(*st->params));
    st->lengths = calloc(n, sizeof(*st->lengths));
    st->formats = calloc(n, sizeof(*st->formats));
    st->owned = calloc(n, sizeof(*st->owned));
    if (!st->params || !st->lengths || !st->formats || !st->owned) {
        free_stmt(st);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    if (cached) {
        st->cached = 1;
        snprintf(st->name, sizeof(st->name), "medic_%u", ++d->names);
    }
    *out = &st->base;
    return 0;
}

int pg_prepare_rows(struct db *db, const char *sql, const char *types, int cached,
                    struct db_stmt **out, struct medic_error *err)
{
    int rc = pg_prepare(db, sql, cached, out, err);
    if (rc == 0 && (rc = db_pg_rows_init(STMT(*out), types, err))) {
        free_stmt(STMT(*out));
        *out = NULL;
    }
    return rc;
}

/* Sets parameter i to v: text (owned, len -1) or a blob's bytes (not). */
static void bind_param(struct pg_stmt *st, int i, char *v, int len)
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

void pg_bind_int64(struct db_stmt *st, int i, int64_t v)
{
    if (STMT(st)->columns) {
        db_pg_put_element(STMT(st), i, 'i', &v, 8);
        return;
    }
    char *s = malloc(24);
    if (s)
        snprintf(s, 24, "%" PRId64, v);
    bind_param(STMT(st), i, s, -1);
}

void pg_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len)
{
    if (STMT(st)->columns) {
        db_pg_put_element(STMT(st), i, v ? 't' : 'n', v, len);
        return;
    }
    char *s = NULL;
    if (v && (s = malloc(len + 1))) {
        memcpy(s, v, len);
        s[len] = 0;
    }
    bind_param(STMT(st), i, s, -1);
}

void pg_bind_double(struct db_stmt *st, int i, double v)
{
    if (STMT(st)->columns) {
        db_pg_put_element(STMT(st), i, 'r', &v, 8);
        return;
    }
    char *s = malloc(32);
    if (s)
        snprintf(s, 32, "%.17g", v);
    bind_param(STMT(st), i, s, -1);
}

void pg_bind_blob(struct db_stmt *st, int i, const void *data, size_t len)
{
    if (STMT(st)->columns)
        db_pg_put_element(STMT(st), i, 't', data, len);
    else
        bind_param(STMT(st), i, (char *)data, (int)len);
}

int pg_step(struct db_stmt *base, struct medic_error *err)
{
    struct pg_stmt *st = STMT(base);
    if (!st->res) {
        int rc = st->columns ? db_pg_build_arrays(st, err) : 0;
        if (rc == 0)
            rc = pg_run(PG(base->d), st, NULL, &st->res, err);
        if (rc)
            return rc;
        st->row = -1;
    }
    return ++st->row < PQntuples(st->res) ? 1 : 0;
}

int pg_column_count(struct db_stmt *st)
{
    return STMT(st)->res ? PQnfields(STMT(st)->res) : 0;
}

const char *pg_column_name(struct db_stmt *st, int i)
{
    return STMT(st)->res ? PQfname(STMT(st)->res, i) : NULL;
}

enum db_type pg_column_type(struct db_stmt *base, int i)
{
    struct pg_stmt *st = STMT(base);
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

int64_t pg_column_int64(struct db_stmt *base, int i)
{
    struct pg_stmt *st = STMT(base);
    const char *v = PQgetvalue(st->res, st->row, i);
    if (PQftype(st->res, i) == PG_BOOL)
        return v[0] == 't';
    return strtoll(v, NULL, 10);
}

double pg_column_double(struct db_stmt *base, int i)
{
    struct pg_stmt *st = STMT(base);
    return strtod(PQgetvalue(st->res, st->row, i), NULL);
}

const char *pg_column_text(struct db_stmt *base, int i)
{
    struct pg_stmt *st = STMT(base);
    return PQgetisnull(st->res, st->row, i) ? NULL : PQgetvalue(st->res, st->row, i);
}

size_t pg_column_bytes(struct db_stmt *base, int i)
{
    struct pg_stmt *st = STMT(base);
    return (size_t)PQgetlength(st->res, st->row, i);
}

const void *pg_column_blob(struct db_stmt *base, int i, size_t *len)
{
    struct pg_stmt *st = STMT(base);
    PQfreemem(st->blob);
    st->blob = NULL;
    *len = 0;
    if (PQgetisnull(st->res, st->row, i))
        return NULL;
    st->blob = PQunescapeBytea((const unsigned char *)PQgetvalue(st->res, st->row, i), len);
    return st->blob;
}

void pg_reset(struct db_stmt *base)
{
    struct pg_stmt *st = STMT(base);
    PQclear(st->res);
    st->res = NULL;
    st->row = -1;
}

void pg_clear(struct db_stmt *base)
{
    struct pg_stmt *st = STMT(base);
    pg_reset(base);
    db_pg_rows_clear(st);
    for (int i = 1; !st->columns && i <= st->nparams; i++)
        bind_param(st, i, NULL, -1);
}

void pg_finalize(struct db_stmt *base)
{
    struct pg_stmt *st = STMT(base);
    struct pg_db *d = PG(base->d);
    PQclear(st->res);
    PQfreemem(st->blob);
    for (int i = 0; st->owned && i < st->nparams; i++)
        if (st->owned[i])
            free(st->params[i]);
    if (st->cached && st->prepared_epoch == d->epoch + 1 && PQstatus(d->c) == CONNECTION_OK) {
        char sql[48];
        snprintf(sql, sizeof(sql), "DEALLOCATE %s", st->name);
        PQclear(PQexec(d->c, sql));
    }
    free_stmt(st);
}

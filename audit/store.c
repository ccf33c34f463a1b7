#include "audit.h"
#include "buf.h"
#include "chain.h"
#include "log.h"
#include "schema.h"
#include "timeutil.h"

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

const double audit_commit_buckets[AUDIT_COMMIT_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};

/* WAL pages after which the writer checkpoints. */
#define AUDIT_CHECKPOINT_PAGES 1000

/* Most requests one transaction takes; more wait for the next one. */
#define AUDIT_MAX_BATCH 512

enum job_kind { JOB_NOTIFICATION, JOB_DECISION, JOB_ACTION, JOB_EVALUATION };

/* What the caller's thread computes before queueing a notification, so
 * that the single writer thread does only database work: the dedupe key
 * and every alert's labels and annotations as JSON, NUL-separated in one
 * buffer (offsets[2i] labels, offsets[2i+1] annotations). */
struct prepared_notification {
    char dedupe_key[65];
    int64_t dedupe_prefix;
    unsigned char *deflated; /* the raw body compressed, when that is smaller */
    size_t deflated_len;     /* 0: store the body as it is */
    struct medic_buf json;
    size_t *offsets;
};

struct job {
    enum job_kind kind;
    const void *in;
    const struct prepared_notification *prepared;
    void *out;
    int64_t id;
    int rc;
    int done;
    pthread_cond_t cond; /* signalled when done: wakes only this job's caller */
    struct medic_error err;
    struct job *next;
    /* asynchronous jobs: called on the writer thread when durable, then the
     * job (heap, owned by the store) is freed */
    audit_done_fn done_fn;
    void *done_arg;
    struct prepared_notification owned_prep;
};

enum stmt_id {
    ST_FIND_FIRST,
    ST_INSERT_NOTIFICATION,
    ST_INSERT_ALERT,
    ST_INSERT_DECISION,
    ST_INSERT_ACTION,
    ST_LAST_DECISION_HASH,
    ST_LAST_ACTION_HASH,
    ST_SELECT_DECISION,
    ST_SELECT_ACTION,
    ST_SET_DECISION_HASH,
    ST_SET_ACTION_HASH,
    ST_MARK_EVALUATED,
    ST_SAVE_ENGINE_STATE,
    ST_COUNT
};

struct audit_store {
    sqlite3 *db;
    sqlite3_stmt *stmts[ST_COUNT];
    struct audit_options options;
    pthread_t writer;
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct job *head, *tail;
    size_t pending;
    int stopping;
    struct audit_stats stats; /* under lock */
};

void audit_options_default(struct audit_options *options)
{
    options->max_pending = 4096;
    options->busy_timeout_ms = 5000;
    options->synchronous_full = 1;
}

static const char *const stmt_sql[ST_COUNT] = {
    [ST_FIND_FIRST] =
        "SELECT id FROM notifications WHERE dedupe_prefix = ?2 AND duplicate_of IS NULL"
        " AND dedupe_key = ?1",
    [ST_INSERT_NOTIFICATION] =
        "INSERT INTO notifications (received_at, group_key, status, receiver, external_url,"
        " truncated_alerts, alert_count, dedupe_key, duplicate_of, remote_addr, payload,"
        " dedupe_prefix, payload_encoding, payload_bytes)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [ST_INSERT_ALERT] =
        "INSERT INTO alerts (notification_id, position, received_at, fingerprint, status,"
        " alertname, node, starts_at, ends_at, generator_url, labels, annotations)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_INSERT_DECISION] =
        "INSERT INTO decisions (created_at, notification_id, alert_id, fingerprint, node,"
        " alertname, policy, step, action, params, risk, model_hash, verdict, reason,"
        " config_hash, prev_hash, hash)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, '')",
    [ST_INSERT_ACTION] =
        "INSERT INTO actions (created_at, decision_id, phase, intent_id, action, node, target,"
        " params, result, duration_ms, detail, prev_hash, hash)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, '')",
    [ST_LAST_DECISION_HASH] = "SELECT hash FROM decisions ORDER BY id DESC LIMIT 1",
    [ST_LAST_ACTION_HASH] = "SELECT hash FROM actions ORDER BY id DESC LIMIT 1",
    [ST_SELECT_DECISION] = NULL, /* built from audit_decision_hashed_columns */
    [ST_SELECT_ACTION] = NULL,
    [ST_SET_DECISION_HASH] = "UPDATE decisions SET hash = ?2 WHERE id = ?1",
    [ST_SET_ACTION_HASH] = "UPDATE actions SET hash = ?2 WHERE id = ?1",
    [ST_MARK_EVALUATED] = "UPDATE notifications SET evaluated_at = ?2 WHERE id = ?1",
    [ST_SAVE_ENGINE_STATE] = "INSERT INTO engine_state (id, updated_at, state) VALUES (1, ?1, ?2)"
                             " ON CONFLICT (id) DO UPDATE SET updated_at = ?1, state = ?2",
};

static int store_fail(struct audit_store *s, struct medic_error *err, const char *what)
{
    return medic_error_set(err, MEDIC_E_STORE, "%s: %s", what, sqlite3_errmsg(s->db));
}

static int exec_sql(struct audit_store *s, const char *sql, struct medic_error *err)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, sql);
    return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void bind_time_ms(sqlite3_stmt *st, int i, int64_t t)
{
    if (t == MEDIC_TIME_UNSET)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, t / MEDIC_NS_PER_MS);
}

static void bind_id(sqlite3_stmt *st, int i, int64_t id)
{
    if (id > 0)
        sqlite3_bind_int64(st, i, id);
    else
        sqlite3_bind_null(st, i);
}

static int step_done(struct audit_store *s, sqlite3_stmt *st, struct medic_error *err,
                     const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE)
        return store_fail(s, err, what);
    return 0;
}

static int labels_json(struct medic_buf *b, const struct medic_labels *l)
{
    int rc = medic_buf_puts(b, "{");
    for (size_t i = 0; i < l->count && rc == 0; i++) {
        if (i)
            rc = medic_buf_puts(b, ",");
        if (rc == 0)
            rc = medic_buf_json_string(b, l->items[i].name);
        if (rc == 0)
            rc = medic_buf_puts(b, ":");
        if (rc == 0)
            rc = medic_buf_json_string(b, l->items[i].value);
    }
    return rc ? rc : medic_buf_puts(b, "}");
}

static int write_notification(struct audit_store *s, struct job *job)
{
    const struct audit_notification_in *in = job->in;
    const struct prepared_notification *prep = job->prepared;
    struct audit_notification_result *out = job->out;
    const struct medic_notification *n = in->notification;
    int64_t first = 0;

    sqlite3_stmt *st = s->stmts[ST_FIND_FIRST];
    sqlite3_bind_text(st, 1, prep->dedupe_key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, prep->dedupe_prefix);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        first = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(s, &job->err, "looking up duplicates");

    st = s->stmts[ST_INSERT_NOTIFICATION];
    sqlite3_bind_int64(st, 1, in->received_at / MEDIC_NS_PER_MS);
    bind_text(st, 2, n->group_key);
    bind_text(st, 3, medic_alert_status_name(n->status));
    bind_text(st, 4, n->receiver);
    bind_text(st, 5, n->external_url);
    sqlite3_bind_int64(st, 6, n->truncated_alerts);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)n->alert_count);
    sqlite3_bind_text(st, 8, prep->dedupe_key, -1, SQLITE_STATIC);
    bind_id(st, 9, first);
    bind_text(st, 10, in->remote_addr);
    if (prep->deflated_len) {
        sqlite3_bind_blob(st, 11, prep->deflated, (int)prep->deflated_len, SQLITE_STATIC);
        bind_text(st, 13, "deflate");
    } else {
        sqlite3_bind_blob(st, 11, in->raw, (int)in->raw_len, SQLITE_STATIC);
        bind_text(st, 13, "identity");
    }
    sqlite3_bind_int64(st, 12, prep->dedupe_prefix);
    sqlite3_bind_int64(st, 14, (sqlite3_int64)in->raw_len);
    if ((rc = step_done(s, st, &job->err, "storing the notification")))
        return rc;
    int64_t id = sqlite3_last_insert_rowid(s->db);
    out->id = id;
    out->duplicate = first != 0;
    out->duplicate_of = first;
    if (first)
        return 0;

    st = s->stmts[ST_INSERT_ALERT];
    for (size_t i = 0; i < n->alert_count; i++) {
        const struct medic_alert *a = &n->alerts[i];
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
        sqlite3_bind_int64(st, 3, in->received_at / MEDIC_NS_PER_MS);
        bind_text(st, 4, a->fingerprint);
        bind_text(st, 5, medic_alert_status_name(a->status));
        bind_text(st, 6, medic_labels_get(&a->labels, "alertname"));
        bind_text(st, 7, in->alert_nodes ? in->alert_nodes[i] : NULL);
        bind_time_ms(st, 8, a->starts_at);
        bind_time_ms(st, 9, a->ends_at);
        bind_text(st, 10, a->generator_url);
        sqlite3_bind_text(st, 11, prep->json.data + prep->offsets[2 * i], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 12, prep->json.data + prep->offsets[2 * i + 1], -1, SQLITE_STATIC);
        if ((rc = step_done(s, st, &job->err, "storing an alert")))
            return rc;
    }
    return 0;
}

/* The first 64 bits of a lowercase hex digest, as an SQLite integer. */
static int64_t hex_prefix64(const char *hex)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++)
        v = v << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
    return (int64_t)v;
}

static int prepare_notification(const struct audit_notification_in *in,
                                struct prepared_notification *p)
{
    const struct medic_notification *n = in->notification;
    memset(p, 0, sizeof(*p));
    /* the raw body is most of what a notification writes: compress it
     * (zlib, fastest level) here, on the caller's thread, so that the
     * writer's commits write less */
    uLongf bound = compressBound((uLong)in->raw_len);
    p->deflated = malloc(bound);
    if (p->deflated &&
        compress2(p->deflated, &bound, (const Bytef *)in->raw, (uLong)in->raw_len, Z_BEST_SPEED) ==
            Z_OK &&
        bound < in->raw_len)
        p->deflated_len = bound;
    medic_notification_dedupe_key(n, p->dedupe_key);
    p->dedupe_prefix = hex_prefix64(p->dedupe_key);
    medic_buf_init(&p->json, 0);
    p->offsets = calloc(2 * n->alert_count + 1, sizeof(*p->offsets));
    if (!p->offsets)
        return MEDIC_E_NOMEM;
    int rc = 0;
    for (size_t i = 0; i < n->alert_count && rc == 0; i++) {
        p->offsets[2 * i] = p->json.len;
        rc = labels_json(&p->json, &n->alerts[i].labels);
        if (rc == 0)
            rc = medic_buf_append(&p->json, "", 1);
        p->offsets[2 * i + 1] = p->json.len;
        if (rc == 0)
            rc = labels_json(&p->json, &n->alerts[i].annotations);
        if (rc == 0)
            rc = medic_buf_append(&p->json, "", 1);
    }
    return rc;
}

static void prepared_release(struct prepared_notification *p)
{
    free(p->deflated);
    medic_buf_release(&p->json);
    free(p->offsets);
}

/* Fills the row's hash from its stored content and the previous hash. */
static int seal_row(struct audit_store *s, enum stmt_id select, enum stmt_id update, int64_t id,
                    struct medic_error *err)
{
    char hash[65];
    sqlite3_stmt *st = s->stmts[select];
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_reset(st);
        return store_fail(s, err, "reading back a chained row");
    }
    audit_chain_hash_row(st, hash);
    sqlite3_reset(st);
    st = s->stmts[update];
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, hash, -1, SQLITE_TRANSIENT);
    return step_done(s, st, err, "sealing a chained row");
}

static int last_hash(struct audit_store *s, enum stmt_id which, char out[65],
                     struct medic_error *err)
{
    sqlite3_stmt *st = s->stmts[which];
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        snprintf(out, 65, "%s", (const char *)sqlite3_column_text(st, 0));
    else
        snprintf(out, 65, "%s", AUDIT_CHAIN_GENESIS);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail(s, err, "reading the chain head");
    return 0;
}

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in, int64_t *id,
                           struct medic_error *err);

static int write_decision(struct audit_store *s, struct job *job)
{
    return insert_decision(s, job->in, &job->id, &job->err);
}

static int write_evaluation(struct audit_store *s, struct job *job)
{
    const struct audit_evaluation_in *in = job->in;
    int64_t *ids = job->out;
    int rc = 0;
    for (size_t i = 0; i < in->decision_count && rc == 0; i++) {
        int64_t id = 0;
        rc = insert_decision(s, &in->decisions[i], &id, &job->err);
        if (ids)
            ids[i] = id;
    }
    sqlite3_stmt *st = s->stmts[ST_MARK_EVALUATED];
    for (size_t i = 0; i < in->evaluated_count && rc == 0; i++) {
        sqlite3_bind_int64(st, 1, in->evaluated[i]);
        sqlite3_bind_int64(st, 2, in->evaluated_at / MEDIC_NS_PER_MS);
        rc = step_done(s, st, &job->err, "marking a notification evaluated");
    }
    if (rc == 0 && in->state_json) {
        st = s->stmts[ST_SAVE_ENGINE_STATE];
        sqlite3_bind_int64(st, 1, in->evaluated_at / MEDIC_NS_PER_MS);
        sqlite3_bind_text(st, 2, in->state_json, -1, SQLITE_STATIC);
        rc = step_done(s, st, &job->err, "saving the engine state");
    }
    return rc;
}

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in,
                           int64_t *out_id, struct medic_error *err)
{
    char prev[65];
    int rc = last_hash(s, ST_LAST_DECISION_HASH, prev, err);
    if (rc)
        return rc;
    sqlite3_stmt *st = s->stmts[ST_INSERT_DECISION];
    sqlite3_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    bind_id(st, 2, in->notification_id);
    bind_id(st, 3, in->alert_id);
    bind_text(st, 4, in->fingerprint);
    bind_text(st, 5, in->node);
    bind_text(st, 6, in->alertname);
    bind_text(st, 7, in->policy);
    if (in->step >= 0)
        sqlite3_bind_int(st, 8, in->step);
    bind_text(st, 9, in->action);
    bind_text(st, 10, in->params_json);
    if (!isnan(in->risk))
        sqlite3_bind_double(st, 11, in->risk);
    bind_text(st, 12, in->model_hash);
    bind_text(st, 13, in->verdict);
    bind_text(st, 14, in->reason);
    bind_text(st, 15, in->config_hash);
    sqlite3_bind_text(st, 16, prev, -1, SQLITE_TRANSIENT);
    if ((rc = step_done(s, st, err, "storing a decision")))
        return rc;
    *out_id = sqlite3_last_insert_rowid(s->db);
    return seal_row(s, ST_SELECT_DECISION, ST_SET_DECISION_HASH, *out_id, err);
}

static int write_action(struct audit_store *s, struct job *job)
{
    const struct audit_action_in *in = job->in;
    char prev[65];
    int rc = last_hash(s, ST_LAST_ACTION_HASH, prev, &job->err);
    if (rc)
        return rc;
    sqlite3_stmt *st = s->stmts[ST_INSERT_ACTION];
    sqlite3_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    sqlite3_bind_int64(st, 2, in->decision_id);
    bind_text(st, 3, in->intent_id > 0 ? "outcome" : "intent");
    bind_id(st, 4, in->intent_id);
    bind_text(st, 5, in->action);
    bind_text(st, 6, in->node);
    bind_text(st, 7, in->target);
    bind_text(st, 8, in->params_json);
    bind_text(st, 9, in->result);
    if (in->duration_ms >= 0)
        sqlite3_bind_int64(st, 10, in->duration_ms);
    bind_text(st, 11, in->detail);
    sqlite3_bind_text(st, 12, prev, -1, SQLITE_TRANSIENT);
    if ((rc = step_done(s, st, &job->err, "storing an action")))
        return rc;
    job->id = sqlite3_last_insert_rowid(s->db);
    return seal_row(s, ST_SELECT_ACTION, ST_SET_ACTION_HASH, job->id, &job->err);
}

static int run_job(struct audit_store *s, struct job *job)
{
    switch (job->kind) {
    case JOB_NOTIFICATION:
        return write_notification(s, job);
    case JOB_DECISION:
        return write_decision(s, job);
    case JOB_ACTION:
        return write_action(s, job);
    case JOB_EVALUATION:
        return write_evaluation(s, job);
    }
    MEDIC_BUG("unknown audit job");
}

static void record_commit(struct audit_store *s, double seconds, size_t committed, int failed)
{
    struct audit_stats *st = &s->stats;
    if (failed) {
        st->commit_failures++;
        st->unhealthy = 1; /* until the next commit that writes something */
        return;
    }
    if (committed)
        st->unhealthy = 0;
    st->commits++;
    st->requests_committed += committed;
    st->commit_seconds_sum += seconds;
    for (int i = 0; i < AUDIT_COMMIT_BUCKETS; i++)
        if (seconds <= audit_commit_buckets[i])
            st->commit_bucket_counts[i]++;
}

/* One transaction for the whole batch; a savepoint per request, so that a
 * request that fails leaves nothing behind while the others commit. */
static void run_batch(struct audit_store *s, struct job *batch)
{
    int64_t start = medic_time_monotonic();
    struct medic_error err = {0};
    size_t ok = 0;
    int store_failed = 0; /* a request failed in the database itself (disk full, I/O) */
    int rc = exec_sql(s, "BEGIN IMMEDIATE", &err);
    for (struct job *j = batch; j; j = j->next) {
        if (rc) {
            j->rc = rc;
            j->err = err;
            continue;
        }
        if (exec_sql(s, "SAVEPOINT request", &j->err)) {
            j->rc = MEDIC_E_STORE;
            continue;
        }
        j->rc = run_job(s, j);
        if (j->rc) {
            if (j->rc == MEDIC_E_STORE &&
                sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_UNIQUE)
                j->err.code = MEDIC_E_INVALID;
            else if (j->rc == MEDIC_E_STORE)
                store_failed = 1;
            sqlite3_exec(s->db, "ROLLBACK TO request; RELEASE request", NULL, NULL, NULL);
        } else {
            sqlite3_exec(s->db, "RELEASE request", NULL, NULL, NULL);
            ok++;
        }
    }
    if (rc == 0 && exec_sql(s, "COMMIT", &err) != 0) {
        rc = MEDIC_E_STORE;
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        for (struct job *j = batch; j; j = j->next) {
            j->rc = rc;
            j->err = err;
        }
    }
    if (rc)
        medic_log_error("audit commit failed", "error", err.msg, NULL);
    double seconds = (double)(medic_time_monotonic() - start) / 1e9;
    struct job *async = NULL;
    pthread_mutex_lock(&s->lock);
    record_commit(s, seconds, ok, rc != 0 || (store_failed && ok == 0));
    for (struct job *j = batch, *next; j; j = next) {
        next = j->next; /* a woken synchronous caller frees its job */
        if (j->done_fn) {
            j->next = async;
            async = j;
        } else {
            j->done = 1;
            pthread_cond_signal(&j->cond);
        }
    }
    pthread_mutex_unlock(&s->lock);
    for (struct job *j = async, *next; j; j = next) {
        next = j->next;
        if (j->rc && j->err.code == 0)
            j->err.code = j->rc;
        j->done_fn(j->done_arg, j->rc, &j->err);
        prepared_release(&j->owned_prep);
        free(j);
    }
}

static void *writer_main(void *arg)
{
    struct audit_store *s = arg;
    pthread_setname_np(pthread_self(), "medic-audit");
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->work, &s->lock);
        if (!s->head && s->stopping)
            break;
        struct job *batch = s->head, *last = batch;
        size_t n = 1;
        while (last->next && n < AUDIT_MAX_BATCH) {
            last = last->next;
            n++;
        }
        s->head = last->next;
        if (!s->head)
            s->tail = NULL;
        last->next = NULL;
        s->pending -= n;
        pthread_mutex_unlock(&s->lock);
        run_batch(s, batch);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Queues job under the lock; refuses when closing or full. */
static int enqueue_locked(struct audit_store *s, struct job *job, struct medic_error *err)
{
    if (s->stopping)
        return medic_error_set(err, MEDIC_E_CLOSED, "the audit log is closing");
    if (s->pending >= s->options.max_pending)
        return medic_error_set(err, MEDIC_E_BUSY, "the audit queue is full (%zu requests)",
                               s->options.max_pending);
    job->next = NULL;
    if (s->tail)
        s->tail->next = job;
    else
        s->head = job;
    s->tail = job;
    s->pending++;
    pthread_cond_signal(&s->work);
    return 0;
}

static int submit(struct audit_store *s, struct job *job, struct medic_error *err)
{
    pthread_cond_init(&job->cond, NULL);
    pthread_mutex_lock(&s->lock);
    int rc = enqueue_locked(s, job, err);
    if (rc) {
        pthread_mutex_unlock(&s->lock);
        pthread_cond_destroy(&job->cond);
        return rc;
    }
    while (!job->done)
        pthread_cond_wait(&job->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_cond_destroy(&job->cond);
    if (job->rc && err) {
        *err = job->err;
        if (err->code == 0)
            err->code = job->rc;
    }
    return job->rc;
}

int audit_record_notification(struct audit_store *store, const struct audit_notification_in *in,
                              struct audit_notification_result *out, struct medic_error *err)
{
    struct prepared_notification prep;
    if (prepare_notification(in, &prep)) {
        prepared_release(&prep);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    struct job job = {.kind = JOB_NOTIFICATION, .in = in, .prepared = &prep, .out = out};
    int rc = submit(store, &job, err);
    prepared_release(&prep);
    return rc;
}

int audit_record_evaluation(struct audit_store *store, const struct audit_evaluation_in *in,
                            int64_t *decision_ids, struct medic_error *err)
{
    struct job job = {.kind = JOB_EVALUATION, .in = in, .out = decision_ids};
    return submit(store, &job, err);
}

int audit_record_notification_async(struct audit_store *store,
                                    const struct audit_notification_in *in,
                                    struct audit_notification_result *out, audit_done_fn done,
                                    void *arg, struct medic_error *err)
{
    struct job *job = calloc(1, sizeof(*job));
    if (!job)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (prepare_notification(in, &job->owned_prep)) {
        prepared_release(&job->owned_prep);
        free(job);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    job->kind = JOB_NOTIFICATION;
    job->in = in;
    job->prepared = &job->owned_prep;
    job->out = out;
    job->done_fn = done;
    job->done_arg = arg;
    pthread_mutex_lock(&store->lock);
    int rc = enqueue_locked(store, job, err);
    pthread_mutex_unlock(&store->lock);
    if (rc) {
        prepared_release(&job->owned_prep);
        free(job);
    }
    return rc;
}

int audit_record_decision(struct audit_store *store, const struct audit_decision_in *in,
                          int64_t *out_id, struct medic_error *err)
{
    struct job job = {.kind = JOB_DECISION, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

int audit_record_action(struct audit_store *store, const struct audit_action_in *in,
                        int64_t *out_id, struct medic_error *err)
{
    struct job job = {.kind = JOB_ACTION, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

void audit_store_stats(struct audit_store *store, struct audit_stats *out)
{
    pthread_mutex_lock(&store->lock);
    *out = store->stats;
    out->queue_depth = store->pending;
    out->max_pending = store->options.max_pending;
    pthread_mutex_unlock(&store->lock);
}

static int prepare_all(struct audit_store *s, struct medic_error *err)
{
    char sql[512];
    for (int i = 0; i < ST_COUNT; i++) {
        const char *text = stmt_sql[i];
        if (i == ST_SELECT_DECISION || i == ST_SELECT_ACTION) {
            snprintf(sql, sizeof(sql), "SELECT %s FROM %s WHERE id = ?1",
                     i == ST_SELECT_DECISION ? audit_decision_hashed_columns
                                             : audit_action_hashed_columns,
                     i == ST_SELECT_DECISION ? "decisions" : "actions");
            text = sql;
        }
        if (sqlite3_prepare_v3(s->db, text, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[i], NULL) !=
            SQLITE_OK)
            return store_fail(s, err, "preparing statements");
    }
    return 0;
}

int audit_store_open(const char *path, const struct audit_options *options,
                     struct audit_store **out, struct medic_error *err)
{
    struct audit_store *s = calloc(1, sizeof(*s));
    if (!s)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (options)
        s->options = *options;
    else
        audit_options_default(&s->options);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    int rc;
    if (sqlite3_open_v2(path, &s->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        rc = medic_error_set(err, MEDIC_E_STORE, "cannot open audit database '%s': %s", path,
                             s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(s->db, s->options.busy_timeout_ms);
    char pragmas[160];
    snprintf(pragmas, sizeof(pragmas),
             "PRAGMA journal_mode = WAL; PRAGMA synchronous = %s; PRAGMA foreign_keys = ON",
             s->options.synchronous_full ? "FULL" : "NORMAL");
    if ((rc = exec_sql(s, pragmas, err)))
        goto fail;
    if ((rc = audit_schema_migrate(s->db, err)) || (rc = prepare_all(s, err)))
        goto fail;
    /* the writer checkpoints after its own commits (SQLite's default of
     * 1000 pages): the WAL then restarts from its beginning and stays small,
     * where a checkpoint racing the writer from another thread lets it grow */
    sqlite3_wal_autocheckpoint(s->db, AUDIT_CHECKPOINT_PAGES);
    if (pthread_create(&s->writer, NULL, writer_main, s) != 0) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "cannot start the audit writer thread");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->stmts[i]);
    sqlite3_close(s->db);
    free(s);
    return rc;
}

void audit_store_free(struct audit_store *store)
{
    if (!store)
        return;
    pthread_mutex_lock(&store->lock);
    store->stopping = 1;
    pthread_cond_signal(&store->work);
    pthread_mutex_unlock(&store->lock);
    pthread_join(store->writer, NULL);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(store->stmts[i]);
    sqlite3_close(store->db);
    pthread_mutex_destroy(&store->lock);
    pthread_cond_destroy(&store->work);
    free(store);
}

#include "store_internal.h"
#include "buf.h"
#include "chain.h"
#include "deflate.h"
#include "log.h"
#include "schema.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    [ST_PUT_ENGINE_ROW] = "INSERT INTO engine_rows (kind, key, value) VALUES (?1, ?2, ?3)"
                          " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value",
    [ST_DROP_ENGINE_ROW] = "DELETE FROM engine_rows WHERE kind = ?1 AND key = ?2",
    [ST_DROP_ENGINE_ROWS] = "DELETE FROM engine_rows",
    [ST_DROP_LEGACY_STATE] = "DELETE FROM engine_state",
    [ST_INSERT_CHANGE] =
        "INSERT INTO incident_changes (created_at, incident, node, policy, from_state, state,"
        " cause, decision_id, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, '')",
    [ST_LAST_CHANGE_HASH] = "SELECT hash FROM incident_changes ORDER BY id DESC LIMIT 1",
    [ST_SELECT_CHANGE] = NULL,
    [ST_SET_CHANGE_HASH] = "UPDATE incident_changes SET hash = ?2 WHERE id = ?1",
    /* prepared once: parsing them per request cost as much as an insert */
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
};

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in, int64_t *id,
                           struct medic_error *err);

static int store_fail(struct audit_store *s, struct medic_error *err, const char *what)
{
    return medic_error_set(err, MEDIC_E_STORE, "%s: %s", what, sqlite3_errmsg(s->db));
}

int audit__exec_sql(struct audit_store *s, const char *sql, struct medic_error *err)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(s, err, sql);
    return 0;
}

int audit__exec_stmt(struct audit_store *s, enum stmt_id id, struct medic_error *err)
{
    sqlite3_stmt *st = s->stmts[id];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return store_fail(s, err, stmt_sql[id]);
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
    out->first_alert_id = 0;
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
        if (i == 0)
            out->first_alert_id = sqlite3_last_insert_rowid(s->db);
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

int audit__prepare_notification(const struct audit_notification_in *in,
                                struct prepared_notification *p)
{
    const struct medic_notification *n = in->notification;
    memset(p, 0, sizeof(*p));
    /* the raw body is most of what a notification writes: compress it
     * here, on the caller's thread, so that the writer's commits write less */
    p->deflated_len = audit__deflate(in->raw, in->raw_len, &p->deflated);
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

void audit__prepared_release(struct prepared_notification *p)
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
    struct db_stmt *row = db_stmt_over_sqlite(st);
    if (row)
        audit_chain_hash_db_row(row, db_column_count(row), hash);
    db_finalize(row);
    sqlite3_reset(st);
    if (!row)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
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

static int write_decision(struct audit_store *s, struct job *job)
{
    return insert_decision(s, job->in, &job->id, &job->err);
}

static int insert_change(struct audit_store *s, const struct audit_change_in *in,
                         int64_t decision_id, struct medic_error *err)
{
    char prev[65];
    int rc = last_hash(s, ST_LAST_CHANGE_HASH, prev, err);
    if (rc)
        return rc;
    sqlite3_stmt *st = s->stmts[ST_INSERT_CHANGE];
    sqlite3_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    sqlite3_bind_int64(st, 2, in->incident);
    bind_text(st, 3, in->node);
    bind_text(st, 4, in->policy);
    bind_text(st, 5, in->from);
    bind_text(st, 6, in->state);
    bind_text(st, 7, in->cause);
    bind_id(st, 8, decision_id);
    sqlite3_bind_text(st, 9, prev, -1, SQLITE_TRANSIENT);
    if ((rc = step_done(s, st, err, "storing an incident's change")))
        return rc;
    return seal_row(s, ST_SELECT_CHANGE, ST_SET_CHANGE_HASH, sqlite3_last_insert_rowid(s->db), err);
}

/* The engine's state rows a round changed: put_row below, called back by
 * the engine on the writer thread inside the round's transaction. */
struct row_sink {
    struct audit_store *s;
    struct medic_error *err;
};

static int put_row(void *arg, const char *kind, const char *key, const char *value, size_t len)
{
    struct row_sink *sink = arg;
    struct audit_store *s = sink->s;
    sqlite3_stmt *st;
    if (!kind) {
        st = s->stmts[ST_DROP_ENGINE_ROWS];
        return step_done(s, st, sink->err, "clearing the engine state");
    }
    st = s->stmts[value ? ST_PUT_ENGINE_ROW : ST_DROP_ENGINE_ROW];
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if (value)
        sqlite3_bind_text(st, 3, value, (int)len, SQLITE_STATIC);
    return step_done(s, st, sink->err, "saving the engine state");
}

static int write_evaluation(struct audit_store *s, struct job *job)
{
    const struct audit_evaluation_in *in = job->in;
    int64_t *ids = job->out;
    int64_t *own = NULL;
    if (!ids && (in->change_count || in->state_fn)) /* the changes and the state need them */
        ids = own = calloc(in->decision_count + 1, sizeof(*ids));
    if (!ids && (in->change_count || in->state_fn))
        return medic_error_set(&job->err, MEDIC_E_NOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < in->decision_count && rc == 0; i++) {
        int64_t id = 0;
        rc = insert_decision(s, &in->decisions[i], &id, &job->err);
        if (ids)
            ids[i] = id;
    }
    for (size_t i = 0; i < in->change_count && rc == 0; i++) {
        long k = in->changes[i].decision;
        rc = insert_change(s, &in->changes[i],
                           k >= 0 && (size_t)k < in->decision_count ? ids[k] : 0, &job->err);
    }
    if (rc == 0 && in->state_fn) {
        struct row_sink sink = {s, &job->err};
        rc = in->state_fn(in->state_arg, ids, put_row, &sink);
        if (rc && !job->err.msg[0])
            medic_error_set(&job->err, rc, "cannot save the engine state: %s", medic_strerror(rc));
    }
    if (rc == 0 && in->drop_legacy_state)
        rc = step_done(s, s->stmts[ST_DROP_LEGACY_STATE], &job->err,
                       "removing the engine state of an earlier medic");
    sqlite3_stmt *st = s->stmts[ST_MARK_EVALUATED];
    for (size_t i = 0; i < in->evaluated_count && rc == 0; i++) {
        sqlite3_bind_int64(st, 1, in->evaluated[i]);
        sqlite3_bind_int64(st, 2, in->evaluated_at / MEDIC_NS_PER_MS);
        rc = step_done(s, st, &job->err, "marking a notification evaluated");
    }
    free(own);
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

int audit__run_job(struct audit_store *s, struct job *job)
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

int audit__prepare_all(struct audit_store *s, struct medic_error *err)
{
    char sql[512];
    for (int i = 0; i < ST_COUNT; i++) {
        const char *text = stmt_sql[i];
        if (i == ST_SELECT_DECISION)
            snprintf(sql, sizeof(sql), "SELECT %s FROM decisions WHERE id = ?1",
                     audit_decision_hashed_columns);
        else if (i == ST_SELECT_ACTION)
            snprintf(sql, sizeof(sql), "SELECT %s FROM actions WHERE id = ?1",
                     audit_action_hashed_columns);
        else if (i == ST_SELECT_CHANGE)
            snprintf(sql, sizeof(sql), "SELECT %s FROM incident_changes WHERE id = ?1",
                     audit_change_hashed_columns);
        if (!text)
            text = sql;
        if (sqlite3_prepare_v3(s->db, text, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[i], NULL) !=
            SQLITE_OK)
            return store_fail(s, err, "preparing statements");
    }
    return 0;
}

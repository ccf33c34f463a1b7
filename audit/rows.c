/* SPDX-License-Identifier: Apache-2.0 */
#include "rows_internal.h"
#include "buf.h"
#include "chain.h"
#include "payload_codec.h"
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
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)%s",
    /* several replicas may store the same key at once: the unique index
     * decides which is first (the others wait for it, then store a duplicate) */
    [ST_INSERT_FIRST] =
        "INSERT INTO notifications (received_at, group_key, status, receiver, external_url,"
        " truncated_alerts, alert_count, dedupe_key, duplicate_of, remote_addr, payload,"
        " dedupe_prefix, payload_encoding, payload_bytes)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
        " ON CONFLICT (dedupe_key) WHERE duplicate_of IS NULL DO NOTHING RETURNING id",
    [ST_INSERT_ALERT] =
        "INSERT INTO alerts (notification_id, position, received_at, fingerprint, status,"
        " alertname, node, starts_at, ends_at, generator_url, labels, annotations)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)%s", /* see step_insert */
    [ST_INSERT_DECISION] =
        "INSERT INTO decisions (created_at, notification_id, alert_id, fingerprint, node,"
        " alertname, policy, step, action, params, risk, model_hash, verdict, reason,"
        " config_hash, prev_hash, hash)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, '')"
        " RETURNING %s", /* the hashed columns: the row as stored, hashed at once */
    [ST_INSERT_ACTION] =
        "INSERT INTO actions (created_at, decision_id, phase, intent_id, action, node, target,"
        " params, result, duration_ms, detail, prev_hash, hash)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, '') RETURNING %s",
    [ST_LAST_DECISION_HASH] = "SELECT hash FROM decisions ORDER BY id DESC LIMIT 1",
    [ST_LAST_ACTION_HASH] = "SELECT hash FROM actions ORDER BY id DESC LIMIT 1",
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
        " cause, decision_id, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, '')"
        " RETURNING %s",
    [ST_LAST_CHANGE_HASH] = "SELECT hash FROM incident_changes ORDER BY id DESC LIMIT 1",
    [ST_SET_CHANGE_HASH] = "UPDATE incident_changes SET hash = ?2 WHERE id = ?1",
    [ST_INSERT_APPROVAL] = "INSERT INTO approvals (created_at, decision_id, answer, by_name,"
                           " reason, remote_addr, undo) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)%s",
    [ST_MARK_APPROVAL] = "UPDATE approvals SET evaluated_at = ?2, result = ?3,"
                         " result_decision_id = ?4 WHERE id = ?1 AND evaluated_at IS NULL",
    [ST_INSERT_PAUSE] = "INSERT INTO pause_requests (created_at, request, by_name, reason, until,"
                        " remote_addr) VALUES (?1, ?2, ?3, ?4, ?5, ?6)%s",
    [ST_MARK_PAUSE] = "UPDATE pause_requests SET evaluated_at = ?2, result = ?3,"
                      " result_decision_id = ?4 WHERE id = ?1 AND evaluated_at IS NULL",
    [ST_INSERT_RELEASE] = "INSERT INTO release_requests (created_at, node, by_name, reason,"
                          " remote_addr) VALUES (?1, ?2, ?3, ?4, ?5)%s",
    [ST_MARK_RELEASE] = "UPDATE release_requests SET evaluated_at = ?2, result = ?3,"
                        " result_decision_id = ?4 WHERE id = ?1 AND evaluated_at IS NULL",
};

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in, int64_t *id,
                           struct medic_error *err);

static void bind_time_ms(struct db_stmt *st, int i, int64_t t)
{
    if (t == MEDIC_TIME_UNSET)
        db_bind_null(st, i);
    else
        db_bind_int64(st, i, t / MEDIC_NS_PER_MS);
}

int audit__step_id(struct db_stmt *st, int64_t *id, struct medic_error *err, const char *what)
{
    int rc = db_step(st, err);
    if (id)
        *id = rc == 1 ? db_column_int64(st, 0) : 0;
    db_clear(st);
    if (rc < 0) {
        medic_error_prefix(err, what);
        return rc;
    }
    return 0;
}

/* Runs an insert of one row (st: ST_INSERT_NOTIFICATION or
 * ST_INSERT_ALERT) and gives that row's id: PostgreSQL's RETURNING id, or
 * SQLite's last rowid (see db_last_insert_id). */
static int step_insert(struct audit_store *s, struct db_stmt *st, int64_t *id,
                       struct medic_error *err, const char *what)
{
    if (s->backend->returning_id[0])
        return audit__step_id(st, id, err, what);
    int rc = audit__step_id(st, NULL, err, what);
    *id = rc == 0 ? db_last_insert_id(s->db) : 0;
    return rc;
}

/* Runs st, which returns no row. */
static int step_done(struct db_stmt *st, struct medic_error *err, const char *what)
{
    return audit__step_id(st, NULL, err, what);
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

/* Binds a notification's row, the first or a duplicate of first, to
 * parameters base + 1 to base + 14. */
void audit__bind_notification_at(struct db_stmt *st, int base, const struct job *job,
                                 int64_t first);

static void bind_notification(struct db_stmt *st, const struct job *job, int64_t first)
{
    audit__bind_notification_at(st, 0, job, first);
}

void audit__bind_notification_at(struct db_stmt *st, int b, const struct job *job, int64_t first)
{
    const struct audit_notification_in *in = job->in;
    const struct prepared_notification *prep = job->prepared;
    const struct medic_notification *n = in->notification;
    db_bind_int64(st, b + 1, in->received_at / MEDIC_NS_PER_MS);
    audit__bind_text(st, b + 2, n->group_key);
    audit__bind_text(st, b + 3, medic_alert_status_name(n->status));
    audit__bind_text(st, b + 4, n->receiver);
    audit__bind_text(st, b + 5, n->external_url);
    db_bind_int64(st, b + 6, n->truncated_alerts);
    db_bind_int64(st, b + 7, (int64_t)n->alert_count);
    audit__bind_text(st, b + 8, prep->dedupe_key);
    audit__bind_id(st, b + 9, first);
    audit__bind_text(st, b + 10, in->remote_addr);
    if (prep->compressed_len) {
        db_bind_blob(st, b + 11, prep->compressed, prep->compressed_len);
        audit__bind_text(st, b + 13, AUDIT_PAYLOAD_LZ4);
    } else {
        db_bind_blob(st, b + 11, in->raw, in->raw_len);
        audit__bind_text(st, b + 13, "identity");
    }
    db_bind_int64(st, b + 12, prep->dedupe_prefix);
    db_bind_int64(st, b + 14, (int64_t)in->raw_len);
}

int audit__find_first(struct audit_store *s, const struct prepared_notification *prep,
                      int64_t *first, struct medic_error *err)
{
    struct db_stmt *st = s->stmts[ST_FIND_FIRST];
    db_bind_text(st, 1, prep->dedupe_key);
    db_bind_int64(st, 2, prep->dedupe_prefix);
    return audit__step_id(st, first, err, "looking up duplicates");
}

int audit__insert_notification_row(struct audit_store *s, struct job *job, int64_t first,
                                   int64_t *id)
{
    bind_notification(s->stmts[ST_INSERT_NOTIFICATION], job, first);
    return step_insert(s, s->stmts[ST_INSERT_NOTIFICATION], id, &job->err,
                       "storing the notification");
}

/* Binds alert i of the job's notification (stored as id) to parameters
 * base + 1 to base + 12. */
void audit__bind_alert_at(struct db_stmt *st, int b, const struct job *job, int64_t id, size_t i)
{
    const struct audit_notification_in *in = job->in;
    const struct prepared_notification *prep = job->prepared;
    const struct medic_alert *a = &in->notification->alerts[i];
    db_bind_int64(st, b + 1, id);
    db_bind_int64(st, b + 2, (int64_t)i);
    db_bind_int64(st, b + 3, in->received_at / MEDIC_NS_PER_MS);
    audit__bind_text(st, b + 4, a->fingerprint);
    audit__bind_text(st, b + 5, medic_alert_status_name(a->status));
    audit__bind_text(st, b + 6, medic_labels_get(&a->labels, "alertname"));
    audit__bind_text(st, b + 7, in->alert_nodes ? in->alert_nodes[i] : NULL);
    bind_time_ms(st, b + 8, a->starts_at);
    bind_time_ms(st, b + 9, a->ends_at);
    audit__bind_text(st, b + 10, a->generator_url);
    const size_t *o = prep->offsets + 2 * i; /* labels, annotations, what follows */
    db_bind_text_len(st, b + 11, prep->json.data + o[0], o[1] - o[0] - 1);
    db_bind_text_len(st, b + 12, prep->json.data + o[1], o[2] - o[1] - 1);
}

int audit__insert_alerts_each(struct audit_store *s, struct job *job, int64_t id)
{
    struct audit_notification_result *out = job->out;
    const struct medic_notification *n =
        ((const struct audit_notification_in *)job->in)->notification;
    struct db_stmt *st = s->stmts[ST_INSERT_ALERT];
    int rc = 0;
    for (size_t i = 0; i < n->alert_count && rc == 0; i++) {
        int64_t alert_id = 0;
        audit__bind_alert_at(st, 0, job, id, i);
        rc = step_insert(s, st, &alert_id, &job->err, "storing an alert");
        if (i == 0)
            out->first_alert_id = alert_id;
    }
    return rc;
}

static int write_notification(struct audit_store *s, struct job *job)
{
    const struct medic_notification *n =
        ((const struct audit_notification_in *)job->in)->notification;
    struct audit_notification_result *out = job->out;
    int64_t id = 0, first = 0;
    int rc = s->backend->insert_notification(s, job, &id, &first);
    if (rc)
        return rc;
    out->id = id;
    out->duplicate = first != 0;
    out->duplicate_of = first;
    out->first_alert_id = 0;
    if (first || n->alert_count == 0)
        return 0;
    return s->backend->insert_alerts(s, job, id);
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
    p->compressed_len = audit__payload_compress(in->raw, in->raw_len, &p->compressed);
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
    p->offsets[2 * n->alert_count] = p->json.len;
    return rc;
}

void audit__prepared_release(struct prepared_notification *p)
{
    free(p->compressed);
    medic_buf_release(&p->json);
    free(p->offsets);
}

/* Runs the insert of a chained row, which returns the row as stored
 * (its hashed columns, the id first), and fills the row's hash from it;
 * the chain's head is that hash from now. */
static int insert_sealed(struct audit_store *s, enum chain chain, enum stmt_id insert,
                         enum stmt_id update, int64_t *id, struct medic_error *err,
                         const char *what)
{
    struct db_stmt *st = s->stmts[insert];
    char hash[65];
    int rc = db_step(st, err);
    if (rc == 1) {
        *id = db_column_int64(st, 0);
        audit_chain_hash_db_row(st, db_column_count(st), hash);
    }
    db_clear(st);
    if (rc != 1) {
        if (rc == 0)
            rc = medic_error_set(err, MEDIC_E_STORE, "the insert returned no row");
        medic_error_prefix(err, what);
        return rc;
    }
    st = s->stmts[update];
    db_bind_int64(st, 1, *id);
    db_bind_text(st, 2, hash);
    if ((rc = step_done(st, err, "sealing a chained row")))
        return rc;
    memcpy(s->chain_head[chain], hash, sizeof(hash));
    return 0;
}

/* The chain's last hash: read once per transaction (which holds the chain
 * lock on PostgreSQL), then kept as rows are sealed. */
int audit__last_hash(struct audit_store *s, enum chain chain, char out[65], struct medic_error *err)
{
    static const enum stmt_id head_of[CHAIN_COUNT] = {
        [CHAIN_DECISIONS] = ST_LAST_DECISION_HASH,
        [CHAIN_ACTIONS] = ST_LAST_ACTION_HASH,
        [CHAIN_CHANGES] = ST_LAST_CHANGE_HASH,
    };
    if (!s->chain_head[chain][0]) {
        struct db_stmt *st = s->stmts[head_of[chain]];
        int rc = db_step(st, err);
        const char *v = rc == 1 ? db_column_text(st, 0) : NULL;
        snprintf(s->chain_head[chain], sizeof(s->chain_head[chain]), "%s",
                 v ? v : AUDIT_CHAIN_GENESIS);
        db_reset(st);
        if (rc < 0) {
            s->chain_head[chain][0] = 0;
            medic_error_prefix(err, "reading the chain head");
            return rc;
        }
    }
    memcpy(out, s->chain_head[chain], 65);
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
    int rc = audit__last_hash(s, CHAIN_CHANGES, prev, err);
    if (rc)
        return rc;
    struct db_stmt *st = s->stmts[ST_INSERT_CHANGE];
    db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    db_bind_int64(st, 2, in->incident);
    audit__bind_text(st, 3, in->node);
    audit__bind_text(st, 4, in->policy);
    audit__bind_text(st, 5, in->from);
    audit__bind_text(st, 6, in->state);
    audit__bind_text(st, 7, in->cause);
    audit__bind_id(st, 8, decision_id);
    db_bind_text(st, 9, prev);
    int64_t id = 0;
    return insert_sealed(s, CHAIN_CHANGES, ST_INSERT_CHANGE, ST_SET_CHANGE_HASH, &id, err,
                         "storing an incident's change");
}

/* A row's value as stored: the bytes as they came, each reference to a
 * decision of this evaluation replaced by its id (into value). */
int audit__row_value(const struct audit_rows *rows, const struct audit_row *row, const int64_t *ids,
                     size_t decision_count, struct medic_buf *value, struct medic_error *err)
{
    const char *d = rows->data.data;
    medic_buf_reset(value);
    size_t at = 0;
    for (size_t k = 0; k < row->ref_count; k++) {
        const struct audit_row_ref *ref = &rows->refs[row->first_ref + k];
        if (ref->decision >= decision_count || ref->offset < at)
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "the engine state names a decision it did not make");
        medic_buf_append(value, d + row->value + at, ref->offset - at);
        medic_buf_printf(value, "\"%lld\"", (long long)ids[ref->decision]);
        at = ref->offset + ref->len;
    }
    medic_buf_append(value, d + row->value + at, row->value_len - at);
    return value->error ? medic_error_set(err, MEDIC_E_NOMEM, "out of memory") : 0;
}

/* Writes the engine's changed rows: the bytes as they came, each
 * reference to a decision of this evaluation replaced by its id. On
 * PostgreSQL each run of puts or of deletions goes in one statement. */
static int write_state_rows(struct audit_store *s, const struct audit_rows *rows,
                            const int64_t *ids, size_t decision_count, struct medic_error *err)
{
    int rc = 0;
    if (rows->clear_first)
        rc = step_done(s->stmts[ST_DROP_ENGINE_ROWS], err, "clearing the engine state");
    struct medic_buf value;
    medic_buf_init(&value, 0);
    for (size_t i = 0; rc == 0 && i < rows->count;) {
        const struct audit_row *row = &rows->items[i];
        int dropped = row->value == SIZE_MAX;
        if (s->backend->state_rows_together) {
            size_t end = i + 1;
            while (end < rows->count && (rows->items[end].value == SIZE_MAX) == dropped &&
                   end - i < 10000)
                end++;
            if (end - i > 1) {
                int r = s->backend->state_rows_together(s, rows, i, end, ids, decision_count, err);
                if (r != 1) {
                    rc = r;
                    i = end;
                    continue;
                }
            }
        }
        const char *d = rows->data.data;
        struct db_stmt *st = s->stmts[dropped ? ST_DROP_ENGINE_ROW : ST_PUT_ENGINE_ROW];
        db_bind_text(st, 1, d + row->kind);
        db_bind_text(st, 2, d + row->key);
        if (!dropped && row->ref_count == 0)
            db_bind_text_len(st, 3, d + row->value, row->value_len);
        else if (!dropped) {
            if ((rc = audit__row_value(rows, row, ids, decision_count, &value, err)))
                break;
            db_bind_text_len(st, 3, value.data, value.len);
        }
        rc = step_done(st, err, "saving the engine state");
        i++;
    }
    medic_buf_release(&value);
    return rc;
}

/* What came of the people's requests an evaluation took (which:
 * ST_MARK_APPROVAL or ST_MARK_PAUSE), each with the decision that says
 * so. */
static int mark_requests(struct audit_store *s, enum stmt_id which,
                         const struct audit_request_mark *marks, size_t count,
                         const struct audit_evaluation_in *in, const int64_t *ids,
                         struct medic_error *err)
{
    struct db_stmt *st = s->stmts[which];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const struct audit_request_mark *m = &marks[i];
        db_bind_int64(st, 1, m->id);
        db_bind_int64(st, 2, in->evaluated_at / MEDIC_NS_PER_MS);
        audit__bind_text(st, 3, m->result);
        audit__bind_id(
            st, 4,
            m->decision >= 0 && (size_t)m->decision < in->decision_count ? ids[m->decision] : 0);
        rc = step_done(st, err, "recording what came of a person's request");
    }
    return rc;
}

static int write_evaluation(struct audit_store *s, struct job *job)
{
    const struct audit_evaluation_in *in = job->in;
    const struct audit_backend *b = s->backend;
    int64_t *ids = job->out;
    int64_t *own = NULL;
    if (!ids) /* the changes and the state refer to them */
        ids = own = calloc(in->decision_count + 1, sizeof(*ids));
    if (!ids)
        return medic_error_set(&job->err, MEDIC_E_NOMEM, "out of memory");
    int rc = 0;
    if (in->decision_count)
        rc = b->insert_decisions(s, in, ids, &job->err);
    if (rc == 0 && in->change_count)
        rc = b->insert_changes(s, in, ids, &job->err);
    if (rc == 0 && in->state)
        rc = write_state_rows(s, in->state, ids, in->decision_count, &job->err);
    if (rc == 0 && in->drop_legacy_state)
        rc = step_done(s->stmts[ST_DROP_LEGACY_STATE], &job->err,
                       "removing the engine state of an earlier medic");
    if (rc == 0 && in->evaluated_count)
        rc = b->mark_evaluated(s, in, &job->err);
    if (rc == 0)
        rc = mark_requests(s, ST_MARK_APPROVAL, in->approvals, in->approval_count, in, ids,
                           &job->err);
    if (rc == 0)
        rc = mark_requests(s, ST_MARK_PAUSE, in->pauses, in->pause_count, in, ids, &job->err);
    if (rc == 0)
        rc = mark_requests(s, ST_MARK_RELEASE, in->releases, in->release_count, in, ids, &job->err);
    /* every replica waiting on one of them hears of it at the commit */
    if (rc == 0 && b->taken_sql && in->approval_count + in->pause_count + in->release_count)
        rc = db_exec_later(s->db, b->taken_sql, &job->err);
    free(own);
    return rc;
}

/* A person's request (a pause, a release, an answer) for the leader to take. */
static int write_person(struct audit_store *s, struct job *job)
{
    struct db_stmt *st;
    if (job->kind == JOB_PAUSE) {
        const struct audit_pause_in *in = job->in;
        st = s->stmts[ST_INSERT_PAUSE];
        db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
        audit__bind_text(st, 2, in->pause ? "pause" : "unpause");
        audit__bind_text(st, 3, in->by);
        audit__bind_text(st, 4, in->reason);
        bind_time_ms(st, 5, in->until);
        audit__bind_text(st, 6, in->remote_addr);
    } else if (job->kind == JOB_RELEASE) {
        const struct audit_release_in *in = job->in;
        st = s->stmts[ST_INSERT_RELEASE];
        db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
        audit__bind_text(st, 2, in->node);
        audit__bind_text(st, 3, in->by);
        audit__bind_text(st, 4, in->reason);
        audit__bind_text(st, 5, in->remote_addr);
    } else {
        const struct audit_approval_in *in = job->in;
        st = s->stmts[ST_INSERT_APPROVAL];
        db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
        db_bind_int64(st, 2, in->decision_id);
        audit__bind_text(st, 3, in->approve ? "approve" : "deny");
        audit__bind_text(st, 4, in->by);
        audit__bind_text(st, 5, in->reason);
        audit__bind_text(st, 6, in->remote_addr);
        db_bind_int64(st, 7, in->undo ? 1 : 0);
    }
    return step_insert(s, st, &job->id, &job->err, "storing a person's request");
}

int audit__insert_decisions_each(struct audit_store *s, const struct audit_evaluation_in *in,
                                 int64_t *ids, struct medic_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < in->decision_count && rc == 0; i++)
        rc = insert_decision(s, &in->decisions[i], &ids[i], err);
    return rc;
}

int audit__insert_changes_each(struct audit_store *s, const struct audit_evaluation_in *in,
                               const int64_t *ids, struct medic_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < in->change_count && rc == 0; i++) {
        long k = in->changes[i].decision;
        rc = insert_change(s, &in->changes[i],
                           k >= 0 && (size_t)k < in->decision_count ? ids[k] : 0, err);
    }
    return rc;
}

int audit__mark_evaluated_each(struct audit_store *s, const struct audit_evaluation_in *in,
                               struct medic_error *err)
{
    struct db_stmt *st = s->stmts[ST_MARK_EVALUATED];
    int rc = 0;
    for (size_t i = 0; i < in->evaluated_count && rc == 0; i++) {
        db_bind_int64(st, 1, in->evaluated[i]);
        db_bind_int64(st, 2, in->evaluated_at / MEDIC_NS_PER_MS);
        rc = step_done(st, err, "marking a notification evaluated");
    }
    return rc;
}

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in,
                           int64_t *out_id, struct medic_error *err)
{
    char prev[65];
    int rc = audit__last_hash(s, CHAIN_DECISIONS, prev, err);
    if (rc)
        return rc;
    struct db_stmt *st = s->stmts[ST_INSERT_DECISION];
    db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    audit__bind_id(st, 2, in->notification_id);
    audit__bind_id(st, 3, in->alert_id);
    audit__bind_text(st, 4, in->fingerprint);
    audit__bind_text(st, 5, in->node);
    audit__bind_text(st, 6, in->alertname);
    audit__bind_text(st, 7, in->policy);
    if (in->step >= 0)
        db_bind_int64(st, 8, in->step);
    else
        db_bind_null(st, 8);
    audit__bind_text(st, 9, in->action);
    audit__bind_text(st, 10, in->params_json);
    if (!isnan(in->risk))
        db_bind_double(st, 11, in->risk);
    else
        db_bind_null(st, 11);
    audit__bind_text(st, 12, in->model_hash);
    audit__bind_text(st, 13, in->verdict);
    audit__bind_text(st, 14, in->reason);
    audit__bind_text(st, 15, in->config_hash);
    db_bind_text(st, 16, prev);
    return insert_sealed(s, CHAIN_DECISIONS, ST_INSERT_DECISION, ST_SET_DECISION_HASH, out_id, err,
                         "storing a decision");
}

static int write_action(struct audit_store *s, struct job *job)
{
    const struct audit_action_in *in = job->in;
    char prev[65];
    int rc = audit__last_hash(s, CHAIN_ACTIONS, prev, &job->err);
    if (rc)
        return rc;
    struct db_stmt *st = s->stmts[ST_INSERT_ACTION];
    db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    db_bind_int64(st, 2, in->decision_id);
    audit__bind_text(st, 3, in->intent_id > 0 ? "outcome" : "intent");
    audit__bind_id(st, 4, in->intent_id);
    audit__bind_text(st, 5, in->action);
    audit__bind_text(st, 6, in->node);
    audit__bind_text(st, 7, in->target);
    audit__bind_text(st, 8, in->params_json);
    audit__bind_text(st, 9, in->result);
    if (in->duration_ms >= 0)
        db_bind_int64(st, 10, in->duration_ms);
    else
        db_bind_null(st, 10);
    audit__bind_text(st, 11, in->detail);
    db_bind_text(st, 12, prev);
    return insert_sealed(s, CHAIN_ACTIONS, ST_INSERT_ACTION, ST_SET_ACTION_HASH, &job->id,
                         &job->err, "storing an action");
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
    case JOB_LEASE:
        return 0; /* guard_batch checked the term */
    case JOB_APPROVAL:
    case JOB_PAUSE:
    case JOB_RELEASE:
        return write_person(s, job);
    }
    MEDIC_BUG("unknown audit job");
}

int audit__prepare_all(struct audit_store *s, struct medic_error *err)
{
    char sql[1024];
    for (int i = 0; i < ST_COUNT; i++) {
        const char *text = stmt_sql[i];
        const int inserts_one = i == ST_INSERT_ALERT || i == ST_INSERT_NOTIFICATION ||
                                i == ST_INSERT_APPROVAL || i == ST_INSERT_PAUSE ||
                                i == ST_INSERT_RELEASE;
        const char *returning = i == ST_INSERT_DECISION ? audit_decision_hashed_columns
                                : i == ST_INSERT_ACTION ? audit_action_hashed_columns
                                : i == ST_INSERT_CHANGE ? audit_change_hashed_columns
                                : inserts_one           ? s->backend->returning_id /* step_insert */
                                                        : NULL;
        if (returning) { /* in place of the statement's "%s" */
            const char *at = strstr(text, "%s");
            snprintf(sql, sizeof(sql), "%.*s%s%s", (int)(at - text), text, returning, at + 2);
            text = sql;
        }
        if (i == ST_INSERT_FIRST && !s->backend->shared) /* one writer: looked up instead */
            continue;
        int rc = db_prepare_cached(s->db, text, &s->stmts[i], err);
        if (rc) {
            medic_error_prefix(err, "preparing statements");
            return rc;
        }
    }
    return 0;
}

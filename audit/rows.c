#include "store_internal.h"
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
};

/* PostgreSQL: alert ids come from one sequence that every replica draws
 * on, and a notification's alerts must have consecutive ids (the engine
 * finds alert k at the first id plus k): a replica inserts them holding
 * this lock, for the inserts only. */
#define ALERT_IDS_LOCK 0x6d656469630001LL

#define NOTIFICATION_COLUMNS 14
#define ALERT_COLUMNS 12
/* rows per statement: PostgreSQL takes at most 65,535 parameters */
#define ROWS_PER_STATEMENT(columns) (60000 / (columns))

/* "INSERT ... VALUES (?1, ..., ?C), (...) ..." for rows rows of columns. */
static int values_sql(struct medic_buf *b, const char *head, size_t rows, int columns,
                      const char *tail)
{
    medic_buf_reset(b);
    medic_buf_puts(b, head);
    int p = 1;
    for (size_t r = 0; r < rows; r++) {
        medic_buf_puts(b, r ? ",(" : " VALUES (");
        for (int c = 0; c < columns; c++)
            medic_buf_printf(b, c ? ",?%d" : "?%d", p++);
        medic_buf_puts(b, ")");
    }
    medic_buf_puts(b, tail);
    return b->error ? MEDIC_E_NOMEM : 0;
}

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in, int64_t *id,
                           struct medic_error *err);

static void bind_text(struct db_stmt *st, int i, const char *v)
{
    db_bind_text(st, i, v);
}

static void bind_time_ms(struct db_stmt *st, int i, int64_t t)
{
    if (t == MEDIC_TIME_UNSET)
        db_bind_null(st, i);
    else
        db_bind_int64(st, i, t / MEDIC_NS_PER_MS);
}

static void bind_id(struct db_stmt *st, int i, int64_t id)
{
    if (id > 0)
        db_bind_int64(st, i, id);
    else
        db_bind_null(st, i);
}

/* Runs st and clears it for the next use; id (unless NULL) receives the
 * first column of the row it returned (an insert's new id), 0 when none. */
static int step_id(struct db_stmt *st, int64_t *id, struct medic_error *err, const char *what)
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
    if (s->pg)
        return step_id(st, id, err, what);
    int rc = step_id(st, NULL, err, what);
    *id = rc == 0 ? db_last_insert_id(s->db) : 0;
    return rc;
}

/* Runs st, which returns no row. */
static int step_done(struct db_stmt *st, struct medic_error *err, const char *what)
{
    return step_id(st, NULL, err, what);
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
static void bind_notification_at(struct db_stmt *st, int base, const struct job *job,
                                 int64_t first);

static void bind_notification(struct db_stmt *st, const struct job *job, int64_t first)
{
    bind_notification_at(st, 0, job, first);
}

static void bind_notification_at(struct db_stmt *st, int b, const struct job *job, int64_t first)
{
    const struct audit_notification_in *in = job->in;
    const struct prepared_notification *prep = job->prepared;
    const struct medic_notification *n = in->notification;
    db_bind_int64(st, b + 1, in->received_at / MEDIC_NS_PER_MS);
    bind_text(st, b + 2, n->group_key);
    bind_text(st, b + 3, medic_alert_status_name(n->status));
    bind_text(st, b + 4, n->receiver);
    bind_text(st, b + 5, n->external_url);
    db_bind_int64(st, b + 6, n->truncated_alerts);
    db_bind_int64(st, b + 7, (int64_t)n->alert_count);
    bind_text(st, b + 8, prep->dedupe_key);
    bind_id(st, b + 9, first);
    bind_text(st, b + 10, in->remote_addr);
    if (prep->compressed_len) {
        db_bind_blob(st, b + 11, prep->compressed, prep->compressed_len);
        bind_text(st, b + 13, AUDIT_PAYLOAD_LZ4);
    } else {
        db_bind_blob(st, b + 11, in->raw, in->raw_len);
        bind_text(st, b + 13, "identity");
    }
    db_bind_int64(st, b + 12, prep->dedupe_prefix);
    db_bind_int64(st, b + 14, (int64_t)in->raw_len);
}

static int find_first(struct audit_store *s, const struct prepared_notification *prep,
                      int64_t *first, struct medic_error *err)
{
    struct db_stmt *st = s->stmts[ST_FIND_FIRST];
    db_bind_text(st, 1, prep->dedupe_key);
    db_bind_int64(st, 2, prep->dedupe_prefix);
    return step_id(st, first, err, "looking up duplicates");
}

/* The notification's row, and whether it is a duplicate (*first: the id
 * of the one it repeats). SQLite has one writer: a lookup then an insert.
 * PostgreSQL may have several: the insert as first is tried, and the
 * unique index on the key turns it into nothing when another replica (or
 * this batch) stored the key already. */
static int insert_notification(struct audit_store *s, struct job *job, int64_t *id, int64_t *first)
{
    const struct prepared_notification *prep = job->prepared;
    int rc;
    *first = 0;
    if (s->pg) {
        bind_notification(s->stmts[ST_INSERT_FIRST], job, 0);
        if ((rc = step_id(s->stmts[ST_INSERT_FIRST], id, &job->err, "storing the notification")))
            return rc;
        if (*id)
            return 0;
    }
    if ((rc = find_first(s, prep, first, &job->err)))
        return rc;
    if (s->pg && !*first)
        return medic_error_set(&job->err, MEDIC_E_STORE,
                               "storing the notification: its key is taken but not found");
    bind_notification(s->stmts[ST_INSERT_NOTIFICATION], job, *first);
    return step_insert(s, s->stmts[ST_INSERT_NOTIFICATION], id, &job->err,
                       "storing the notification");
}

/* Binds alert i of the job's notification (stored as id) to parameters
 * base + 1 to base + 12. */
static void bind_alert_at(struct db_stmt *st, int b, const struct job *job, int64_t id, size_t i)
{
    const struct audit_notification_in *in = job->in;
    const struct prepared_notification *prep = job->prepared;
    const struct medic_alert *a = &in->notification->alerts[i];
    db_bind_int64(st, b + 1, id);
    db_bind_int64(st, b + 2, (int64_t)i);
    db_bind_int64(st, b + 3, in->received_at / MEDIC_NS_PER_MS);
    bind_text(st, b + 4, a->fingerprint);
    bind_text(st, b + 5, medic_alert_status_name(a->status));
    bind_text(st, b + 6, medic_labels_get(&a->labels, "alertname"));
    bind_text(st, b + 7, in->alert_nodes ? in->alert_nodes[i] : NULL);
    bind_time_ms(st, b + 8, a->starts_at);
    bind_time_ms(st, b + 9, a->ends_at);
    bind_text(st, b + 10, a->generator_url);
    const size_t *o = prep->offsets + 2 * i; /* labels, annotations, what follows */
    db_bind_text_len(st, b + 11, prep->json.data + o[0], o[1] - o[0] - 1);
    db_bind_text_len(st, b + 12, prep->json.data + o[1], o[2] - o[1] - 1);
}

static int insert_alerts(struct audit_store *s, struct job *job, int64_t id)
{
    struct audit_notification_result *out = job->out;
    const struct medic_notification *n =
        ((const struct audit_notification_in *)job->in)->notification;
    struct db_stmt *st = s->stmts[ST_INSERT_ALERT];
    int rc = 0;
    for (size_t i = 0; i < n->alert_count && rc == 0; i++) {
        int64_t alert_id = 0;
        bind_alert_at(st, 0, job, id, i);
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
    int rc = insert_notification(s, job, &id, &first);
    if (rc)
        return rc;
    out->id = id;
    out->duplicate = first != 0;
    out->duplicate_of = first;
    out->first_alert_id = 0;
    if (first || n->alert_count == 0)
        return 0;
    int lock = s->pg && n->alert_count > 1;
    char sql[64];
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", ALERT_IDS_LOCK);
    if (lock && (rc = db_exec(s->db, sql, &job->err)))
        return rc;
    rc = insert_alerts(s, job, id);
    if (lock) {
        struct medic_error ignored;
        snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", ALERT_IDS_LOCK);
        db_exec(s->db, sql, &ignored);
    }
    return rc;
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
static int last_hash(struct audit_store *s, enum chain chain, char out[65], struct medic_error *err)
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
    int rc = last_hash(s, CHAIN_CHANGES, prev, err);
    if (rc)
        return rc;
    struct db_stmt *st = s->stmts[ST_INSERT_CHANGE];
    db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    db_bind_int64(st, 2, in->incident);
    bind_text(st, 3, in->node);
    bind_text(st, 4, in->policy);
    bind_text(st, 5, in->from);
    bind_text(st, 6, in->state);
    bind_text(st, 7, in->cause);
    bind_id(st, 8, decision_id);
    db_bind_text(st, 9, prev);
    int64_t id = 0;
    return insert_sealed(s, CHAIN_CHANGES, ST_INSERT_CHANGE, ST_SET_CHANGE_HASH, &id, err,
                         "storing an incident's change");
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A row's value as stored: the bytes as they came, each reference to a
 * decision of this evaluation replaced by its id (into value). */
static int row_value(const struct audit_rows *rows, const struct audit_row *row, const int64_t *ids,
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

/* PostgreSQL: rows first to past_end of the same kind (all put, or all
 * deleted), in one statement, when no (kind, key) repeats among them (an
 * upsert may not touch a row twice); 1 when it could not, to go row by
 * row. */
static int pg_rows_together(struct audit_store *s, const struct audit_rows *rows, size_t first,
                            size_t past_end, const int64_t *ids, size_t decision_count,
                            struct medic_error *err)
{
    const char *d = rows->data.data;
    size_t n = past_end - first;
    for (size_t i = first; i < past_end; i++)
        for (size_t k = i + 1; k < past_end && n <= 64; k++)
            if (strcmp(d + rows->items[i].kind, d + rows->items[k].kind) == 0 &&
                strcmp(d + rows->items[i].key, d + rows->items[k].key) == 0)
                return 1;
    if (n > 64) { /* a quadratic check costs more than it saves: sort the keys */
        struct medic_buf keys;
        medic_buf_init(&keys, 0);
        for (size_t i = first; i < past_end; i++)
            medic_buf_printf(&keys, "%s%c%s%c", d + rows->items[i].kind, 1, d + rows->items[i].key,
                             0);
        char **list = calloc(n, sizeof(*list));
        int repeated = !list || keys.error;
        for (size_t i = 0, at = 0; !repeated && i < n; i++) {
            list[i] = keys.data + at;
            at += strlen(list[i]) + 1;
        }
        if (!repeated) {
            qsort(list, n, sizeof(*list), compare_strings);
            for (size_t i = 1; i < n && !repeated; i++)
                repeated = strcmp(list[i - 1], list[i]) == 0;
        }
        free(list);
        medic_buf_release(&keys);
        if (repeated)
            return 1;
    }
    int dropped = rows->items[first].value == SIZE_MAX;
    struct medic_buf sql, value;
    medic_buf_init(&sql, 0);
    medic_buf_init(&value, 0);
    int rc = dropped ? values_sql(&sql, "DELETE FROM engine_rows WHERE (kind, key) IN (", n, 2, ")")
                     : values_sql(&sql, "INSERT INTO engine_rows (kind, key, value)", n, 3,
                                  " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value");
    struct db_stmt *st = NULL;
    if (rc)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    else
        rc = db_prepare(s->db, sql.data, &st, err);
    int p = 1;
    for (size_t i = first; rc == 0 && i < past_end; i++) {
        const struct audit_row *row = &rows->items[i];
        db_bind_text(st, p++, d + row->kind);
        db_bind_text(st, p++, d + row->key);
        if (dropped)
            continue;
        if (row->ref_count == 0) {
            db_bind_text_len(st, p++, d + row->value, row->value_len);
        } else if ((rc = row_value(rows, row, ids, decision_count, &value, err)) == 0) {
            db_bind_text_len(st, p++, value.data, value.len);
        }
    }
    if (rc == 0 && (rc = db_step(st, err)) > 0)
        rc = 0;
    if (rc && rc != MEDIC_E_INVALID)
        medic_error_prefix(err, "saving the engine state");
    db_finalize(st);
    medic_buf_release(&sql);
    medic_buf_release(&value);
    return rc;
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
        if (s->pg) {
            size_t end = i + 1;
            while (end < rows->count && (rows->items[end].value == SIZE_MAX) == dropped &&
                   end - i < 10000)
                end++;
            if (end - i > 1) {
                int r = pg_rows_together(s, rows, i, end, ids, decision_count, err);
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
            if ((rc = row_value(rows, row, ids, decision_count, &value, err)))
                break;
            db_bind_text_len(st, 3, value.data, value.len);
        }
        rc = step_done(st, err, "saving the engine state");
        i++;
    }
    medic_buf_release(&value);
    return rc;
}

/* PostgreSQL: an evaluation's rows in a few statements (defined below). */
static int pg_insert_decisions(struct audit_store *s, const struct audit_evaluation_in *in,
                               int64_t *ids, struct medic_error *err);
static int pg_insert_changes(struct audit_store *s, const struct audit_evaluation_in *in,
                             const int64_t *ids, struct medic_error *err);
static int pg_mark_evaluated(struct audit_store *s, const struct audit_evaluation_in *in,
                             struct medic_error *err);

static int write_evaluation(struct audit_store *s, struct job *job)
{
    const struct audit_evaluation_in *in = job->in;
    int64_t *ids = job->out;
    int64_t *own = NULL;
    if (!ids && (in->change_count || in->state)) /* the changes and the state need them */
        ids = own = calloc(in->decision_count + 1, sizeof(*ids));
    if (!ids && (in->change_count || in->state))
        return medic_error_set(&job->err, MEDIC_E_NOMEM, "out of memory");
    int rc = 0;
    /* PostgreSQL: every row is a round trip, so rows go together; SQLite
     * runs in the process, row by row */
    if (s->pg && in->decision_count) {
        int64_t *got = ids ? ids : calloc(in->decision_count, sizeof(*got));
        rc = got ? pg_insert_decisions(s, in, got, &job->err)
                 : medic_error_set(&job->err, MEDIC_E_NOMEM, "out of memory");
        if (got != ids)
            free(got);
    }
    for (size_t i = 0; !s->pg && i < in->decision_count && rc == 0; i++) {
        int64_t id = 0;
        rc = insert_decision(s, &in->decisions[i], &id, &job->err);
        if (ids)
            ids[i] = id;
    }
    if (s->pg && in->change_count && rc == 0)
        rc = pg_insert_changes(s, in, ids, &job->err);
    for (size_t i = 0; !s->pg && i < in->change_count && rc == 0; i++) {
        long k = in->changes[i].decision;
        rc = insert_change(s, &in->changes[i],
                           k >= 0 && (size_t)k < in->decision_count ? ids[k] : 0, &job->err);
    }
    if (rc == 0 && in->state)
        rc = write_state_rows(s, in->state, ids, in->decision_count, &job->err);
    if (rc == 0 && in->drop_legacy_state)
        rc = step_done(s->stmts[ST_DROP_LEGACY_STATE], &job->err,
                       "removing the engine state of an earlier medic");
    if (s->pg && rc == 0 && in->evaluated_count) {
        free(own);
        return pg_mark_evaluated(s, in, &job->err);
    }
    struct db_stmt *st = s->stmts[ST_MARK_EVALUATED];
    for (size_t i = 0; i < in->evaluated_count && rc == 0; i++) {
        db_bind_int64(st, 1, in->evaluated[i]);
        db_bind_int64(st, 2, in->evaluated_at / MEDIC_NS_PER_MS);
        rc = step_done(st, &job->err, "marking a notification evaluated");
    }
    free(own);
    return rc;
}

static int insert_decision(struct audit_store *s, const struct audit_decision_in *in,
                           int64_t *out_id, struct medic_error *err)
{
    char prev[65];
    int rc = last_hash(s, CHAIN_DECISIONS, prev, err);
    if (rc)
        return rc;
    struct db_stmt *st = s->stmts[ST_INSERT_DECISION];
    db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    bind_id(st, 2, in->notification_id);
    bind_id(st, 3, in->alert_id);
    bind_text(st, 4, in->fingerprint);
    bind_text(st, 5, in->node);
    bind_text(st, 6, in->alertname);
    bind_text(st, 7, in->policy);
    if (in->step >= 0)
        db_bind_int64(st, 8, in->step);
    else
        db_bind_null(st, 8);
    bind_text(st, 9, in->action);
    bind_text(st, 10, in->params_json);
    if (!isnan(in->risk))
        db_bind_double(st, 11, in->risk);
    else
        db_bind_null(st, 11);
    bind_text(st, 12, in->model_hash);
    bind_text(st, 13, in->verdict);
    bind_text(st, 14, in->reason);
    bind_text(st, 15, in->config_hash);
    db_bind_text(st, 16, prev);
    return insert_sealed(s, CHAIN_DECISIONS, ST_INSERT_DECISION, ST_SET_DECISION_HASH, out_id, err,
                         "storing a decision");
}

static int write_action(struct audit_store *s, struct job *job)
{
    const struct audit_action_in *in = job->in;
    char prev[65];
    int rc = last_hash(s, CHAIN_ACTIONS, prev, &job->err);
    if (rc)
        return rc;
    struct db_stmt *st = s->stmts[ST_INSERT_ACTION];
    db_bind_int64(st, 1, in->created_at / MEDIC_NS_PER_MS);
    db_bind_int64(st, 2, in->decision_id);
    bind_text(st, 3, in->intent_id > 0 ? "outcome" : "intent");
    bind_id(st, 4, in->intent_id);
    bind_text(st, 5, in->action);
    bind_text(st, 6, in->node);
    bind_text(st, 7, in->target);
    bind_text(st, 8, in->params_json);
    bind_text(st, 9, in->result);
    if (in->duration_ms >= 0)
        db_bind_int64(st, 10, in->duration_ms);
    else
        db_bind_null(st, 10);
    bind_text(st, 11, in->detail);
    db_bind_text(st, 12, prev);
    return insert_sealed(s, CHAIN_ACTIONS, ST_INSERT_ACTION, ST_SET_ACTION_HASH, &job->id,
                         &job->err, "storing an action");
}

/* ---- PostgreSQL: a batch's notifications together ---- */

/* The notifications' own rows: firsts in one statement (the unique index
 * turns a key already stored into nothing), then duplicates. */
static int store_notifications(struct audit_store *s, struct job **jobs, size_t n,
                               struct medic_buf *sql, struct medic_error *err)
{
    static const char head[] =
        "INSERT INTO notifications (received_at, group_key, status, receiver, external_url,"
        " truncated_alerts, alert_count, dedupe_key, duplicate_of, remote_addr, payload,"
        " dedupe_prefix, payload_encoding, payload_bytes)";
    struct db_stmt *st = NULL;
    int rc = values_sql(sql, head, n, NOTIFICATION_COLUMNS,
                        " ON CONFLICT (dedupe_key) WHERE duplicate_of IS NULL DO NOTHING"
                        " RETURNING id, dedupe_key");
    if (rc == 0)
        rc = db_prepare(s->db, sql->data, &st, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        bind_notification_at(st, (int)i * NOTIFICATION_COLUMNS, jobs[i], 0);
    /* each key stored goes to the first job with that key */
    int r;
    while (rc == 0 && (r = db_step(st, err)) == 1) {
        int64_t id = db_column_int64(st, 0);
        const char *key = db_column_text(st, 1);
        for (size_t i = 0; i < n; i++) {
            struct audit_notification_result *out = jobs[i]->out;
            if (!out->id && strcmp(jobs[i]->prepared->dedupe_key, key) == 0) {
                out->id = id;
                break;
            }
        }
    }
    if (rc == 0 && r < 0)
        rc = r;
    db_finalize(st);
    st = NULL;
    /* the others repeat a key stored before, by this batch or earlier */
    size_t dups = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct audit_notification_result *out = jobs[i]->out;
        if (out->id)
            continue;
        const char *key = jobs[i]->prepared->dedupe_key;
        for (size_t k = 0; k < n && !out->duplicate_of; k++) {
            const struct audit_notification_result *o = jobs[k]->out;
            if (o->id && !o->duplicate && strcmp(jobs[k]->prepared->dedupe_key, key) == 0)
                out->duplicate_of = o->id;
        }
        if (!out->duplicate_of)
            rc = find_first(s, jobs[i]->prepared, &out->duplicate_of, err);
        if (rc == 0 && !out->duplicate_of)
            rc = medic_error_set(err, MEDIC_E_STORE,
                                 "storing the notification: its key is taken but not found");
        out->duplicate = 1;
        dups++;
    }
    if (rc || dups == 0)
        return rc;
    rc = values_sql(sql, head, dups, NOTIFICATION_COLUMNS, " RETURNING id");
    if (rc == 0)
        rc = db_prepare(s->db, sql->data, &st, err);
    int at = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct audit_notification_result *out = jobs[i]->out;
        if (out->duplicate)
            bind_notification_at(st, NOTIFICATION_COLUMNS * at++, jobs[i], out->duplicate_of);
    }
    /* RETURNING gives the rows in the order of VALUES */
    size_t next = 0;
    while (rc == 0 && (r = db_step(st, err)) == 1) {
        while (next < n && !((struct audit_notification_result *)jobs[next]->out)->duplicate)
            next++;
        if (next < n)
            ((struct audit_notification_result *)jobs[next++]->out)->id = db_column_int64(st, 0);
    }
    if (rc == 0 && r < 0)
        rc = r;
    db_finalize(st);
    return rc;
}

/* The job that holds the next alert to store, from (*job, *alert) on:
 * duplicates store none, and a job's alerts end at its count. */
static struct audit_notification_result *next_alert(struct job **jobs, size_t *job, size_t *alert)
{
    for (;;) {
        struct audit_notification_result *out = jobs[*job]->out;
        const struct medic_notification *n =
            ((const struct audit_notification_in *)jobs[*job]->in)->notification;
        if (!out->duplicate && *alert < n->alert_count)
            return out;
        ++*job;
        *alert = 0;
    }
}

/* The first notifications' alerts, holding ALERT_IDS_LOCK, in as few
 * statements as the parameters allow: each notification's alerts get
 * consecutive ids. */
static int store_alerts(struct audit_store *s, struct job **jobs, size_t n, struct medic_buf *sql,
                        struct medic_error *err)
{
    static const char head[] =
        "INSERT INTO alerts (notification_id, position, received_at, fingerprint, status,"
        " alertname, node, starts_at, ends_at, generator_url, labels, annotations)";
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (!((struct audit_notification_result *)jobs[i]->out)->duplicate)
            total += ((const struct audit_notification_in *)jobs[i]->in)->notification->alert_count;
    if (total == 0)
        return 0;
    char lock[80];
    snprintf(lock, sizeof(lock), "SELECT pg_advisory_lock(%lld)", ALERT_IDS_LOCK);
    int rc = db_exec(s->db, lock, err);
    size_t job = 0, alert = 0; /* the next alert to store */
    while (rc == 0 && total) {
        size_t rows =
            total < ROWS_PER_STATEMENT(ALERT_COLUMNS) ? total : ROWS_PER_STATEMENT(ALERT_COLUMNS);
        struct db_stmt *st = NULL;
        rc = values_sql(sql, head, rows, ALERT_COLUMNS, " RETURNING id");
        if (rc == 0)
            rc = db_prepare(s->db, sql->data, &st, err);
        size_t first_job = job, first_alert = alert;
        for (size_t k = 0; rc == 0 && k < rows; k++) {
            const struct audit_notification_result *out = next_alert(jobs, &job, &alert);
            bind_alert_at(st, (int)k * ALERT_COLUMNS, jobs[job], out->id, alert++);
        }
        /* RETURNING gives the ids in the order of VALUES: each
         * notification's first, and a check that they follow on */
        job = first_job;
        alert = first_alert;
        int64_t expect = 0;
        int r;
        while (rc == 0 && (r = db_step(st, err)) == 1) {
            int64_t id = db_column_int64(st, 0);
            struct audit_notification_result *out = next_alert(jobs, &job, &alert);
            if (alert == 0)
                out->first_alert_id = id;
            else if (id != expect)
                rc = medic_error_set(err, MEDIC_E_STORE,
                                     "storing alerts: their ids do not follow on");
            expect = id + 1;
            alert++;
        }
        if (rc == 0 && r < 0)
            rc = r;
        db_finalize(st);
        total -= rows;
    }
    struct medic_error ignored;
    snprintf(lock, sizeof(lock), "SELECT pg_advisory_unlock(%lld)", ALERT_IDS_LOCK);
    db_exec(s->db, lock, &ignored);
    return rc;
}

/* ---- PostgreSQL: an evaluation's rows together ---- */

/* n ids drawn from table's identity sequence, in ascending order. */
static int pg_next_ids(struct audit_store *s, const char *table, size_t n, int64_t *ids,
                       struct medic_error *err)
{
    char sql[200];
    snprintf(sql, sizeof(sql),
             "SELECT nextval(pg_get_serial_sequence('%s', 'id')) AS id"
             " FROM generate_series(1, ?1) ORDER BY id",
             table);
    struct db_stmt *st = NULL;
    int rc = db_prepare(s->db, sql, &st, err);
    if (rc)
        return rc;
    db_bind_int64(st, 1, (int64_t)n);
    size_t got = 0;
    int r;
    while ((r = db_step(st, err)) == 1 && got < n)
        ids[got++] = db_column_int64(st, 0);
    db_finalize(st);
    if (r < 0)
        return r;
    return got == n ? 0 : medic_error_set(err, MEDIC_E_STORE, "drawing ids: too few");
}

/* A chained row being written: each value goes both into its hash (as
 * the chain's check reads it back) and into the statement's next
 * parameter, so the two cannot disagree. */
struct sealed_row {
    struct medic_sha256 *h;
    struct db_stmt *st;
    int next; /* the parameter the next value binds */
};

static void put_int(struct sealed_row *r, int64_t v)
{
    audit_chain_row_int(r->h, v);
    db_bind_int64(r->st, ++r->next, v);
}

static void put_id(struct sealed_row *r, int64_t id) /* NULL when 0 or less */
{
    audit_chain_row_id(r->h, id);
    bind_id(r->st, ++r->next, id);
}

static void put_text(struct sealed_row *r, const char *v) /* NULL stays NULL */
{
    audit_chain_row_text(r->h, v);
    bind_text(r->st, ++r->next, v);
}

static void put_real(struct sealed_row *r, double v) /* NULL when NaN */
{
    audit_chain_row_real(r->h, v);
    if (isnan(v))
        db_bind_null(r->st, ++r->next);
    else
        db_bind_double(r->st, ++r->next, v);
}

/* One kind of chained row for pg_insert_sealed: its data columns (all but
 * prev_hash and hash, which follow them) in column order, for row i with
 * id. */
struct sealed_kind {
    const char *table, *head; /* head names every column, prev_hash and hash last */
    int columns;              /* with prev_hash and hash */
    enum chain chain;
    void (*put)(const struct audit_evaluation_in *in, const int64_t *decisions, size_t i,
                int64_t id, struct sealed_row *row);
};

/* n chained rows in one statement per ROWS_PER_STATEMENT: their ids drawn
 * first (into ids), each row's hash computed here from the values stored
 * (as the chain's check computes it from the row read back), chained on
 * from the head. */
static int pg_insert_sealed(struct audit_store *s, const struct sealed_kind *k,
                            const struct audit_evaluation_in *in, const int64_t *decisions,
                            size_t n, int64_t *ids, struct medic_error *err)
{
    char prev[65];
    int rc = last_hash(s, k->chain, prev, err);
    if (rc == 0)
        rc = pg_next_ids(s, k->table, n, ids, err);
    struct medic_buf sql;
    medic_buf_init(&sql, 0);
    const size_t per = ROWS_PER_STATEMENT(k->columns);
    /* each row's prev_hash and hash, kept until its statement ran */
    char(*hashes)[2][65] = calloc(per < n ? per : n, sizeof(*hashes));
    if (rc == 0 && !hashes)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t at = 0; rc == 0 && at < n; at += per) {
        size_t rows = n - at < per ? n - at : per;
        struct db_stmt *st = NULL;
        rc = values_sql(&sql, k->head, rows, k->columns, "");
        if (rc == 0)
            rc = db_prepare(s->db, sql.data, &st, err);
        for (size_t r = 0; rc == 0 && r < rows; r++) {
            struct sealed_row row = {audit_chain_row_new(), st, (int)r * k->columns};
            if (!row.h) {
                rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
                break;
            }
            k->put(in, decisions, at + r, ids[at + r], &row);
            memcpy(hashes[r][0], prev, 65);
            put_text(&row, hashes[r][0]);
            audit_chain_row_finish(row.h, hashes[r][1]);
            memcpy(prev, hashes[r][1], 65);
            db_bind_text(st, ++row.next, hashes[r][1]);
        }
        if (rc == 0 && (rc = db_step(st, err)) > 0)
            rc = 0;
        if (rc)
            medic_error_prefix(err, k->table);
        db_finalize(st);
    }
    if (rc == 0)
        memcpy(s->chain_head[k->chain], prev, 65);
    free(hashes);
    medic_buf_release(&sql);
    return rc;
}

static void put_decision(const struct audit_evaluation_in *in, const int64_t *decisions, size_t i,
                         int64_t id, struct sealed_row *row)
{
    (void)decisions;
    const struct audit_decision_in *d = &in->decisions[i];
    put_int(row, id);
    put_int(row, d->created_at / MEDIC_NS_PER_MS);
    put_id(row, d->notification_id);
    put_id(row, d->alert_id);
    put_text(row, d->fingerprint);
    put_text(row, d->node);
    put_text(row, d->alertname);
    put_text(row, d->policy);
    if (d->step >= 0)
        put_int(row, d->step);
    else
        put_id(row, 0);
    put_text(row, d->action);
    put_text(row, d->params_json);
    put_real(row, d->risk);
    put_text(row, d->model_hash);
    put_text(row, d->verdict);
    put_text(row, d->reason);
    put_text(row, d->config_hash);
}

static void put_change(const struct audit_evaluation_in *in, const int64_t *decisions, size_t i,
                       int64_t id, struct sealed_row *row)
{
    const struct audit_change_in *c = &in->changes[i];
    long d = c->decision;
    put_int(row, id);
    put_int(row, c->created_at / MEDIC_NS_PER_MS);
    put_int(row, c->incident);
    put_text(row, c->node);
    put_text(row, c->policy);
    put_text(row, c->from);
    put_text(row, c->state);
    put_text(row, c->cause);
    put_id(row, decisions && d >= 0 && (size_t)d < in->decision_count ? decisions[d] : 0);
}

static const struct sealed_kind sealed_decisions = {
    "decisions",
    "INSERT INTO decisions (id, created_at, notification_id, alert_id, fingerprint, node,"
    " alertname, policy, step, action, params, risk, model_hash, verdict, reason,"
    " config_hash, prev_hash, hash)",
    18,
    CHAIN_DECISIONS,
    put_decision,
};

static const struct sealed_kind sealed_changes = {
    "incident_changes",
    "INSERT INTO incident_changes (id, created_at, incident, node, policy, from_state, state,"
    " cause, decision_id, prev_hash, hash)",
    11,
    CHAIN_CHANGES,
    put_change,
};

static int pg_insert_decisions(struct audit_store *s, const struct audit_evaluation_in *in,
                               int64_t *ids, struct medic_error *err)
{
    return pg_insert_sealed(s, &sealed_decisions, in, NULL, in->decision_count, ids, err);
}

static int pg_insert_changes(struct audit_store *s, const struct audit_evaluation_in *in,
                             const int64_t *ids, struct medic_error *err)
{
    int64_t *own = calloc(in->change_count, sizeof(*own));
    int rc = own ? pg_insert_sealed(s, &sealed_changes, in, ids, in->change_count, own, err)
                 : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    free(own);
    return rc;
}

/* The notifications evaluated, in one statement per 30,000. */
static int pg_mark_evaluated(struct audit_store *s, const struct audit_evaluation_in *in,
                             struct medic_error *err)
{
    struct medic_buf sql;
    medic_buf_init(&sql, 0);
    int rc = 0;
    const size_t per = 30000;
    for (size_t at = 0; rc == 0 && at < in->evaluated_count; at += per) {
        size_t n = in->evaluated_count - at < per ? in->evaluated_count - at : per;
        medic_buf_reset(&sql);
        medic_buf_puts(&sql, "UPDATE notifications SET evaluated_at = ?1 WHERE id IN (");
        for (size_t k = 0; k < n; k++)
            medic_buf_printf(&sql, k ? ",?%zu" : "?%zu", k + 2);
        medic_buf_puts(&sql, ")");
        struct db_stmt *st = NULL;
        rc = sql.error ? medic_error_set(err, MEDIC_E_NOMEM, "out of memory")
                       : db_prepare(s->db, sql.data, &st, err);
        if (rc == 0) {
            db_bind_int64(st, 1, in->evaluated_at / MEDIC_NS_PER_MS);
            for (size_t k = 0; k < n; k++)
                db_bind_int64(st, (int)k + 2, in->evaluated[at + k]);
            if ((rc = db_step(st, err)) > 0)
                rc = 0;
            if (rc)
                medic_error_prefix(err, "marking notifications evaluated");
        }
        db_finalize(st);
    }
    medic_buf_release(&sql);
    return rc;
}

int audit__write_notifications_together(struct audit_store *s, struct job *batch,
                                        struct medic_error *err)
{
    size_t n = 0;
    for (struct job *j = batch; j; j = j->next)
        n += j->kind == JOB_NOTIFICATION && !j->left_out;
    if (n == 0)
        return 0;
    struct job **jobs = calloc(n, sizeof(*jobs));
    if (!jobs)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    n = 0;
    for (struct job *j = batch; j; j = j->next)
        if (j->kind == JOB_NOTIFICATION && !j->left_out) {
            jobs[n++] = j;
            memset(j->out, 0, sizeof(struct audit_notification_result));
        }
    struct medic_buf sql;
    medic_buf_init(&sql, 0);
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < n; at += ROWS_PER_STATEMENT(NOTIFICATION_COLUMNS)) {
        size_t rows = n - at < ROWS_PER_STATEMENT(NOTIFICATION_COLUMNS)
                          ? n - at
                          : ROWS_PER_STATEMENT(NOTIFICATION_COLUMNS);
        rc = store_notifications(s, jobs + at, rows, &sql, err);
    }
    if (rc == 0)
        rc = store_alerts(s, jobs, n, &sql, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        jobs[i]->written = 1;
    medic_buf_release(&sql);
    free(jobs);
    return rc;
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
    }
    MEDIC_BUG("unknown audit job");
}

int audit__prepare_all(struct audit_store *s, struct medic_error *err)
{
    char sql[1024];
    for (int i = 0; i < ST_COUNT; i++) {
        const char *text = stmt_sql[i];
        const int inserts_one = i == ST_INSERT_ALERT || i == ST_INSERT_NOTIFICATION;
        const char *returning = i == ST_INSERT_DECISION ? audit_decision_hashed_columns
                                : i == ST_INSERT_ACTION ? audit_action_hashed_columns
                                : i == ST_INSERT_CHANGE ? audit_change_hashed_columns
                                : inserts_one ? (s->pg ? " RETURNING id" : "") /* step_insert */
                                              : NULL;
        if (returning) { /* in place of the statement's "%s" */
            const char *at = strstr(text, "%s");
            snprintf(sql, sizeof(sql), "%.*s%s%s", (int)(at - text), text, returning, at + 2);
            text = sql;
        }
        if (i == ST_INSERT_FIRST && !s->pg) /* SQLite has one writer: see insert_notification */
            continue;
        int rc = db_prepare_cached(s->db, text, &s->stmts[i], err);
        if (rc) {
            medic_error_prefix(err, "preparing statements");
            return rc;
        }
    }
    return 0;
}

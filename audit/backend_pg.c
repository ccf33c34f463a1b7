/* SPDX-License-Identifier: Apache-2.0 */
/* The PostgreSQL backend (backend.h): a log several replicas share. The
 * leader's term is checked in every transaction that decides or starts an
 * action, and every statement is a round trip, so a batch's rows go
 * together: its notifications in one multi-row insert (the unique index
 * decides which are first, duplicates follow), their alerts in one insert
 * under the id lock; an evaluation's decisions and incident changes sealed
 * here and inserted together, its state rows and evaluated marks in one
 * statement per run. */
#include "backend.h"
#include "rows_internal.h"
#include "buf.h"
#include "chain.h"
#include "lease.h"
#include "postgres.h"
#include "schema.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
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
    int rc =
        dropped
            ? audit__values_sql(&sql, "DELETE FROM engine_rows WHERE (kind, key) IN (", n, 2, ")")
            : audit__values_sql(&sql, "INSERT INTO engine_rows (kind, key, value)", n, 3,
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
        } else if ((rc = audit__row_value(rows, row, ids, decision_count, &value, err)) == 0) {
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
    int rc = audit__values_sql(sql, head, n, NOTIFICATION_COLUMNS,
                               " ON CONFLICT (dedupe_key) WHERE duplicate_of IS NULL DO NOTHING"
                               " RETURNING id, dedupe_key");
    if (rc == 0)
        rc = db_prepare(s->db, sql->data, &st, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        audit__bind_notification_at(st, (int)i * NOTIFICATION_COLUMNS, jobs[i], 0);
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
            rc = audit__find_first(s, jobs[i]->prepared, &out->duplicate_of, err);
        if (rc == 0 && !out->duplicate_of)
            rc = medic_error_set(err, MEDIC_E_STORE,
                                 "storing the notification: its key is taken but not found");
        out->duplicate = 1;
        dups++;
    }
    if (rc || dups == 0)
        return rc;
    rc = audit__values_sql(sql, head, dups, NOTIFICATION_COLUMNS, " RETURNING id");
    if (rc == 0)
        rc = db_prepare(s->db, sql->data, &st, err);
    int at = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct audit_notification_result *out = jobs[i]->out;
        if (out->duplicate)
            audit__bind_notification_at(st, NOTIFICATION_COLUMNS * at++, jobs[i],
                                        out->duplicate_of);
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
        rc = audit__values_sql(sql, head, rows, ALERT_COLUMNS, " RETURNING id");
        if (rc == 0)
            rc = db_prepare(s->db, sql->data, &st, err);
        size_t first_job = job, first_alert = alert;
        for (size_t k = 0; rc == 0 && k < rows; k++) {
            const struct audit_notification_result *out = next_alert(jobs, &job, &alert);
            audit__bind_alert_at(st, (int)k * ALERT_COLUMNS, jobs[job], out->id, alert++);
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
    audit__bind_id(r->st, ++r->next, id);
}

static void put_text(struct sealed_row *r, const char *v) /* NULL stays NULL */
{
    audit_chain_row_text(r->h, v);
    audit__bind_text(r->st, ++r->next, v);
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
    int rc = audit__last_hash(s, k->chain, prev, err);
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
        rc = audit__values_sql(&sql, k->head, rows, k->columns, "");
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

static int pg_write_together(struct audit_store *s, struct job *batch, struct medic_error *err)
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

/* The lock every transaction that appends to a hash chain takes first, so
 * that chained rows of two replicas (a former leader recording an
 * outcome, the new one deciding) never interleave. */
#define CHAIN_LOCK "SELECT pg_advisory_xact_lock(7308604759930986497)"

/* The chain lock when the batch appends to a chain, and the leader's term
 * checked (the lease row share-locked until the commit) when it decides or
 * starts an action; a replica that does not lead has those requests
 * refused (MEDIC_E_FENCED). */
static int pg_guard(struct audit_store *s, struct job *batch, struct medic_error *err)
{
    int chained = 0, leads = 0;
    for (struct job *j = batch; j; j = j->next)
        if (!j->left_out) {
            chained |= audit__job_chains(j);
            leads |= audit__job_fenced(j);
        }
    if (chained && db_exec(s->db, CHAIN_LOCK, err))
        return err->code;
    if (!leads)
        return 0;
    medic_mutex_lock(&s->lock);
    char replica[sizeof(s->replica)];
    memcpy(replica, s->replica, sizeof(replica));
    int64_t epoch = s->epoch;
    medic_mutex_unlock(&s->lock);
    struct medic_error why = {0};
    int rc = epoch ? audit_lease_fence(s->conn, replica, epoch, &why)
                   : medic_error_set(&why, MEDIC_E_FENCED, "this replica is not the leader");
    if (rc && rc != MEDIC_E_FENCED) {
        *err = why;
        return rc;
    }
    for (struct job *j = batch; rc && j; j = j->next)
        if (!j->left_out && audit__job_fenced(j)) {
            j->left_out = 1;
            j->rc = MEDIC_E_FENCED;
            j->err = why;
        }
    return 0;
}

/* Several writers: the insert as first is tried, and the unique index on
 * the key turns it into nothing when another replica (or this batch)
 * stored the key already; then it is a duplicate of the one found. */
static int pg_insert_notification(struct audit_store *s, struct job *job, int64_t *id,
                                  int64_t *first)
{
    struct db_stmt *st = s->stmts[ST_INSERT_FIRST];
    *first = 0;
    audit__bind_notification_at(st, 0, job, 0);
    int rc = audit__step_id(st, id, &job->err, "storing the notification");
    if (rc || *id)
        return rc;
    if ((rc = audit__find_first(s, job->prepared, first, &job->err)))
        return rc;
    if (!*first)
        return medic_error_set(&job->err, MEDIC_E_STORE,
                               "storing the notification: its key is taken but not found");
    return audit__insert_notification_row(s, job, *first, id);
}

/* A notification's alerts under the id lock (see ALERT_IDS_LOCK). */
static int pg_insert_alerts(struct audit_store *s, struct job *job, int64_t id)
{
    const struct medic_notification *n =
        ((const struct audit_notification_in *)job->in)->notification;
    int lock = n->alert_count > 1;
    char sql[64];
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", ALERT_IDS_LOCK);
    int rc = 0;
    if (lock && (rc = db_exec(s->db, sql, &job->err)))
        return rc;
    rc = audit__insert_alerts_each(s, job, id);
    if (lock) {
        struct medic_error ignored;
        snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", ALERT_IDS_LOCK);
        db_exec(s->db, sql, &ignored);
    }
    return rc;
}

/* Connects and creates or checks the schema. A connection that breaks
 * later is opened again by the first batch after it (db.h). */
static int pg_open(struct audit_store *s, const char *url, struct medic_error *err)
{
    PGconn *c = NULL;
    int rc = audit_pg_connect(url, &c, err);
    s->conn = c;
    if (rc == 0)
        rc = audit_pg_schema(c, err);
    if (rc == 0 && !(s->db = db_over_pg(c)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

static void pg_close(struct audit_store *s)
{
    db_free(s->db);
    PQfinish(s->conn);
}

static void pg_finish(struct audit_store *s, struct job *batch, int rc,
                      const struct medic_error *err, int64_t start)
{
    audit__complete_batch(s, batch, rc, err, start); /* durable at COMMIT */
}

static int pg_open_reader(const char *url, void **conn, struct db **db, struct medic_error *err)
{
    PGconn *c = NULL;
    int rc = audit_pg_connect(url, &c, err);
    *conn = c;
    if (rc)
        return rc;
    PGresult *v = PQexec(c, "SELECT max(version) FROM medic_schema");
    int version = PQresultStatus(v) == PGRES_TUPLES_OK && !PQgetisnull(v, 0, 0)
                      ? atoi(PQgetvalue(v, 0, 0))
                      : 0;
    PQclear(v);
    if (version <= 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "postgresql: no medic audit log in this database (medic_schema)");
    rc = audit__readable_version(version, err);
    if (rc == 0 && !(*db = db_over_pg(c)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

static void pg_close_reader(void *conn, struct db *db)
{
    db_free(db);
    PQfinish(conn);
}

const struct audit_backend audit_backend_pg = {
    .name = "postgresql",
    .shared = 1,
    .returning_id = " RETURNING id",
    .open = pg_open,
    .close = pg_close,
    .guard = pg_guard,
    .write_together = pg_write_together,
    .finish = pg_finish,
    .insert_notification = pg_insert_notification,
    .insert_alerts = pg_insert_alerts,
    .insert_decisions = pg_insert_decisions,
    .insert_changes = pg_insert_changes,
    .mark_evaluated = pg_mark_evaluated,
    .state_rows_together = pg_rows_together,
    .open_reader = pg_open_reader,
    .close_reader = pg_close_reader,
};

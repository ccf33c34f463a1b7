/* SPDX-License-Identifier: Apache-2.0 */
/* The PostgreSQL backend's statements of rows (pg.h): a batch's
 * notifications and alerts, an evaluation's decisions and incident
 * changes (each row's hash computed here from the values it stores, as
 * the chain's check computes it from the row read back), its state rows
 * and its evaluated marks, each kind in one statement. */
#include "pg.h"
#include "buf.h"
#include "chain.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOTIFICATIONS_HEAD                                                                         \
    "INSERT INTO notifications (received_at, group_key, status, receiver, external_url,"           \
    " truncated_alerts, alert_count, dedupe_key, duplicate_of, remote_addr, payload,"              \
    " dedupe_prefix, payload_encoding, payload_bytes)"
#define NOTIFICATIONS_TYPES "ittttiititbiti" /* audit__bind_notification_at's columns */

static const struct {
    const char *head, *types, *tail;
} own_sql[OWN_COUNT] = {
    /* the unique index turns a key stored already into nothing */
    [OWN_FIRSTS] = {NOTIFICATIONS_HEAD, NOTIFICATIONS_TYPES,
                    " ON CONFLICT (dedupe_key) WHERE duplicate_of IS NULL DO NOTHING"
                    " RETURNING id, dedupe_key"},
    [OWN_DUPLICATES] = {NOTIFICATIONS_HEAD, NOTIFICATIONS_TYPES, " RETURNING id"},
    [OWN_ALERTS] = {"INSERT INTO alerts (notification_id, position, received_at, fingerprint,"
                    " status, alertname, node, starts_at, ends_at, generator_url, labels,"
                    " annotations)",
                    "iiittttiittt", " RETURNING id"},
    [OWN_DECISIONS] = {"INSERT INTO decisions (id, created_at, notification_id, alert_id,"
                       " fingerprint, node, alertname, policy, step, action, params, risk,"
                       " model_hash, verdict, reason, config_hash, prev_hash, hash)",
                       "iiiittttittrtttttt", ""},
    [OWN_CHANGES] = {"INSERT INTO incident_changes (id, created_at, incident, node, policy,"
                     " from_state, state, cause, decision_id, prev_hash, hash)",
                     "iiitttttitt", ""},
    [OWN_ROWS_PUT] = {"INSERT INTO engine_rows (kind, key, value)", "ttt",
                      " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value"},
    [OWN_ROWS_DROP] = {"DELETE FROM engine_rows e USING", "tt",
                       " AS d(kind, key) WHERE e.kind = d.kind AND e.key = d.key"},
    [OWN_MARK_EVALUATED] = {"UPDATE notifications n SET evaluated_at = v.at FROM", "ii",
                            " AS v(id, at) WHERE n.id = v.id"},
};

/* "HEAD [SELECT * FROM] unnest(?1::T1[], ...) TAIL" */
struct db_stmt *audit__pg_own(struct audit_store *s, enum pg_own k, struct medic_error *err)
{
    struct db_stmt **own = PG_STORE(s)->own;
    if (own[k])
        return own[k];
    static const char *const names[] = {
        ['i'] = "bigint", ['t'] = "text", ['b'] = "bytea", ['r'] = "double precision"};
    const char *types = own_sql[k].types;
    int insert = strncmp(own_sql[k].head, "INSERT", 6) == 0;
    struct medic_buf sql;
    medic_buf_init(&sql, 0);
    medic_buf_printf(&sql, "%s%s unnest(", own_sql[k].head, insert ? " SELECT * FROM" : "");
    for (size_t i = 0; types[i]; i++)
        medic_buf_printf(&sql, "%s?%zu::%s[]", i ? ", " : "", i + 1,
                         names[(unsigned char)types[i]]);
    medic_buf_printf(&sql, ")%s", own_sql[k].tail);
    if (sql.error)
        medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    else
        db_prepare_rows(s->db, sql.data, types, insert, &own[k], err);
    medic_buf_release(&sql);
    return own[k];
}

int audit__pg_run_rows(struct db_stmt *st, struct medic_error *err, const char *what)
{
    int rc = db_step(st, err);
    db_clear(st);
    if (rc > 0)
        rc = 0;
    if (rc && rc != MEDIC_E_INVALID)
        medic_error_prefix(err, what);
    return rc;
}

void audit__pg_own_free(struct audit_store *s)
{
    struct db_stmt **own = PG_STORE(s)->own;
    for (int k = 0; k < OWN_COUNT; k++) {
        db_finalize(own[k]);
        own[k] = NULL;
    }
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether a (kind, key) repeats among rows first to past_end. */
static int keys_repeat(const struct audit_rows *rows, size_t first, size_t past_end)
{
    const char *d = rows->data.data;
    size_t n = past_end - first;
    if (n <= 64) {
        for (size_t i = first; i < past_end; i++)
            for (size_t k = i + 1; k < past_end; k++)
                if (strcmp(d + rows->items[i].kind, d + rows->items[k].kind) == 0 &&
                    strcmp(d + rows->items[i].key, d + rows->items[k].key) == 0)
                    return 1;
        return 0;
    }
    /* a quadratic check costs more than it saves: sort the keys */
    struct medic_buf keys;
    medic_buf_init(&keys, 0);
    for (size_t i = first; i < past_end; i++)
        medic_buf_printf(&keys, "%s%c%s%c", d + rows->items[i].kind, 1, d + rows->items[i].key, 0);
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
    return repeated;
}

/* PostgreSQL: rows first to past_end of the same kind (all put, or all
 * deleted), in one statement, when no (kind, key) repeats among them (an
 * upsert may not touch a row twice); 1 when it could not, to go row by
 * row. */
int audit__pg_rows_together(struct audit_store *s, const struct audit_rows *rows, size_t first,
                            size_t past_end, const int64_t *ids, size_t decision_count,
                            struct medic_error *err)
{
    if (keys_repeat(rows, first, past_end))
        return 1;
    const char *d = rows->data.data;
    int dropped = rows->items[first].value == SIZE_MAX;
    struct db_stmt *st = audit__pg_own(s, dropped ? OWN_ROWS_DROP : OWN_ROWS_PUT, err);
    if (!st)
        return err->code;
    struct medic_buf value;
    medic_buf_init(&value, 0);
    int rc = 0, p = 1;
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
    if (rc)
        db_clear(st);
    else
        rc = audit__pg_run_rows(st, err, "saving the engine state");
    medic_buf_release(&value);
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
    const char *table;
    enum pg_own statement; /* names every column, prev_hash and hash last */
    int columns;           /* with prev_hash and hash */
    enum chain chain;
    void (*put)(const struct audit_evaluation_in *in, const int64_t *decisions, size_t i,
                int64_t id, struct sealed_row *row);
};

/* n chained rows in one statement: their ids drawn first (into ids), each
 * row's hash computed here from the values stored (as the chain's check
 * computes it from the row read back), chained on from the head. */
static int pg_insert_sealed(struct audit_store *s, const struct sealed_kind *k,
                            const struct audit_evaluation_in *in, const int64_t *decisions,
                            size_t n, int64_t *ids, struct medic_error *err)
{
    char prev[65];
    struct db_stmt *st = audit__pg_own(s, k->statement, err);
    int rc = st ? audit__last_hash(s, k->chain, prev, err) : err->code;
    if (rc == 0)
        rc = pg_next_ids(s, k->table, n, ids, err);
    for (size_t r = 0; rc == 0 && r < n; r++) {
        struct sealed_row row = {audit_chain_row_new(), st, (int)r * k->columns};
        if (!row.h) {
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        k->put(in, decisions, r, ids[r], &row);
        put_text(&row, prev);
        audit_chain_row_finish(row.h, prev); /* the row's hash, the next one's prev_hash */
        db_bind_text(st, ++row.next, prev);
    }
    if (rc == 0)
        rc = audit__pg_run_rows(st, err, k->table);
    else if (st)
        db_clear(st);
    if (rc == 0)
        memcpy(s->chain_head[k->chain], prev, 65);
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
    "decisions", OWN_DECISIONS, 18, CHAIN_DECISIONS, put_decision,
};

static const struct sealed_kind sealed_changes = {
    "incident_changes", OWN_CHANGES, 11, CHAIN_CHANGES, put_change,
};

int audit__pg_insert_decisions(struct audit_store *s, const struct audit_evaluation_in *in,
                               int64_t *ids, struct medic_error *err)
{
    return pg_insert_sealed(s, &sealed_decisions, in, NULL, in->decision_count, ids, err);
}

int audit__pg_insert_changes(struct audit_store *s, const struct audit_evaluation_in *in,
                             const int64_t *ids, struct medic_error *err)
{
    int64_t *own = calloc(in->change_count, sizeof(*own));
    int rc = own ? pg_insert_sealed(s, &sealed_changes, in, ids, in->change_count, own, err)
                 : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    free(own);
    return rc;
}

/* The notifications evaluated, in one statement. */
int audit__pg_mark_evaluated(struct audit_store *s, const struct audit_evaluation_in *in,
                             struct medic_error *err)
{
    struct db_stmt *st = audit__pg_own(s, OWN_MARK_EVALUATED, err);
    if (!st)
        return err->code;
    for (size_t k = 0; k < in->evaluated_count; k++) {
        db_bind_int64(st, (int)(2 * k + 1), in->evaluated[k]);
        db_bind_int64(st, (int)(2 * k + 2), in->evaluated_at / MEDIC_NS_PER_MS);
    }
    return audit__pg_run_rows(st, err, "marking notifications evaluated");
}

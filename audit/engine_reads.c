/* SPDX-License-Identifier: Apache-2.0 */
/* What the daemon reads back at start and when it takes over (what was
 * committed but not evaluated, intents without an outcome, decisions never
 * started, the engine's state, an action's outcome), and what replay and
 * the dataset builder walk (notifications with their bodies, confirmed
 * faults), on either database. */
#include "reader_internal.h"
#include "buf.h"
#include "payload_codec.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prepares sql on the reader's database; err says "query failed: ..." */
static int prepare(struct audit_reader *reader, const char *sql, struct db_stmt **st,
                   struct medic_error *err)
{
    if (db_prepare(reader->db, sql, st, err) == 0)
        return 0;
    medic_error_prefix(err, "query failed");
    return err->code;
}

/* The body in columns col (payload), col + 1 (its encoding) and col + 2
 * (its length as received) of st's row, appended to out. */
static int decode_payload(struct db_stmt *st, int col, int64_t id, struct medic_buf *out,
                          struct medic_error *err)
{
    size_t len;
    const void *data = db_column_blob(st, col, &len);
    const char *encoding = db_column_text(st, col + 1);
    int64_t bytes = db_column_int64(st, col + 2);
    int rc = audit__payload_decode(encoding, data, len, bytes, out);
    if (rc == MEDIC_E_STORE)
        return medic_error_set(err, rc, "the stored body of notification %lld is corrupt",
                               (long long)id);
    if (rc)
        medic_error_set(err, rc, "the body does not fit in memory");
    return rc;
}

int audit_read_payload(struct audit_reader *reader, int64_t id, struct medic_buf *out,
                       struct medic_error *err)
{
    struct db_stmt *st = NULL;
    int rc = prepare(reader,
                     "SELECT payload, payload_encoding, payload_bytes FROM notifications "
                     "WHERE id = ?1",
                     &st, err);
    if (rc)
        return rc;
    db_bind_int64(st, 1, id);
    int step = db_step(st, err);
    if (step == 0)
        rc = medic_error_set(err, MEDIC_E_NOTFOUND, "no notification %lld", (long long)id);
    else if (step < 0)
        rc = step;
    else
        rc = decode_payload(st, 0, id, out, err);
    db_finalize(st);
    return rc;
}

static int walk_notifications(struct audit_reader *reader, const char *where, int64_t a, int64_t b,
                              size_t limit, audit_pending_fn fn, audit_walk_fn walk, void *arg,
                              struct medic_error *err)
{
    struct db_stmt *st = NULL;
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT n.id, CASE WHEN n.duplicate_of IS NULL THEN (SELECT a.id FROM alerts a"
             " WHERE a.notification_id = n.id AND a.position = 0) ELSE %d END,"
             " n.received_at, n.payload, n.payload_encoding, n.payload_bytes"
             " FROM notifications n WHERE %s"
             " ORDER BY n.id LIMIT ?3",
             AUDIT_DUPLICATE, where);
    int rc = prepare(reader, sql, &st, err), step = 0;
    if (rc)
        return rc;
    db_bind_int64(st, 1, a);
    db_bind_int64(st, 2, b);
    db_bind_int64(st, 3, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
    struct medic_buf body;
    medic_buf_init(&body, (size_t)64 << 20);
    while (rc == 0 && (step = db_step(st, err)) == 1) {
        int64_t id = db_column_int64(st, 0);
        int64_t first_alert = db_column_int64(st, 1);
        int64_t received = db_column_int64(st, 2) * MEDIC_NS_PER_MS;
        medic_buf_reset(&body);
        rc = decode_payload(st, 3, id, &body, err);
        if (rc == 0 && fn)
            rc = fn(arg, id, first_alert, received, body.data ? body.data : "", body.len);
        if (rc == 0 && walk)
            rc = walk(arg, id, received, first_alert == AUDIT_DUPLICATE, body.data ? body.data : "",
                      body.len);
    }
    if (rc == 0 && step < 0)
        rc = step;
    medic_buf_release(&body);
    db_finalize(st);
    return rc;
}

int audit_pending_notifications(struct audit_reader *reader, size_t limit, audit_pending_fn fn,
                                void *arg, struct medic_error *err)
{
    /* ?1 and ?2 (both 0) keep the placeholders' numbers */
    return walk_notifications(
        reader, "n.evaluated_at IS NULL AND n.id > CAST(?1 AS BIGINT) + CAST(?2 AS BIGINT)", 0, 0,
        limit, fn, NULL, arg, err);
}

int audit_walk_notifications(struct audit_reader *reader, int64_t since, int64_t until,
                             audit_walk_fn fn, void *arg, struct medic_error *err)
{
    return walk_notifications(reader, "n.received_at >= ?1 AND n.received_at < ?2",
                              since / MEDIC_NS_PER_MS, until / MEDIC_NS_PER_MS, (size_t)INT64_MAX,
                              NULL, fn, arg, err);
}

/* Steps st to its end, calling row for each row until it returns non-zero. */
static int each_row(struct db_stmt *st, int (*row)(struct db_stmt *st, void *ctx), void *ctx,
                    struct medic_error *err)
{
    int rc = 0, step;
    while (rc == 0 && (step = db_step(st, err)) == 1)
        rc = row(st, ctx);
    if (rc == 0 && step < 0)
        rc = step;
    db_finalize(st);
    return rc;
}

/* Prepares sql (no parameters) and calls row for each of its rows. */
static int query_rows(struct audit_reader *reader, const char *sql,
                      int (*row)(struct db_stmt *st, void *ctx), void *ctx, struct medic_error *err)
{
    struct db_stmt *st = NULL;
    if (prepare(reader, sql, &st, err))
        return err->code;
    return each_row(st, row, ctx, err);
}

/* The same with ?1 bound to up_to. */
static int query_rows_to(struct audit_reader *reader, const char *sql, int64_t up_to,
                         int (*row)(struct db_stmt *st, void *ctx), void *ctx,
                         struct medic_error *err)
{
    struct db_stmt *st = NULL;
    if (prepare(reader, sql, &st, err))
        return err->code;
    db_bind_int64(st, 1, up_to);
    return each_row(st, row, ctx, err);
}

static int bound_row(struct db_stmt *st, void *ctx)
{
    struct audit_recovery_bound *b = ctx;
    b->decision_id = db_column_int64(st, 0);
    b->action_id = db_column_int64(st, 1);
    return 0;
}

int audit_recovery_bound(struct audit_reader *reader, struct audit_recovery_bound *out,
                         struct medic_error *err)
{
    *out = (struct audit_recovery_bound){0, 0};
    return query_rows(reader,
                      "SELECT (SELECT COALESCE(max(id), 0) FROM decisions),"
                      " (SELECT COALESCE(max(id), 0) FROM actions)",
                      bound_row, out, err);
}

struct intent_ctx {
    audit_intent_fn fn;
    void *arg;
};

static int intent_row(struct db_stmt *st, void *ctx)
{
    struct intent_ctx *c = ctx;
    return c->fn(c->arg, db_column_int64(st, 0), db_column_int64(st, 1), db_column_text(st, 2),
                 db_column_text(st, 3));
}

int audit_open_intents(struct audit_reader *reader, const struct audit_recovery_bound *bound,
                       audit_intent_fn fn, void *arg, struct medic_error *err)
{
    struct intent_ctx c = {fn, arg};
    return query_rows_to(reader,
                         "SELECT i.id, i.decision_id, i.action, i.node FROM actions i WHERE"
                         " i.phase = 'intent' AND i.id <= ?1 AND NOT EXISTS (SELECT 1 FROM"
                         " actions o WHERE o.intent_id = i.id) ORDER BY i.id",
                         bound->action_id, intent_row, &c, err);
}

struct unstarted_ctx {
    audit_unstarted_fn fn;
    void *arg;
};

static int unstarted_row(struct db_stmt *st, void *ctx)
{
    struct unstarted_ctx *c = ctx;
    struct audit_unstarted u = {
        .decision_id = db_column_int64(st, 0),
        .created_at = db_column_int64(st, 1) * MEDIC_NS_PER_MS,
        .node = db_column_text(st, 2),
        .alertname = db_column_text(st, 3),
        .policy = db_column_text(st, 4),
        .action = db_column_text(st, 5),
        .params_json = db_column_text(st, 6),
        .reason = db_column_text(st, 7),
        .alert_started_at = db_column_int64(st, 8) * MEDIC_NS_PER_MS,
        .resolved = (int)db_column_int64(st, 9),
    };
    return c->fn(c->arg, &u);
}

int audit_unstarted_decisions(struct audit_reader *reader, const struct audit_recovery_bound *bound,
                              audit_unstarted_fn fn, void *arg, struct medic_error *err)
{
    struct unstarted_ctx c = {fn, arg};
    return query_rows_to(reader,
                         "SELECT d.id, d.created_at, d.node, d.alertname, d.policy, d.action,"
                         " d.params, d.reason, COALESCE(a.starts_at, d.created_at),"
                         " d.fingerprint IS NOT NULL AND EXISTS (SELECT 1 FROM alerts r WHERE"
                         "  r.node IS NOT DISTINCT FROM d.node AND r.fingerprint = d.fingerprint"
                         "  AND r.status = 'resolved' AND r.id > COALESCE(d.alert_id, 0))"
                         " FROM decisions d LEFT JOIN alerts a ON a.id = d.alert_id"
                         " WHERE d.verdict = 'execute' AND d.action IS NOT NULL AND d.id <= ?1"
                         " AND NOT EXISTS (SELECT 1 FROM actions x WHERE x.decision_id = d.id)"
                         " ORDER BY d.id",
                         bound->decision_id, unstarted_row, &c, err);
}

struct engine_row_ctx {
    audit_row_fn fn;
    void *arg;
    size_t *count;
};

static int engine_row(struct db_stmt *st, void *ctx)
{
    struct engine_row_ctx *c = ctx;
    (*c->count)++;
    return c->fn(c->arg, db_column_text(st, 0), db_column_text(st, 1), db_column_text(st, 2),
                 db_column_bytes(st, 2));
}

int audit_read_engine_rows(struct audit_reader *reader, audit_row_fn fn, void *arg, size_t *count,
                           struct medic_error *err)
{
    *count = 0;
    struct engine_row_ctx c = {fn, arg, count};
    int rc = query_rows(reader, "SELECT kind, key, value FROM engine_rows", engine_row, &c, err);
    /* a database of an earlier medic, not yet upgraded by medic serve */
    return rc && *count == 0 && strstr(err->msg, "no such table") ? 0 : rc;
}

int audit_read_engine_state(struct audit_reader *reader, struct medic_buf *out,
                            struct medic_error *err)
{
    struct db_stmt *st = NULL;
    if (prepare(reader, "SELECT state FROM engine_state WHERE id = 1", &st, err))
        return err->code;
    int rc, step = db_step(st, err);
    if (step == 1)
        rc = medic_buf_append(out, db_column_text(st, 0), db_column_bytes(st, 0));
    else if (step == 0)
        rc = medic_error_set(err, MEDIC_E_NOTFOUND, "no saved engine state");
    else
        rc = step;
    db_finalize(st);
    return rc;
}

struct fault_ctx {
    const char *const *actions;
    size_t action_count;
    audit_fault_fn fn;
    void *arg;
};

static int fault_row(struct db_stmt *st, void *ctx)
{
    struct fault_ctx *c = ctx;
    const char *action = db_column_text(st, 0);
    int wanted = c->action_count == 0;
    for (size_t i = 0; i < c->action_count && !wanted; i++)
        wanted = strcmp(action, c->actions[i]) == 0;
    if (!wanted)
        return 0;
    struct audit_fault in = {
        .action = action,
        .node = db_column_text(st, 1),
        .at = db_column_int64(st, 2) * MEDIC_NS_PER_MS,
        .alertname = db_column_text(st, 3),
        .gpu = db_column_text(st, 4),
    };
    return c->fn(c->arg, &in);
}

int audit_confirmed_faults(struct audit_reader *reader, int64_t since, int64_t until,
                           const char *const *actions, size_t action_count, audit_fault_fn fn,
                           void *arg, struct medic_error *err)
{
    char gpu[64], sql[768];
    db_json_text(reader->db, "a.labels", "gpu", gpu, sizeof(gpu));
    snprintf(sql, sizeof(sql),
             "SELECT o.action, o.node, COALESCE(a.starts_at, d.created_at), a.alertname, %s"
             " FROM actions o JOIN actions i ON i.id = o.intent_id"
             " JOIN decisions d ON d.id = i.decision_id LEFT JOIN alerts a ON a.id = d.alert_id"
             " WHERE o.phase = 'outcome' AND o.result = 'succeeded' AND o.node IS NOT NULL"
             " AND COALESCE(a.starts_at, d.created_at) >= ?1"
             " AND COALESCE(a.starts_at, d.created_at) < ?2 ORDER BY o.id",
             gpu);
    struct db_stmt *st = NULL;
    if (prepare(reader, sql, &st, err))
        return err->code;
    db_bind_int64(st, 1, since / MEDIC_NS_PER_MS);
    db_bind_int64(st, 2, until / MEDIC_NS_PER_MS);
    struct fault_ctx c = {actions, action_count, fn, arg};
    return each_row(st, fault_row, &c, err);
}

int audit_node_has_decisions(struct audit_reader *reader, const char *node, int64_t since,
                             int64_t until, int *out, struct medic_error *err)
{
    struct db_stmt *st = NULL;
    if (prepare(reader,
                "SELECT EXISTS (SELECT 1 FROM decisions WHERE node = ?1 AND"
                " created_at >= ?2 AND created_at < ?3 AND verdict != 'no_match')",
                &st, err))
        return err->code;
    db_bind_text(st, 1, node);
    db_bind_int64(st, 2, since / MEDIC_NS_PER_MS);
    db_bind_int64(st, 3, until / MEDIC_NS_PER_MS);
    int rc = db_step(st, err);
    if (rc == 1) {
        *out = (int)db_column_int64(st, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = medic_error_set(err, MEDIC_E_STORE, "query failed: no row");
    }
    db_finalize(st);
    return rc;
}

int audit_decision_outcome(struct audit_reader *reader, int64_t decision_id, char *result,
                           size_t result_size, char *detail, size_t detail_size,
                           struct medic_error *err)
{
    struct db_stmt *st = NULL;
    if (prepare(reader,
                "SELECT result, detail FROM actions WHERE decision_id = ?1 AND"
                " phase = 'outcome' ORDER BY id LIMIT 1",
                &st, err))
        return err->code;
    db_bind_int64(st, 1, decision_id);
    int rc = db_step(st, err);
    if (rc == 1) {
        const char *r = db_column_text(st, 0);
        const char *d = db_column_text(st, 1);
        snprintf(result, result_size, "%s", r ? r : "");
        snprintf(detail, detail_size, "%s", d ? d : "");
        rc = 0;
    } else if (rc == 0) {
        rc = MEDIC_E_NOTFOUND;
    }
    db_finalize(st);
    return rc;
}

struct approval_ctx {
    audit_approval_fn fn;
    void *arg;
};

static int approval_row(struct db_stmt *st, void *ctx)
{
    struct approval_ctx *c = ctx;
    const char *answer = db_column_text(st, 3);
    struct audit_pending_approval a = {
        .id = db_column_int64(st, 0),
        .decision_id = db_column_int64(st, 1),
        .created_at = db_column_int64(st, 2) * MEDIC_NS_PER_MS,
        .approve = answer && strcmp(answer, "approve") == 0,
        .by = db_column_text(st, 4),
        .reason = db_column_text(st, 5),
        .undo = db_column_int64(st, 6) != 0,
    };
    return c->fn(c->arg, &a);
}

int audit_pending_approvals(struct audit_reader *reader, audit_approval_fn fn, void *arg,
                            struct medic_error *err)
{
    struct approval_ctx c = {fn, arg};
    return query_rows(
        reader,
        "SELECT id, decision_id, created_at, answer, by_name, reason, undo FROM approvals"
        " WHERE evaluated_at IS NULL ORDER BY id",
        approval_row, &c, err);
}

static int approval_result_row(struct db_stmt *st, void *ctx)
{
    struct audit_approval_result *out = ctx;
    out->done = db_column_type(st, 0) != DB_NULL;
    const char *result = db_column_text(st, 1);
    snprintf(out->result, sizeof(out->result), "%s", result ? result : "");
    out->decision_id = db_column_int64(st, 2);
    const char *verdict = db_column_text(st, 3);
    snprintf(out->verdict, sizeof(out->verdict), "%s", verdict ? verdict : "");
    const char *action = db_column_text(st, 4);
    snprintf(out->action, sizeof(out->action), "%s", action ? action : "");
    return 0;
}

int audit_approval_result(struct audit_reader *reader, int64_t id,
                          struct audit_approval_result *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    return query_rows_to(
        reader,
        "SELECT a.evaluated_at, a.result, a.result_decision_id, d.verdict, d.action"
        " FROM approvals a LEFT JOIN decisions d ON d.id = a.result_decision_id"
        " WHERE a.id = ?1",
        id, approval_result_row, out, err);
}

struct pause_ctx {
    audit_pause_fn fn;
    void *arg;
};

static int pause_row(struct db_stmt *st, void *ctx)
{
    struct pause_ctx *c = ctx;
    const char *request = db_column_text(st, 2);
    struct audit_pending_pause p = {
        .id = db_column_int64(st, 0),
        .created_at = db_column_int64(st, 1) * MEDIC_NS_PER_MS,
        .until = db_column_type(st, 5) == DB_NULL ? MEDIC_TIME_UNSET
                                                  : db_column_int64(st, 5) * MEDIC_NS_PER_MS,
        .pause = request && strcmp(request, "pause") == 0,
        .by = db_column_text(st, 3),
        .reason = db_column_text(st, 4),
    };
    return c->fn(c->arg, &p);
}

int audit_pending_pauses(struct audit_reader *reader, audit_pause_fn fn, void *arg,
                         struct medic_error *err)
{
    struct pause_ctx c = {fn, arg};
    return query_rows(reader,
                      "SELECT id, created_at, request, by_name, reason, until FROM pause_requests"
                      " WHERE evaluated_at IS NULL ORDER BY id",
                      pause_row, &c, err);
}

int audit_pause_result(struct audit_reader *reader, int64_t id, struct audit_approval_result *out,
                       struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    return query_rows_to(
        reader,
        "SELECT p.evaluated_at, p.result, p.result_decision_id, d.verdict, d.action"
        " FROM pause_requests p LEFT JOIN decisions d"
        " ON d.id = p.result_decision_id WHERE p.id = ?1",
        id, approval_result_row, out, err);
}

struct release_ctx {
    audit_release_fn fn;
    void *arg;
};

static int release_row(struct db_stmt *st, void *ctx)
{
    struct release_ctx *c = ctx;
    struct audit_pending_release r = {
        .id = db_column_int64(st, 0),
        .created_at = db_column_int64(st, 1) * MEDIC_NS_PER_MS,
        .node = db_column_text(st, 2),
        .by = db_column_text(st, 3),
        .reason = db_column_text(st, 4),
    };
    return c->fn(c->arg, &r);
}

int audit_pending_releases(struct audit_reader *reader, audit_release_fn fn, void *arg,
                           struct medic_error *err)
{
    struct release_ctx c = {fn, arg};
    return query_rows(reader,
                      "SELECT id, created_at, node, by_name, reason FROM release_requests"
                      " WHERE evaluated_at IS NULL ORDER BY id",
                      release_row, &c, err);
}

int audit_release_result(struct audit_reader *reader, int64_t id, struct audit_approval_result *out,
                         struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    return query_rows_to(
        reader,
        "SELECT r.evaluated_at, r.result, r.result_decision_id, d.verdict, d.action"
        " FROM release_requests r LEFT JOIN decisions d"
        " ON d.id = r.result_decision_id WHERE r.id = ?1",
        id, approval_result_row, out, err);
}

struct fate {
    char *out;
    size_t size;
    int found;
};

static int fate_row(struct db_stmt *st, void *ctx)
{
    struct fate *f = ctx;
    const char *verdict = db_column_text(st, 0), *answer = db_column_text(st, 1);
    const char *by = db_column_text(st, 2), *ended = db_column_text(st, 3);
    f->found = 1;
    if (verdict && strcmp(verdict, "pending") != 0)
        snprintf(f->out, f->size, "it was never a step waiting for approval (its verdict is %s)",
                 verdict);
    else if (answer)
        snprintf(f->out, f->size, "it was answered already: %s by %s",
                 strcmp(answer, "approve") == 0 ? "approved" : "denied", by ? by : "?");
    else if (ended)
        snprintf(f->out, f->size, "%.480s", ended);
    else
        snprintf(f->out, f->size, "it waits no more (its incident ended, or a restart lost it)");
    return 0;
}

int audit_pending_fate(struct audit_reader *reader, int64_t decision_id, char *out, size_t size,
                       struct medic_error *err)
{
    struct fate f = {out, size, 0};
    out[0] = '\0';
    int rc = query_rows_to(
        reader,
        "SELECT d.verdict,"
        " (SELECT a.answer FROM approvals a WHERE a.decision_id = d.id"
        "  AND a.evaluated_at IS NOT NULL AND a.result NOT LIKE 'refused%' ORDER BY a.id LIMIT 1),"
        " (SELECT a.by_name FROM approvals a WHERE a.decision_id = d.id"
        "  AND a.evaluated_at IS NOT NULL AND a.result NOT LIKE 'refused%' ORDER BY a.id LIMIT 1),"
        " (SELECT e.reason FROM decisions e WHERE e.id > d.id AND e.node = d.node"
        "  AND e.policy = d.policy AND e.verdict = 'suppressed'"
        "  AND (e.reason LIKE 'step % withdrawn%' OR e.reason LIKE 'step % expired%')"
        "  ORDER BY e.id LIMIT 1)"
        " FROM decisions d WHERE d.id = ?1",
        decision_id, fate_row, &f, err);
    if (rc == 0 && !f.found)
        snprintf(out, size, "no decision has that id");
    return rc;
}

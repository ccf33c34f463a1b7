/* SPDX-License-Identifier: Apache-2.0 */
#include "reader_internal.h"
#include "backend.h"
#include "buf.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int audit_reader_open(const char *location, struct audit_reader **out, struct medic_error *err)
{
    struct audit_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    r->backend = audit__backend_for(location);
    int rc = r->backend->open_reader(location, &r->conn, &r->db, err);
    if (rc) {
        audit_reader_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void audit_reader_free(struct audit_reader *reader)
{
    if (!reader)
        return;
    reader->backend->close_reader(reader->conn, reader->db);
    free(reader);
}

int audit_kind_parse(const char *name)
{
    static const char *const names[] = {"notifications", "alerts",  "decisions", "actions",
                                        "incidents",     "changes", "approvals", "pauses"};
    for (int i = 0; i < AUDIT_KIND_COUNT; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

void audit_filter_init(struct audit_filter *filter)
{
    memset(filter, 0, sizeof(*filter));
    filter->since = MEDIC_TIME_UNSET;
    filter->until = MEDIC_TIME_UNSET;
}

/* How a selected column is shown. */
struct col {
    const char *name;
    const char *expr;
    enum col_show show;
};

struct query_spec {
    const struct col *cols;
    size_t ncols;
    const char *from;
    const char *time_expr;
    const char *node_expr;
    const char *alertname_expr;
    const char *policy_expr;
    const char *verdict_expr;
    const char *status_expr;
    const char *order_expr; /* the newest first; NULL: by time, then the first column */
    const char *where;      /* NULL: every row */
};

static const struct col notification_cols[] = {
    {"id", "n.id", SHOW_INT},
    {"received_at", "n.received_at", SHOW_TIME},
    {"status", "n.status", SHOW_TEXT},
    {"alerts", "n.alert_count", SHOW_INT},
    {"duplicate_of", "n.duplicate_of", SHOW_INT},
    {"group_key", "n.group_key", SHOW_TEXT},
    {"receiver", "n.receiver", SHOW_TEXT},
    {"remote_addr", "n.remote_addr", SHOW_TEXT},
};

static const struct col alert_cols[] = {
    {"id", "a.id", SHOW_INT},
    {"received_at", "a.received_at", SHOW_TIME},
    {"notification_id", "a.notification_id", SHOW_INT},
    {"status", "a.status", SHOW_TEXT},
    {"alertname", "a.alertname", SHOW_TEXT},
    {"node", "a.node", SHOW_TEXT},
    {"starts_at", "a.starts_at", SHOW_TIME},
    {"ends_at", "a.ends_at", SHOW_TIME},
    {"fingerprint", "a.fingerprint", SHOW_TEXT},
    {"labels", "a.labels", SHOW_JSON},
};

static const struct col decision_cols[] = {
    {"id", "d.id", SHOW_INT},
    {"created_at", "d.created_at", SHOW_TIME},
    {"node", "d.node", SHOW_TEXT},
    {"alertname", "d.alertname", SHOW_TEXT},
    {"policy", "d.policy", SHOW_TEXT},
    {"step", "d.step + 1", SHOW_INT}, /* stored from 0; shown from 1, as reasons count */
    {"action", "d.action", SHOW_TEXT},
    {"verdict", "d.verdict", SHOW_TEXT},
    {"reason", "d.reason", SHOW_TEXT},
    {"risk", "d.risk", SHOW_REAL},
    {"params", "d.params", SHOW_JSON},
    {"notification_id", "d.notification_id", SHOW_INT},
    {"alert_id", "d.alert_id", SHOW_INT},
    {"model_hash", "d.model_hash", SHOW_TEXT},
    {"config_hash", "d.config_hash", SHOW_TEXT},
    {"fingerprint", "d.fingerprint", SHOW_TEXT},
};

static const struct col action_cols[] = {
    {"id", "x.id", SHOW_INT},
    {"created_at", "x.created_at", SHOW_TIME},
    {"decision_id", "x.decision_id", SHOW_INT},
    {"phase", "x.phase", SHOW_TEXT},
    {"intent_id", "x.intent_id", SHOW_INT},
    {"action", "x.action", SHOW_TEXT},
    {"node", "x.node", SHOW_TEXT},
    {"target", "x.target", SHOW_TEXT},
    {"result", "x.result", SHOW_TEXT},
    {"duration_ms", "x.duration_ms", SHOW_INT},
    {"detail", "x.detail", SHOW_TEXT},
    {"policy", "d.policy", SHOW_TEXT},
};

/* an incident as its last change left it */
static const struct col incident_cols[] = {
    {"incident", "c.incident", SHOW_INT},      {"opened_at", "g.opened", SHOW_TIME},
    {"updated_at", "c.created_at", SHOW_TIME}, {"node", "c.node", SHOW_TEXT},
    {"policy", "c.policy", SHOW_TEXT},         {"state", "c.state", SHOW_TEXT},
    {"cause", "c.cause", SHOW_TEXT},           {"changes", "g.n", SHOW_INT},
};

static const struct col change_cols[] = {
    {"id", "c.id", SHOW_INT},
    {"created_at", "c.created_at", SHOW_TIME},
    {"incident", "c.incident", SHOW_INT},
    {"node", "c.node", SHOW_TEXT},
    {"policy", "c.policy", SHOW_TEXT},
    {"from", "c.from_state", SHOW_TEXT},
    {"state", "c.state", SHOW_TEXT},
    {"cause", "c.cause", SHOW_TEXT},
    {"decision_id", "c.decision_id", SHOW_INT},
};

/* a person's answer to a pending step, with the step it answered */
static const struct col approval_cols[] = {
    {"id", "p.id", SHOW_INT},
    {"created_at", "p.created_at", SHOW_TIME},
    {"decision_id", "p.decision_id", SHOW_INT},
    {"node", "d.node", SHOW_TEXT},
    {"policy", "d.policy", SHOW_TEXT},
    {"action", "d.action", SHOW_TEXT},
    {"answer", "p.answer", SHOW_TEXT},
    {"by", "p.by_name", SHOW_TEXT},
    {"reason", "p.reason", SHOW_TEXT},
    {"taken_at", "p.evaluated_at", SHOW_TIME},
    {"result", "p.result", SHOW_TEXT},
    {"result_decision_id", "p.result_decision_id", SHOW_INT},
    {"remote_addr", "p.remote_addr", SHOW_TEXT},
};

static const struct col pause_cols[] = {
    {"id", "p.id", SHOW_INT},
    {"created_at", "p.created_at", SHOW_TIME},
    {"request", "p.request", SHOW_TEXT},
    {"by", "p.by_name", SHOW_TEXT},
    {"reason", "p.reason", SHOW_TEXT},
    {"until", "p.until", SHOW_TIME},
    {"taken_at", "p.evaluated_at", SHOW_TIME},
    {"result", "p.result", SHOW_TEXT},
    {"result_decision_id", "p.result_decision_id", SHOW_INT},
    {"remote_addr", "p.remote_addr", SHOW_TEXT},
};

#define COLS(a) a, sizeof(a) / sizeof(a[0])

static const struct query_spec specs[] = {
    [AUDIT_NOTIFICATIONS] = {COLS(notification_cols), "notifications n", "n.received_at",
                             "(SELECT a.node FROM alerts a WHERE a.notification_id = "
                             "COALESCE(n.duplicate_of, n.id) AND a.node = ?)",
                             "(SELECT a.alertname FROM alerts a WHERE a.notification_id = "
                             "COALESCE(n.duplicate_of, n.id) AND a.alertname = ?)",
                             NULL, NULL, "n.status"},
    /* an alert's time is its notification's: the notifications' index by
     * time finds a range and gives the order (SQLite's CROSS JOIN keeps
     * them the outer loop), as the alerts have no index by time or
     * alertname of their own; a node's alerts are found by their index
     * (alerts_by_node below) */
    [AUDIT_ALERTS] = {COLS(alert_cols), "notifications n CROSS JOIN alerts a", "n.received_at",
                      "a.node", "a.alertname", NULL, NULL, "a.status",
                      "n.received_at DESC, n.id DESC, a.id DESC", "a.notification_id = n.id"},
    [AUDIT_DECISIONS] = {COLS(decision_cols), "decisions d", "d.created_at", "d.node",
                         "d.alertname", "d.policy", "d.verdict", NULL},
    [AUDIT_ACTIONS] = {COLS(action_cols), "actions x JOIN decisions d ON d.id = x.decision_id",
                       "x.created_at", "x.node", "d.alertname", "d.policy", "d.verdict",
                       "x.result"},
    [AUDIT_INCIDENTS] = {COLS(incident_cols),
                         "incident_changes c JOIN (SELECT incident AS i, max(id) AS last,"
                         " min(created_at) AS opened, count(*) AS n FROM incident_changes"
                         " GROUP BY incident) g ON c.id = g.last",
                         "c.created_at", "c.node", NULL, "c.policy", NULL, NULL},
    [AUDIT_CHANGES] = {COLS(change_cols), "incident_changes c", "c.created_at", "c.node", NULL,
                       "c.policy", NULL, NULL},
    [AUDIT_APPROVALS] = {COLS(approval_cols),
                         "approvals p LEFT JOIN decisions d ON d.id = p.decision_id",
                         "p.created_at", "d.node", NULL, "d.policy", NULL, NULL},
    [AUDIT_PAUSES] = {COLS(pause_cols), "pause_requests p", "p.created_at", NULL, NULL, NULL, NULL,
                      NULL},
};

/* A node's alerts: their index, by node and time, finds them in order. */
static const struct query_spec alerts_by_node = {.cols = alert_cols,
                                                 .ncols =
                                                     sizeof(alert_cols) / sizeof(alert_cols[0]),
                                                 .from = "alerts a",
                                                 .time_expr = "a.received_at",
                                                 .node_expr = "a.node",
                                                 .alertname_expr = "a.alertname",
                                                 .status_expr = "a.status"};

static int add_condition(struct medic_buf *sql, const char *expr, const char *value,
                         const char *flag, int as_query, enum audit_kind kind, const char **binds,
                         int *nbinds, struct medic_error *err)
{
    static const char *const kind_names[] = {"notifications", "alerts",  "decisions", "actions",
                                             "incidents",     "changes", "approvals", "pauses"};
    if (!value)
        return 0;
    if (!expr)
        return medic_error_set(err, MEDIC_E_INVALID, "%s%s does not apply to %s",
                               as_query ? "the query parameter " : "--", flag, kind_names[kind]);
    /* expressions that hold their own placeholder are sub-selects; the
     * placeholder is numbered here (?N, as both backends take it) */
    const char *mark = strchr(expr, '?');
    if (mark)
        medic_buf_printf(sql, " AND %.*s?%d%s IS NOT NULL", (int)(mark - expr), expr, *nbinds + 1,
                         mark + 1);
    else
        medic_buf_printf(sql, " AND %s = ?%d", expr, *nbinds + 1);
    binds[(*nbinds)++] = value;
    return 0;
}

static void show_cell(struct db_stmt *st, int i, enum col_show show, char *tmp, size_t size,
                      const char **out)
{
    if (db_column_type(st, i) == DB_NULL) {
        *out = NULL;
        return;
    }
    switch (show) {
    case SHOW_TIME:
        medic_time_format(db_column_int64(st, i) * MEDIC_NS_PER_MS, tmp, size);
        *out = tmp;
        break;
    case SHOW_REAL:
        snprintf(tmp, size, "%.6g", db_column_double(st, i));
        *out = tmp;
        break;
    default:
        *out = db_column_text(st, i);
    }
}

int audit__rows_to_table(struct db_stmt *st, const enum col_show *shows, size_t ncols,
                         struct medic_table *table, struct medic_error *err)
{
    int step, rc = 0;
    while ((step = db_step(st, err)) == 1) {
        const char *values[16];
        char tmp[16][40];
        for (size_t i = 0; i < ncols && i < 16; i++)
            show_cell(st, (int)i, shows[i], tmp[i], sizeof(tmp[i]), &values[i]);
        if ((rc = medic_table_add_row(table, values))) {
            medic_error_set(err, rc, "out of memory");
            break;
        }
    }
    if (rc == 0 && step < 0)
        rc = step;
    if (rc)
        medic_table_release(table);
    return rc;
}

/* value is one of the names in list (a NULL-ended array); else an error
 * naming them. */
static int one_of(const char *what, const char *value, const char *const *list,
                  struct medic_error *err)
{
    char names[200] = "";
    for (size_t i = 0; value && list[i]; i++) {
        if (strcmp(value, list[i]) == 0)
            return 0;
        size_t at = strlen(names);
        snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "", list[i]);
    }
    return value ? medic_error_set(err, MEDIC_E_INVALID, "%s '%s' is not one of %s", what, value,
                                   names)
                 : 0;
}

int audit_query(struct audit_reader *reader, enum audit_kind kind,
                const struct audit_filter *filter, struct medic_table *table,
                struct medic_error *err)
{
    static const char *const verdicts[] = {"execute", "dry_run", "suppressed", "no_match",
                                           "error",   "pending", NULL};
    static const char *const statuses[] = {"firing", "resolved", NULL};
    static const char *const results[] = {"pending", "succeeded",   "failed", "timed_out",
                                          "refused", "interrupted", NULL};
    const struct query_spec *spec =
        kind == AUDIT_ALERTS && filter->node ? &alerts_by_node : &specs[kind];
    const char *names[16];
    enum medic_column_type types[16];
    for (size_t i = 0; i < spec->ncols; i++) {
        names[i] = spec->cols[i].name;
        types[i] = spec->cols[i].show == SHOW_INT    ? MEDIC_COL_INT
                   : spec->cols[i].show == SHOW_REAL ? MEDIC_COL_REAL
                   : spec->cols[i].show == SHOW_JSON ? MEDIC_COL_JSON
                                                     : MEDIC_COL_TEXT;
    }
    struct medic_buf sql;
    medic_buf_init(&sql, 0);
    medic_buf_puts(&sql, "SELECT ");
    for (size_t i = 0; i < spec->ncols; i++)
        medic_buf_printf(&sql, "%s%s", i ? ", " : "", spec->cols[i].expr);
    medic_buf_printf(&sql, " FROM %s WHERE %s", spec->from, spec->where ? spec->where : "1 = 1");
    const char *binds[8];
    int nbinds = 0, rc;
    if ((rc = add_condition(&sql, spec->node_expr, filter->node, "node", filter->as_query, kind,
                            binds, &nbinds, err)) ||
        (rc = add_condition(&sql, spec->alertname_expr, filter->alertname, "alertname",
                            filter->as_query, kind, binds, &nbinds, err)) ||
        (rc = add_condition(&sql, spec->policy_expr, filter->policy, "policy", filter->as_query,
                            kind, binds, &nbinds, err)) ||
        (rc = add_condition(&sql, spec->verdict_expr, filter->verdict, "verdict", filter->as_query,
                            kind, binds, &nbinds, err)) ||
        (rc = add_condition(&sql, spec->status_expr, filter->status, "status", filter->as_query,
                            kind, binds, &nbinds, err)) ||
        (rc = add_condition(&sql,
                            kind == AUDIT_INCIDENTS || kind == AUDIT_CHANGES ? "c.state" : NULL,
                            filter->state, "state", filter->as_query, kind, binds, &nbinds, err)) ||
        /* a value no row can have: refused, not answered with nothing */
        (rc = one_of("verdict", filter->verdict, verdicts, err)) ||
        (rc = one_of("status", filter->status, kind == AUDIT_ACTIONS ? results : statuses, err))) {
        medic_buf_release(&sql);
        return rc;
    }
    if (filter->incident > 0) {
        if (kind != AUDIT_INCIDENTS && kind != AUDIT_CHANGES) {
            medic_buf_release(&sql);
            return medic_error_set(err, MEDIC_E_INVALID, "%s applies to incidents and changes",
                                   filter->as_query ? "the query parameter incident"
                                                    : "--incident");
        }
        medic_buf_printf(&sql, " AND c.incident = %lld", (long long)filter->incident);
    }
    if (filter->waiting) {
        if (kind != AUDIT_DECISIONS) {
            medic_buf_release(&sql);
            return medic_error_set(err, MEDIC_E_INVALID, "%s applies to decisions",
                                   filter->as_query ? "the query parameter waiting" : "--waiting");
        }
        /* pending, neither answered (a refusal is no answer) nor withdrawn
         * nor expired since */
        medic_buf_puts(&sql, " AND d.verdict = 'pending' AND NOT EXISTS (SELECT 1 FROM approvals w"
                             " WHERE w.decision_id = d.id AND w.evaluated_at IS NOT NULL"
                             " AND w.result NOT LIKE 'refused%') AND NOT EXISTS (SELECT 1 FROM"
                             " decisions w WHERE w.id > d.id AND w.node = d.node AND w.policy ="
                             " d.policy AND w.verdict = 'suppressed' AND (w.reason LIKE 'step %"
                             " withdrawn%' OR w.reason LIKE 'step % expired%'))");
    }
    if (filter->decision > 0) {
        if (kind != AUDIT_DECISIONS && kind != AUDIT_ACTIONS) {
            medic_buf_release(&sql);
            return medic_error_set(err, MEDIC_E_INVALID, "%s applies to decisions and actions",
                                   filter->as_query ? "the query parameter decision"
                                                    : "--decision");
        }
        medic_buf_printf(&sql, " AND %s = %lld", kind == AUDIT_ACTIONS ? "x.decision_id" : "d.id",
                         (long long)filter->decision);
    }
    if (filter->since != MEDIC_TIME_UNSET)
        medic_buf_printf(&sql, " AND %s >= %lld", spec->time_expr,
                         (long long)(filter->since / MEDIC_NS_PER_MS));
    if (filter->until != MEDIC_TIME_UNSET)
        medic_buf_printf(&sql, " AND %s < %lld", spec->time_expr,
                         (long long)(filter->until / MEDIC_NS_PER_MS));
    if (spec->order_expr)
        medic_buf_printf(&sql, " ORDER BY %s", spec->order_expr);
    else
        medic_buf_printf(&sql, " ORDER BY %s DESC, %s DESC", spec->time_expr, spec->cols[0].expr);
    medic_buf_printf(&sql, " LIMIT %ld", filter->limit > 0 ? filter->limit : 100);

    struct db_stmt *st = NULL;
    rc = medic_table_init(table, spec->ncols, names, types);
    if (rc) {
        medic_buf_release(&sql);
        return medic_error_set(err, rc, "out of memory");
    }
    if ((rc = db_prepare(reader->db, sql.data, &st, err)))
        goto out;
    for (int i = 0; i < nbinds; i++)
        db_bind_text(st, i + 1, binds[i]);
    enum col_show shows[16];
    for (size_t i = 0; i < spec->ncols; i++)
        shows[i] = spec->cols[i].show;
    rc = audit__rows_to_table(st, shows, spec->ncols, table, err);
    db_finalize(st);
    medic_buf_release(&sql);
    return rc;
out:
    db_finalize(st);
    medic_buf_release(&sql);
    if (rc)
        medic_table_release(table);
    return rc;
}

#include "reader_internal.h"
#include "buf.h"
#include "postgres.h"
#include "timeutil.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int open_pg(struct audit_reader *r, const char *url, struct medic_error *err)
{
    if (audit_pg_connect(url, &r->pg, err))
        return err->code;
    PGresult *v = PQexec(r->pg, "SELECT max(version) FROM medic_schema");
    int version = PQresultStatus(v) == PGRES_TUPLES_OK && !PQgetisnull(v, 0, 0)
                      ? atoi(PQgetvalue(v, 0, 0))
                      : 0;
    PQclear(v);
    if (version <= 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "postgresql: no medic audit log in this database (medic_schema)");
    if (version > audit_schema_version())
        return medic_error_set(err, MEDIC_E_STORE,
                               "database schema version %d is newer than this medic (%d); "
                               "upgrade medic",
                               version, audit_schema_version());
    return 0;
}

static int open_sqlite(struct audit_reader *r, const char *path, struct medic_error *err)
{
    if (sqlite3_open_v2(path, &r->lite, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "cannot open audit database '%s': %s", path,
                               r->lite ? sqlite3_errmsg(r->lite) : "out of memory");
    sqlite3_busy_timeout(r->lite, 5000);
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(r->lite, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version <= 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "'%s' is not a medic audit database (%s); pass the --db that medic "
                               "serve writes",
                               path, version < 0 ? sqlite3_errmsg(r->lite) : "no medic schema");
    if (version > audit_schema_version())
        return medic_error_set(err, MEDIC_E_STORE,
                               "database schema version %d is newer than this medic (%d); "
                               "upgrade medic",
                               version, audit_schema_version());
    return 0;
}

int audit_reader_open(const char *location, struct audit_reader **out, struct medic_error *err)
{
    struct audit_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = audit_pg_is_url(location) ? open_pg(r, location, err) : open_sqlite(r, location, err);
    if (rc == 0 && !(r->db = r->pg ? db_over_pg(r->pg) : db_over_sqlite(r->lite)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
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
    db_free(reader->db);
    sqlite3_close(reader->lite);
    PQfinish(reader->pg);
    free(reader);
}

int audit_kind_parse(const char *name)
{
    static const char *const names[] = {"notifications", "alerts",    "decisions",
                                        "actions",       "incidents", "changes"};
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
    {"step", "d.step", SHOW_INT},
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

#define COLS(a) a, sizeof(a) / sizeof(a[0])

static const struct query_spec specs[] = {
    [AUDIT_NOTIFICATIONS] = {COLS(notification_cols), "notifications n", "n.received_at",
                             "(SELECT a.node FROM alerts a WHERE a.notification_id = "
                             "COALESCE(n.duplicate_of, n.id) AND a.node = ?)",
                             "(SELECT a.alertname FROM alerts a WHERE a.notification_id = "
                             "COALESCE(n.duplicate_of, n.id) AND a.alertname = ?)",
                             NULL, NULL, "n.status"},
    [AUDIT_ALERTS] = {COLS(alert_cols), "alerts a", "a.received_at", "a.node", "a.alertname", NULL,
                      NULL, "a.status"},
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
};

static int add_condition(struct medic_buf *sql, const char *expr, const char *value,
                         const char *flag, enum audit_kind kind, const char **binds, int *nbinds,
                         struct medic_error *err)
{
    static const char *const kind_names[] = {"notifications", "alerts",    "decisions",
                                             "actions",       "incidents", "changes"};
    if (!value)
        return 0;
    if (!expr)
        return medic_error_set(err, MEDIC_E_INVALID, "%s does not apply to %s", flag,
                               kind_names[kind]);
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

int audit_query(struct audit_reader *reader, enum audit_kind kind,
                const struct audit_filter *filter, struct medic_table *table,
                struct medic_error *err)
{
    const struct query_spec *spec = &specs[kind];
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
    medic_buf_printf(&sql, " FROM %s WHERE 1 = 1", spec->from);
    const char *binds[8];
    int nbinds = 0, rc;
    if ((rc = add_condition(&sql, spec->node_expr, filter->node, "--node", kind, binds, &nbinds,
                            err)) ||
        (rc = add_condition(&sql, spec->alertname_expr, filter->alertname, "--alertname", kind,
                            binds, &nbinds, err)) ||
        (rc = add_condition(&sql, spec->policy_expr, filter->policy, "--policy", kind, binds,
                            &nbinds, err)) ||
        (rc = add_condition(&sql, spec->verdict_expr, filter->verdict, "--verdict", kind, binds,
                            &nbinds, err)) ||
        (rc = add_condition(&sql, spec->status_expr, filter->status, "--status", kind, binds,
                            &nbinds, err)) ||
        (rc = add_condition(&sql,
                            kind == AUDIT_INCIDENTS || kind == AUDIT_CHANGES ? "c.state" : NULL,
                            filter->state, "--state", kind, binds, &nbinds, err))) {
        medic_buf_release(&sql);
        return rc;
    }
    if (filter->incident > 0) {
        if (kind != AUDIT_INCIDENTS && kind != AUDIT_CHANGES) {
            medic_buf_release(&sql);
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "--incident applies to incidents and changes");
        }
        medic_buf_printf(&sql, " AND c.incident = %lld", (long long)filter->incident);
    }
    if (filter->since != MEDIC_TIME_UNSET)
        medic_buf_printf(&sql, " AND %s >= %lld", spec->time_expr,
                         (long long)(filter->since / MEDIC_NS_PER_MS));
    if (filter->until != MEDIC_TIME_UNSET)
        medic_buf_printf(&sql, " AND %s < %lld", spec->time_expr,
                         (long long)(filter->until / MEDIC_NS_PER_MS));
    medic_buf_printf(&sql, " ORDER BY %s DESC, %s DESC LIMIT %ld", spec->time_expr,
                     spec->cols[0].expr, filter->limit > 0 ? filter->limit : 100);

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
    int rc;
    if (encoding && strcmp(encoding, "deflate") == 0) {
        uLongf n = (uLongf)bytes;
        unsigned char *raw = malloc(bytes > 0 ? (size_t)bytes : 1);
        if (!raw)
            return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        if (!data || uncompress(raw, &n, data, (uLong)len) != Z_OK || n != (uLongf)bytes) {
            free(raw);
            return medic_error_set(err, MEDIC_E_STORE,
                                   "the stored body of notification %lld is corrupt",
                                   (long long)id);
        }
        rc = medic_buf_append(out, raw, n);
        free(raw);
    } else {
        rc = medic_buf_append(out, data, len);
    }
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
             "SELECT n.id, (SELECT a.id FROM alerts a WHERE a.notification_id = n.id AND "
             "a.position = 0),"
             " n.received_at, n.payload, n.payload_encoding, n.payload_bytes"
             " FROM notifications n WHERE n.duplicate_of IS NULL AND %s"
             " ORDER BY n.id LIMIT ?3",
             where);
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
            rc = fn(arg, id, first_alert, body.data ? body.data : "", body.len);
        if (rc == 0 && walk)
            rc = walk(arg, id, received, body.data ? body.data : "", body.len);
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

int audit_open_intents(struct audit_reader *reader, audit_intent_fn fn, void *arg,
                       struct medic_error *err)
{
    struct intent_ctx c = {fn, arg};
    return query_rows(reader,
                      "SELECT i.id, i.decision_id, i.action, i.node FROM actions i WHERE"
                      " i.phase = 'intent' AND NOT EXISTS (SELECT 1 FROM actions o WHERE"
                      " o.intent_id = i.id) ORDER BY i.id",
                      intent_row, &c, err);
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

int audit_unstarted_decisions(struct audit_reader *reader, audit_unstarted_fn fn, void *arg,
                              struct medic_error *err)
{
    struct unstarted_ctx c = {fn, arg};
    return query_rows(reader,
                      "SELECT d.id, d.created_at, d.node, d.alertname, d.policy, d.action,"
                      " d.params, d.reason, COALESCE(a.starts_at, d.created_at),"
                      " d.fingerprint IS NOT NULL AND EXISTS (SELECT 1 FROM alerts r WHERE"
                      "  r.node IS NOT DISTINCT FROM d.node AND r.fingerprint = d.fingerprint"
                      "  AND r.status = 'resolved' AND r.id > COALESCE(d.alert_id, 0))"
                      " FROM decisions d LEFT JOIN alerts a ON a.id = d.alert_id"
                      " WHERE d.verdict = 'execute' AND d.action IS NOT NULL"
                      " AND NOT EXISTS (SELECT 1 FROM actions x WHERE x.decision_id = d.id)"
                      " ORDER BY d.id",
                      unstarted_row, &c, err);
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
    char sql[768];
    snprintf(sql, sizeof(sql),
             "SELECT o.action, o.node, COALESCE(a.starts_at, d.created_at), a.alertname, %s"
             " FROM actions o JOIN actions i ON i.id = o.intent_id"
             " JOIN decisions d ON d.id = i.decision_id LEFT JOIN alerts a ON a.id = d.alert_id"
             " WHERE o.phase = 'outcome' AND o.result = 'succeeded' AND o.node IS NOT NULL"
             " AND COALESCE(a.starts_at, d.created_at) >= ?1"
             " AND COALESCE(a.starts_at, d.created_at) < ?2 ORDER BY o.id",
             db_is_pg(reader->db) ? "(a.labels::json ->> 'gpu')"
                                  : "json_extract(a.labels, '$.gpu')");
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

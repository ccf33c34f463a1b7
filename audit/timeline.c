/* SPDX-License-Identifier: Apache-2.0 */
/* One node's timeline: its alerts, the decisions about it, its incidents'
 * changes and the actions on it, merged in time order. */
#include "reader_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <stdint.h>

/* Each part is read through its table's by-node index; the newest rows
 * are kept (LIMIT) and shown oldest first. At one millisecond, an alert
 * comes before the decision it caused, the decision before the incident's
 * change, the change before the action. Steps are counted from 1, as
 * the decisions' reasons count them. */
static const char timeline_sql[] =
    "SELECT t, kind, id, what, detail FROM ("
    " SELECT a.received_at AS t, 0 AS o, 'alert' AS kind, a.id AS id,"
    "  COALESCE(a.alertname, '') || ' ' || a.status AS what, a.labels AS detail"
    "  FROM alerts a WHERE a.node = ?1 AND a.received_at >= ?2 AND a.received_at < ?3"
    " UNION ALL"
    " SELECT d.created_at, 1, 'decision', d.id,"
    "  d.verdict || ' ' || COALESCE(d.action, '-') || COALESCE(' (' || d.policy || ' step ' ||"
    "  (d.step + 1) || ')', ''), COALESCE(d.reason, '')"
    "  FROM decisions d WHERE d.node = ?1 AND d.created_at >= ?2 AND d.created_at < ?3"
    " UNION ALL"
    " SELECT c.created_at, 2, 'incident', c.id,"
    "  'incident ' || c.incident || COALESCE(' (' || c.policy || ')', '') || ': ' ||"
    "  c.from_state || ' -> ' || c.state, COALESCE(c.cause, '')"
    "  FROM incident_changes c WHERE c.node = ?1 AND c.created_at >= ?2 AND c.created_at < ?3"
    " UNION ALL"
    " SELECT x.created_at, 3, 'action', x.id,"
    "  x.action || ' ' || x.phase || ' ' || x.result ||"
    "  COALESCE(' in ' || x.duration_ms || ' ms', ''),"
    "  COALESCE(x.detail, x.target, '')"
    "  FROM actions x WHERE x.node = ?1 AND x.created_at >= ?2 AND x.created_at < ?3"
    " ORDER BY t DESC, o DESC, id DESC LIMIT ?4"
    ") AS newest ORDER BY t, o, id";

int audit_timeline(struct audit_reader *reader, const char *node, int64_t since, int64_t until,
                   long limit, struct medic_table *table, struct medic_error *err)
{
    static const char *const names[] = {"time", "kind", "id", "what", "detail"};
    static const enum medic_column_type types[] = {MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_INT,
                                                   MEDIC_COL_TEXT, MEDIC_COL_TEXT};
    if (!node || !*node)
        return medic_error_set(err, MEDIC_E_INVALID, "a timeline is about one node: give --node");
    int rc = medic_table_init(table, 5, names, types);
    if (rc)
        return medic_error_set(err, rc, "out of memory");
    struct db_stmt *st = NULL;
    if (db_prepare(reader->db, timeline_sql, &st, err)) {
        medic_table_release(table);
        medic_error_prefix(err, "query failed");
        return err->code;
    }
    db_bind_text(st, 1, node);
    db_bind_int64(st, 2, since == MEDIC_TIME_UNSET ? INT64_MIN : since / MEDIC_NS_PER_MS);
    db_bind_int64(st, 3, until == MEDIC_TIME_UNSET ? INT64_MAX : until / MEDIC_NS_PER_MS);
    db_bind_int64(st, 4, limit > 0 ? limit : 100);
    static const enum col_show shows[] = {SHOW_TIME, SHOW_TEXT, SHOW_INT, SHOW_TEXT, SHOW_TEXT};
    rc = audit__rows_to_table(st, shows, 5, table, err);
    db_finalize(st);
    return rc;
}

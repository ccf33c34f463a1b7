/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite log's schema: every version's step from the first, so that
 * a log of any earlier medic is brought up to date. */
#include "sqlite.h"
#include "schema.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int widen_verdicts(sqlite3 *db, struct medic_error *err);
static int widen_results(sqlite3 *db, struct medic_error *err);
static int widen_encodings(sqlite3 *db, struct medic_error *err);
static int verdict_pending(sqlite3 *db, struct medic_error *err);
static int approvals_undo(sqlite3 *db, struct medic_error *err);
static int checks_without_lists(sqlite3 *db, struct medic_error *err);

/* Each entry moves the schema from version i to i + 1: its SQL, then its
 * function when it has one. Never edit an entry that has shipped: add a
 * new one. */
static const struct migration {
    const char *sql;
    int (*fn)(sqlite3 *db, struct medic_error *err);
} migrations[] = {
    {/* 1: notifications, alerts, decisions, actions */
     "CREATE TABLE notifications ("
     "  id INTEGER PRIMARY KEY,"
     "  received_at INTEGER NOT NULL," /* unix ms */
     "  group_key TEXT NOT NULL,"
     "  status TEXT NOT NULL CHECK (status IN ('firing','resolved')),"
     "  receiver TEXT,"
     "  external_url TEXT,"
     "  truncated_alerts INTEGER NOT NULL DEFAULT 0,"
     "  alert_count INTEGER NOT NULL,"
     "  dedupe_key TEXT NOT NULL,"
     "  dedupe_prefix INTEGER NOT NULL," /* first 64 bits of dedupe_key */
     "  duplicate_of INTEGER REFERENCES notifications(id),"
     "  remote_addr TEXT,"
     "  payload BLOB NOT NULL," /* the body as received, maybe compressed */
     "  payload_encoding TEXT NOT NULL CHECK (payload_encoding IN ('identity','deflate')),"
     "  payload_bytes INTEGER NOT NULL" /* length of the body as received */
     ");"
     /* an integer prefix keeps this randomly-ordered index small: fewer
      * pages written per commit than with the 64-character key */
     "CREATE INDEX notifications_first_by_dedupe_prefix ON notifications(dedupe_prefix)"
     "  WHERE duplicate_of IS NULL;"
     "CREATE INDEX notifications_by_time ON notifications(received_at);"
     "CREATE TABLE alerts ("
     "  id INTEGER PRIMARY KEY,"
     "  notification_id INTEGER NOT NULL REFERENCES notifications(id),"
     "  position INTEGER NOT NULL,"
     "  received_at INTEGER NOT NULL,"
     "  fingerprint TEXT NOT NULL,"
     "  status TEXT NOT NULL CHECK (status IN ('firing','resolved')),"
     "  alertname TEXT,"
     "  node TEXT,"
     "  starts_at INTEGER," /* unix ms, NULL = unset */
     "  ends_at INTEGER,"
     "  generator_url TEXT,"
     "  labels TEXT NOT NULL," /* JSON object */
     "  annotations TEXT NOT NULL"
     ");"
     "CREATE INDEX alerts_by_notification ON alerts(notification_id);"
     "CREATE INDEX alerts_by_node ON alerts(node, received_at);"
     "CREATE INDEX alerts_by_alertname ON alerts(alertname, received_at);"
     "CREATE INDEX alerts_by_time ON alerts(received_at);"
     "CREATE TABLE decisions ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  notification_id INTEGER REFERENCES notifications(id),"
     "  alert_id INTEGER REFERENCES alerts(id),"
     "  fingerprint TEXT,"
     "  node TEXT,"
     "  alertname TEXT,"
     "  policy TEXT,"
     "  step INTEGER,"
     "  action TEXT,"
     "  params TEXT," /* JSON object */
     "  risk REAL,"   /* NULL = unknown */
     "  model_hash TEXT,"
     "  verdict TEXT NOT NULL CHECK (verdict IN ('execute','dry_run','suppressed','no_match')),"
     "  reason TEXT,"
     "  config_hash TEXT,"
     "  prev_hash TEXT NOT NULL,"
     "  hash TEXT NOT NULL"
     ");"
     "CREATE INDEX decisions_by_node ON decisions(node, created_at);"
     "CREATE INDEX decisions_by_alertname ON decisions(alertname, created_at);"
     "CREATE INDEX decisions_by_policy ON decisions(policy, created_at);"
     "CREATE INDEX decisions_by_verdict ON decisions(verdict, created_at);"
     "CREATE INDEX decisions_by_time ON decisions(created_at);"
     "CREATE INDEX decisions_by_fingerprint ON decisions(fingerprint);"
     "CREATE TABLE actions ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  decision_id INTEGER NOT NULL REFERENCES decisions(id),"
     "  phase TEXT NOT NULL CHECK (phase IN ('intent','outcome')),"
     "  intent_id INTEGER REFERENCES actions(id),"
     "  action TEXT NOT NULL,"
     "  node TEXT,"
     "  target TEXT,"
     "  params TEXT,"
     "  result TEXT NOT NULL CHECK (result IN "
     "    ('pending','succeeded','failed','timed_out','interrupted')),"
     "  duration_ms INTEGER,"
     "  detail TEXT,"
     "  prev_hash TEXT NOT NULL,"
     "  hash TEXT NOT NULL,"
     "  CHECK ((phase = 'intent') = (result = 'pending')),"
     "  CHECK ((phase = 'outcome') = (intent_id IS NOT NULL))"
     ");"
     /* one action per decision, ever; one outcome per intent */
     "CREATE UNIQUE INDEX actions_one_intent_per_decision ON actions(decision_id)"
     "  WHERE phase = 'intent';"
     "CREATE UNIQUE INDEX actions_one_outcome_per_intent ON actions(intent_id)"
     "  WHERE phase = 'outcome';"
     "CREATE INDEX actions_by_node ON actions(node, created_at);"
     "CREATE INDEX actions_by_time ON actions(created_at);"
     "CREATE INDEX actions_by_result ON actions(result, created_at);",
     NULL},
    {/* 2: the policy engine's progress: which notifications it evaluated,
      * and its state, both written with the decisions they led to */
     "ALTER TABLE notifications ADD COLUMN evaluated_at INTEGER;"
     "CREATE INDEX notifications_pending ON notifications(id)"
     "  WHERE evaluated_at IS NULL AND duplicate_of IS NULL;"
     "CREATE TABLE engine_state ("
     "  id INTEGER PRIMARY KEY CHECK (id = 1),"
     "  updated_at INTEGER NOT NULL,"
     "  state TEXT NOT NULL"
     ");",
     NULL},
    /* 3: the verdict 'error': a decision the engine could not make (it ran
     * out of memory, or over its cap), recorded rather than lost. Loosening
     * a CHECK changes no stored row, so the table's SQL is edited in place
     * (SQLite's documented procedure): see widen_verdicts(). */
    {"", widen_verdicts},
    /* 4: incidents' state changes, each with its cause, in their own hash
     * chain; and the outcome 'refused' (an action that a check before it
     * declined) */
    {"CREATE TABLE incident_changes ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  incident INTEGER NOT NULL,"
     "  node TEXT,"
     "  policy TEXT,"
     "  from_state TEXT NOT NULL,"
     "  state TEXT NOT NULL,"
     "  cause TEXT,"
     "  decision_id INTEGER REFERENCES decisions(id),"
     "  prev_hash TEXT NOT NULL,"
     "  hash TEXT NOT NULL"
     ");"
     "CREATE INDEX incident_changes_by_incident ON incident_changes(incident, id);"
     "CREATE INDEX incident_changes_by_node ON incident_changes(node, created_at);"
     "CREATE INDEX incident_changes_by_time ON incident_changes(created_at);",
     widen_results},
    /* 5: the engine's state as a row per incident, node and remembered
     * alert, written when it changes (engine_state held one document,
     * rewritten whole every round; an upgrade imports it once) */
    {"CREATE TABLE engine_rows ("
     "  kind TEXT NOT NULL,"
     "  key TEXT NOT NULL,"
     "  value TEXT NOT NULL,"
     "  PRIMARY KEY (kind, key)"
     ");",
     NULL},
    /* 6: bodies stored as LZ4 blocks ('lz4'), several times cheaper to
     * compress than zlib's deflate; 'deflate' rows stay readable */
    {"", widen_encodings},
    /* 7: duplicates are evaluated too (an alert re-sent, as Alertmanager
     * does every repeat_interval, is seen again: its expiry moves on);
     * those stored before count as evaluated, never as a backlog */
    {"UPDATE notifications SET evaluated_at = received_at"
     "  WHERE duplicate_of IS NOT NULL AND evaluated_at IS NULL;"
     "DROP INDEX notifications_pending;"
     "CREATE INDEX notifications_pending ON notifications(id) WHERE evaluated_at IS NULL;",
     NULL},
    /* 8: (PostgreSQL only: SQLite has no lease) the lease carries its
     * holder's configuration hash, and an operator's word that another
     * configuration may take it over */
    {"", NULL},
    /* 9: approve mode: the verdict 'pending' (a disruptive step waits for
     * a person), and the people's answers, each taken by the engine once
     * (evaluated_at) with the decision it led to; the same for their
     * pauses of the fleet */
    {"CREATE TABLE IF NOT EXISTS approvals ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  decision_id INTEGER NOT NULL REFERENCES decisions(id),"
     "  answer TEXT NOT NULL CHECK (answer IN ('approve','deny')),"
     "  by_name TEXT NOT NULL,"
     "  reason TEXT,"
     "  remote_addr TEXT,"
     "  evaluated_at INTEGER,"
     "  result TEXT,"
     "  result_decision_id INTEGER REFERENCES decisions(id)"
     ");"
     "CREATE INDEX IF NOT EXISTS approvals_pending ON approvals(id) WHERE evaluated_at IS NULL;"
     "CREATE INDEX IF NOT EXISTS approvals_by_decision ON approvals(decision_id);"
     "CREATE TABLE IF NOT EXISTS pause_requests ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  request TEXT NOT NULL CHECK (request IN ('pause','unpause')),"
     "  by_name TEXT NOT NULL,"
     "  reason TEXT,"
     "  until INTEGER,"
     "  remote_addr TEXT,"
     "  evaluated_at INTEGER,"
     "  result TEXT,"
     "  result_decision_id INTEGER REFERENCES decisions(id)"
     ");"
     "CREATE INDEX IF NOT EXISTS pause_requests_pending ON pause_requests(id)"
     "  WHERE evaluated_at IS NULL;",
     verdict_pending},
    /* 10: the repair loop: a person's release of a quarantined node,
     * taken by the engine once, as answers and pauses are */
    {"CREATE TABLE IF NOT EXISTS release_requests ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  node TEXT NOT NULL,"
     "  by_name TEXT NOT NULL,"
     "  reason TEXT,"
     "  remote_addr TEXT,"
     "  evaluated_at INTEGER,"
     "  result TEXT,"
     "  result_decision_id INTEGER REFERENCES decisions(id)"
     ");"
     "CREATE INDEX IF NOT EXISTS release_requests_pending ON release_requests(id)"
     "  WHERE evaluated_at IS NULL;",
     NULL},
    /* 11: a denial may ask medic to undo what the incident holds (deny
     * --undo); without it a denied step holds the node for a person */
    {"", approvals_undo},
    /* 12: the archive's record, and an index for each key that refers to
     * a row, so that rows can be taken out of the log */
    {"CREATE TABLE IF NOT EXISTS audit_archives ("
     "  id INTEGER PRIMARY KEY,"
     "  created_at INTEGER NOT NULL,"
     "  before_at INTEGER NOT NULL,"
     "  file TEXT NOT NULL,"
     "  state TEXT NOT NULL CHECK (state IN ('removing','done','held')),"
     "  decisions_last_id INTEGER NOT NULL,"
     "  decisions_hash TEXT NOT NULL,"
     "  actions_last_id INTEGER NOT NULL,"
     "  actions_hash TEXT NOT NULL,"
     "  changes_last_id INTEGER NOT NULL,"
     "  changes_hash TEXT NOT NULL,"
     "  rows_digest TEXT NOT NULL,"
     "  notifications INTEGER NOT NULL,"
     "  alerts INTEGER NOT NULL,"
     "  decisions INTEGER NOT NULL,"
     "  actions INTEGER NOT NULL,"
     "  changes INTEGER NOT NULL,"
     "  requests INTEGER NOT NULL"
     ");" ARCHIVE_INDEXES,
     NULL},
    /* 13: the CHECKs of a value among three or more as ORs, not IN lists
     * (SQLite built a temporary b-tree of the list for every row written):
     * the same rule, so the tables' SQL is edited in place */
    {"", checks_without_lists},
    /* 14: alerts found by time and alertname through their notifications
     * (two index entries fewer per alert), and the first notifications'
     * key prefixes in id order, read into the writer's memory (firsts.c),
     * instead of an index by prefix (a random leaf per notification) */
    {ALERT_INDEXES_DROPPED DEDUPE_PREFIX_INDEX_DROPPED AUDIT_FIRSTS_INDEX, NULL},
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == AUDIT_SCHEMA_VERSION,
               "a migration for every schema version");

static int exec(sqlite3 *db, const char *sql, struct medic_error *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        medic_error_set(err, MEDIC_E_STORE, "%s", msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return MEDIC_E_STORE;
    }
    return 0;
}

/* Edits a table's SQL in place, inside the migration's transaction
 * (SQLite's documented procedure for loosening a CHECK, which changes no
 * stored row); bumping schema_version makes every connection reparse. */
static int edit_table_sql(sqlite3 *db, const char *table, const char *from, const char *to,
                          struct medic_error *err)
{
    int version = (int)audit_lite_int(db, "PRAGMA schema_version", -1);
    if (version < 0)
        return medic_error_set(err, MEDIC_E_STORE, "cannot read schema_version: %s",
                               sqlite3_errmsg(db));
    /* %Q quotes the texts as SQL literals */
    char *sql = sqlite3_mprintf("PRAGMA writable_schema = ON;"
                                "UPDATE sqlite_schema SET sql = replace(sql, %Q, %Q)"
                                " WHERE type = 'table' AND name = %Q;"
                                "PRAGMA schema_version = %d;"
                                "PRAGMA writable_schema = OFF;",
                                from, to, table, version + 1);
    if (!sql)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = exec(db, sql, err);
    sqlite3_free(sql);
    return rc;
}

/* Adds 'error' to the decisions' verdict CHECK. */
static int widen_verdicts(sqlite3 *db, struct medic_error *err)
{
    return edit_table_sql(db, "decisions", "'suppressed','no_match')",
                          "'suppressed','no_match','error')", err);
}

/* Adds 'refused' to the actions' result CHECK. */
static int widen_results(sqlite3 *db, struct medic_error *err)
{
    return edit_table_sql(db, "actions", "'timed_out','interrupted')",
                          "'timed_out','refused','interrupted')", err);
}

/* Adds 'lz4' to the notifications' payload_encoding CHECK. */
static int widen_encodings(sqlite3 *db, struct medic_error *err)
{
    return edit_table_sql(db, "notifications", "('identity','deflate')",
                          "('identity','deflate','lz4')", err);
}

/* Adds 'pending' to the decisions' verdict CHECK. */
static int verdict_pending(sqlite3 *db, struct medic_error *err)
{
    return edit_table_sql(db, "decisions", "'no_match','error')", "'no_match','error','pending')",
                          err);
}

/* Replaces the CHECK on column in table's SQL (whatever its spacing, as
 * each earlier step left it) by CHECK (expr); nothing when the SQL has
 * that CHECK already. */
static int replace_check(sqlite3 *db, const char *table, const char *column, const char *expr,
                         struct medic_error *err)
{
    sqlite3_stmt *st = NULL;
    char *from = NULL, *to = NULL;
    if (sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "cannot read the schema: %s",
                               sqlite3_errmsg(db));
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    const char *sql =
        sqlite3_step(st) == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    char head[80];
    snprintf(head, sizeof(head), "CHECK (%s IN", column);
    const char *check = sql ? strstr(sql, head) : NULL;
    const char *end = check ? strchr(check, '(') : NULL;
    for (int depth = 0; end && *end; end++)
        if (*end == '(')
            depth++;
        else if (*end == ')' && --depth == 0)
            break;
    if (end && *end) {
        from = sqlite3_mprintf("%.*s", (int)(end - check + 1), check);
        to = sqlite3_mprintf("CHECK (%s)", expr);
    }
    int done = !check && sql && strstr(sql, expr); /* a log set back to an earlier version */
    sqlite3_finalize(st);
    int rc = from && to ? edit_table_sql(db, table, from, to, err)
             : done     ? 0
                        : medic_error_set(err, MEDIC_E_STORE, "%s: no CHECK (%s IN ...) to rewrite",
                                          table, column);
    sqlite3_free(from);
    sqlite3_free(to);
    return rc;
}

/* The CHECKs that compared a value with an IN list of three or more,
 * rewritten as ORs (schema_def.c): each row written no longer builds a
 * temporary b-tree. */
static int checks_without_lists(sqlite3 *db, struct medic_error *err)
{
    static const char *const edits[][3] = {
        {"notifications", "payload_encoding",
         "payload_encoding = 'identity' OR payload_encoding = 'deflate' OR"
         " payload_encoding = 'lz4'"},
        {"decisions", "verdict",
         "verdict = 'execute' OR verdict = 'dry_run' OR verdict = 'suppressed' OR"
         " verdict = 'no_match' OR verdict = 'error' OR verdict = 'pending'"},
        {"actions", "result",
         "result = 'pending' OR result = 'succeeded' OR result = 'failed' OR"
         " result = 'timed_out' OR result = 'refused' OR result = 'interrupted'"},
        {"audit_archives", "state", "state = 'removing' OR state = 'done' OR state = 'held'"},
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        int rc = replace_check(db, edits[i][0], edits[i][1], edits[i][2], err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Adds approvals.undo, once (a log a test or an older medic brought back
 * to an earlier version may have it already). */
static int approvals_undo(sqlite3 *db, struct medic_error *err)
{
    int64_t found = audit_lite_int(
        db, "SELECT count(*) FROM pragma_table_info('approvals') WHERE name = 'undo'", 0);
    return found
               ? 0
               : exec(db, "ALTER TABLE approvals ADD COLUMN undo INTEGER NOT NULL DEFAULT 0", err);
}

/* A new, empty file: the newest schema at once, rendered from its
 * description (*done set), in one transaction that holds the write lock
 * from the look on. */
static int create_newest(sqlite3 *db, int *done, struct medic_error *err)
{
    *done = 0;
    int rc = exec(db, "BEGIN IMMEDIATE", err);
    if (rc)
        return rc;
    if (audit_lite_int(db, "SELECT count(*) FROM sqlite_master", -1) == 0) {
        struct medic_buf sql;
        medic_buf_init(&sql, 0);
        rc = audit_schema_render(audit_backend_sqlite.sql_types, 0, &sql);
        medic_buf_printf(&sql, "PRAGMA user_version = %d;", AUDIT_SCHEMA_VERSION);
        if (rc == 0 && sql.error)
            rc = MEDIC_E_NOMEM;
        if (rc)
            medic_error_set(err, rc, "out of memory");
        else
            rc = exec(db, sql.data, err);
        medic_buf_release(&sql);
        *done = rc == 0;
    }
    if (rc == 0)
        return exec(db, "COMMIT", err);
    exec(db, "ROLLBACK", NULL);
    return rc;
}

int audit_lite_migrate(sqlite3 *db, struct medic_error *err)
{
    int64_t version = audit_lite_int(db, "PRAGMA user_version", 0);
    int done = 0;
    int rc = version == 0 ? create_newest(db, &done, err) : 0;
    return rc || done ? rc : audit_lite_migrate_steps(db, err);
}

int audit_lite_migrate_steps(sqlite3 *db, struct medic_error *err)
{
    int version = (int)audit_lite_int(db, "PRAGMA user_version", -1);
    if (version < 0)
        return medic_error_set(err, MEDIC_E_STORE, "cannot read schema version: %s",
                               sqlite3_errmsg(db));
    int newest = AUDIT_SCHEMA_VERSION;
    if (version > newest)
        return medic_error_set(err, MEDIC_E_STORE,
                               "database schema version %d is newer than this medic (%d); "
                               "upgrade medic",
                               version, newest);
    for (int v = version; v < newest; v++) {
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", v + 1);
        int rc = exec(db, "BEGIN IMMEDIATE", err);
        if (rc == 0)
            rc = migrations[v].sql[0] ? exec(db, migrations[v].sql, err) : 0;
        if (rc == 0 && migrations[v].fn)
            rc = migrations[v].fn(db, err);
        if (rc == 0)
            rc = exec(db, bump, err);
        if (rc == 0)
            rc = exec(db, "COMMIT", err);
        if (rc) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            char why[400];
            snprintf(why, sizeof(why), "%.399s", err ? err->msg : "");
            return medic_error_set(err, MEDIC_E_STORE, "migration to schema version %d: %s", v + 1,
                                   why);
        }
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log's schema at its newest version, described once: every
 * table's columns (a type of the description's, then constraints in
 * standard SQL, the same in every dialect), its constraints and its
 * indexes. Each backend renders it with its own types (backend.h's
 * sql_types) to create a new log; an existing one is brought here by that
 * backend's migration steps, and a test checks that both give the same
 * schema. */
#include "backend.h"
#include "schema.h"

#include <string.h>

struct column {
    const char *name;
    enum schema_type type;
    const char *constraints; /* "" or standard SQL */
};

struct table {
    const char *name;
    const struct column *columns;
    size_t ncolumns;
    const char *constraints; /* the table's own, after its columns ("" or ", ...") */
    const char *indexes;     /* CREATE INDEX statements, each ending in ';' */
    /* 1: only where several processes write (the lease); -1: only where
     * one does */
    int shared_only;
};

/* A CHECK that a value is one of three or more is written as ORs, not as
 * IN (...): SQLite builds a temporary b-tree of an IN list's values for
 * every row it checks, about 1.6 us per row written (schema version 13). */
#define STATUS_CHECK "CHECK (status IN ('firing','resolved'))"

static const struct column notifications[] = {
    {"id", SCHEMA_ID, ""},
    {"received_at", SCHEMA_INT, "NOT NULL"}, /* unix ms */
    {"group_key", SCHEMA_TEXT, "NOT NULL"},
    {"status", SCHEMA_TEXT, "NOT NULL " STATUS_CHECK},
    {"receiver", SCHEMA_TEXT, ""},
    {"external_url", SCHEMA_TEXT, ""},
    {"truncated_alerts", SCHEMA_INT, "NOT NULL DEFAULT 0"},
    {"alert_count", SCHEMA_INT, "NOT NULL"},
    {"dedupe_key", SCHEMA_TEXT, "NOT NULL"},
    {"dedupe_prefix", SCHEMA_INT, "NOT NULL"}, /* the first 64 bits of dedupe_key */
    {"duplicate_of", SCHEMA_INT, "REFERENCES notifications(id)"},
    {"remote_addr", SCHEMA_TEXT, ""},
    {"payload", SCHEMA_BLOB, "NOT NULL"}, /* the body as received, maybe compressed */
    {"payload_encoding", SCHEMA_TEXT,
     "NOT NULL CHECK (payload_encoding = 'identity' OR payload_encoding = 'deflate' OR"
     " payload_encoding = 'lz4')"},
    {"payload_bytes", SCHEMA_INT, "NOT NULL"}, /* the body's length as received */
    {"evaluated_at", SCHEMA_INT, ""},
};

static const struct column alerts[] = {
    {"id", SCHEMA_ID, ""},
    {"notification_id", SCHEMA_INT, "NOT NULL REFERENCES notifications(id)"},
    {"position", SCHEMA_INT, "NOT NULL"},
    {"received_at", SCHEMA_INT, "NOT NULL"},
    {"fingerprint", SCHEMA_TEXT, "NOT NULL"},
    {"status", SCHEMA_TEXT, "NOT NULL " STATUS_CHECK},
    {"alertname", SCHEMA_TEXT, ""},
    {"node", SCHEMA_TEXT, ""},
    {"starts_at", SCHEMA_INT, ""}, /* unix ms, NULL = unset */
    {"ends_at", SCHEMA_INT, ""},
    {"generator_url", SCHEMA_TEXT, ""},
    {"labels", SCHEMA_TEXT, "NOT NULL"}, /* a JSON object */
    {"annotations", SCHEMA_TEXT, "NOT NULL"},
};

static const struct column decisions[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"notification_id", SCHEMA_INT, "REFERENCES notifications(id)"},
    {"alert_id", SCHEMA_INT, "REFERENCES alerts(id)"},
    {"fingerprint", SCHEMA_TEXT, ""},
    {"node", SCHEMA_TEXT, ""},
    {"alertname", SCHEMA_TEXT, ""},
    {"policy", SCHEMA_TEXT, ""},
    {"step", SCHEMA_INT, ""},
    {"action", SCHEMA_TEXT, ""},
    {"params", SCHEMA_TEXT, ""}, /* a JSON object */
    {"risk", SCHEMA_REAL, ""},   /* NULL = unknown */
    {"model_hash", SCHEMA_TEXT, ""},
    {"verdict", SCHEMA_TEXT,
     "NOT NULL CHECK (verdict = 'execute' OR verdict = 'dry_run' OR verdict = 'suppressed' OR"
     " verdict = 'no_match' OR verdict = 'error' OR verdict = 'pending')"},
    {"reason", SCHEMA_TEXT, ""},
    {"config_hash", SCHEMA_TEXT, ""},
    {"prev_hash", SCHEMA_TEXT, "NOT NULL"},
    {"hash", SCHEMA_TEXT, "NOT NULL"},
};

static const struct column actions[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"decision_id", SCHEMA_INT, "NOT NULL REFERENCES decisions(id)"},
    {"phase", SCHEMA_TEXT, "NOT NULL CHECK (phase IN ('intent','outcome'))"},
    {"intent_id", SCHEMA_INT, "REFERENCES actions(id)"},
    {"action", SCHEMA_TEXT, "NOT NULL"},
    {"node", SCHEMA_TEXT, ""},
    {"target", SCHEMA_TEXT, ""},
    {"params", SCHEMA_TEXT, ""},
    {"result", SCHEMA_TEXT,
     "NOT NULL CHECK (result = 'pending' OR result = 'succeeded' OR result = 'failed' OR"
     " result = 'timed_out' OR result = 'refused' OR result = 'interrupted')"},
    {"duration_ms", SCHEMA_INT, ""},
    {"detail", SCHEMA_TEXT, ""},
    {"prev_hash", SCHEMA_TEXT, "NOT NULL"},
    {"hash", SCHEMA_TEXT, "NOT NULL"},
};

static const struct column engine_state[] = {
    {"id", SCHEMA_KEY, "CHECK (id = 1)"},
    {"updated_at", SCHEMA_INT, "NOT NULL"},
    {"state", SCHEMA_TEXT, "NOT NULL"},
};

static const struct column incident_changes[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"incident", SCHEMA_INT, "NOT NULL"},
    {"node", SCHEMA_TEXT, ""},
    {"policy", SCHEMA_TEXT, ""},
    {"from_state", SCHEMA_TEXT, "NOT NULL"},
    {"state", SCHEMA_TEXT, "NOT NULL"},
    {"cause", SCHEMA_TEXT, ""},
    {"decision_id", SCHEMA_INT, "REFERENCES decisions(id)"},
    {"prev_hash", SCHEMA_TEXT, "NOT NULL"},
    {"hash", SCHEMA_TEXT, "NOT NULL"},
};

static const struct column engine_rows[] = {
    {"kind", SCHEMA_TEXT, "NOT NULL"},
    {"key", SCHEMA_TEXT, "NOT NULL"},
    {"value", SCHEMA_TEXT, "NOT NULL"},
};

/* a person's request, taken by the engine once (evaluated_at) with the
 * decision that records what came of it */
#define TAKEN_COLUMNS                                                                              \
    {"evaluated_at", SCHEMA_INT, ""}, {"result", SCHEMA_TEXT, ""},                                 \
    {                                                                                              \
        "result_decision_id", SCHEMA_INT, "REFERENCES decisions(id)"                               \
    }

static const struct column approvals[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"decision_id", SCHEMA_INT, "NOT NULL REFERENCES decisions(id)"},
    {"answer", SCHEMA_TEXT, "NOT NULL CHECK (answer IN ('approve','deny'))"},
    {"by_name", SCHEMA_TEXT, "NOT NULL"},
    {"reason", SCHEMA_TEXT, ""},
    {"remote_addr", SCHEMA_TEXT, ""},
    TAKEN_COLUMNS,
    {"undo", SCHEMA_INT, "NOT NULL DEFAULT 0"},
};

static const struct column pause_requests[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"request", SCHEMA_TEXT, "NOT NULL CHECK (request IN ('pause','unpause'))"},
    {"by_name", SCHEMA_TEXT, "NOT NULL"},
    {"reason", SCHEMA_TEXT, ""},
    {"until", SCHEMA_INT, ""},
    {"remote_addr", SCHEMA_TEXT, ""},
    TAKEN_COLUMNS,
};

static const struct column release_requests[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"node", SCHEMA_TEXT, "NOT NULL"},
    {"by_name", SCHEMA_TEXT, "NOT NULL"},
    {"reason", SCHEMA_TEXT, ""},
    {"remote_addr", SCHEMA_TEXT, ""},
    TAKEN_COLUMNS,
};

/* Several replicas: the leader's lease (pg/lease.c), on the database's
 * clock. */
static const struct column medic_lease[] = {
    {"id", SCHEMA_KEY, "CHECK (id = 1)"},
    {"holder", SCHEMA_TEXT, "NOT NULL"},
    {"epoch", SCHEMA_INT, "NOT NULL"},
    {"expires_at", SCHEMA_TIMESTAMP, "NOT NULL"},
    {"config_hash", SCHEMA_TEXT, "NOT NULL DEFAULT ''"},
    {"forced", SCHEMA_TEXT, "NOT NULL DEFAULT ''"},
    {"last_forced", SCHEMA_TEXT, "NOT NULL DEFAULT ''"},
};

/* One `medic audit archive` run: the rows it moved into an archive file
 * ("removing" while they are taken out of the log, then "done"; the
 * archive's own copy is "held"), the ids and hashes where each chain was
 * cut (the first row left in the log starts from that hash), and a digest
 * of the unchained rows it moved. */
static const struct column audit_archives[] = {
    {"id", SCHEMA_ID, ""},
    {"created_at", SCHEMA_INT, "NOT NULL"},
    {"before_at", SCHEMA_INT, "NOT NULL"},
    {"file", SCHEMA_TEXT, "NOT NULL"},
    {"state", SCHEMA_TEXT,
     "NOT NULL CHECK (state = 'removing' OR state = 'done' OR state = 'held')"},
    {"decisions_last_id", SCHEMA_INT, "NOT NULL"},
    {"decisions_hash", SCHEMA_TEXT, "NOT NULL"},
    {"actions_last_id", SCHEMA_INT, "NOT NULL"},
    {"actions_hash", SCHEMA_TEXT, "NOT NULL"},
    {"changes_last_id", SCHEMA_INT, "NOT NULL"},
    {"changes_hash", SCHEMA_TEXT, "NOT NULL"},
    {"rows_digest", SCHEMA_TEXT, "NOT NULL"},
    {"notifications", SCHEMA_INT, "NOT NULL"},
    {"alerts", SCHEMA_INT, "NOT NULL"},
    {"decisions", SCHEMA_INT, "NOT NULL"},
    {"actions", SCHEMA_INT, "NOT NULL"},
    {"changes", SCHEMA_INT, "NOT NULL"},
    {"requests", SCHEMA_INT, "NOT NULL"},
};

#define COLUMNS(c) c, sizeof(c) / sizeof(c[0])

static const struct table tables[] = {
    {"notifications", COLUMNS(notifications), "",
     "CREATE INDEX notifications_by_time ON notifications(received_at);"
     "CREATE INDEX notifications_pending ON notifications(id) WHERE evaluated_at IS "
     "NULL;" ARCHIVE_NOTIFICATION_INDEXES,
     0},
    /* an alert's time is its notification's: a range of time is found
     * through notifications_by_time, and an alertname among the alerts of
     * that range, so that each alert costs the writer two index entries */
    {"alerts", COLUMNS(alerts), "",
     "CREATE INDEX alerts_by_notification ON alerts(notification_id);"
     "CREATE INDEX alerts_by_node ON alerts(node, received_at);",
     0},
    {"decisions", COLUMNS(decisions), "",
     "CREATE INDEX decisions_by_node ON decisions(node, created_at);"
     "CREATE INDEX decisions_by_alertname ON decisions(alertname, created_at);"
     "CREATE INDEX decisions_by_policy ON decisions(policy, created_at);"
     "CREATE INDEX decisions_by_verdict ON decisions(verdict, created_at);"
     "CREATE INDEX decisions_by_time ON decisions(created_at);"
     "CREATE INDEX decisions_by_fingerprint ON decisions(fingerprint);" ARCHIVE_DECISION_INDEXES,
     0},
    {"actions", COLUMNS(actions),
     ", CHECK ((phase = 'intent') = (result = 'pending')),"
     " CHECK ((phase = 'outcome') = (intent_id IS NOT NULL))",
     /* one action per decision, ever; one outcome per intent */
     "CREATE UNIQUE INDEX actions_one_intent_per_decision ON actions(decision_id)"
     " WHERE phase = 'intent';"
     "CREATE UNIQUE INDEX actions_one_outcome_per_intent ON actions(intent_id)"
     " WHERE phase = 'outcome';"
     "CREATE INDEX actions_by_node ON actions(node, created_at);"
     "CREATE INDEX actions_by_time ON actions(created_at);"
     "CREATE INDEX actions_by_result ON actions(result, created_at);" ARCHIVE_ACTION_INDEXES,
     0},
    {"engine_state", COLUMNS(engine_state), "", "", 0},
    {"incident_changes", COLUMNS(incident_changes), "",
     "CREATE INDEX incident_changes_by_incident ON incident_changes(incident, id);"
     "CREATE INDEX incident_changes_by_node ON incident_changes(node, created_at);"
     "CREATE INDEX incident_changes_by_time ON "
     "incident_changes(created_at);" ARCHIVE_CHANGE_INDEXES,
     0},
    {"engine_rows", COLUMNS(engine_rows), ", PRIMARY KEY (kind, key)", "", 0},
    {"approvals", COLUMNS(approvals), "",
     "CREATE INDEX approvals_pending ON approvals(id) WHERE evaluated_at IS NULL;"
     "CREATE INDEX approvals_by_decision ON approvals(decision_id);",
     0},
    {"pause_requests", COLUMNS(pause_requests), "",
     "CREATE INDEX pause_requests_pending ON pause_requests(id) WHERE evaluated_at IS NULL;", 0},
    {"release_requests", COLUMNS(release_requests), "",
     "CREATE INDEX release_requests_pending ON release_requests(id) WHERE evaluated_at IS NULL;",
     0},
    {"audit_archives", COLUMNS(audit_archives), "", "", 0},
    /* one process stores notifications: its writer holds the first
     * notifications' key prefixes in memory (audit/sqlite/firsts.c), read
     * from this index, in id order, when it opens the log */
    {NULL, NULL, 0, "", AUDIT_FIRSTS_INDEX, -1},
    /* several processes store notifications at once: this index, not a
     * lookup, decides which copy of a key is the first */
    {NULL, NULL, 0, "",
     "CREATE UNIQUE INDEX notifications_first_by_dedupe_key ON notifications(dedupe_key)"
     " WHERE duplicate_of IS NULL;",
     1},
    {"medic_lease", COLUMNS(medic_lease), "", "", 1},
};

int audit_schema_render(const char *const types[SCHEMA_TYPES], int shared, struct medic_buf *out)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        const struct table *tb = &tables[t];
        if ((tb->shared_only > 0 && !shared) || (tb->shared_only < 0 && shared))
            continue;
        if (tb->name) {
            medic_buf_printf(out, "CREATE TABLE %s (", tb->name);
            for (size_t c = 0; c < tb->ncolumns; c++) {
                const struct column *col = &tb->columns[c];
                medic_buf_printf(out, "%s%s %s%s%s", c ? ", " : "", col->name, types[col->type],
                                 col->constraints[0] ? " " : "", col->constraints);
            }
            medic_buf_printf(out, "%s);", tb->constraints);
        }
        medic_buf_puts(out, tb->indexes);
    }
    return out->error ? MEDIC_E_NOMEM : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* What every backend's schema shares (private to audit/): its version,
 * its description (schema_def.c), which each backend renders in its own
 * types to create a new log, and the columns each hash chain covers. Each
 * backend migrates an older log in its own steps (sqlite/schema.c,
 * pg/schema.c). */
#ifndef MEDIC_AUDIT_SCHEMA_H
#define MEDIC_AUDIT_SCHEMA_H

#include "buf.h"

/* The schema version this build writes: each backend migrates a log up to
 * it, and refuses one newer. */
#define AUDIT_SCHEMA_VERSION 14

/* The indexes that let rows be removed from the log (`medic audit
 * archive`): each key that refers to a row has one, so that the database's
 * check of the references, when a row goes, looks up instead of scanning
 * (version 12). A notification pays for one only when it is a duplicate. */
#define ARCHIVE_NOTIFICATION_INDEXES                                                               \
    "CREATE INDEX IF NOT EXISTS notifications_by_first ON notifications(duplicate_of)"             \
    " WHERE duplicate_of IS NOT NULL;"
#define ARCHIVE_DECISION_INDEXES                                                                   \
    "CREATE INDEX IF NOT EXISTS decisions_by_notification ON decisions(notification_id);"          \
    "CREATE INDEX IF NOT EXISTS decisions_by_alert ON decisions(alert_id);"
#define ARCHIVE_ACTION_INDEXES                                                                     \
    "CREATE INDEX IF NOT EXISTS actions_by_decision ON actions(decision_id);"                      \
    "CREATE INDEX IF NOT EXISTS actions_by_intent ON actions(intent_id) WHERE intent_id IS NOT "   \
    "NULL;"
#define ARCHIVE_CHANGE_INDEXES                                                                     \
    "CREATE INDEX IF NOT EXISTS incident_changes_by_decision ON incident_changes(decision_id);"
#define ARCHIVE_INDEXES                                                                            \
    ARCHIVE_NOTIFICATION_INDEXES ARCHIVE_DECISION_INDEXES ARCHIVE_ACTION_INDEXES                   \
        ARCHIVE_CHANGE_INDEXES

/* Schema version 14, what a notification costs its writer: an alert's
 * time is its notification's, so a range of time or an alertname is found
 * through notifications_by_time; a log one process writes lists its first
 * notifications' key prefixes in id order (appended to, never a random
 * leaf), read into the writer's memory (sqlite/firsts.c); the index by
 * prefix is gone from both backends (PostgreSQL finds a first by its
 * unique key). */
#define ALERT_INDEXES_DROPPED                                                                      \
    "DROP INDEX IF EXISTS alerts_by_alertname; DROP INDEX IF EXISTS alerts_by_time;"
#define AUDIT_FIRSTS_INDEX                                                                         \
    "CREATE INDEX IF NOT EXISTS notifications_firsts ON notifications(id, dedupe_prefix)"          \
    " WHERE duplicate_of IS NULL;"
#define DEDUPE_PREFIX_INDEX_DROPPED "DROP INDEX IF EXISTS notifications_first_by_dedupe_prefix;"

/* A column's type in the description, which each backend names (its
 * table's sql_types): an id drawn for each new row, a key given, integers,
 * reals, text, bytes, a time with its zone. */
enum schema_type {
    SCHEMA_ID,
    SCHEMA_KEY,
    SCHEMA_INT,
    SCHEMA_REAL,
    SCHEMA_TEXT,
    SCHEMA_BLOB,
    SCHEMA_TIMESTAMP,
    SCHEMA_TYPES
};

/* The newest schema's CREATE statements in a dialect's types, with the
 * tables and indexes only a log several processes write needs when
 * shared; MEDIC_E_NOMEM or 0. */
int audit_schema_render(const char *const types[SCHEMA_TYPES], int shared, struct medic_buf *out);

/* Columns covered by a row's hash, in hashing order. */
extern const char audit_decision_hashed_columns[];
extern const char audit_action_hashed_columns[];
extern const char audit_change_hashed_columns[];

#endif

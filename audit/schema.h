/* SPDX-License-Identifier: Apache-2.0 */
/* Versioned schema migrations (private to audit/). */
#ifndef MEDIC_AUDIT_SCHEMA_H
#define MEDIC_AUDIT_SCHEMA_H

#include "error.h"

#include <sqlite3.h>

/* Brings db up to the newest schema, one transaction per version, keeping
 * the version in PRAGMA user_version. Refuses a database newer than this
 * build. */
int audit_schema_migrate(sqlite3 *db, struct medic_error *err);

/* Columns covered by a row's hash, in hashing order. */
extern const char audit_decision_hashed_columns[];
extern const char audit_action_hashed_columns[];
extern const char audit_change_hashed_columns[];

#endif

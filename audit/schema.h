/* SPDX-License-Identifier: Apache-2.0 */
/* What every backend's schema shares (private to audit/): its version and
 * the columns each hash chain covers. Each backend creates and migrates
 * its own tables (sqlite/schema.c, pg/schema.c). */
#ifndef MEDIC_AUDIT_SCHEMA_H
#define MEDIC_AUDIT_SCHEMA_H

/* The schema version this build writes: each backend migrates a log up to
 * it, and refuses one newer. */
#define AUDIT_SCHEMA_VERSION 11

/* Columns covered by a row's hash, in hashing order. */
extern const char audit_decision_hashed_columns[];
extern const char audit_action_hashed_columns[];
extern const char audit_change_hashed_columns[];

#endif

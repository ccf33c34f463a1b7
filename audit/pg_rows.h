/* SPDX-License-Identifier: Apache-2.0 */
/* The PostgreSQL backend's statements of rows (pg_rows.c): each takes a
 * batch's rows as one array per column (db_prepare_rows), so that it is
 * parsed once per connection and sent in one round trip whatever the
 * batch's size. Private to audit/. */
#ifndef MEDIC_AUDIT_PG_ROWS_H
#define MEDIC_AUDIT_PG_ROWS_H

#include "rows_internal.h"

enum pg_own {
    OWN_FIRSTS,
    OWN_DUPLICATES,
    OWN_ALERTS,
    OWN_DECISIONS,
    OWN_CHANGES,
    OWN_ROWS_PUT,
    OWN_ROWS_DROP,
    OWN_MARK_EVALUATED,
    OWN_COUNT
};

/* Statement k on the writer's connection, prepared on first use (NULL
 * with err set when it could not be). */
struct db_stmt *audit__pg_own(struct audit_store *s, enum pg_own k, struct medic_error *err);
/* Frees them, before the connection closes. */
void audit__pg_own_free(struct audit_store *s);
/* Runs a statement of rows that returns none, then forgets them. */
int audit__pg_run_rows(struct db_stmt *st, struct medic_error *err, const char *what);

/* The backend's operations (backend.h) that write an evaluation's rows. */
int audit__pg_rows_together(struct audit_store *s, const struct audit_rows *rows, size_t first,
                            size_t past_end, const int64_t *ids, size_t decision_count,
                            struct medic_error *err);
int audit__pg_insert_decisions(struct audit_store *s, const struct audit_evaluation_in *in,
                               int64_t *ids, struct medic_error *err);
int audit__pg_insert_changes(struct audit_store *s, const struct audit_evaluation_in *in,
                             const int64_t *ids, struct medic_error *err);
int audit__pg_mark_evaluated(struct audit_store *s, const struct audit_evaluation_in *in,
                             struct medic_error *err);

#endif

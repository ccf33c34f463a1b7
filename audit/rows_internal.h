/* SPDX-License-Identifier: Apache-2.0 */
/* What rows.c (each request's rows, one by one) and backend_pg.c
 * (PostgreSQL: a batch's rows together) share. Private to audit/. */
#ifndef MEDIC_AUDIT_ROWS_INTERNAL_H
#define MEDIC_AUDIT_ROWS_INTERNAL_H

#include "backend.h"

/* PostgreSQL: alert ids come from one sequence that every replica draws
 * on, and a notification's alerts must have consecutive ids (the engine
 * finds alert k at the first id plus k): a replica inserts alerts holding
 * this lock while the insert runs, alone when a notification among them
 * has several, shared when each has one (their ids may interleave). */
#define ALERT_IDS_LOCK 0x6d656469630001LL

#define NOTIFICATION_COLUMNS 14
#define ALERT_COLUMNS 12

static inline void audit__bind_text(struct db_stmt *st, int i, const char *v)
{
    db_bind_text(st, i, v);
}

/* An id, or NULL when 0 or less. */
static inline void audit__bind_id(struct db_stmt *st, int i, int64_t id)
{
    if (id > 0)
        db_bind_int64(st, i, id);
    else
        db_bind_null(st, i);
}

/* Runs st and clears it for the next use; id (unless NULL) receives the
 * first column of the row it returned (an insert's new id), 0 when none. */
int audit__step_id(struct db_stmt *st, int64_t *id, struct medic_error *err, const char *what);
/* A notification's row, the first or a duplicate of first, bound to
 * parameters base + 1 to base + 14. */
void audit__bind_notification_at(struct db_stmt *st, int base, const struct job *job,
                                 int64_t first);
/* Alert i of the job's notification (stored as id), bound to parameters
 * base + 1 to base + 12. */
void audit__bind_alert_at(struct db_stmt *st, int base, const struct job *job, int64_t id,
                          size_t i);
/* The id of the first notification with prep's key; 0 when none. */
int audit__find_first(struct audit_store *s, const struct prepared_notification *prep,
                      int64_t *first, struct medic_error *err);
/* The head of a chain in the open transaction. */
int audit__last_hash(struct audit_store *s, enum chain chain, char out[65],
                     struct medic_error *err);
/* A state row's value as stored, its references to decisions replaced by
 * their ids. */
int audit__row_value(const struct audit_rows *rows, const struct audit_row *row, const int64_t *ids,
                     size_t decision_count, struct medic_buf *value, struct medic_error *err);

#endif

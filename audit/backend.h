/* SPDX-License-Identifier: Apache-2.0 */
/* An audit backend: what the writer (store.c, rows.c) and the readers
 * (reader.c) ask of a database, in one table of operations, each backend
 * in a file of its own: backend_sqlite.c (a file one process writes, its
 * syncs and checkpoints on threads of their own) and backend_pg.c
 * (PostgreSQL, shared by replicas: a lease fences the writers, a batch's
 * rows go together because every statement is a round trip). The callers
 * never ask which one they have. SQL runs through db.h on either. Private
 * to audit/. */
#ifndef MEDIC_AUDIT_BACKEND_H
#define MEDIC_AUDIT_BACKEND_H

#include "store_internal.h"

struct audit_backend {
    const char *name;
    /* several processes write the log: a lease fences them, and a
     * notification is inserted as first, its key's unique index deciding */
    int shared;
    /* appended to an insert of one row to have its id back ("": the
     * connection's last rowid, db_last_insert_id) */
    const char *returning_id;

    /* The writer's connection: opened, the schema created or migrated,
     * s->conn and s->db set. close undoes what open and prepare did, also
     * after a failed open. */
    int (*open)(struct audit_store *s, const char *location, struct medic_error *err);
    void (*close)(struct audit_store *s);
    /* The writer's helpers, once its statements are prepared; stop joins
     * them (also when start failed halfway). NULL: none. */
    int (*start)(struct audit_store *s, const char *location, struct medic_error *err);
    void (*stop)(struct audit_store *s);

    /* On the writer's thread before its first batch. NULL: nothing. */
    void (*start_writer)(struct audit_store *s);

    /* In a batch's transaction, before its rows: locks, and the leader's
     * term for the requests that need it (refused ones left out, their rc
     * MEDIC_E_FENCED). NULL: nothing to check. */
    int (*guard)(struct audit_store *s, struct job *batch, struct medic_error *err);
    /* The batch's notifications in a few statements (marked written); on
     * failure the transaction is rolled back and the batch goes request by
     * request. NULL: always request by request. */
    int (*write_together)(struct audit_store *s, struct job *batch, struct medic_error *err);
    /* After the batch's requests ran, before its commit: more requests
     * taken into the same transaction; the first that failed, or NULL.
     * NULL: none. */
    struct job *(*before_commit)(struct audit_store *s, struct job *batch);
    /* The batch's transaction ended (rc 0: committed): made durable, then
     * its callers told (audit__complete_batch). */
    void (*finish)(struct audit_store *s, struct job *batch, int rc, const struct medic_error *err,
                   int64_t start);

    /* A notification's row: *id, and *first the id of the one it repeats
     * (0: it is the first). */
    int (*insert_notification)(struct audit_store *s, struct job *job, int64_t *id, int64_t *first);
    /* The alerts of the notification stored as id, with consecutive ids. */
    int (*insert_alerts)(struct audit_store *s, struct job *job, int64_t id);
    /* An evaluation's decisions (their ids into ids), sealed in their
     * chain; its incident changes; its evaluated marks. */
    int (*insert_decisions)(struct audit_store *s, const struct audit_evaluation_in *in,
                            int64_t *ids, struct medic_error *err);
    int (*insert_changes)(struct audit_store *s, const struct audit_evaluation_in *in,
                          const int64_t *ids, struct medic_error *err);
    int (*mark_evaluated)(struct audit_store *s, const struct audit_evaluation_in *in,
                          struct medic_error *err);
    /* State rows first to past_end, all put or all deleted, in one
     * statement; 1 when it cannot (a key repeats), to go row by row. NULL:
     * always row by row. */
    int (*state_rows_together)(struct audit_store *s, const struct audit_rows *rows, size_t first,
                               size_t past_end, const int64_t *ids, size_t decision_count,
                               struct medic_error *err);

    /* A read connection to a log that holds medic's schema (not newer
     * than this build's): *conn and *db set. close_reader takes either. */
    int (*open_reader)(const char *location, void **conn, struct db **db, struct medic_error *err);
    void (*close_reader)(void *conn, struct db *db);
};

extern const struct audit_backend audit_backend_sqlite;
extern const struct audit_backend audit_backend_pg;

/* The backend of a location: a postgresql:// URL, or an SQLite path. */
const struct audit_backend *audit__backend_for(const char *location);
/* 0 when this build reads a log of schema version, else the error that
 * says to upgrade medic. */
int audit__readable_version(int version, struct medic_error *err);

/* rows.c: the row-by-row ways, for a backend that has no faster one. */
int audit__insert_notification_looked_up(struct audit_store *s, struct job *job, int64_t *id,
                                         int64_t *first);
/* The notification's row as a duplicate of first (0: as the first). */
int audit__insert_notification_row(struct audit_store *s, struct job *job, int64_t first,
                                   int64_t *id);
int audit__insert_alerts_each(struct audit_store *s, struct job *job, int64_t id);
int audit__insert_decisions_each(struct audit_store *s, const struct audit_evaluation_in *in,
                                 int64_t *ids, struct medic_error *err);
int audit__insert_changes_each(struct audit_store *s, const struct audit_evaluation_in *in,
                               const int64_t *ids, struct medic_error *err);
int audit__mark_evaluated_each(struct audit_store *s, const struct audit_evaluation_in *in,
                               struct medic_error *err);

/* store.c, for a backend whose commit waits on the syncer: while the
 * syncer syncs the batch committed before, takes the requests that arrive
 * into the open transaction (at most AUDIT_MAX_BATCH in all), each run at
 * once; the first that failed, or NULL. */
struct job *audit__gather_more(struct audit_store *s, struct job *batch);

#endif

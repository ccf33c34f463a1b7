/* SPDX-License-Identifier: Apache-2.0 */
/* An audit backend: everything medic asks of one database, in one table of
 * operations per backend, each backend in a folder of its own that alone
 * names its library: sqlite/ (a file one process writes, its syncs and
 * checkpoints on threads of their own) and pg/ (PostgreSQL, shared by
 * replicas: a lease fences the writers, a batch's rows go together because
 * every statement is a round trip). The table of backends (backend.c)
 * chooses one by the log's location. The writer (store.c, rows.c), the
 * readers (reader.c) and the SQL layer (db.h) never ask which one they
 * have. Private to audit/. */
#ifndef MEDIC_AUDIT_BACKEND_H
#define MEDIC_AUDIT_BACKEND_H

#include "schema.h"
#include "store_internal.h"

struct audit_backend {
    const char *name;
    /* the location's prefixes that choose this backend (NULL-terminated);
     * none: a file path, the backend of any other location */
    const char *const *schemes;
    /* several processes write the log: a lease fences them, and a
     * notification is inserted as first, its key's unique index deciding */
    int shared;
    /* notifications may be stored by writers of their own, each on a
     * connection of its own (not chained, their unique keys deciding
     * between connections), while the store's writer keeps everything
     * chained or fenced in one order (store.c) */
    int parallel_notifications;
    /* appended to an insert of one row to have its id back ("": the
     * connection's last rowid, db_last_insert_id) */
    const char *returning_id;
    /* the schema description's types in this dialect (schema.h) */
    const char *sql_types[SCHEMA_TYPES];
    /* an expression for the text at key of a JSON text column: [0], the
     * column, [1], the key, [2] */
    const char *json_text[3];

    /* ---- the process ---- */

    /* Once, before any thread starts: the library's process-wide
     * settings. NULL: none. */
    void (*library_init)(void);
    /* "  name:  version\n" of the library, for medic version. */
    void (*library_version)(struct medic_buf *out);

    /* ---- the writer (store.c, rows.c) ---- */

    /* The writer's connection: opened, the schema created or migrated,
     * s->state and s->db set. close undoes what open and prepare did, also
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

    /* ---- the readers ---- */

    /* A read connection to a log that holds medic's schema (not newer
     * than this build's): *conn and *db set. close_reader takes either. */
    int (*open_reader)(const char *location, void **conn, struct db **db, struct medic_error *err);
    void (*close_reader)(void *conn, struct db *db);

    /* ---- the log copied in (migrate.c) ---- */

    /* A log at location opened to write rows into it with the newest
     * schema (created when new, else brought up to date; *conn and *db,
     * closed with close_reader): a migration's target, an archive file, a
     * log an archive takes rows out of. */
    int (*open_target)(const char *location, void **conn, struct db **db, struct medic_error *err);
    /* After rows were copied into table with their ids: new rows take ids
     * after them. NULL: the database does so by itself. */
    int (*ids_follow)(struct db *d, const char *table, struct medic_error *err);

    /* ---- the leader's lease (audit.h); NULL on a backend one process
     * writes ---- */

    int (*lease_open)(const char *location, const char *replica, void **lease,
                      struct medic_error *err);
    void (*lease_free)(void *lease);
    int (*lease_renew)(void *lease, const char *config_hash, int64_t lease_ms,
                       struct audit_lease *out, struct medic_error *err);
    int (*lease_clock)(void *lease, int64_t *db_now, int64_t *mono_at, struct medic_error *err);
    int (*lease_release)(void *lease, int64_t epoch, struct medic_error *err);
    int (*lease_read)(const char *location, struct audit_lease *out, struct medic_error *err);
    int (*lease_force)(const char *location, const char *reason, struct medic_error *err);

    /* ---- the word that an engine took people's requests (audit.h's
     * audit_listener); NULL where one medic owns the log ---- */

    /* run in the transaction that marks requests taken, NULL: nothing */
    const char *taken_sql;
    int (*listen_open)(const char *location, void **listener, struct medic_error *err);
    int (*listen_wait)(void *listener, int wake_fd, int timeout_ms, struct medic_error *err);
    void (*listen_free)(void *listener);

    /* ---- the SQL layer (db.h), each call handed to these ---- */

    void (*free_db)(struct db *d);
    int (*exec)(struct db *d, const char *sql, struct medic_error *err);
    int (*exec_later)(struct db *d, const char *sql, struct medic_error *err);
    int (*lock_session)(struct db *d, int64_t key, int shared, struct medic_error *err);
    int (*unlock_session)(struct db *d, int64_t key, int shared, struct medic_error *err);
    int (*begin)(struct db *d, struct medic_error *err);
    int (*begin_snapshot)(struct db *d, struct medic_error *err);
    int (*commit)(struct db *d, struct medic_error *err);
    void (*rollback)(struct db *d);
    int64_t (*last_insert_id)(struct db *d);
    int (*prepare)(struct db *d, const char *sql, int cached, struct db_stmt **out,
                   struct medic_error *err);
    /* NULL: the backend has no arrays */
    int (*prepare_rows)(struct db *d, const char *sql, const char *types, int cached,
                        struct db_stmt **out, struct medic_error *err);
    void (*bind_int64)(struct db_stmt *st, int i, int64_t v);
    void (*bind_text_len)(struct db_stmt *st, int i, const char *v, size_t len); /* NULL: NULL */
    void (*bind_double)(struct db_stmt *st, int i, double v);
    void (*bind_blob)(struct db_stmt *st, int i, const void *data, size_t len);
    int (*step)(struct db_stmt *st, struct medic_error *err);
    int (*column_count)(struct db_stmt *st);
    const char *(*column_name)(struct db_stmt *st, int i);
    enum db_type (*column_type)(struct db_stmt *st, int i);
    int64_t (*column_int64)(struct db_stmt *st, int i);
    double (*column_double)(struct db_stmt *st, int i);
    const char *(*column_text)(struct db_stmt *st, int i);
    size_t (*column_bytes)(struct db_stmt *st, int i);
    const void *(*column_blob)(struct db_stmt *st, int i, size_t *len);
    void (*reset)(struct db_stmt *st);
    void (*clear)(struct db_stmt *st);
    void (*finalize)(struct db_stmt *st);
};

/* What every backend's connection and statement begin with. */
struct db {
    const struct audit_backend *backend;
    enum db_failure failure;
};

struct db_stmt {
    const struct audit_backend *backend;
    struct db *d;
};

extern const struct audit_backend audit_backend_sqlite;
extern const struct audit_backend audit_backend_pg;

/* The backend of a location, from the table of backends: the one whose
 * scheme it starts with, else the one of file paths. */
const struct audit_backend *audit__backend_for(const char *location);
/* 0 when this build reads a log of schema version, else the error that
 * says to upgrade medic. */
int audit__readable_version(int version, struct medic_error *err);

/* rows.c: the row-by-row ways, for a backend that has no faster one. */
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

/* store.c, for a backend whose commit waits on a thread of its own: while
 * busy(s) says (called under s->lock) that the batch committed before is
 * still being made durable, takes the requests that arrive into the open
 * transaction (at most AUDIT_MAX_BATCH in all), each run at once; the
 * first that failed, or NULL. */
struct job *audit__gather_more(struct audit_store *s, struct job *batch,
                               int (*busy)(const struct audit_store *s));

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite backend (backend.h): a file one medic writes, in WAL mode at
 * synchronous=FULL. Through the gathering VFS (wal_gather.h) a commit
 * leaves its WAL sync to the syncer thread (syncer.c), which completes the
 * batches once it is done while the writer takes the next requests into
 * its open transaction; the checkpointer thread (checkpointer.c) copies
 * the WAL into the database. Rows are written one by one, in the process. */
#include "sqlite.h"
#include "log.h"
#include "timeutil.h"
#include "wal_gather.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int on_wal(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    ((struct lite_store *)arg)->wal_frames = frames;
    return SQLITE_OK;
}

/* Why SQLite could not open or create path, in the words an operator acts
 * on: the directory that is missing or not writable, else SQLite's own. */
static const char *why_not_opened(const char *path, sqlite3 *lite, char *buf, size_t n)
{
    char dir[256];
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) : 1;
    if (len == 0)
        len = 1; /* the root directory */
    if (len >= sizeof(dir))
        return lite ? sqlite3_errmsg(lite) : "out of memory";
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    int w;
    if (access(dir, F_OK) != 0)
        w = snprintf(buf, n, "its directory '%s' does not exist (create it, or set audit.path)",
                     dir);
    else if (access(dir, W_OK | X_OK) != 0)
        w = snprintf(buf, n, "its directory '%s' is not writable by this user", dir);
    else
        return lite ? sqlite3_errmsg(lite) : "out of memory";
    return w > 0 && (size_t)w < n ? buf : "its directory cannot be used";
}

static int lite_open(struct audit_store *s, const char *path, struct medic_error *err)
{
    /* a commit's WAL writes as one (wal_gather.h): SQLite syncs them before
     * any other connection may read them only with synchronous=FULL */
    const char *vfs = s->options.synchronous_full ? audit_wal_gather_vfs() : NULL;
    struct lite_store *l = calloc(1, sizeof(*l));
    if (!l)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    s->state = l;
    sqlite3 *lite = NULL;
    int opened = sqlite3_open_v2(
        path, &lite, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
    l->conn = lite;
    if (opened != SQLITE_OK) {
        char why[320];
        return medic_error_set(err, MEDIC_E_STORE, "cannot open audit database '%s': %s", path,
                               why_not_opened(path, lite, why, sizeof(why)));
    }
    sqlite3_busy_timeout(lite, s->options.busy_timeout_ms);
    char pragmas[200];
    snprintf(pragmas, sizeof(pragmas),
             "PRAGMA journal_mode = WAL; PRAGMA synchronous = %s; PRAGMA foreign_keys = ON;"
             " PRAGMA temp_store = MEMORY",
             s->options.synchronous_full ? "FULL" : "NORMAL");
    char *msg = NULL;
    if (sqlite3_exec(lite, pragmas, NULL, NULL, &msg) != SQLITE_OK) {
        medic_error_set(err, MEDIC_E_STORE, "cannot set the audit database up: %s",
                        msg ? msg : sqlite3_errmsg(lite));
        sqlite3_free(msg);
        return MEDIC_E_STORE;
    }
    int rc = audit_lite_migrate(lite, err);
    if (rc)
        return rc;
    /* without the syncer, SQLite checkpoints in the writer's commits
     * (its default of 1000 pages) */
    sqlite3_wal_autocheckpoint(lite, AUDIT_CHECKPOINT_PAGES);
    /* with the gathering VFS, commits leave their sync to the syncer
     * thread, and the checkpoints to checkpoint() and the checkpointer */
    if (vfs && s->options.defer_syncs) {
        l->deferring = 1;
        sqlite3_wal_hook(lite, on_wal, l);
    }
    if ((rc = audit__firsts_load(&l->firsts, lite, err)))
        return rc;
    if (!(s->db = audit_lite_db(lite)))
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return 0;
}

static void lite_close(struct audit_store *s)
{
    struct lite_store *l = LITE_STORE(s);
    db_free(s->db);
    if (l) {
        audit__firsts_release(&l->firsts);
        sqlite3_close(l->conn);
    }
    free(l);
    s->state = NULL;
}

static int lite_start(struct audit_store *s, const char *path, struct medic_error *err)
{
    struct lite_store *l = LITE_STORE(s);
    if (!l->deferring)
        return 0;
    if (audit__syncer_start(s))
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the audit syncer thread");
    l->syncer_up = 1;
    if (audit__checkpointer_start(s, path))
        return medic_error_set(err, MEDIC_E_STORE, "cannot start the audit checkpointer on '%s'",
                               path);
    return 0;
}

static void lite_stop(struct audit_store *s)
{
    struct lite_store *l = LITE_STORE(s);
    if (l->syncer_up)
        audit__syncer_stop(s);
    l->syncer_up = 0;
    audit__checkpointer_stop(s);
}

static void lite_start_writer(struct audit_store *s)
{
    audit_wal_defer_syncs(LITE_STORE(s)->deferring);
}

/* In each write transaction, before its rows: the first notifications
 * another process stored since the last one, listed for the duplicate
 * check. */
static int lite_guard(struct audit_store *s, struct job *batch, struct medic_error *err)
{
    (void)batch;
    struct lite_store *l = LITE_STORE(s);
    return audit__firsts_catch_up(&l->firsts, l->conn, err);
}

/* A notification's row: a duplicate of the first stored with its key,
 * else a first, then listed. */
static int lite_insert_notification(struct audit_store *s, struct job *job, int64_t *id,
                                    int64_t *first)
{
    struct lite_store *l = LITE_STORE(s);
    const struct prepared_notification *p = job->prepared;
    int rc =
        audit__firsts_find(&l->firsts, l->conn, p->dedupe_prefix, p->dedupe_key, first, &job->err);
    if (rc == 0)
        rc = audit__insert_notification_row(s, job, *first, id);
    if (rc == 0 && !*first && audit__firsts_add(&l->firsts, p->dedupe_prefix, *id))
        rc = medic_error_set(&job->err, MEDIC_E_NOMEM,
                             "out of memory listing the notification for duplicate checks");
    return rc;
}

static struct job *lite_before_commit(struct audit_store *s, struct job *batch)
{
    return LITE_STORE(s)->deferring ? audit__gather_more(s, batch, audit__syncer_busy) : NULL;
}

/* After a commit whose sync was left to the syncer: the checkpointer
 * thread copies the WAL's pages while the writer goes on (checkpointer.c).
 * Only when the WAL must start again under a load that never pauses does
 * the writer copy the pages left itself, with the WAL synced first by
 * SQLite (a checkpoint copies only what is on disk); its next transaction
 * then starts the WAL again from its beginning. */
static void checkpoint(struct audit_store *s)
{
    struct lite_store *l = LITE_STORE(s);
    if (l->wal_frames < AUDIT_CHECKPOINT_PAGES || !audit__checkpointer_ask(s, l->wal_frames))
        return;
    audit_wal_defer_syncs(0);
    int rc = sqlite3_wal_checkpoint_v2(l->conn, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    audit_wal_defer_syncs(1);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        medic_log_warn("audit checkpoint failed", "error", sqlite3_errmsg(l->conn), NULL);
    l->wal_frames = 0;
    medic_mutex_lock(&s->lock);
    s->stats.checkpoints_finished++;
    medic_mutex_unlock(&s->lock);
}

static void lite_finish(struct audit_store *s, struct job *batch, int rc,
                        const struct medic_error *err, int64_t start)
{
    int deferring = LITE_STORE(s)->deferring;
    int fd = deferring ? audit_wal_take_deferred() : -1;
    if (rc == 0 && deferring) {
        checkpoint(s);
        audit__syncer_hand(s, batch, fd, start);
        return;
    }
    audit__complete_batch(s, batch, rc, err, start);
}

static int lite_open_reader(const char *path, void **conn, struct db **db, struct medic_error *err)
{
    sqlite3 *lite = NULL;
    int opened = sqlite3_open_v2(path, &lite, SQLITE_OPEN_READONLY, NULL);
    *conn = lite;
    if (opened != SQLITE_OK && access(path, F_OK) != 0 && errno == ENOENT)
        return medic_error_set(err, MEDIC_E_STORE,
                               "no audit database at '%s' (medic serve creates it at its "
                               "audit.path; --db names another file or a postgresql:// URL)",
                               path);
    if (opened != SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "cannot open audit database '%s': %s", path,
                               lite ? sqlite3_errmsg(lite) : "out of memory");
    sqlite3_busy_timeout(lite, AUDIT_DEFAULT_BUSY_TIMEOUT_MS);
    int version = (int)audit_lite_int(lite, "PRAGMA user_version", -1);
    if (version <= 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "'%s' is not a medic audit database (%s); pass the --db that medic "
                               "serve writes",
                               path, version < 0 ? sqlite3_errmsg(lite) : "no medic schema");
    int rc = audit__readable_version(version, err);
    if (rc == 0 && !(*db = audit_lite_db(lite)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

/* A log opened to write rows into it from outside the daemon (an archive
 * file, or the live log an archive takes rows out of): created with the
 * newest schema when new, else brought up to date; its references checked,
 * and a daemon's writer waited for. */
static int lite_open_target(const char *path, void **conn, struct db **db, struct medic_error *err)
{
    sqlite3 *lite = NULL;
    int opened = sqlite3_open_v2(path, &lite, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    *conn = lite;
    if (opened != SQLITE_OK) {
        char why[320];
        return medic_error_set(err, MEDIC_E_STORE, "cannot open audit database '%s': %s", path,
                               why_not_opened(path, lite, why, sizeof(why)));
    }
    sqlite3_busy_timeout(lite, 30000);
    char *msg = NULL;
    if (sqlite3_exec(lite, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON", NULL, NULL,
                     &msg) != SQLITE_OK) {
        medic_error_set(err, MEDIC_E_STORE, "cannot set the audit database up: %s",
                        msg ? msg : sqlite3_errmsg(lite));
        sqlite3_free(msg);
        return MEDIC_E_STORE;
    }
    int rc = audit_lite_migrate(lite, err);
    if (rc == 0 && !(*db = audit_lite_db(lite)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

static void lite_close_reader(void *conn, struct db *db)
{
    db_free(db);
    sqlite3_close(conn);
}

static void lite_library_init(void)
{
    /* no allocation statistics, which take a global mutex per allocation */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static void lite_library_version(struct medic_buf *out)
{
    medic_buf_printf(out, "  sqlite:         %s\n", sqlite3_libversion());
}

const struct audit_backend audit_backend_sqlite = {
    .name = "sqlite",
    .schemes = NULL,
    .shared = 0,
    .returning_id = "",
    .sql_types = {[SCHEMA_ID] = "INTEGER PRIMARY KEY",
                  [SCHEMA_KEY] = "INTEGER PRIMARY KEY",
                  [SCHEMA_INT] = "INTEGER",
                  [SCHEMA_REAL] = "REAL",
                  [SCHEMA_TEXT] = "TEXT",
                  [SCHEMA_BLOB] = "BLOB",
                  [SCHEMA_TIMESTAMP] = "TEXT"},
    .json_text = {"json_extract(", ", '$.", "')"},
    .library_init = lite_library_init,
    .library_version = lite_library_version,
    .open = lite_open,
    .close = lite_close,
    .start = lite_start,
    .stop = lite_stop,
    .start_writer = lite_start_writer,
    .before_commit = lite_before_commit,
    .finish = lite_finish,
    .guard = lite_guard,
    .insert_notification = lite_insert_notification,
    .insert_alerts = audit__insert_alerts_each,
    .insert_decisions = audit__insert_decisions_each,
    .insert_changes = audit__insert_changes_each,
    .mark_evaluated = audit__mark_evaluated_each,
    .open_reader = lite_open_reader,
    .close_reader = lite_close_reader,
    .open_target = lite_open_target,
    .free_db = lite_free,
    .exec = lite_exec,
    .exec_later = lite_exec,
    .lock_session = lite_no_lock,
    .unlock_session = lite_no_lock,
    .begin = lite_begin,
    .begin_snapshot = lite_begin_snapshot,
    .commit = lite_commit,
    .rollback = lite_rollback,
    .last_insert_id = lite_last_insert_id,
    .prepare = lite_prepare,
    .bind_int64 = lite_bind_int64,
    .bind_text_len = lite_bind_text_len,
    .bind_double = lite_bind_double,
    .bind_blob = lite_bind_blob,
    .step = lite_step,
    .column_count = lite_column_count,
    .column_name = lite_column_name,
    .column_type = lite_column_type,
    .column_int64 = lite_column_int64,
    .column_double = lite_column_double,
    .column_text = lite_column_text,
    .column_bytes = lite_column_bytes,
    .column_blob = lite_column_blob,
    .reset = lite_reset,
    .clear = lite_clear,
    .finalize = lite_finalize,
};

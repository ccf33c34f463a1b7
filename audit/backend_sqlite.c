/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite backend (backend.h): a file one medic writes, in WAL mode at
 * synchronous=FULL. Through the gathering VFS (wal_gather.h) a commit
 * leaves its WAL sync to the syncer thread (syncer.c), which completes the
 * batches once it is done while the writer takes the next requests into
 * its open transaction; the checkpointer thread (checkpointer.c) copies
 * the WAL into the database. Rows are written one by one, in the process. */
#include "backend.h"
#include "log.h"
#include "schema.h"
#include "timeutil.h"
#include "wal_gather.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int on_wal(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    ((struct audit_store *)arg)->wal_frames = frames;
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
    sqlite3 *lite = NULL;
    int opened = sqlite3_open_v2(
        path, &lite, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
    s->conn = lite;
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
    int rc = audit_schema_migrate(lite, err);
    if (rc)
        return rc;
    /* without the syncer, SQLite checkpoints in the writer's commits
     * (its default of 1000 pages) */
    sqlite3_wal_autocheckpoint(lite, AUDIT_CHECKPOINT_PAGES);
    /* with the gathering VFS, commits leave their sync to the syncer
     * thread, and the checkpoints to checkpoint() and the checkpointer */
    if (vfs && s->options.defer_syncs) {
        s->deferring = 1;
        sqlite3_wal_hook(lite, on_wal, s);
    }
    if (!(s->db = db_over_sqlite(lite)))
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return 0;
}

static void lite_close(struct audit_store *s)
{
    db_free(s->db);
    sqlite3_close(s->conn);
}

static int lite_start(struct audit_store *s, const char *path, struct medic_error *err)
{
    if (!s->deferring)
        return 0;
    if (audit__syncer_start(s))
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the audit syncer thread");
    s->syncer_up = 1;
    if (audit__checkpointer_start(s, path))
        return medic_error_set(err, MEDIC_E_STORE, "cannot start the audit checkpointer on '%s'",
                               path);
    return 0;
}

static void lite_stop(struct audit_store *s)
{
    if (s->syncer_up)
        audit__syncer_stop(s);
    s->syncer_up = 0;
    audit__checkpointer_stop(s);
}

static void lite_start_writer(struct audit_store *s)
{
    audit_wal_defer_syncs(s->deferring);
}

static struct job *lite_before_commit(struct audit_store *s, struct job *batch)
{
    return s->deferring ? audit__gather_more(s, batch) : NULL;
}

/* After a commit whose sync was left to the syncer: the checkpointer
 * thread copies the WAL's pages while the writer goes on (checkpointer.c).
 * Only when the WAL must start again under a load that never pauses does
 * the writer copy the pages left itself, with the WAL synced first by
 * SQLite (a checkpoint copies only what is on disk); its next transaction
 * then starts the WAL again from its beginning. */
static void checkpoint(struct audit_store *s)
{
    if (s->wal_frames < AUDIT_CHECKPOINT_PAGES || !audit__checkpointer_ask(s, s->wal_frames))
        return;
    audit_wal_defer_syncs(0);
    int rc = sqlite3_wal_checkpoint_v2(s->conn, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    audit_wal_defer_syncs(1);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        medic_log_warn("audit checkpoint failed", "error", sqlite3_errmsg(s->conn), NULL);
    s->wal_frames = 0;
    medic_mutex_lock(&s->lock);
    s->stats.checkpoints_finished++;
    medic_mutex_unlock(&s->lock);
}

static void lite_finish(struct audit_store *s, struct job *batch, int rc,
                        const struct medic_error *err, int64_t start)
{
    int fd = s->deferring ? audit_wal_take_deferred() : -1;
    if (rc == 0 && s->deferring) {
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
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(lite, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version <= 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "'%s' is not a medic audit database (%s); pass the --db that medic "
                               "serve writes",
                               path, version < 0 ? sqlite3_errmsg(lite) : "no medic schema");
    int rc = audit__readable_version(version, err);
    if (rc == 0 && !(*db = db_over_sqlite(lite)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

static void lite_close_reader(void *conn, struct db *db)
{
    db_free(db);
    sqlite3_close(conn);
}

const struct audit_backend audit_backend_sqlite = {
    .name = "sqlite",
    .shared = 0,
    .returning_id = "",
    .open = lite_open,
    .close = lite_close,
    .start = lite_start,
    .stop = lite_stop,
    .start_writer = lite_start_writer,
    .before_commit = lite_before_commit,
    .finish = lite_finish,
    .insert_notification = audit__insert_notification_looked_up,
    .insert_alerts = audit__insert_alerts_each,
    .insert_decisions = audit__insert_decisions_each,
    .insert_changes = audit__insert_changes_each,
    .mark_evaluated = audit__mark_evaluated_each,
    .open_reader = lite_open_reader,
    .close_reader = lite_close_reader,
};

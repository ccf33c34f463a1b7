/* SPDX-License-Identifier: Apache-2.0 */
/* The checkpointer thread: copies the WAL's pages into the database on a
 * connection of its own, while the writer goes on committing.
 *
 * A checkpoint of the audit log copies some 1,000 pages and syncs the
 * WAL and the database file: milliseconds in which a writer that ran it
 * itself would commit nothing, and every request waiting on it would wait
 * that much longer. The writer only asks (audit__checkpointer_ask) and
 * this thread copies what is committed by then. The WAL starts again from
 * its beginning where a transaction begins with every frame copied, as
 * one does whenever the writer pauses; under a load that never lets it,
 * the writer copies the last pages itself once the WAL is past its size
 * (audit__ckpt_plan_next), a short pause, and the WAL stays bounded.
 * Private to audit/. */
#include "log.h"
#include "lock.h"
#include "sqlite.h"

#include <stdlib.h>

/* Runs of one checkpoint at most, and the frames a run copies below
 * which another would gain little. */
#define CKPT_RUNS 4
#define CKPT_FEW 64

static void *checkpointer_main(void *arg)
{
    struct audit_store *s = arg;
    struct lite_store *l = LITE_STORE(s);
    pthread_setname_np(pthread_self(), "medic-ckpt");
    medic_mutex_lock(&s->lock);
    for (;;) {
        while (!l->ckpt_plan.running && !l->ckpt_stopping)
            medic_cond_wait(&l->ckpt_work, &s->lock);
        if (l->ckpt_stopping)
            break;
        medic_mutex_unlock(&s->lock);
        /* PASSIVE: copies what no reader still needs, never waits on one.
         * Again while the run before copied many pages: the writer commits
         * more meanwhile, and what is left when this thread is done is what
         * the writer may have to copy with its commits waiting */
        int ran = 0, before = -1; /* frames copied in all after the run before */
        for (int run = 0; run < CKPT_RUNS; run++) {
            int frames = 0, done = 0;
            int rc = sqlite3_wal_checkpoint_v2(l->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames,
                                               &done);
            if (rc != SQLITE_OK && rc != SQLITE_BUSY)
                medic_log_warn("audit checkpoint failed", "error", sqlite3_errmsg(l->ckpt_db),
                               NULL);
            if (rc != SQLITE_OK)
                break;
            ran = 1;
            if (before >= 0 && done - before < CKPT_FEW)
                break;
            before = done;
        }
        /* SQLite syncs the database file only after a run that reached the
         * WAL's end, which the writer's commits rarely let one do: synced
         * here, the pages copied are not left to the writer's sync */
        sqlite3_file *db = NULL;
        if (ran &&
            sqlite3_file_control(l->ckpt_db, "main", SQLITE_FCNTL_FILE_POINTER, &db) == SQLITE_OK &&
            db && db->pMethods && db->pMethods->xSync(db, SQLITE_SYNC_NORMAL) != SQLITE_OK)
            medic_log_warn("audit checkpoint failed", "error", "cannot sync the database file",
                           NULL);
        medic_mutex_lock(&s->lock);
        l->ckpt_plan.running = 0;
        s->stats.checkpoints_copied++;
    }
    medic_mutex_unlock(&s->lock);
    return NULL;
}

int audit__checkpointer_start(struct audit_store *s, const char *path)
{
    struct lite_store *l = LITE_STORE(s);
    if (sqlite3_open_v2(path, &l->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(l->ckpt_db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_close(l->ckpt_db);
        l->ckpt_db = NULL;
        return MEDIC_E_STORE;
    }
    pthread_cond_init(&l->ckpt_work, NULL);
    if (pthread_create(&l->checkpointer, NULL, checkpointer_main, s) != 0) {
        pthread_cond_destroy(&l->ckpt_work);
        sqlite3_close(l->ckpt_db);
        l->ckpt_db = NULL;
        return MEDIC_E_NOMEM;
    }
    return 0;
}

enum ckpt_step audit__ckpt_plan_next(struct ckpt_plan *p, int frames)
{
    if (frames < p->asked_at) { /* the WAL started again */
        p->asked_at = 0;
        p->catch_ups = 0;
    }
    if (p->running)
        return CKPT_WAIT;
    /* past the WAL's size the checkpointer is asked for less at a time,
     * until what it leaves is little, twice at most */
    int restart = frames >= AUDIT_WAL_RESTART_PAGES;
    int left = frames - p->asked_at; /* committed since it was last asked */
    if (restart && (left < AUDIT_CATCH_UP_PAGES || p->catch_ups >= 2))
        return CKPT_FINISH;
    if (left < (restart ? AUDIT_CATCH_UP_PAGES : AUDIT_CHECKPOINT_PAGES))
        return CKPT_WAIT;
    p->running = 1;
    p->asked_at = frames;
    p->catch_ups += restart;
    return CKPT_ASK;
}

int audit__checkpointer_ask(struct audit_store *s, int frames)
{
    struct lite_store *l = LITE_STORE(s);
    medic_mutex_lock(&s->lock);
    enum ckpt_step step = audit__ckpt_plan_next(&l->ckpt_plan, frames);
    if (step == CKPT_ASK)
        pthread_cond_signal(&l->ckpt_work);
    medic_mutex_unlock(&s->lock);
    return step == CKPT_FINISH;
}

void audit__checkpointer_stop(struct audit_store *s)
{
    struct lite_store *l = LITE_STORE(s);
    if (!l->ckpt_db)
        return;
    medic_mutex_lock(&s->lock);
    l->ckpt_stopping = 1;
    pthread_cond_signal(&l->ckpt_work);
    medic_mutex_unlock(&s->lock);
    pthread_join(l->checkpointer, NULL);
    pthread_cond_destroy(&l->ckpt_work);
    sqlite3_close(l->ckpt_db);
    l->ckpt_db = NULL;
}

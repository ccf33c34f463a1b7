/* SPDX-License-Identifier: Apache-2.0 */
/* The syncer thread: makes committed batches durable and completes them.
 *
 * With SQLite at synchronous=FULL the writer's commit writes the WAL and
 * leaves its fdatasync here (wal_gather.h); the writer starts the next
 * batch at once, and keeps adding requests to it while a sync is in
 * flight, committing it when the sync is done. So the disk's sync and the
 * CPU's inserts overlap, and a batch is as large as the time one sync
 * takes lets it grow. No request is answered before a sync that began
 * after its commit: an answer still means on disk. */
#include "log.h"
#include "lock.h"
#include "sqlite.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* fdatasync(fd) unless fd is -1; an error (logged) in err. */
static int sync_wal(int fd, struct medic_error *err)
{
    if (fd < 0 || fdatasync(fd) == 0)
        return 0;
    int rc =
        medic_error_set(err, MEDIC_E_STORE, "cannot sync the audit log's WAL: %s", strerror(errno));
    medic_log_error("audit commit failed", "error", err->msg, NULL);
    return rc;
}

static void *syncer_main(void *arg)
{
    struct audit_store *s = arg;
    struct lite_store *l = LITE_STORE(s);
    pthread_setname_np(pthread_self(), "medic-sync");
    medic_mutex_lock(&s->lock);
    for (;;) {
        while (!l->to_sync && !l->syncer_stopping)
            medic_cond_wait(&l->synced_work, &s->lock);
        if (!l->to_sync)
            break;
        struct synced *list = l->to_sync;
        l->to_sync = l->to_sync_tail = NULL;
        l->syncing = 1;
        medic_mutex_unlock(&s->lock);
        /* one sync for every batch handed meanwhile: the newest WAL's
         * descriptor (a WAL file is the same for the connection's life) */
        int fd = -1;
        for (struct synced *b = list; b; b = b->next)
            if (b->fd >= 0)
                fd = b->fd;
        struct medic_error err = {0};
        int rc = sync_wal(fd, &err);
        medic_mutex_lock(&s->lock);
        l->syncing = 0;
        pthread_cond_signal(&s->work); /* the writer commits what it gathered */
        medic_mutex_unlock(&s->lock);
        for (struct synced *b = list, *next; b; b = next) {
            next = b->next;
            audit__complete_batch(s, b->batch, rc, &err, b->start);
            free(b);
        }
        medic_mutex_lock(&s->lock);
    }
    medic_mutex_unlock(&s->lock);
    return NULL;
}

int audit__syncer_start(struct audit_store *s)
{
    struct lite_store *l = LITE_STORE(s);
    pthread_cond_init(&l->synced_work, NULL);
    if (pthread_create(&l->syncer, NULL, syncer_main, s) != 0) {
        pthread_cond_destroy(&l->synced_work);
        l->deferring = 0;
        return MEDIC_E_NOMEM;
    }
    return 0;
}

void audit__syncer_hand(struct audit_store *s, struct job *batch, int fd, int64_t start)
{
    struct lite_store *l = LITE_STORE(s);
    struct synced *b = malloc(sizeof(*b));
    if (!b) { /* memory is short: synced here (which covers every commit before) */
        struct medic_error err = {0};
        int rc = sync_wal(fd, &err);
        audit__complete_batch(s, batch, rc, &err, start);
        return;
    }
    *b = (struct synced){batch, fd, start, NULL};
    medic_mutex_lock(&s->lock);
    if (l->to_sync_tail)
        l->to_sync_tail->next = b;
    else
        l->to_sync = b;
    l->to_sync_tail = b;
    pthread_cond_signal(&l->synced_work);
    medic_mutex_unlock(&s->lock);
}

void audit__syncer_stop(struct audit_store *s)
{
    struct lite_store *l = LITE_STORE(s);
    medic_mutex_lock(&s->lock);
    l->syncer_stopping = 1;
    pthread_cond_signal(&l->synced_work);
    medic_mutex_unlock(&s->lock);
    pthread_join(l->syncer, NULL);
    pthread_cond_destroy(&l->synced_work);
}

int audit__syncer_busy(const struct audit_store *s)
{
    const struct lite_store *l = s->state;
    return l->syncing || l->to_sync;
}

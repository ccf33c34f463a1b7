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
#include "store_internal.h"

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
    pthread_setname_np(pthread_self(), "medic-sync");
    medic_mutex_lock(&s->lock);
    for (;;) {
        while (!s->to_sync && !s->syncer_stopping)
            medic_cond_wait(&s->synced_work, &s->lock);
        if (!s->to_sync)
            break;
        struct synced *list = s->to_sync;
        s->to_sync = s->to_sync_tail = NULL;
        s->syncing = 1;
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
        s->syncing = 0;
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
    pthread_cond_init(&s->synced_work, NULL);
    if (pthread_create(&s->syncer, NULL, syncer_main, s) != 0) {
        pthread_cond_destroy(&s->synced_work);
        s->deferring = 0;
        return MEDIC_E_NOMEM;
    }
    return 0;
}

void audit__syncer_hand(struct audit_store *s, struct job *batch, int fd, int64_t start)
{
    struct synced *b = malloc(sizeof(*b));
    if (!b) { /* memory is short: synced here (which covers every commit before) */
        struct medic_error err = {0};
        int rc = sync_wal(fd, &err);
        audit__complete_batch(s, batch, rc, &err, start);
        return;
    }
    *b = (struct synced){batch, fd, start, NULL};
    medic_mutex_lock(&s->lock);
    if (s->to_sync_tail)
        s->to_sync_tail->next = b;
    else
        s->to_sync = b;
    s->to_sync_tail = b;
    pthread_cond_signal(&s->synced_work);
    medic_mutex_unlock(&s->lock);
}

void audit__syncer_stop(struct audit_store *s)
{
    medic_mutex_lock(&s->lock);
    s->syncer_stopping = 1;
    pthread_cond_signal(&s->synced_work);
    medic_mutex_unlock(&s->lock);
    pthread_join(s->syncer, NULL);
    pthread_cond_destroy(&s->synced_work);
}

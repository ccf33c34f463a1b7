/* SPDX-License-Identifier: Apache-2.0 */
#include "backend.h"
#include "lock.h"
#include "buf.h"
#include "log.h"
#include "timeutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Most requests one transaction takes; more wait for the next one. */
#define AUDIT_MAX_BATCH 512

void audit_options_default(struct audit_options *options)
{
    options->max_pending = AUDIT_DEFAULT_MAX_PENDING;
    options->busy_timeout_ms = AUDIT_DEFAULT_BUSY_TIMEOUT_MS;
    options->synchronous_full = 1;
    options->defer_syncs = 1;
    options->notification_writers = AUDIT_WRITERS_AUTO;
}

/* Notification writers of their own where the backend takes them: as
 * asked, or a quarter of the machine's cores (at most 4): on a small
 * machine the database's CPU is the limit, and smaller batches on more
 * connections only cost more. */
static size_t lanes_wanted(const struct audit_store *s)
{
    if (!s->backend->parallel_notifications)
        return 0;
    if (s->options.notification_writers != AUDIT_WRITERS_AUTO)
        return s->options.notification_writers;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 4 ? 0 : cores >= 16 ? 4 : (size_t)(cores / 4);
}

/* Tries a batch this many times when PostgreSQL gives up a lock wait or
 * breaks a deadlock (two replicas storing the same keys in other orders). */
#define AUDIT_BATCH_TRIES 4

int audit__job_chains(const struct job *j)
{
    return j->kind != JOB_NOTIFICATION && j->kind != JOB_LEASE && j->kind != JOB_APPROVAL &&
           j->kind != JOB_PAUSE && j->kind != JOB_RELEASE;
}

int audit__job_fenced(const struct job *j)
{
    return j->kind == JOB_EVALUATION || j->kind == JOB_DECISION || j->kind == JOB_LEASE ||
           (j->kind == JOB_ACTION && ((const struct audit_action_in *)j->in)->intent_id <= 0);
}

/* Takes up to max (at least 1) queued requests off the non-empty queue,
 * under the lock: the first, with the last in *last and their number in
 * *n (either may be NULL). */
static struct job *take_queued(struct audit_store *s, size_t max, struct job **last, size_t *n)
{
    struct job *first = s->head, *end = first;
    size_t k = 1;
    while (end->next && k < max) {
        end = end->next;
        k++;
    }
    s->head = end->next;
    if (!s->head)
        s->tail = NULL;
    end->next = NULL;
    s->pending -= k;
    if (last)
        *last = end;
    if (n)
        *n = k;
    return first;
}

/* The open transaction commits once the sync before is done, so that a
 * sync carries everything that waited for it. */
struct job *audit__gather_more(struct audit_store *s, struct job *batch,
                               int (*busy)(const struct audit_store *s))
{
    struct job *last = batch;
    size_t n = 1;
    for (; last->next; last = last->next)
        n++;
    medic_mutex_lock(&s->lock);
    while (busy(s) && n < AUDIT_MAX_BATCH) {
        if (!s->head) {
            if (s->stopping)
                break;
            medic_cond_wait(&s->work, &s->lock);
            continue;
        }
        size_t k;
        struct job *end, *more = take_queued(s, AUDIT_MAX_BATCH - n, &end, &k);
        medic_mutex_unlock(&s->lock);
        last->next = more;
        last = end;
        n += k;
        for (struct job *j = more; j; j = j->next)
            if ((j->rc = audit__run_job(s, j)))
                return j;
        medic_mutex_lock(&s->lock);
    }
    medic_mutex_unlock(&s->lock);
    return NULL;
}

/* One transaction for the whole batch. A request that fails (a unique
 * constraint: the same action intent twice) rolls the transaction back
 * and the batch runs again without it, so that it leaves nothing behind
 * while the others commit; failures are rare, and a savepoint per request
 * instead cost every request a copy of each page it touched. A failure of
 * the database itself (disk full, I/O, a lost connection) fails the whole
 * batch; a deadlock or a lock wait given up runs it again. */
static void run_batch(struct audit_store *s, struct job *batch)
{
    int64_t start = medic_time_monotonic();
    struct medic_error err = {0};
    int rc, tries = 0;
    /* the batch's notifications in a few statements where the backend can,
     * unless that failed once: then job by job, which finds the one at
     * fault */
    const struct audit_backend *b = s->backend;
    int together = b->write_together != NULL;
    for (;;) {
        for (struct job *j = batch; j; j = j->next)
            j->written = 0;
        if ((rc = db_begin(s->db, &err)))
            break;
        memset(s->chain_head, 0, sizeof(s->chain_head)); /* another writer may have moved them */
        if (b->guard && (rc = b->guard(s, batch, &err))) {
            db_rollback(s->db);
            break;
        }
        if (together) {
            struct medic_error why = {0};
            if (b->write_together(s, batch, &why)) {
                medic_log_warn("cannot write the batch's notifications together; writing them "
                               "one by one",
                               "error", why.msg, NULL);
                db_rollback(s->db);
                together = 0;
                continue;
            }
        }
        struct job *bad = NULL;
        for (struct job *j = batch; j && !bad; j = j->next)
            if (!j->left_out && !j->written && (j->rc = audit__run_job(s, j)))
                bad = j;
        if (!bad && b->before_commit)
            bad = b->before_commit(s, batch);
        if (!bad) {
            rc = db_commit(s->db, &err);
            if (rc && db_last_failure(s->db) == DB_FAIL_RETRY && ++tries < AUDIT_BATCH_TRIES)
                continue;
            break;
        }
        enum db_failure why = db_last_failure(s->db);
        int unique = bad->rc == MEDIC_E_STORE && why == DB_FAIL_UNIQUE;
        db_rollback(s->db);
        for (struct job *j = batch; j; j = j->next)
            if (j->rc == MEDIC_E_FENCED) /* checked again in the next try */
                j->left_out = 0;
        if (bad->rc == MEDIC_E_STORE && why == DB_FAIL_RETRY && ++tries < AUDIT_BATCH_TRIES)
            continue;
        if (bad->rc == MEDIC_E_STORE && !unique) {
            rc = bad->rc;
            err = bad->err;
            break;
        }
        if (unique)
            bad->err.code = MEDIC_E_INVALID;
        bad->left_out = 1;
    }
    b->finish(s, batch, rc, &err, start);
}

static void *writer_main(void *arg)
{
    struct audit_store *s = arg;
    pthread_setname_np(pthread_self(), "medic-audit");
    if (s->backend->start_writer)
        s->backend->start_writer(s);
    medic_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping)
            medic_cond_wait(&s->work, &s->lock);
        if (!s->head && s->stopping)
            break;
        struct job *batch = take_queued(s, AUDIT_MAX_BATCH, NULL, NULL);
        medic_mutex_unlock(&s->lock);
        run_batch(s, batch);
        medic_mutex_lock(&s->lock);
    }
    medic_mutex_unlock(&s->lock);
    return NULL;
}

/* Queues job under the lock; refuses when closing or full. */
static int enqueue_locked(struct audit_store *s, struct job *job, struct medic_error *err)
{
    if (s->stopping)
        return medic_error_set(err, MEDIC_E_CLOSED, "the audit log is closing");
    if (s->pending >= s->options.max_pending)
        return medic_error_set(err, MEDIC_E_BUSY, "the audit queue is full (%zu requests)",
                               s->options.max_pending);
    job->next = NULL;
    if (s->tail)
        s->tail->next = job;
    else
        s->head = job;
    s->tail = job;
    s->pending++;
    pthread_cond_signal(&s->work);
    return 0;
}

static int submit(struct audit_store *s, struct job *job, struct medic_error *err)
{
    pthread_cond_init(&job->cond, NULL);
    medic_mutex_lock(&s->lock);
    int rc = enqueue_locked(s, job, err);
    if (rc) {
        medic_mutex_unlock(&s->lock);
        pthread_cond_destroy(&job->cond);
        return rc;
    }
    while (!job->done)
        medic_cond_wait(&job->cond, &s->lock);
    medic_mutex_unlock(&s->lock);
    pthread_cond_destroy(&job->cond);
    if (job->rc && err) {
        *err = job->err;
        if (err->code == 0)
            err->code = job->rc;
    }
    return job->rc;
}

/* The writer that stores a notification: one of the lanes, the same for
 * every notification of an Alertmanager group (so that a group's
 * notifications are committed, and handed to the engine, in the order they
 * came), else the store's own. */
static struct audit_store *lane_for(struct audit_store *store,
                                    const struct audit_notification_in *in)
{
    if (!store->lane_count)
        return store;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *c = in->notification->group_key; c && *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return store->lanes[h % store->lane_count];
}

int audit_record_notification(struct audit_store *store, const struct audit_notification_in *in,
                              struct audit_notification_result *out, struct medic_error *err)
{
    struct prepared_notification prep;
    if (audit__prepare_notification(in, &prep)) {
        audit__prepared_release(&prep);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    struct job job = {.kind = JOB_NOTIFICATION, .in = in, .prepared = &prep, .out = out};
    int rc = submit(lane_for(store, in), &job, err);
    audit__prepared_release(&prep);
    return rc;
}

int audit_record_evaluation(struct audit_store *store, const struct audit_evaluation_in *in,
                            int64_t *decision_ids, struct medic_error *err)
{
    struct job job = {.kind = JOB_EVALUATION, .in = in, .out = decision_ids};
    return submit(store, &job, err);
}

int audit_record_notification_async(struct audit_store *store,
                                    const struct audit_notification_in *in,
                                    struct audit_notification_result *out, audit_done_fn done,
                                    void *arg, struct medic_error *err)
{
    struct job *job = calloc(1, sizeof(*job));
    if (!job)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (audit__prepare_notification(in, &job->owned_prep)) {
        audit__prepared_release(&job->owned_prep);
        free(job);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    job->kind = JOB_NOTIFICATION;
    job->in = in;
    job->prepared = &job->owned_prep;
    job->out = out;
    job->done_fn = done;
    job->done_arg = arg;
    struct audit_store *lane = lane_for(store, in);
    medic_mutex_lock(&lane->lock);
    int rc = enqueue_locked(lane, job, err);
    medic_mutex_unlock(&lane->lock);
    if (rc) {
        audit__prepared_release(&job->owned_prep);
        free(job);
    }
    return rc;
}

int audit_record_decision(struct audit_store *store, const struct audit_decision_in *in,
                          int64_t *out_id, struct medic_error *err)
{
    struct job job = {.kind = JOB_DECISION, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

int audit_record_approval(struct audit_store *store, const struct audit_approval_in *in,
                          int64_t *out_id, struct medic_error *err)
{
    struct job job = {.kind = JOB_APPROVAL, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

int audit_record_pause(struct audit_store *store, const struct audit_pause_in *in, int64_t *out_id,
                       struct medic_error *err)
{
    struct job job = {.kind = JOB_PAUSE, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

int audit_record_release(struct audit_store *store, const struct audit_release_in *in,
                         int64_t *out_id, struct medic_error *err)
{
    struct job job = {.kind = JOB_RELEASE, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

int audit_record_action(struct audit_store *store, const struct audit_action_in *in,
                        int64_t *out_id, struct medic_error *err)
{
    struct job job = {.kind = JOB_ACTION, .in = in};
    int rc = submit(store, &job, err);
    if (rc == 0 && out_id)
        *out_id = job.id;
    return rc;
}

int audit_store_check_lease(struct audit_store *store, struct medic_error *err)
{
    if (!store->backend->shared) /* one process owns the log */
        return 0;
    struct job job = {.kind = JOB_LEASE};
    return submit(store, &job, err);
}

void audit_store_stats(struct audit_store *store, struct audit_stats *out)
{
    medic_mutex_lock(&store->lock);
    *out = store->stats;
    out->queue_depth = store->pending;
    out->max_pending = store->options.max_pending;
    medic_mutex_unlock(&store->lock);
    for (size_t i = 0; i < store->lane_count; i++) {
        struct audit_store *l = store->lanes[i];
        medic_mutex_lock(&l->lock);
        const struct audit_stats *st = &l->stats;
        out->commits += st->commits;
        out->commit_failures += st->commit_failures;
        out->requests_committed += st->requests_committed;
        for (int b = 0; b < AUDIT_COMMIT_BUCKETS; b++)
            out->commit_bucket_counts[b] += st->commit_bucket_counts[b];
        out->commit_seconds_sum += st->commit_seconds_sum;
        out->unhealthy |= st->unhealthy;
        out->queue_depth += l->pending;
        out->max_pending += l->options.max_pending;
        medic_mutex_unlock(&l->lock);
    }
}

void audit_store_set_term(struct audit_store *store, const char *replica, int64_t epoch)
{
    medic_mutex_lock(&store->lock);
    snprintf(store->replica, sizeof(store->replica), "%s", replica ? replica : "");
    store->epoch = epoch;
    medic_mutex_unlock(&store->lock);
}

static void close_db(struct audit_store *s)
{
    for (int i = 0; i < ST_COUNT; i++)
        db_finalize(s->stmts[i]);
    s->backend->close(s);
}

/* One writer: its connection, its statements, its backend's threads and
 * its thread. */
static int open_writer(const char *location, const struct audit_options *options,
                       struct audit_store **out, struct medic_error *err)
{
    struct audit_store *s = calloc(1, sizeof(*s));
    if (!s)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (options)
        s->options = *options;
    else
        audit_options_default(&s->options);
    medic_mutex_init(&s->lock, MEDIC_LOCK_AUDIT_STORE);
    pthread_cond_init(&s->work, NULL);
    s->backend = audit__backend_for(location);
    int rc = s->backend->open(s, location, err);
    if (rc == 0)
        rc = audit__prepare_all(s, err);
    int started = rc == 0 && s->backend->start;
    if (started)
        rc = s->backend->start(s, location, err);
    if (rc == 0 && pthread_create(&s->writer, NULL, writer_main, s) != 0)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "cannot start the audit writer thread");
    if (rc) {
        if (started)
            s->backend->stop(s);
        close_db(s);
        medic_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->work);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void free_writer(struct audit_store *store)
{
    medic_mutex_lock(&store->lock);
    store->stopping = 1;
    pthread_cond_signal(&store->work);
    medic_mutex_unlock(&store->lock);
    pthread_join(store->writer, NULL);
    if (store->backend->start)
        store->backend->stop(store);
    close_db(store);
    medic_mutex_destroy(&store->lock);
    pthread_cond_destroy(&store->work);
    free(store);
}

int audit_store_open(const char *location, const struct audit_options *options,
                     struct audit_store **out, struct medic_error *err)
{
    struct audit_store *s = NULL;
    int rc = open_writer(location, options, &s, err);
    if (rc)
        return rc;
    /* notifications are not chained: where the backend takes several
     * writers, they go on connections of their own (lanes) */
    size_t lanes = lanes_wanted(s);
    if (lanes && !(s->lanes = calloc(lanes, sizeof(*s->lanes))))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    while (rc == 0 && s->lane_count < lanes) {
        if ((rc = open_writer(location, options, &s->lanes[s->lane_count], err)))
            medic_error_prefix(err, "opening a notification writer");
        else
            s->lane_count++;
    }
    if (rc) {
        audit_store_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void audit_store_free(struct audit_store *store)
{
    if (!store)
        return;
    /* the lanes' notifications first: all of them are committed before
     * the ordered writer stops */
    for (size_t i = 0; i < store->lane_count; i++)
        free_writer(store->lanes[i]);
    free(store->lanes);
    free_writer(store);
}

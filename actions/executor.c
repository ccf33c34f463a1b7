/* SPDX-License-Identifier: Apache-2.0 */
#include "executor.h"
#include "lock.h"
#include "log.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct executor {
    struct executor_hooks hooks;
    pthread_t *threads;
    size_t thread_count;
    struct medic_mutex lock;
    pthread_cond_t work;
    pthread_cond_t stop; /* broadcast when stopping: wakes a job waiting to retry */
    struct executor_job *ring;
    size_t capacity, head, count;
    size_t in_flight;
    int stopping;
    uint64_t results[MEDIC_ACTION_KIND_COUNT][MEDIC_OUTCOME_COUNT];
    uint64_t rejected;
};

/* Whether an intent that could not be recorded is tried again: the
 * database was unreachable or its queue full. A refusal (the decision
 * already has an intent, the replica's term ended) is final. */
static int retryable(const struct medic_error *err)
{
    return err->code == MEDIC_E_STORE || err->code == MEDIC_E_BUSY;
}

int executor_wait(struct executor *e, int64_t ms)
{
    struct timespec until = medic_time_deadline_in(ms * MEDIC_NS_PER_MS);
    medic_mutex_lock(&e->lock);
    if (!e->stopping)
        medic_cond_timedwait(&e->stop, &e->lock, &until);
    int stopping = e->stopping;
    medic_mutex_unlock(&e->lock);
    return stopping;
}

/* Records job's intent; while the database cannot be reached, tries again
 * with backoff for up to EXECUTOR_INTENT_RETRY_MS. An intent whose commit
 * was lost and landed after all is refused by the next try (one intent per
 * decision), so retrying never runs an action twice. */
static int record_intent(struct executor *e, const struct executor_job *job, int64_t *intent,
                         struct medic_error *err)
{
    int64_t deadline = medic_time_monotonic() + EXECUTOR_INTENT_RETRY_MS * MEDIC_NS_PER_MS;
    int64_t pause = 100;
    for (;;) {
        *err = (struct medic_error){0};
        int rc = e->hooks.intent(e->hooks.ctx, job, intent, err);
        if (rc == 0 || !retryable(err) || medic_time_monotonic() >= deadline)
            return rc;
        if (pause == 100) {
            char id[24];
            snprintf(id, sizeof(id), "%lld", (long long)job->decision_id);
            medic_log_warn("cannot record an action's intent yet; the action waits and tries again",
                           "decision", id, "action", medic_action_name(job->action.kind), "error",
                           err->msg, NULL);
        }
        if (executor_wait(e, pause))
            return rc;
        pause = pause * 2 > 2000 ? 2000 : pause * 2;
    }
}

static void run_job(struct executor *e, struct executor_job *job)
{
    struct medic_error err = {0};
    int64_t intent = 0;
    if (record_intent(e, job, &intent, &err)) {
        char id[24];
        snprintf(id, sizeof(id), "%lld", (long long)job->decision_id);
        medic_log_error("action not started: its intent could not be recorded (a decision left "
                        "without an intent is taken up by the next start or the next leader)",
                        "decision", id, "action", medic_action_name(job->action.kind), "error",
                        err.msg, NULL);
        medic_mutex_lock(&e->lock);
        e->rejected++;
        medic_mutex_unlock(&e->lock);
        medic_action_release(&job->action);
        return;
    }
    char detail[512] = "";
    int64_t start = medic_time_monotonic();
    enum medic_outcome r = e->hooks.run(e->hooks.ctx, job, detail, sizeof(detail));
    int64_t ms = (medic_time_monotonic() - start) / MEDIC_NS_PER_MS;
    e->hooks.outcome(e->hooks.ctx, job, intent, r, ms, detail);
    medic_mutex_lock(&e->lock);
    e->results[job->action.kind][r]++;
    medic_mutex_unlock(&e->lock);
    medic_action_release(&job->action);
}

static void *worker(void *arg)
{
    struct executor *e = arg;
    pthread_setname_np(pthread_self(), "medic-action");
    medic_mutex_lock(&e->lock);
    for (;;) {
        while (!e->count && !e->stopping)
            medic_cond_wait(&e->work, &e->lock);
        if (!e->count)
            break;
        struct executor_job job = e->ring[e->head];
        e->head = (e->head + 1) % e->capacity;
        e->count--;
        e->in_flight++;
        medic_mutex_unlock(&e->lock);
        run_job(e, &job);
        medic_mutex_lock(&e->lock);
        e->in_flight--;
    }
    medic_mutex_unlock(&e->lock);
    return NULL;
}

int executor_start(size_t threads, size_t capacity, const struct executor_hooks *hooks,
                   struct executor **out, struct medic_error *err)
{
    struct executor *e = calloc(1, sizeof(*e));
    if (!e || !(e->ring = calloc(capacity, sizeof(*e->ring))) ||
        !(e->threads = calloc(threads, sizeof(*e->threads)))) {
        if (e)
            free(e->ring);
        free(e);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    e->hooks = *hooks;
    e->capacity = capacity;
    medic_mutex_init(&e->lock, MEDIC_LOCK_EXECUTOR);
    medic_cond_init(&e->work);
    medic_cond_init(&e->stop);
    for (size_t i = 0; i < threads; i++) {
        if (pthread_create(&e->threads[i], NULL, worker, e) != 0) {
            e->thread_count = i;
            executor_stop(e);
            return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the action workers");
        }
    }
    e->thread_count = threads;
    *out = e;
    return 0;
}

int executor_submit(struct executor *e, const struct executor_job *job)
{
    medic_mutex_lock(&e->lock);
    if (e->stopping || e->count == e->capacity) {
        e->rejected++;
        medic_mutex_unlock(&e->lock);
        return e->stopping ? MEDIC_E_CLOSED : MEDIC_E_BUSY;
    }
    e->ring[(e->head + e->count) % e->capacity] = *job;
    e->count++;
    pthread_cond_signal(&e->work);
    medic_mutex_unlock(&e->lock);
    return 0;
}

void executor_stats(struct executor *e, struct executor_stats *out)
{
    medic_mutex_lock(&e->lock);
    out->queued = e->count;
    out->in_flight = e->in_flight;
    out->capacity = e->capacity;
    memcpy(out->results, e->results, sizeof(out->results));
    out->rejected = e->rejected;
    medic_mutex_unlock(&e->lock);
}

void executor_stop(struct executor *e)
{
    if (!e)
        return;
    medic_mutex_lock(&e->lock);
    e->stopping = 1;
    pthread_cond_broadcast(&e->work);
    pthread_cond_broadcast(&e->stop);
    medic_mutex_unlock(&e->lock);
    for (size_t i = 0; i < e->thread_count; i++)
        pthread_join(e->threads[i], NULL);
    medic_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->stop);
    free(e->threads);
    free(e->ring);
    free(e);
}

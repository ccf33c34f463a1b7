/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_readers.h"
#include "lock.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdlib.h>

struct job {
    engine_reader_fn fn;
    void *arg;
    void (*free_arg)(void *arg);
    struct receiver_later later;
    struct job *next;
};

struct engine_readers {
    pthread_t threads[ENGINE_READERS];
    int started;
    struct medic_mutex lock;
    pthread_cond_t cond;
    int stopping;
    struct job *head, *tail;
    size_t queued;
};

static void finish(struct job *j, unsigned int code, const char *body, size_t len)
{
    j->later.done(j->later.request, code, body, len);
    if (j->free_arg)
        j->free_arg(j->arg);
    free(j);
}

static void run(struct job *j)
{
    struct medic_buf out;
    medic_buf_init(&out, (size_t)32 << 20);
    int code = j->fn(j->arg, &out);
    if (out.error) {
        static const char oom[] = "{\"status\":\"error\",\"error\":\"the answer is too large or "
                                  "memory ran out; narrow the query\"}\n";
        finish(j, 503, oom, sizeof(oom) - 1);
    } else {
        finish(j, (unsigned int)code, out.data ? out.data : "", out.len);
    }
    medic_buf_release(&out);
}

static void *reader_main(void *arg)
{
    struct engine_readers *r = arg;
    pthread_setname_np(pthread_self(), "medic-reader");
    medic_mutex_lock(&r->lock);
    for (;;) {
        while (!r->stopping && !r->head)
            medic_cond_wait(&r->cond, &r->lock);
        if (r->stopping)
            break;
        struct job *j = r->head;
        r->head = j->next;
        if (!r->head)
            r->tail = NULL;
        r->queued--;
        medic_mutex_unlock(&r->lock);
        run(j);
        medic_mutex_lock(&r->lock);
    }
    medic_mutex_unlock(&r->lock);
    return NULL;
}

int engine_readers_start(struct engine_readers **out, struct medic_error *err)
{
    struct engine_readers *r = calloc(1, sizeof(*r));
    if (!r)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    medic_mutex_init(&r->lock, MEDIC_LOCK_READERS);
    medic_cond_init(&r->cond);
    for (; r->started < ENGINE_READERS; r->started++)
        if (pthread_create(&r->threads[r->started], NULL, reader_main, r) != 0)
            break;
    if (r->started == 0) {
        pthread_cond_destroy(&r->cond);
        medic_mutex_destroy(&r->lock);
        free(r);
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the readers' threads");
    }
    *out = r;
    return 0;
}

void engine_readers_stop(struct engine_readers *r)
{
    if (!r)
        return;
    medic_mutex_lock(&r->lock);
    r->stopping = 1;
    pthread_cond_broadcast(&r->cond);
    medic_mutex_unlock(&r->lock);
    for (int i = 0; i < r->started; i++)
        pthread_join(r->threads[i], NULL);
    for (struct job *j = r->head, *next; j; j = next) {
        next = j->next;
        static const char stopping[] = "{\"status\":\"error\",\"error\":\"shutting down\"}\n";
        finish(j, 503, stopping, sizeof(stopping) - 1);
    }
    pthread_cond_destroy(&r->cond);
    medic_mutex_destroy(&r->lock);
    free(r);
}

int engine_readers_run(struct engine_readers *r, engine_reader_fn fn, void *arg,
                       void (*free_arg)(void *arg), const struct receiver_later *later)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return MEDIC_E_NOMEM;
    *j = (struct job){fn, arg, free_arg, *later, NULL};
    medic_mutex_lock(&r->lock);
    int full = r->queued >= ENGINE_READERS_QUEUE || r->stopping;
    if (!full) {
        if (r->tail)
            r->tail->next = j;
        else
            r->head = j;
        r->tail = j;
        r->queued++;
        pthread_cond_signal(&r->cond);
    }
    medic_mutex_unlock(&r->lock);
    if (full) {
        free(j);
        return MEDIC_E_BUSY;
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_answers.h"
#include "buf.h"
#include "lock.h"
#include "log.h"
#include "timeutil.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* On a log several replicas share, where another replica's engine may
 * take the requests, the database says when one did (audit_listener);
 * while it cannot (the listening connection broke), the waiting requests
 * are looked up this often, and the listener opened again at most every
 * LISTEN_RETRY. */
#define SHARED_LOOK_INTERVAL (50 * MEDIC_NS_PER_MS)
#define LISTEN_RETRY MEDIC_NS_PER_SEC

struct waiter {
    const char *what;
    int64_t id;
    engine_answer_result result;
    char who[128];
    struct receiver_later later;
    int64_t deadline; /* monotonic */
    struct waiter *next;
};

struct engine_answers {
    char *audit_path;
    int shared;  /* the log is shared: another replica's engine may take a request */
    int wake[2]; /* a shared log's: written to wake the thread from its listener's wait */
    pthread_t thread;
    struct medic_mutex lock;
    pthread_cond_t cond;
    int stopping, woken;
    struct waiter *head;
};

/* What came of request w as JSON, and its status: 200, 409 when refused,
 * 202 when no engine took it yet, 503 when the log cannot say. */
static void answer(struct waiter *w, const struct audit_approval_result *res, int done,
                   const char *error)
{
    struct medic_buf out;
    medic_buf_init(&out, 1 << 20);
    unsigned int code;
    if (error) {
        code = 503;
        medic_buf_puts(&out, "{\"status\":\"error\",\"error\":");
        medic_buf_json_string(&out, error);
        medic_buf_puts(&out, "}\n");
    } else {
        code = !done ? 202 : strncmp(res->result, "refused", 7) == 0 ? 409 : 200;
        medic_buf_printf(&out, "{\"status\":\"%s\",\"data\":{\"%s\":%lld,\"decision\":%lld,",
                         code == 200   ? "success"
                         : code == 202 ? "accepted"
                                       : "error",
                         w->what, (long long)w->id, (long long)res->decision_id);
        medic_buf_puts(&out, "\"verdict\":");
        medic_buf_json_string(&out, res->verdict);
        medic_buf_puts(&out, ",\"action\":");
        medic_buf_json_string(&out, res->action);
        medic_buf_puts(&out, ",\"by\":");
        medic_buf_json_string(&out, w->who);
        medic_buf_puts(&out, ",\"result\":");
        medic_buf_json_string(&out, done ? res->result
                                         : "recorded; the engine that leads has not taken it yet");
        medic_buf_puts(&out, "}}\n");
    }
    w->later.done(w->later.request, out.error ? 503 : code, out.data ? out.data : "", out.len);
    medic_buf_release(&out);
    free(w);
}

/* Wakes the thread from a shared log's wait (a byte in its pipe; a full
 * pipe wakes it as well). */
static void wake(struct engine_answers *a)
{
    if (a->wake[1] >= 0) {
        ssize_t n = write(a->wake[1], "w", 1);
        (void)n;
    }
}

/* Looks the waiting requests up: those answered leave the list. */
static struct waiter *look(struct audit_reader **reader, const char *path, struct waiter *list)
{
    struct medic_error err = {0};
    if (!*reader && audit_reader_open(path, reader, &err)) {
        *reader = NULL;
        for (struct waiter *w = list, *next; w; w = next) {
            next = w->next;
            answer(w, NULL, 0, err.msg);
        }
        return NULL;
    }
    struct waiter *kept = NULL;
    int64_t now = medic_time_monotonic();
    for (struct waiter *w = list, *next; w; w = next) {
        next = w->next;
        struct audit_approval_result res = {0};
        int rc = w->result(*reader, w->id, &res, &err);
        if (rc) {
            answer(w, NULL, 0, err.msg);
            audit_reader_free(*reader); /* opened afresh at the next look */
            *reader = NULL;
        } else if (res.done || now >= w->deadline) {
            answer(w, &res, res.done, NULL);
        } else {
            w->next = kept;
            kept = w;
        }
    }
    return kept;
}

/* On a shared log, with waiting requests: waits at most wait_ns for the
 * database's word that an engine took requests, or for this replica's
 * wake-up, through the listener (opened, and opened again after a break,
 * at most every LISTEN_RETRY); without one, SHARED_LOOK_INTERVAL at most. */
static void wait_shared(struct engine_answers *a, struct audit_listener **listener,
                        int64_t *listen_at, int64_t wait_ns)
{
    struct medic_error err = {0};
    int64_t now = medic_time_monotonic();
    if (!*listener && now >= *listen_at) {
        *listen_at = now + LISTEN_RETRY;
        if (audit_listener_open(a->audit_path, listener, &err)) {
            medic_log_warn("cannot hear when another replica takes people's requests; looking "
                           "them up every 50 ms",
                           "error", err.msg, NULL);
            *listener = NULL;
        }
    }
    if (!*listener && wait_ns > SHARED_LOOK_INTERVAL)
        wait_ns = SHARED_LOOK_INTERVAL;
    int ms = wait_ns <= 0 ? 0 : (int)((wait_ns + MEDIC_NS_PER_MS - 1) / MEDIC_NS_PER_MS);
    if (*listener) {
        if (audit_listener_wait(*listener, a->wake[0], ms, &err) < 0) {
            medic_log_warn("lost the word of people's requests taken; listening again", "error",
                           err.msg, NULL);
            audit_listener_free(*listener);
            *listener = NULL;
        }
    } else {
        struct pollfd fd = {a->wake[0], POLLIN, 0};
        poll(&fd, 1, ms);
    }
    char drain[64];
    while (read(a->wake[0], drain, sizeof(drain)) > 0)
        ;
}

static void *answers_main(void *arg)
{
    struct engine_answers *a = arg;
    pthread_setname_np(pthread_self(), "medic-answers");
    struct audit_reader *reader = NULL;
    struct audit_listener *listener = NULL;
    int64_t listen_at = 0; /* monotonic: when to (re)open the listener */
    medic_mutex_lock(&a->lock);
    while (!a->stopping) {
        if (!a->head) {
            medic_cond_wait(&a->cond, &a->lock);
            continue;
        }
        struct waiter *list = a->head;
        a->head = NULL;
        a->woken = 0;
        medic_mutex_unlock(&a->lock);
        struct waiter *kept = look(&reader, a->audit_path, list);
        medic_mutex_lock(&a->lock);
        while (kept) { /* back in the list, with any that came meanwhile */
            struct waiter *next = kept->next;
            kept->next = a->head;
            a->head = kept;
            kept = next;
        }
        /* the next look: when this replica's engine took requests (it
         * wakes this thread), when a request has waited its longest, and
         * on a shared log when the database says another engine took some */
        int64_t next = INT64_MAX, now = medic_time_monotonic();
        for (struct waiter *w = a->head; w; w = w->next)
            if (w->deadline < next)
                next = w->deadline;
        if (a->shared && a->head && !a->woken && !a->stopping) {
            medic_mutex_unlock(&a->lock);
            wait_shared(a, &listener, &listen_at, next - now);
            medic_mutex_lock(&a->lock);
            continue;
        }
        struct timespec until = medic_time_deadline_in(next == INT64_MAX ? 0 : next - now);
        while (!a->stopping && !a->woken && a->head &&
               medic_cond_timedwait(&a->cond, &a->lock, &until) == 0)
            ;
    }
    struct waiter *left = a->head;
    a->head = NULL;
    medic_mutex_unlock(&a->lock);
    audit_listener_free(listener);
    for (struct waiter *w = left, *next; w; w = next) {
        next = w->next;
        struct audit_approval_result none = {0};
        answer(w, &none, 0, NULL); /* recorded; an engine takes it later */
    }
    audit_reader_free(reader);
    return NULL;
}

int engine_answers_start(const char *audit_path, struct engine_answers **out,
                         struct medic_error *err)
{
    struct engine_answers *a = calloc(1, sizeof(*a));
    if (!a || !(a->audit_path = strdup(audit_path))) {
        free(a);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    a->shared = audit_location_is_shared(audit_path);
    a->wake[0] = a->wake[1] = -1;
    if (a->shared && pipe2(a->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(a->audit_path);
        free(a);
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot make the answers' wake-up pipe");
    }
    medic_mutex_init(&a->lock, MEDIC_LOCK_ANSWERS);
    medic_cond_init(&a->cond);
    if (pthread_create(&a->thread, NULL, answers_main, a) != 0) {
        pthread_cond_destroy(&a->cond);
        medic_mutex_destroy(&a->lock);
        free(a->audit_path);
        free(a);
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the answers' thread");
    }
    *out = a;
    return 0;
}

void engine_answers_stop(struct engine_answers *a)
{
    if (!a)
        return;
    medic_mutex_lock(&a->lock);
    a->stopping = 1;
    pthread_cond_broadcast(&a->cond);
    medic_mutex_unlock(&a->lock);
    wake(a);
    pthread_join(a->thread, NULL);
    for (int i = 0; i < 2; i++)
        if (a->wake[i] >= 0)
            close(a->wake[i]);
    pthread_cond_destroy(&a->cond);
    medic_mutex_destroy(&a->lock);
    free(a->audit_path);
    free(a);
}

int engine_answers_wait(struct engine_answers *a, const char *what, int64_t id,
                        engine_answer_result result, const char *who,
                        const struct receiver_later *later)
{
    struct waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return MEDIC_E_NOMEM;
    w->what = what;
    w->id = id;
    w->result = result;
    snprintf(w->who, sizeof(w->who), "%s", who ? who : "");
    w->later = *later;
    w->deadline = medic_time_monotonic() + ENGINE_ANSWER_WAIT;
    medic_mutex_lock(&a->lock);
    w->next = a->head;
    a->head = w;
    a->woken = 1;
    pthread_cond_broadcast(&a->cond);
    medic_mutex_unlock(&a->lock);
    wake(a);
    return 0;
}

void engine_answers_taken(struct engine_answers *a)
{
    medic_mutex_lock(&a->lock);
    a->woken = 1;
    pthread_cond_broadcast(&a->cond);
    medic_mutex_unlock(&a->lock);
    wake(a);
}

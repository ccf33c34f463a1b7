/* SPDX-License-Identifier: Apache-2.0 */
/* Request deadlines: a connection must deliver a whole request, header and
 * body, within the request timeout, however it paces its bytes.
 * libmicrohttpd's own timeout is an idle one, reset by every byte, so a
 * client trickling a byte every few seconds would hold its connection
 * for ever; hundreds of them would keep Alertmanager out. Each connection
 * is tracked from its start (and from the end of each request, for the
 * next one on a kept-alive connection) until its request is whole; a
 * watcher thread shuts down the socket of one past its deadline, and
 * libmicrohttpd then closes it as a connection its peer closed. */
#include "server_internal.h"
#include "lock.h"
#include "log.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

struct tracked {
    struct tracked *prev, *next;
    MHD_socket fd;
    int64_t since; /* monotonic: the connection's start, or its last request's end */
    int received;  /* its request is whole: no deadline until the next one */
    int shut;
};

struct receiver_deadlines {
    struct medic_mutex lock; /* the list; held while a socket is shut, so that a closed
                              * connection's descriptor is never shut after its reuse */
    pthread_cond_t wake;
    struct tracked *head;
    int64_t timeout;
    int stopping;
    pthread_t thread;
    atomic_ullong closed;
};

static void *watch(void *arg)
{
    struct receiver_deadlines *d = arg;
    pthread_setname_np(pthread_self(), "medic-deadline");
    int64_t period =
        d->timeout / 4 < 500 * MEDIC_NS_PER_MS ? d->timeout / 4 : 500 * MEDIC_NS_PER_MS;
    medic_mutex_lock(&d->lock);
    while (!d->stopping) {
        int64_t now = medic_time_monotonic();
        for (struct tracked *t = d->head; t; t = t->next)
            if (!t->received && !t->shut && now - t->since > d->timeout) {
                shutdown(t->fd, SHUT_RDWR);
                t->shut = 1;
                atomic_fetch_add(&d->closed, 1);
            }
        struct timespec until = medic_time_deadline_in(period);
        medic_cond_timedwait(&d->wake, &d->lock, &until);
    }
    medic_mutex_unlock(&d->lock);
    return NULL;
}

int receiver__deadlines_start(int64_t timeout, struct receiver_deadlines **out)
{
    struct receiver_deadlines *d = calloc(1, sizeof(*d));
    if (!d)
        return MEDIC_E_NOMEM;
    d->timeout = timeout;
    medic_mutex_init(&d->lock, MEDIC_LOCK_DEADLINE);
    medic_cond_init(&d->wake);
    if (pthread_create(&d->thread, NULL, watch, d) != 0) {
        pthread_cond_destroy(&d->wake);
        medic_mutex_destroy(&d->lock);
        free(d);
        return MEDIC_E_NOMEM;
    }
    *out = d;
    return 0;
}

void receiver__deadlines_stop(struct receiver_deadlines *d)
{
    if (!d)
        return;
    medic_mutex_lock(&d->lock);
    d->stopping = 1;
    pthread_cond_signal(&d->wake);
    medic_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    while (d->head) { /* the daemon stopped before: nothing else holds them */
        struct tracked *t = d->head;
        d->head = t->next;
        free(t);
    }
    pthread_cond_destroy(&d->wake);
    medic_mutex_destroy(&d->lock);
    free(d);
}

void receiver__on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                             enum MHD_ConnectionNotificationCode code)
{
    struct receiver_deadlines *d = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct tracked *t = info ? calloc(1, sizeof(*t)) : NULL;
        *socket_context = t;
        if (!t)
            return; /* untracked: libmicrohttpd's idle timeout still holds */
        t->fd = info->connect_fd;
        t->since = medic_time_monotonic();
        medic_mutex_lock(&d->lock);
        t->next = d->head;
        if (d->head)
            d->head->prev = t;
        d->head = t;
        medic_mutex_unlock(&d->lock);
        return;
    }
    struct tracked *t = *socket_context;
    if (!t)
        return;
    /* closed: out of the list before libmicrohttpd closes the descriptor */
    medic_mutex_lock(&d->lock);
    if (t->prev)
        t->prev->next = t->next;
    else
        d->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    medic_mutex_unlock(&d->lock);
    free(t);
    *socket_context = NULL;
}

/* The tracking of conn's connection, or NULL. */
static struct tracked *tracked_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void receiver__request_whole(struct receiver_deadlines *d, struct MHD_Connection *conn)
{
    struct tracked *t = tracked_of(conn);
    if (!t)
        return;
    medic_mutex_lock(&d->lock);
    t->received = 1;
    medic_mutex_unlock(&d->lock);
}

void receiver__request_ended(struct receiver_deadlines *d, struct MHD_Connection *conn)
{
    struct tracked *t = tracked_of(conn);
    if (!t)
        return;
    medic_mutex_lock(&d->lock);
    t->received = 0; /* a next request on the kept-alive connection has the same time */
    t->since = medic_time_monotonic();
    medic_mutex_unlock(&d->lock);
}

unsigned long long receiver__deadlines_closed(struct receiver_deadlines *d)
{
    return atomic_load(&d->closed);
}

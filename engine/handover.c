/* SPDX-License-Identifier: Apache-2.0 */
#include "handover.h"
#include "lock.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_committed(struct committed *c)
{
    while (c) {
        struct committed *next = c->next;
        medic_notification_release(&c->n);
        free(c);
        c = next;
    }
}

void handover_init(struct handover *h)
{
    memset(h, 0, sizeof(*h));
    medic_mutex_init(&h->lock, MEDIC_LOCK_HANDOVER);
    medic_cond_init(&h->cond);
    h->wake = 1;
    h->backlog = 1;
    h->outcomes_from_log = 1;
}

void handover_release(struct handover *h)
{
    free_committed(h->head);
    free(h->outcomes);
    medic_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
}

void handover_committed(struct handover *h, int64_t id, int64_t first_alert, int64_t received_at,
                        struct medic_notification *n)
{
    struct committed *c = n ? malloc(sizeof(*c)) : NULL;
    medic_mutex_lock(&h->lock);
    int queue = c && !h->backlog && h->queued < HANDOVER_QUEUE_LIMIT &&
                h->queued_alerts + n->alert_count <= HANDOVER_ALERTS_LIMIT;
    if (queue) {
        c->id = id;
        c->first_alert = first_alert;
        c->received_at = received_at;
        c->n = *n; /* the arena moves with it */
        medic_notification_init(n);
        c->next = NULL;
        if (h->tail)
            h->tail->next = c;
        else
            h->head = c;
        h->tail = c;
        h->queued++;
        h->queued_alerts += c->n.alert_count;
    } else {
        h->backlog = 1; /* it is in the log: read from there, in order */
        h->left_out++;
    }
    h->wake = 1;
    pthread_cond_signal(&h->cond);
    medic_mutex_unlock(&h->lock);
    if (!queue)
        free(c);
}

void handover_outcome(struct handover *h, int64_t decision, enum medic_outcome outcome,
                      const char *detail)
{
    medic_mutex_lock(&h->lock);
    if (!h->outcomes)
        h->outcomes = malloc(HANDOVER_OUTCOMES_LIMIT * sizeof(*h->outcomes));
    if (h->outcomes && h->outcome_count < HANDOVER_OUTCOMES_LIMIT) {
        struct handover_outcome *o = &h->outcomes[h->outcome_count++];
        o->decision = decision;
        o->outcome = outcome;
        snprintf(o->detail, sizeof(o->detail), "%s", detail ? detail : "");
    } else {
        h->outcomes_from_log = 1;
    }
    h->wake = 1;
    pthread_cond_signal(&h->cond);
    medic_mutex_unlock(&h->lock);
}

void handover_wake(struct handover *h)
{
    medic_mutex_lock(&h->lock);
    h->wake = 1;
    pthread_cond_signal(&h->cond);
    medic_mutex_unlock(&h->lock);
}

void handover_take(struct handover *h, size_t limit, struct handed *out)
{
    memset(out, 0, sizeof(*out));
    medic_mutex_lock(&h->lock);
    if (h->head) {
        struct committed *last = h->head;
        size_t n = 1, alerts = last->n.alert_count;
        while (last->next && n < limit) {
            last = last->next;
            alerts += last->n.alert_count;
            n++;
        }
        out->notifications = h->head;
        h->head = last->next;
        if (!h->head)
            h->tail = NULL;
        last->next = NULL;
        h->queued -= n;
        h->queued_alerts -= alerts;
    } else if (h->backlog) {
        out->from_log = 1;
        h->left_out = 0;
    }
    out->outcomes = h->outcomes;
    out->outcome_count = h->outcome_count;
    out->outcomes_from_log = h->outcomes_from_log;
    h->outcomes = NULL;
    h->outcome_count = 0;
    h->outcomes_from_log = 0;
    medic_mutex_unlock(&h->lock);
}

void handed_release(struct handed *d)
{
    free_committed(d->notifications);
    free(d->outcomes);
    memset(d, 0, sizeof(*d));
}

void handover_caught_up(struct handover *h)
{
    medic_mutex_lock(&h->lock);
    if (h->left_out == 0 && !h->shared)
        h->backlog = 0;
    medic_mutex_unlock(&h->lock);
}

void handover_fall_back(struct handover *h)
{
    medic_mutex_lock(&h->lock);
    struct committed *queued = h->head;
    h->head = h->tail = NULL;
    h->queued = h->queued_alerts = 0;
    h->backlog = 1;
    h->outcomes_from_log = 1;
    free(h->outcomes);
    h->outcomes = NULL;
    h->outcome_count = 0;
    medic_mutex_unlock(&h->lock);
    free_committed(queued);
}

void handover_publish_holds(struct handover *h, int paused, int storm)
{
    atomic_store(&h->paused, paused);
    atomic_store(&h->storm, storm);
}

const char *handover_held(struct handover *h)
{
    return atomic_load(&h->paused)  ? "a person paused medic"
           : atomic_load(&h->storm) ? "a storm began"
                                    : NULL;
}

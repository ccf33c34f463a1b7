/* SPDX-License-Identifier: Apache-2.0 */
/* What other threads hand the engine's thread, and the wake-ups that come
 * with it: committed notifications (from the audit writer, in commit
 * order) and recorded outcomes (from dispatch); and, the other way, what
 * the engine's last round found holding disruptive steps back (a pause, a
 * storm), for the actions' workers. The engine owns it, outliving the
 * pipeline and dispatch of each term, so neither points at the other.
 * When memory cannot hold them, it says so instead: `backlog` (some
 * committed notifications are only in the audit log: read them from there,
 * in order, and queue nothing until the reads caught up) and
 * `outcomes_from_log` (look every awaited outcome up in the log). Its lock
 * is held only for a pointer's move, so the audit writer is never kept
 * waiting by a round. Private to engine/. */
#ifndef MEDIC_ENGINE_HANDOVER_H
#define MEDIC_ENGINE_HANDOVER_H

#include "action.h"
#include "lock.h"
#include "alert.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Committed notifications (and their alerts) waiting in memory at most;
 * past either, they are read back from the audit log. */
#define HANDOVER_QUEUE_LIMIT 16384
#define HANDOVER_ALERTS_LIMIT 262144
/* Outcomes waiting in memory at most; past it, read from the audit log. */
#define HANDOVER_OUTCOMES_LIMIT 4096

/* A committed notification on its way to the engine. */
struct committed {
    int64_t id, first_alert;
    int64_t received_at; /* wall clock: people's requests accepted before it go first */
    struct medic_notification n;
    struct committed *next;
};

/* A recorded outcome on its way to its incident. */
struct handover_outcome {
    int64_t decision;
    enum medic_outcome outcome;
    char detail[1024];
};

struct handover {
    struct medic_mutex lock; /* guards everything below */
    pthread_cond_t cond;     /* signalled with wake or stopping */
    int wake, stopping;
    struct committed *head, *tail;
    size_t queued, queued_alerts;
    int backlog;
    int shared;        /* other replicas commit to the same log: it is always read */
    uint64_t left_out; /* not queued since the last read of the log began */
    struct handover_outcome *outcomes;
    size_t outcome_count;
    int outcomes_from_log;
    atomic_int paused, storm; /* published by each round; read without the lock */
};

/* What one round takes. */
struct handed {
    struct committed *notifications; /* NULL: none, or read the log (from_log) */
    int from_log;
    struct handover_outcome *outcomes;
    size_t outcome_count;
    int outcomes_from_log;
    atomic_int paused, storm; /* published by each round; read without the lock */
};

/* Starts awake, reading both from the log: what a previous run left. */
void handover_init(struct handover *h);
void handover_release(struct handover *h);

/* Takes committed notification n (its content moves; n is left empty),
 * or notes that it stays in the log; wakes the engine. */
void handover_committed(struct handover *h, int64_t id, int64_t first_alert, int64_t received_at,
                        struct medic_notification *n);
void handover_outcome(struct handover *h, int64_t decision, enum medic_outcome outcome,
                      const char *detail);

/* Takes up to limit queued notifications (the queue first: the log holds
 * nothing older while it has items), or the word to read the log, and
 * every handed outcome. */
/* What a round found: a person's pause, a storm (each 0 or 1). */
void handover_publish_holds(struct handover *h, int paused, int storm);
/* Why a disruptive step decided before the last round must not run now
 * ("a person paused medic", "a storm began"); NULL: nothing holds it. */
const char *handover_held(struct handover *h);

/* Wakes the engine for a round (something it reads from the log). */
void handover_wake(struct handover *h);
void handover_take(struct handover *h, size_t limit, struct handed *out);
void handed_release(struct handed *d);
/* A round read the log to its end: the queue takes over unless a
 * notification was left out of it since that read began. */
void handover_caught_up(struct handover *h);
/* After a failed round: what memory held is in the audit log, which the
 * next rounds read in order. */
void handover_fall_back(struct handover *h);

#endif

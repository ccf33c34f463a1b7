/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's pipeline as its files share it: pipeline.c runs the rounds
 * and owns the state; pipeline_reads.c answers what other threads read of
 * it (its gauges, its state under its lock). Private to engine/. */
#ifndef MEDIC_ENGINE_PIPELINE_INTERNAL_H
#define MEDIC_ENGINE_PIPELINE_INTERNAL_H

#include "engine_pipeline.h"
#include "handover.h"
#include "lock.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct engine_pipeline {
    struct engine_answers *answers; /* told when a round took people's requests */
    struct audit_store *store;
    struct engine_dispatch *dispatch;
    struct engine_fleet *fleet;      /* its last cycle's risks serve alerts of the same window */
    struct engine_slurm_view *slurm; /* Slurm's nodes as last read */
    /* monotonic: the read of Slurm's nodes the drains were last reconciled
     * with began then; only reads begun after reconcile_after (this state
     * was read from the log) are used */
    int64_t reconciled_read, reconcile_after;
    struct audit_reader *reader;
    struct config_slot *configs;
    int64_t tick_interval;
    int64_t poll_interval; /* a log shared with other replicas: read this often; 0: not */
    int64_t last_poll;     /* monotonic, as last_tick */
    pthread_t thread;
    struct medic_mutex lock; /* guards state: changed by the engine thread, copied by dry runs */
    struct handover *in;     /* what other threads hand over, and the wake-ups (not owned) */
    struct policy_state *state;
    int legacy_state;  /* an earlier medic's document: dropped once the rows are written */
    int state_stale;   /* a failed round changed state and it could not be read back yet */
    int64_t last_tick; /* monotonic: a step of the wall clock never stalls or rushes ticks */
    atomic_ullong decisions[VERDICT_COUNT];
    atomic_ullong rounds_failed;
    atomic_ullong ticks;
    atomic_ullong evaluated;
    atomic_ullong clock_steps;
    /* the policy engine's clock, which a step of the wall clock does not
     * move; the wall clock's lead on it at the last look (a change of 1 s
     * or more is a step) */
    struct medic_steady_clock clock;
    /* added to clock: a step of the wall clock while nothing is disrupted
     * (time sync setting a wrong clock) re-bases it */
    _Atomic int64_t clock_rebase;
    int64_t rebased_by; /* a re-base the next round tells the policy engine of (engine thread) */
    _Atomic int64_t wall_lead;
    atomic_int approvals_waiting; /* an answer was recorded: read them in the next round */
    atomic_int disrupted_nodes;
    atomic_int quarantined_nodes;
    atomic_int open_incidents;
    atomic_int storm;
    atomic_int paused;
    atomic_int pending_approvals;
    _Atomic int64_t pending_oldest; /* engine clock; MEDIC_TIME_UNSET: none */
};

/* The engine's clock (pipeline_reads.c). */
int64_t engine_pipeline__now(const struct engine_pipeline *e);

/* pipeline_state.c: the committed state, its changes tracked from now
 * on; and, after a failed commit, the last committed state back in
 * e->state (until it can be read, e->state_stale and -1: no round runs). */
int engine_pipeline__read_state(struct engine_pipeline *e, struct policy_state **out,
                                struct medic_error *err);
int engine_pipeline__restore_state(struct engine_pipeline *e);

#endif

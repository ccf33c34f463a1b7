/* SPDX-License-Identifier: Apache-2.0 */
/* The executor: a bounded pool of worker threads, apart from the HTTP
 * threads and the policy engine, that carries out decided actions. For each
 * job it records an intent before the action starts and an outcome after
 * (one enum medic_outcome), through hooks the wiring layer provides;
 * a job whose intent cannot be recorded (a decision that already has one,
 * a replica no longer leading) never runs, so no decision ever runs twice.
 * While the audit database cannot be reached the intent is tried again,
 * for up to EXECUTOR_INTENT_RETRY_MS or until the executor stops. */
#ifndef MEDIC_ACTIONS_EXECUTOR_H
#define MEDIC_ACTIONS_EXECUTOR_H

#include "action.h"
#include "error.h"

#include <stddef.h>
#include <stdint.h>

#define EXECUTOR_INTENT_RETRY_MS 60000

struct executor_job {
    int64_t decision_id;
    struct medic_action action; /* typed parameters; owned by the job */
    char node[128];
    char policy[65];
    char alertname[128];
    char reason[512];
    int require_drained; /* run only while the node is drained in Slurm */
};

struct executor_hooks {
    void *ctx;
    /* Records the intent; returns 0 and the intent's id, or an error (then
     * the job does not run). */
    int (*intent)(void *ctx, const struct executor_job *job, int64_t *intent_id,
                  struct medic_error *err);
    /* Carries the action out within its own hard timeouts; fills detail. */
    enum medic_outcome (*run)(void *ctx, const struct executor_job *job, char *detail, size_t size);
    /* Records the outcome. */
    void (*outcome)(void *ctx, const struct executor_job *job, int64_t intent_id,
                    enum medic_outcome outcome, int64_t duration_ms, const char *detail);
};

struct executor_stats {
    size_t queued, in_flight, capacity;
    uint64_t results[MEDIC_ACTION_KIND_COUNT][MEDIC_OUTCOME_COUNT];
    uint64_t rejected; /* queue full or intent refused */
};

struct executor;

int executor_start(size_t threads, size_t capacity, const struct executor_hooks *hooks,
                   struct executor **out, struct medic_error *err);
/* Queues job, taking its action on success; MEDIC_E_BUSY when the queue
 * is full, MEDIC_E_CLOSED when stopping (the caller still owns it). */
int executor_submit(struct executor *e, const struct executor_job *job);
void executor_stats(struct executor *e, struct executor_stats *out);
/* Waits up to ms (on the monotonic clock) before a job's next try at
 * something it must not give up on, such as recording; returns nonzero,
 * at once, once the executor is stopping. */
int executor_wait(struct executor *e, int64_t ms);
/* Lets the queued and running jobs finish, then stops. NULL is a no-op. */
void executor_stop(struct executor *e);

#endif

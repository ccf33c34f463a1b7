/* The executor: a bounded pool of worker threads, apart from the HTTP
 * threads and the policy engine, that carries out decided actions. For each
 * job it records an intent before the action starts and an outcome after
 * (succeeded, failed, timed_out), through hooks the wiring layer provides;
 * a job whose intent cannot be recorded (a decision that already has one)
 * never runs, so no decision ever runs twice. */
#ifndef MEDIC_ACTIONS_EXECUTOR_H
#define MEDIC_ACTIONS_EXECUTOR_H

#include "error.h"

#include <stddef.h>
#include <stdint.h>

struct executor_job {
    int64_t decision_id;
    char action[32];
    char node[128];
    char policy[65];
    char alertname[128];
    char reason[512];
    char params[1024]; /* JSON */
};

enum executor_result { EXECUTOR_SUCCEEDED, EXECUTOR_FAILED, EXECUTOR_TIMED_OUT };

const char *executor_result_name(enum executor_result r);

struct executor_hooks {
    void *ctx;
    /* Records the intent; returns 0 and the intent's id, or an error (then
     * the job does not run). */
    int (*intent)(void *ctx, const struct executor_job *job, int64_t *intent_id,
                  struct medic_error *err);
    /* Carries the action out within its own hard timeouts; fills detail. */
    enum executor_result (*run)(void *ctx, const struct executor_job *job, char *detail,
                                size_t size);
    /* Records the outcome. */
    void (*outcome)(void *ctx, const struct executor_job *job, int64_t intent_id,
                    enum executor_result result, int64_t duration_ms, const char *detail);
};

/* The actions the statistics count separately; others count as "other". */
#define EXECUTOR_ACTIONS 7
extern const char *const executor_action_names[EXECUTOR_ACTIONS];

struct executor_stats {
    size_t queued, in_flight, capacity;
    uint64_t results[EXECUTOR_ACTIONS][3]; /* by action, by executor_result */
    uint64_t rejected;                     /* queue full or intent refused */
};

struct executor;

int executor_start(size_t threads, size_t capacity, const struct executor_hooks *hooks,
                   struct executor **out, struct medic_error *err);
/* Queues a copy of job; MEDIC_E_BUSY when the queue is full. */
int executor_submit(struct executor *e, const struct executor_job *job);
void executor_stats(struct executor *e, struct executor_stats *out);
/* Lets the queued and running jobs finish, then stops. NULL is a no-op. */
void executor_stop(struct executor *e);

#endif

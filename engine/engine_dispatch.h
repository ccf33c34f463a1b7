/* SPDX-License-Identifier: Apache-2.0 */
/* Action dispatch inside `medic serve`: the executor's hooks (intent and
 * outcome rows in the audit log, the action carried out with the
 * configuration snapshot's notifiers, inventory and credentials), and the
 * start-up recovery of work a crash left behind:
 * - an intent without an outcome is marked interrupted, never rerun;
 * - a decision to execute that never got its intent (it was queued in
 *   memory when medic died) runs now if it is not disruptive and still
 *   valid (its alert has not resolved and is not older than
 *   safety.max_alert_age), else it is recorded interrupted; either way it
 *   is in the audit log, its incident learns the outcome, and on-call is
 *   told about interrupted ones through safety.storm.notifier.
 * A power cycle whose incident drained the node first runs only while
 * Slurm still shows the node drained with no job. */
#ifndef MEDIC_ENGINE_DISPATCH_H
#define MEDIC_ENGINE_DISPATCH_H

#include "audit.h"
#include "buf.h"
#include "config.h"
#include "policy_engine.h"

struct engine_dispatch;

/* What dispatch tells the engine and asks of it, as the executor's hooks
 * do for dispatch: given at start, called on the workers' threads, valid
 * until dispatch stops. */
struct engine_dispatch_hooks {
    void *arg;
    /* an action's outcome is in the audit log: its incident waits for it */
    void (*outcome)(void *arg, int64_t decision, enum medic_outcome outcome, const char *detail);
    /* why a disruptive step decided earlier must not run now (a pause or
     * a storm that began since); NULL: it may */
    const char *(*held)(void *arg);
};

/* Starts the executor's workers and notes how far the audit log at
 * db_path goes: what a recovery may take for left by a crash or the
 * previous leader. Recovers nothing yet. */
int engine_dispatch_start(struct audit_store *store, const char *db_path,
                          struct config_slot *configs, const struct engine_dispatch_hooks *hooks,
                          struct engine_dispatch **out, struct medic_error *err);
/* Recovers what a crash or the previous leader left (above), up to where
 * the log went at start: never what this run decided or started since.
 * Every outcome of the recovery, and of the actions it runs, reaches the
 * incidents waiting for it through the hooks. */
int engine_dispatch_recover(struct engine_dispatch *d, const char *db_path,
                            struct medic_error *err);
/* Hands a committed decision with verdict execute to the executor; a
 * decision that cannot be queued gets an intent and a failed outcome. */
void engine_dispatch_execute(struct engine_dispatch *d, const struct policy_decision *decision,
                             int64_t decision_id);
void engine_dispatch_metrics(struct engine_dispatch *d, struct medic_buf *out);
/* Finishes queued and running actions, then stops. NULL is a no-op. */
void engine_dispatch_stop(struct engine_dispatch *d);

#endif

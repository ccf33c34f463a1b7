/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine fed from a configuration: what `medic serve`,
 * `medic dry-run`, `medic replay` and `medic policy test` share. */
#ifndef MEDIC_ENGINE_EVALUATE_H
#define MEDIC_ENGINE_EVALUATE_H

#include "audit.h"
#include "config.h"
#include "policy_engine.h"

/* The policy engine's context over config (which must outlive it). */
void engine_context_from_config(const struct medic_config *config, struct policy_context *out);

/* Runs the policy engine's scheduler at now; a failure is recorded as an
 * error decision, as below. */
int engine_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out);

/* Feeds every alert of notification n to the policy engine at time now
 * (the scheduler first), alert i with risks[i] (risks NULL: risk for every
 * alert; NAN: unknown) and the driver's recovery action recoveries[i]
 * (NULL: unknown); a duplicate of a notification already evaluated
 * only has its alerts seen again (policy_seen_again). An alert the engine
 * could not fully decide (out of memory, or out->limit reached) gets a
 * decision with verdict error that says so. Returns MEDIC_E_NOMEM only
 * when even that cannot be recorded. */
int engine_evaluate_notification(const struct policy_context *ctx, struct policy_state *st,
                                 const struct medic_notification *n, int duplicate,
                                 const double *risks, const char *const *recoveries, double risk,
                                 int64_t now, struct policy_decisions *out);

/* The policy engine's state saved in the audit log: its rows, or the
 * single document an earlier medic saved (then *legacy is 1 and the rows
 * are still to be written); an empty state when there is neither. */
int engine_state_read(struct audit_reader *reader, struct policy_state **out, int *legacy,
                      struct medic_error *err);

#endif

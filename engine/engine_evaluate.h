/* The policy engine fed from a configuration: what `medic serve`,
 * `medic dry-run`, `medic replay` and `medic policy test` share. */
#ifndef MEDIC_ENGINE_EVALUATE_H
#define MEDIC_ENGINE_EVALUATE_H

#include "config.h"
#include "policy_engine.h"

/* The policy engine's context over config (which must outlive it). */
void engine_context_from_config(const struct medic_config *config, struct policy_context *out);

/* Feeds every alert of notification n to the policy engine at time now
 * (the scheduler first), alert i with risks[i] (risks NULL: risk for every
 * alert; NAN: unknown). Returns MEDIC_E_NOMEM when a decision may be
 * missing. */
int engine_evaluate_notification(const struct policy_context *ctx, struct policy_state *st,
                                 const struct medic_notification *n, const double *risks,
                                 double risk, int64_t now, struct policy_decisions *out);

#endif

/* Builds the policy engine's context from a loaded configuration. */
#ifndef MEDIC_ENGINE_SETUP_H
#define MEDIC_ENGINE_SETUP_H

#include "config.h"
#include "engine.h"

void medic_engine_context(const struct medic_config *config, struct engine_context *out);

/* Feeds every alert of notification n to the engine at time now, alert i
 * with risks[i] (risks NULL: risk for every alert; NAN: unknown). */
int medic_engine_notification(const struct engine_context *ctx, struct engine_state *st,
                              const struct medic_notification *n, const double *risks, double risk,
                              int64_t now, struct engine_decisions *out);

#endif

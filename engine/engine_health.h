/* SPDX-License-Identifier: Apache-2.0 */
/* The recovery action the GPU driver recommends for each alert of a round,
 * for policies with when.recovery_action: read from the alert's node's
 * `medic agent` (GET /v1/health) once per node and round, without the
 * engine's lock, each read bounded (1 s) and the round's reads together
 * too (2 s): a slow or absent agent leaves the action unknown, with the
 * reason in the log, and never stalls the pipeline. Only when some policy
 * asks for it. */
#ifndef MEDIC_ENGINE_HEALTH_H
#define MEDIC_ENGINE_HEALTH_H

#include "alert.h"
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#define ENGINE_HEALTH_GPUS 64

struct engine_health_node {
    char node[128];
    int codes[ENGINE_HEALTH_GPUS]; /* by GPU index; -1 unknown */
    size_t count;                  /* GPUs reported; 0: the read failed */
};

struct engine_health {
    const struct medic_config *config;
    int enabled; /* a policy has when.recovery_action */
    int64_t deadline;
    struct engine_health_node *nodes;
    size_t count, cap;
};

void engine_health_begin(struct engine_health *h, const struct medic_config *config);
void engine_health_end(struct engine_health *h);
/* Fills out[i] with the recovery action's name for alert i of n (NULL:
 * unknown, or not asked). */
void engine_health_alerts(struct engine_health *h, const struct medic_notification *n,
                          const char **out);

#endif

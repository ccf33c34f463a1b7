/* SPDX-License-Identifier: Apache-2.0 */
/* The runners: carry out one decided action (an executor job) against the
 * configuration in force, its outcome and a detail back. */
#ifndef MEDIC_ENGINE_RUNNERS_H
#define MEDIC_ENGINE_RUNNERS_H

#include "config.h"
#include "executor.h"
#include "fence.h"
#include "ipmi.h"
#include "notify.h"
#include "slurm.h"

struct engine_run_context {
    const struct medic_config *config;
    const struct action_fence *fence; /* asked right before a disruptive command */
    struct executor *waiter;          /* a verify waits between its checks on it */
};

enum medic_outcome engine_run_action(const struct engine_run_context *rc,
                                     const struct executor_job *job, char *detail, size_t size);
/* The token for node n's `medic agent` (n may be NULL: not in the
 * inventory); NULL, with why in detail, when there is no agent or token. */
const struct credential *engine_agent_of(const struct medic_config *c,
                                         const struct inventory_node *n, const char *node,
                                         char *detail, size_t size);
/* scontrol as the configuration says (its program and slurm.conf). */
void engine_slurm_options(const struct medic_config *c, struct slurm_options *o);
/* The BMC of node n as FreeIPMI wants it; -1 (detail says why) when the
 * inventory or the credentials lack something. */
int engine_ipmi_target(const struct medic_config *c, const struct inventory_node *n,
                       struct ipmi_target *t, char *detail, size_t size);
/* A notification (options: NULL for the defaults). */
enum medic_outcome engine_run_notify(const struct medic_config *c, const struct executor_job *job,
                                     const struct notify_options *options, char *detail,
                                     size_t size);

#endif

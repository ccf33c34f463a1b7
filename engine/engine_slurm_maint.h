/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm as a source of maintenance (safety.maintenance_from_slurm): a
 * thread asks Slurm every 30 s which nodes are in a maintenance
 * reservation (`scontrol -o show nodes`, state MAINT), and the policy
 * engine holds disruptive steps on them as in a maintenance window,
 * without waiting on Slurm itself. Until the first read succeeds, or once
 * the last success is older than ENGINE_SLURM_MAINT_STALE (slurmctld
 * unreachable), every disruptive step on a node with a Slurm node is held
 * too: not knowing is never taken as "not in maintenance". Private to
 * engine/. */
#ifndef MEDIC_ENGINE_SLURM_MAINT_H
#define MEDIC_ENGINE_SLURM_MAINT_H

#include "config.h"
#include "policy_engine.h"

#define ENGINE_SLURM_MAINT_INTERVAL (30 * MEDIC_NS_PER_SEC)
/* while the list is unknown, Slurm is asked again this often */
#define ENGINE_SLURM_MAINT_RETRY (5 * MEDIC_NS_PER_SEC)
/* a list older than this is unknown: disruptive steps on Slurm nodes are
 * held (fail closed), as before the first read */
#define ENGINE_SLURM_MAINT_STALE (3 * ENGINE_SLURM_MAINT_INTERVAL)

struct engine_slurm_maint;

/* Starts the thread; it reads Slurm only while the current configuration
 * asks it to. */
int engine_slurm_maint_start(struct config_slot *configs, struct engine_slurm_maint **out);
void engine_slurm_maint_stop(struct engine_slurm_maint *m);
/* The nodes in maintenance at the last read; -1 before the first one
 * (or with m NULL), for /metrics. */
long engine_slurm_maint_count(struct engine_slurm_maint *m);
/* Lets a round's policy context ask m (NULL: nothing asked). */
void engine_slurm_maint_context(struct engine_slurm_maint *m, struct policy_context *ctx);

#endif

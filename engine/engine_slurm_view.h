/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm's nodes as medic last read them: a thread asks Slurm every
 * slurm.read_interval (30 s; `scontrol show nodes`) for each node's state and reason, while the
 * configuration needs them: for safety.maintenance_from_slurm (the nodes
 * in a maintenance reservation, state MAINT, held as in a maintenance
 * window) and, outside dry-run, to reconcile medic's record of the drains
 * it holds with what Slurm shows (a drain someone undid or replaced is let
 * go, so the caps count only what medic really holds). Nobody waits on
 * Slurm itself: the engine reads the last list. Until the first read
 * succeeds, or once the last success is older than three intervals
 * (slurmctld unreachable), the list is unknown: every disruptive step on a
 * node with a Slurm node is held, and nothing is reconciled. Private to
 * engine/. */
#ifndef MEDIC_ENGINE_SLURM_VIEW_H
#define MEDIC_ENGINE_SLURM_VIEW_H

#include "config.h"
#include "policy_engine.h"

#include <stdint.h>

/* while the list is unknown, Slurm is asked again this often */
#define ENGINE_SLURM_VIEW_RETRY (5 * MEDIC_NS_PER_SEC)

struct engine_slurm_view;

/* Starts the thread; it reads Slurm only while the current configuration
 * needs it. */
int engine_slurm_view_start(struct config_slot *configs, struct engine_slurm_view **out);
void engine_slurm_view_stop(struct engine_slurm_view *v);
/* Asks Slurm again now (a replica that just took the lease). */
void engine_slurm_view_refresh(struct engine_slurm_view *v);
/* The nodes in maintenance at the last read; -1 unknown (never read, too
 * old, maintenance_from_slurm off, or v NULL), for /metrics. */
long engine_slurm_view_maint_count(struct engine_slurm_view *v);
/* Which read is the latest (0: none yet, or too old), and when
 * (monotonic) it began: Slurm showed each node as it was at that time or
 * later. */
uint64_t engine_slurm_view_latest(struct engine_slurm_view *v, int64_t *began);
/* Reads that succeeded since medic started (0 with v NULL). */
uint64_t engine_slurm_view_reads(struct engine_slurm_view *v);
/* Lets a round's policy context ask v (NULL: nothing asked). */
void engine_slurm_view_context(struct engine_slurm_view *v, struct policy_context *ctx);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The pipeline inside `medic serve`: receiver -> store -> decide -> act.
 * One thread evaluates every committed notification in order, runs the
 * escalation scheduler on an interval, and commits the decisions together
 * with the rows of the policy engine's state they changed, so that a
 * restart neither loses nor repeats a step; decisions to execute go to
 * dispatch only once committed.
 * Committed notifications and recorded outcomes reach it in memory. The
 * audit log is read only where memory cannot serve: at start (what a crash
 * left undecided), after a failed round, and when more notifications wait
 * than the queue holds; then it reads them back in order until it has
 * caught up. Each round works on one configuration snapshot, in phases
 * (round.h): gather without the engine's lock (the log's reads, risks,
 * agents' health), decide under it taken once, commit, dispatch. */
#ifndef MEDIC_ENGINE_PIPELINE_H
#define MEDIC_ENGINE_PIPELINE_H

#include "audit.h"
#include "buf.h"
#include "config.h"
#include "engine_answers.h"
#include "engine_dispatch.h"
#include "engine_fleet.h"
#include "engine_slurm_view.h"
#include "policy_engine.h"

#include <stdint.h>

struct engine_pipeline;
struct handover;

/* in: what other threads hand the pipeline (a handover_init'ed one,
 * which outlives it; dispatch hands its outcomes there too).
 * poll_interval > 0: other replicas commit to the same audit log, which
 * is then read for what they committed this often, and whenever this
 * replica commits one (notifications are not handed over in memory).
 * answers (may be NULL) is told when a round took people's requests. */
int engine_pipeline_start(struct audit_store *store, const char *db_path,
                          struct config_slot *configs, int64_t tick_interval, int64_t poll_interval,
                          struct handover *in, struct engine_dispatch *dispatch,
                          struct engine_fleet *fleet, struct engine_slurm_view *slurm,
                          struct engine_answers *answers, struct engine_pipeline **out,
                          struct medic_error *err);

/* Notification id, received at received_at (wall clock), was committed
 * (not a duplicate) with its alerts from first_alert_id on: evaluate it
 * soon. Takes n's content (n is left empty); n NULL: read it back from the
 * audit log. Cheap and never blocks on a round; any thread. */
void engine_pipeline_committed(struct engine_pipeline *e, int64_t id, int64_t first_alert_id,
                               int64_t received_at, struct medic_notification *n);

/* A person's answer to a pending step was recorded (audit_record_approval):
 * the next round takes it. Any thread. */
void engine_pipeline_approval_recorded(struct engine_pipeline *e);

/* Finishes the round in progress and stops. NULL is a no-op. */
void engine_pipeline_stop(struct engine_pipeline *e);

/* The pipeline's counters and gauges, for /metrics. */
struct engine_pipeline_stats {
    unsigned long long decisions[VERDICT_COUNT]; /* by verdict */
    unsigned long long rounds_failed;
    unsigned long long ticks;       /* scheduler rounds (ladders escalated, alerts expired) */
    unsigned long long evaluated;   /* notifications evaluated and committed, duplicates too */
    unsigned long long clock_steps; /* steps of the wall clock seen (1 s or more) */
    int64_t wall_clock_lead;        /* the wall clock less the engine's clock, ns */
    int disrupted_nodes, quarantined_nodes, open_incidents, storm, paused;
    int pending_approvals;      /* steps waiting for a person */
    int64_t pending_oldest_age; /* how long the oldest has waited, ns; 0 when none */
};
void engine_pipeline_stats(struct engine_pipeline *e, struct engine_pipeline_stats *out);

/* The engine's clock (see medic_steady_clock): the time the policy
 * engine decides at. Any thread. */
int64_t engine_pipeline_now(const struct engine_pipeline *e);

/* A copy of the policy engine's state as it is now (for dry runs). */
int engine_pipeline_copy_state(struct engine_pipeline *e, struct policy_state **out,
                               struct medic_error *err);

/* Reads the engine's state in place: fn runs under the engine's lock, so
 * it must be short (no I/O), keep no pointer into st, and change nothing
 * but the incidents' cached policy lookups. Returns what fn returns. */
typedef int (*engine_state_fn)(void *arg, struct policy_state *st);
int engine_pipeline_with_state(struct engine_pipeline *e, engine_state_fn fn, void *arg);

#endif

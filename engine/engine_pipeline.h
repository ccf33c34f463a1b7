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
 * caught up. Each round works on one configuration snapshot and takes no
 * lock while risks are fetched. */
#ifndef MEDIC_ENGINE_PIPELINE_H
#define MEDIC_ENGINE_PIPELINE_H

#include "audit.h"
#include "buf.h"
#include "config.h"
#include "engine_dispatch.h"

#include <stdint.h>

struct engine_pipeline;

int engine_pipeline_start(struct audit_store *store, const char *db_path,
                          struct config_slot *configs, int64_t tick_interval,
                          struct engine_dispatch *dispatch, struct engine_pipeline **out,
                          struct medic_error *err);

/* Notification id was committed (not a duplicate) with its alerts from
 * first_alert_id on: evaluate it soon. Takes n's content (n is left
 * empty); n NULL: read it back from the audit log. Cheap and never blocks
 * on a round; any thread. */
void engine_pipeline_committed(struct engine_pipeline *e, int64_t id, int64_t first_alert_id,
                               struct medic_notification *n);

/* An action's outcome was recorded: its incident goes on. Any thread. */
void engine_pipeline_outcome(struct engine_pipeline *e, int64_t decision_id,
                             enum medic_outcome outcome, const char *detail);

/* Finishes the round in progress and stops. NULL is a no-op. */
void engine_pipeline_stop(struct engine_pipeline *e);

/* Appends the pipeline's metrics. */
void engine_pipeline_metrics(struct engine_pipeline *e, struct medic_buf *out);

/* POST /api/v1/dry-run: the decisions a webhook payload would produce now,
 * from a copy of the current state, as JSON into out. Returns the HTTP
 * status. */
int engine_pipeline_dry_run(struct engine_pipeline *e, const char *body, size_t len,
                            struct medic_buf *out);

#endif

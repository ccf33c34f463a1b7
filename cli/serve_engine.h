/* The policy engine inside `medic serve`: a thread that evaluates every
 * committed notification in order, runs the escalation scheduler on an
 * interval, and commits the decisions together with the engine's state,
 * so that a restart neither loses nor repeats a step. Notifications are
 * read back from the audit log, so one committed while medic crashed is
 * evaluated when it starts again. */
#ifndef MEDIC_SERVE_ENGINE_H
#define MEDIC_SERVE_ENGINE_H

#include "audit.h"
#include "buf.h"
#include "config.h"
#include "serve_actions.h"

#include <pthread.h>
#include <stdint.h>

struct serve_engine;

/* config (guarded by config_lock) may be replaced by reloads; the engine
 * takes the lock for each round. */
int serve_engine_start(struct audit_store *store, const char *db_path, pthread_mutex_t *config_lock,
                       const struct medic_config *config, int64_t tick_interval,
                       struct serve_actions *actions, struct serve_engine **out,
                       struct medic_error *err);

/* A notification was committed: evaluate soon. Cheap; any thread. */
void serve_engine_wake(struct serve_engine *e);

/* Finishes the round in progress and stops. NULL is a no-op. */
void serve_engine_stop(struct serve_engine *e);

/* Appends the engine's metrics. */
void serve_engine_metrics(struct serve_engine *e, struct medic_buf *out);

/* POST /api/v1/dry-run: the decisions a webhook payload would produce now,
 * from a copy of the current state, as JSON into out. Returns the HTTP
 * status. */
int serve_engine_dry_run(struct serve_engine *e, const char *body, size_t len,
                         struct medic_buf *out);

#endif

/* The actions inside `medic serve`: the executor's hooks (intent and
 * outcome rows in the audit log, the action carried out with the
 * configuration's notifiers, inventory and credentials), and the start-up
 * check that marks intents left open by a crash as interrupted, never
 * running them again. */
#ifndef MEDIC_SERVE_ACTIONS_H
#define MEDIC_SERVE_ACTIONS_H

#include "audit.h"
#include "buf.h"
#include "config.h"
#include "engine.h"

#include <pthread.h>

struct serve_actions;

int serve_actions_start(struct audit_store *store, const char *db_path,
                        pthread_mutex_t *config_lock, const struct medic_config *config,
                        struct serve_actions **out, struct medic_error *err);
/* Hands a decision with verdict execute to the executor. */
void serve_actions_execute(struct serve_actions *a, const struct engine_decision *d,
                           int64_t decision_id);
void serve_actions_metrics(struct serve_actions *a, struct medic_buf *out);
/* Finishes queued and running actions, then stops. NULL is a no-op. */
void serve_actions_stop(struct serve_actions *a);

#endif

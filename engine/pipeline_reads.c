/* SPDX-License-Identifier: Apache-2.0 */
/* What other threads read of the engine (/metrics, the page, the API):
 * the gauges each round publishes, without a lock, and the state itself,
 * under the engine's lock. */
#include "pipeline_internal.h"

void engine_pipeline_stats(struct engine_pipeline *e, struct engine_pipeline_stats *out)
{
    for (int v = 0; v < VERDICT_COUNT; v++)
        out->decisions[v] = atomic_load(&e->decisions[v]);
    out->rounds_failed = atomic_load(&e->rounds_failed);
    out->ticks = atomic_load(&e->ticks);
    out->evaluated = atomic_load(&e->evaluated);
    out->clock_steps = atomic_load(&e->clock_steps);
    out->wall_clock_lead = atomic_load(&e->wall_lead);
    out->disrupted_nodes = atomic_load(&e->disrupted_nodes);
    out->quarantined_nodes = atomic_load(&e->quarantined_nodes);
    out->open_incidents = atomic_load(&e->open_incidents);
    out->storm = atomic_load(&e->storm);
    out->paused = atomic_load(&e->paused);
    out->pending_approvals = atomic_load(&e->pending_approvals);
    int64_t oldest = atomic_load(&e->pending_oldest);
    out->pending_oldest_age =
        out->pending_approvals && oldest != MEDIC_TIME_UNSET ? engine_pipeline__now(e) - oldest : 0;
}

int64_t engine_pipeline__now(const struct engine_pipeline *e)
{
    return medic_steady_clock_now(&e->clock) + atomic_load(&e->clock_rebase);
}

int64_t engine_pipeline_now(const struct engine_pipeline *e)
{
    return engine_pipeline__now(e);
}

int engine_pipeline_with_state(struct engine_pipeline *e, engine_state_fn fn, void *arg)
{
    medic_mutex_lock(&e->lock);
    int rc = fn(arg, e->state);
    medic_mutex_unlock(&e->lock);
    return rc;
}

int engine_pipeline_copy_state(struct engine_pipeline *e, struct policy_state **out,
                               struct medic_error *err)
{
    /* the engine waits while the rows are written out, not while they
     * are read back */
    return policy_state_copy(e->state, &e->lock, out, err);
}

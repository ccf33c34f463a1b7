/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's state as the audit log holds it: read at start, and read
 * back after a round whose commit failed. */
#include "pipeline_internal.h"
#include "engine_evaluate.h"
#include "log.h"
#include "timeutil.h"

/* The committed state, with its changes tracked from now on. */
int engine_pipeline__read_state(struct engine_pipeline *e, struct policy_state **out,
                                struct medic_error *err)
{
    int rc = engine_state_read(e->reader, out, &e->legacy_state, err);
    if (rc)
        return rc;
    policy_state_track_changes(*out);
    if (e->legacy_state) {
        policy_state_changed_all(*out); /* the first round writes it as rows */
        medic_log_info("engine state of an earlier medic imported; it is kept as rows from now on",
                       NULL);
    } else if (policy_state_rows_outdated(*out)) {
        policy_state_changed_all(*out); /* the first round writes every row again */
        medic_log_info("engine state rows of an earlier medic read; the next round writes them "
                       "again, naming action kinds and incident states",
                       NULL);
    }
    return 0;
}

/* Reloads the last committed state after a failed commit, so that the
 * notifications of the failed round are evaluated again from it. Until it
 * could (the database is unreachable, say), no round runs: the state in
 * memory holds the failed round's changes, which never happened. */
int engine_pipeline__restore_state(struct engine_pipeline *e)
{
    struct medic_error err = {0};
    struct policy_state *st = NULL;
    if (engine_pipeline__read_state(e, &st, &err)) {
        if (!e->state_stale)
            medic_log_error("cannot restore the engine state; no round runs until it is read",
                            "error", err.msg, NULL);
        e->state_stale = 1;
        return -1;
    }
    medic_mutex_lock(&e->lock);
    policy_state_free(e->state);
    e->state = st;
    medic_mutex_unlock(&e->lock);
    if (e->state_stale)
        medic_log_info("engine state restored from the audit log", NULL);
    e->state_stale = 0;
    /* a state read back is reconciled with a read of Slurm begun after it */
    e->reconcile_after = medic_time_monotonic();
    engine_slurm_view_refresh(e->slurm);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* How a committed batch ends, on the writer or the syncer thread: the
 * commit counted, every synchronous caller woken, every asynchronous job
 * called back and freed. */
#include "store_internal.h"
#include "lock.h"
#include "log.h"
#include "timeutil.h"

#include <stdlib.h>

const double audit_commit_buckets[AUDIT_COMMIT_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};

static void record_commit(struct audit_store *s, double seconds, size_t committed, int failed)
{
    struct audit_stats *st = &s->stats;
    if (failed) {
        st->commit_failures++;
        st->unhealthy = 1; /* until the next commit that writes something */
        return;
    }
    if (committed)
        st->unhealthy = 0;
    st->commits++;
    st->requests_committed += committed;
    st->commit_seconds_sum += seconds;
    for (int i = 0; i < AUDIT_COMMIT_BUCKETS; i++)
        if (seconds <= audit_commit_buckets[i])
            st->commit_bucket_counts[i]++;
}

void audit__complete_batch(struct audit_store *s, struct job *batch, int rc,
                           const struct medic_error *err_in, int64_t start)
{
    struct medic_error err = rc ? *err_in : (struct medic_error){0};
    size_t ok = 0, refused = 0;
    for (struct job *j = batch; j; j = j->next) {
        refused += j->left_out && j->rc == MEDIC_E_FENCED;
        if (j->left_out)
            continue;
        if (rc) {
            j->rc = rc;
            j->err = err;
        } else {
            ok++;
        }
    }
    if (rc)
        medic_log_error("audit commit failed", "error", err.msg, NULL);
    double seconds = (double)(medic_time_monotonic() - start) / 1e9;
    struct job *async = NULL;
    medic_mutex_lock(&s->lock);
    record_commit(s, seconds, ok, rc != 0);
    s->stats.fenced += refused;
    for (struct job *j = batch, *next; j; j = next) {
        next = j->next; /* a woken synchronous caller frees its job */
        if (j->done_fn) {
            j->next = async;
            async = j;
        } else {
            j->done = 1;
            pthread_cond_signal(&j->cond);
        }
    }
    medic_mutex_unlock(&s->lock);
    for (struct job *j = async, *next; j; j = next) {
        next = j->next;
        if (j->rc && j->err.code == 0)
            j->err.code = j->rc;
        j->done_fn(j->done_arg, j->rc, &j->err);
        audit__prepared_release(&j->owned_prep);
        free(j);
    }
}

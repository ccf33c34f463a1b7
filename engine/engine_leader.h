/* SPDX-License-Identifier: Apache-2.0 */
/* Leadership among replicas sharing a PostgreSQL audit log (audit/pg/lease.c):
 * a thread renews this replica's lease every third of its length, or
 * takes it once it expired. When the replica gains the lease it sets the
 * audit store's term (every decision and intent is then fenced by it) and
 * calls gain, which starts the policy engine and action dispatch; when it
 * loses the lease (another replica holds it, or it could not renew it for
 * a whole lease) it clears the term first, then calls lose, which stops
 * them. The log says when and why. Private to engine/. */
#ifndef MEDIC_ENGINE_LEADER_H
#define MEDIC_ENGINE_LEADER_H

#include "audit.h"
#include "buf.h"
#include "timeutil.h"

#include <stddef.h>
#include <stdint.h>

struct engine_leader;

/* A replica whose wall clock is further than this from the database's
 * neither takes nor keeps the lease (it would judge alerts' ages wrongly
 * and date its rows so). */
#define ENGINE_LEADER_MAX_CLOCK_OFFSET (10 * MEDIC_NS_PER_SEC)

struct engine_leader_hooks {
    void *arg;
    /* this replica leads from now, in term epoch; non-zero: it could not
     * start, and gives the lease up */
    int (*gain)(void *arg, int64_t epoch);
    /* it no longer leads: stop acting (decisions are already fenced) */
    void (*lose)(void *arg);
    /* after each renewal that kept the lease: finish taking up what gain
     * could not (NULL: nothing); non-zero: it could not start after all,
     * and gives the lease up */
    int (*renewed)(void *arg);
};

/* Starts the thread; url is the audit log's. Each renewal publishes the
 * configuration configs holds then (its hash) beside the lease; a replica
 * whose configuration differs from the holder's says so (log, metrics,
 * page) and does not take the lease when it expires, unless an operator
 * forced it. */
struct config_slot;
int engine_leader_start(const char *url, const char *replica, int64_t lease,
                        struct audit_store *store, struct config_slot *configs,
                        const struct engine_leader_hooks *hooks, struct engine_leader **out,
                        struct medic_error *err);
/* Stops leading (lose first, when leading), gives the lease up so that
 * another replica need not wait for it to expire, and stops the thread.
 * NULL is a no-op. */
void engine_leader_stop(struct engine_leader *l);
/* Who leads, as the last renewal saw it, in words for the on-call page. */
void engine_leader_describe(struct engine_leader *l, char *out, size_t size);
/* medic_ha_leader, medic_ha_epoch, the renewals' latency and failures. */
void engine_leader_metrics(struct engine_leader *l, struct medic_buf *out);

#endif

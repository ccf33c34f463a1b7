/* SPDX-License-Identifier: Apache-2.0 */
/* Every lock in medic has a rank, and a thread takes locks in increasing
 * rank only: the order docs/architecture.md ("Locks") writes down. Builds
 * with MEDIC_LOCK_ORDER_CHECK (the dev and asan presets) keep, per thread,
 * the locks it holds, and abort with both locks named when one is taken
 * while a lock of the same or a higher rank is held. A condition wait
 * keeps its lock counted as held: it is taken again before the wait
 * returns. */
#ifndef MEDIC_LOCK_H
#define MEDIC_LOCK_H

#include <pthread.h>
#include <time.h>

enum medic_lock_rank {
    MEDIC_LOCK_ROLE = 1,          /* engine: the pipeline and dispatch that act (rwlock) */
    MEDIC_LOCK_RECEIVER_SETTINGS, /* receiver: limits and credentials (rwlock) */
    MEDIC_LOCK_RECEIVER_WAITING,  /* receiver: webhooks waiting for their commit */
    MEDIC_LOCK_DEADLINE,          /* receiver: connections past their deadline */
    MEDIC_LOCK_EXECUTOR,          /* actions: the workers' queue */
    MEDIC_LOCK_ENGINE_STATE,      /* the policy engine's state (pipeline) */
    MEDIC_LOCK_FLEET,             /* fleet scoring: the latest risks */
    MEDIC_LOCK_SLURM_MAINT,       /* the nodes Slurm has in maintenance */
    MEDIC_LOCK_HANDOVER,          /* what other threads hand the engine */
    MEDIC_LOCK_LEADER,            /* the lease, as this replica sees it */
    MEDIC_LOCK_CONFIG_SLOT,       /* the current configuration snapshot */
    MEDIC_LOCK_AUDIT_STORE,       /* the audit writer's queue and its threads' plans */
    MEDIC_LOCK_AGENT,             /* medic agent: the limits it replaced */
    MEDIC_LOCK_NVML,              /* medic agent: one NVML call at a time */
    MEDIC_LOCK_PREFLIGHT,         /* medic check live: the next node to check */
    MEDIC_LOCK_ANSWERS,           /* people's requests waiting for their result */
    MEDIC_LOCK_READERS,           /* pages and queries waiting for a reader */
    MEDIC_LOCK_RANKS
};

/* The rank's name, for messages and docs. */
const char *medic_lock_name(enum medic_lock_rank rank);

struct medic_mutex {
    pthread_mutex_t m;
    enum medic_lock_rank rank;
};

struct medic_rwlock {
    pthread_rwlock_t l;
    enum medic_lock_rank rank;
};

int medic_mutex_init(struct medic_mutex *m, enum medic_lock_rank rank);
void medic_mutex_destroy(struct medic_mutex *m);
void medic_mutex_lock(struct medic_mutex *m);
void medic_mutex_unlock(struct medic_mutex *m);
int medic_cond_wait(pthread_cond_t *c, struct medic_mutex *m);
int medic_cond_timedwait(pthread_cond_t *c, struct medic_mutex *m, const struct timespec *until);

int medic_rwlock_init(struct medic_rwlock *l, enum medic_lock_rank rank);
void medic_rwlock_destroy(struct medic_rwlock *l);
void medic_rwlock_rdlock(struct medic_rwlock *l);
void medic_rwlock_wrlock(struct medic_rwlock *l);
void medic_rwlock_unlock(struct medic_rwlock *l);

/* For tests: what a violation does (default: print both names and abort). */
typedef void (*medic_lock_violation_fn)(enum medic_lock_rank taking, enum medic_lock_rank held);
void medic_lock_on_violation(medic_lock_violation_fn fn);
/* 1 when this build checks the order. */
int medic_lock_order_checked(void);

#endif

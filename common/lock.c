/* SPDX-License-Identifier: Apache-2.0 */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const names[MEDIC_LOCK_RANKS] = {
    [MEDIC_LOCK_ROLE] = "engine role",
    [MEDIC_LOCK_RECEIVER_SETTINGS] = "receiver settings",
    [MEDIC_LOCK_RECEIVER_WAITING] = "receiver waiting webhooks",
    [MEDIC_LOCK_DEADLINE] = "receiver deadlines",
    [MEDIC_LOCK_EXECUTOR] = "executor queue",
    [MEDIC_LOCK_ENGINE_STATE] = "engine state",
    [MEDIC_LOCK_FLEET] = "fleet risks",
    [MEDIC_LOCK_SLURM_MAINT] = "Slurm maintenance",
    [MEDIC_LOCK_HANDOVER] = "engine handover",
    [MEDIC_LOCK_LEADER] = "leader",
    [MEDIC_LOCK_CONFIG_SLOT] = "configuration slot",
    [MEDIC_LOCK_AUDIT_STORE] = "audit store",
    [MEDIC_LOCK_AGENT] = "agent limits",
    [MEDIC_LOCK_NVML] = "agent NVML",
    [MEDIC_LOCK_PREFLIGHT] = "check live's next node",
    [MEDIC_LOCK_ANSWERS] = "people's requests waiting",
    [MEDIC_LOCK_READERS] = "pages and queries waiting",
};

const char *medic_lock_name(enum medic_lock_rank rank)
{
    return rank > 0 && rank < MEDIC_LOCK_RANKS && names[rank] ? names[rank] : "unknown lock";
}

static void report(enum medic_lock_rank taking, enum medic_lock_rank held)
{
    fprintf(stderr,
            "medic: lock order violated: taking '%s' while holding '%s' (see "
            "docs/architecture.md, Locks)\n",
            medic_lock_name(taking), medic_lock_name(held));
    abort();
}

static medic_lock_violation_fn on_violation = report;

void medic_lock_on_violation(medic_lock_violation_fn fn)
{
    on_violation = fn ? fn : report;
}

#ifdef MEDIC_LOCK_ORDER_CHECK
#define HELD_MAX 16
static _Thread_local enum medic_lock_rank held[HELD_MAX];
static _Thread_local int held_count;

static void taking(enum medic_lock_rank rank)
{
    for (int i = 0; i < held_count; i++)
        if (held[i] >= rank) {
            on_violation(rank, held[i]);
            break;
        }
}

static void took(enum medic_lock_rank rank)
{
    if (held_count < HELD_MAX)
        held[held_count] = rank;
    held_count++;
}

static void released(enum medic_lock_rank rank)
{
    int top = held_count < HELD_MAX ? held_count : HELD_MAX;
    for (int i = top - 1; i >= 0; i--)
        if (held[i] == rank) {
            for (int k = i; k + 1 < top; k++)
                held[k] = held[k + 1];
            break;
        }
    if (held_count > 0)
        held_count--;
}

int medic_lock_order_checked(void)
{
    return 1;
}
#else
static void taking(enum medic_lock_rank rank)
{
    (void)rank;
}
static void took(enum medic_lock_rank rank)
{
    (void)rank;
}
static void released(enum medic_lock_rank rank)
{
    (void)rank;
}
int medic_lock_order_checked(void)
{
    return 0;
}
#endif

int medic_mutex_init(struct medic_mutex *m, enum medic_lock_rank rank)
{
    m->rank = rank;
    return pthread_mutex_init(&m->m, NULL);
}

void medic_mutex_destroy(struct medic_mutex *m)
{
    pthread_mutex_destroy(&m->m);
}

void medic_mutex_lock(struct medic_mutex *m)
{
    taking(m->rank);
    pthread_mutex_lock(&m->m);
    took(m->rank);
}

void medic_mutex_unlock(struct medic_mutex *m)
{
    released(m->rank);
    pthread_mutex_unlock(&m->m);
}

int medic_cond_wait(pthread_cond_t *c, struct medic_mutex *m)
{
    return pthread_cond_wait(c, &m->m);
}

int medic_cond_timedwait(pthread_cond_t *c, struct medic_mutex *m, const struct timespec *until)
{
    return pthread_cond_timedwait(c, &m->m, until);
}

int medic_rwlock_init(struct medic_rwlock *l, enum medic_lock_rank rank)
{
    l->rank = rank;
    return pthread_rwlock_init(&l->l, NULL);
}

void medic_rwlock_destroy(struct medic_rwlock *l)
{
    pthread_rwlock_destroy(&l->l);
}

void medic_rwlock_rdlock(struct medic_rwlock *l)
{
    taking(l->rank);
    pthread_rwlock_rdlock(&l->l);
    took(l->rank);
}

void medic_rwlock_wrlock(struct medic_rwlock *l)
{
    taking(l->rank);
    pthread_rwlock_wrlock(&l->l);
    took(l->rank);
}

void medic_rwlock_unlock(struct medic_rwlock *l)
{
    released(l->rank);
    pthread_rwlock_unlock(&l->l);
}

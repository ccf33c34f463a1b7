/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_slurm_maint.h"
#include "lock.h"
#include "log.h"
#include "slurm.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct engine_slurm_maint {
    struct config_slot *configs;
    pthread_t thread;
    struct medic_mutex lock;
    pthread_cond_t cond;
    int stopping;
    char **names; /* sorted: the Slurm nodes in maintenance at the last read */
    size_t count;
    int failing;     /* the last read failed: said once, until one works */
    int read;        /* a read succeeded since maintenance_from_slurm was last turned on */
    int64_t read_at; /* when (monotonic) the last read succeeded */
};

static int compare(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void release(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* Asks Slurm, outside the lock; then swaps the list in. A failed read
 * keeps the last one: a node Slurm had in maintenance stays held. */
static void read_slurm(struct engine_slurm_maint *m, const struct medic_config *c)
{
    struct slurm_options o;
    slurm_options_default(&o);
    if (c->slurm_conf)
        o.slurm_conf = c->slurm_conf;
    if (c->scontrol)
        o.scontrol = c->scontrol;
    struct slurm_node_list l;
    struct medic_error err = {0};
    if (slurm_nodes_read(&o, &l, &err)) {
        if (!m->failing)
            medic_log_warn("cannot read the nodes Slurm has in maintenance; keeping the last "
                           "list",
                           "error", err.msg, NULL);
        m->failing = 1;
        return;
    }
    m->failing = 0;
    char **names = calloc(l.count ? l.count : 1, sizeof(*names));
    size_t count = 0;
    for (size_t i = 0; names && i < l.count; i++)
        if (l.items[i].maint && (names[count] = strdup(l.items[i].name)))
            count++;
    slurm_node_list_release(&l);
    if (!names)
        return;
    qsort(names, count, sizeof(*names), compare);
    medic_mutex_lock(&m->lock);
    char **old = m->names;
    size_t old_count = m->count;
    m->names = names;
    m->count = count;
    m->read = 1;
    m->read_at = medic_time_monotonic();
    medic_mutex_unlock(&m->lock);
    release(old, old_count);
}

static void *maint_main(void *arg)
{
    struct engine_slurm_maint *m = arg;
    pthread_setname_np(pthread_self(), "medic-maint");
    medic_mutex_lock(&m->lock);
    while (!m->stopping) {
        medic_mutex_unlock(&m->lock);
        const struct medic_config *c = config_slot_acquire(m->configs);
        if (c->policies.safety.maintenance_from_slurm) {
            read_slurm(m, c);
        } else { /* turned off by a reload: nothing held by it */
            medic_mutex_lock(&m->lock);
            char **old = m->names;
            size_t old_count = m->count;
            m->names = NULL;
            m->count = 0;
            m->read = 0;
            medic_mutex_unlock(&m->lock);
            release(old, old_count);
        }
        medic_config_unref(c);
        /* while the list is unknown (never read, or the last read failed)
         * disruptive steps on Slurm nodes wait: ask again sooner */
        medic_mutex_lock(&m->lock);
        int64_t wait =
            m->failing || !m->read ? ENGINE_SLURM_MAINT_RETRY : ENGINE_SLURM_MAINT_INTERVAL;
        medic_mutex_unlock(&m->lock);
        struct timespec until = medic_time_deadline_in(wait);
        medic_mutex_lock(&m->lock);
        while (!m->stopping && medic_cond_timedwait(&m->cond, &m->lock, &until) == 0)
            ;
    }
    medic_mutex_unlock(&m->lock);
    return NULL;
}

int engine_slurm_maint_start(struct config_slot *configs, struct engine_slurm_maint **out)
{
    struct engine_slurm_maint *m = calloc(1, sizeof(*m));
    if (!m)
        return MEDIC_E_NOMEM;
    m->configs = configs;
    medic_mutex_init(&m->lock, MEDIC_LOCK_SLURM_MAINT);
    medic_cond_init(&m->cond);
    if (pthread_create(&m->thread, NULL, maint_main, m) != 0) {
        pthread_cond_destroy(&m->cond);
        medic_mutex_destroy(&m->lock);
        free(m);
        return MEDIC_E_IO;
    }
    *out = m;
    return 0;
}

void engine_slurm_maint_stop(struct engine_slurm_maint *m)
{
    if (!m)
        return;
    medic_mutex_lock(&m->lock);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cond);
    medic_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    pthread_cond_destroy(&m->cond);
    medic_mutex_destroy(&m->lock);
    release(m->names, m->count);
    free(m);
}

static int in_maintenance(void *arg, const char *slurm_node, int64_t *read_at)
{
    struct engine_slurm_maint *m = arg;
    medic_mutex_lock(&m->lock);
    int known = m->read && medic_time_monotonic() - m->read_at <= ENGINE_SLURM_MAINT_STALE;
    int found = m->count && bsearch(&slurm_node, m->names, m->count, sizeof(*m->names), compare);
    /* the wall-clock time of the last read, for the reason */
    *read_at =
        m->read ? medic_time_now() - (medic_time_monotonic() - m->read_at) : MEDIC_TIME_UNSET;
    medic_mutex_unlock(&m->lock);
    return known ? found : -1; /* unknown: held, never taken as "not in maintenance" */
}

long engine_slurm_maint_count(struct engine_slurm_maint *m)
{
    if (!m)
        return -1;
    medic_mutex_lock(&m->lock);
    long n = m->read && medic_time_monotonic() - m->read_at <= ENGINE_SLURM_MAINT_STALE
                 ? (long)m->count
                 : -1;
    medic_mutex_unlock(&m->lock);
    return n;
}

void engine_slurm_maint_context(struct engine_slurm_maint *m, struct policy_context *ctx)
{
    if (!m)
        return;
    ctx->slurm_maint = in_maintenance;
    ctx->slurm_maint_arg = m;
}

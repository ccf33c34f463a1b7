/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_slurm_view.h"
#include "lock.h"
#include "log.h"
#include "slurm.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct engine_slurm_view {
    struct config_slot *configs;
    pthread_t thread;
    struct medic_mutex lock;
    pthread_cond_t cond;
    int stopping;
    int refresh;                  /* asked to read now */
    struct slurm_node_list nodes; /* sorted by name: Slurm's nodes at the last read */
    int maint_on;                 /* maintenance_from_slurm at the last read */
    int failing;                  /* the last read failed: said once, until one works */
    uint64_t reads;               /* reads that succeeded since the list was last needed */
    int64_t read_at;              /* when (monotonic) the last successful read began */
    int64_t interval;             /* slurm.read_interval at the last read */
    uint64_t total;               /* reads that succeeded since the start */
};

static int compare_nodes(const void *a, const void *b)
{
    return strcmp(((const struct slurm_node_info *)a)->name,
                  ((const struct slurm_node_info *)b)->name);
}

static const struct slurm_node_info *find(const struct engine_slurm_view *v, const char *name)
{
    struct slurm_node_info key = {.name = (char *)name};
    return v->nodes.count
               ? bsearch(&key, v->nodes.items, v->nodes.count, sizeof(key), compare_nodes)
               : NULL;
}

/* Whether the configuration needs Slurm's nodes: for maintenance, or to
 * reconcile drains where medic acts (not in dry-run) on Slurm nodes. */
static int needed(const struct medic_config *c)
{
    if (c->policies.safety.maintenance_from_slurm)
        return 1;
    if (c->mode == MEDIC_MODE_DRY_RUN)
        return 0;
    for (size_t i = 0; i < c->inventory.count; i++)
        if (c->inventory.nodes[i].slurm_node)
            return 1;
    return 0;
}

/* Asks Slurm, outside the lock; then swaps the list in. A failed read
 * keeps the last one: a node Slurm had in maintenance stays held. */
static void read_slurm(struct engine_slurm_view *v, const struct medic_config *c)
{
    struct slurm_options o;
    slurm_options_default(&o);
    if (c->slurm_conf)
        o.slurm_conf = c->slurm_conf;
    if (c->scontrol)
        o.scontrol = c->scontrol;
    struct slurm_node_list l;
    struct medic_error err = {0};
    int64_t began = medic_time_monotonic();
    if (slurm_nodes_read(&o, &l, &err)) {
        if (!v->failing)
            medic_log_warn("cannot read Slurm's nodes; keeping the last list", "error", err.msg,
                           NULL);
        v->failing = 1;
        return;
    }
    if (v->failing)
        medic_log_info("Slurm's nodes read again", NULL);
    v->failing = 0;
    qsort(l.items, l.count, sizeof(*l.items), compare_nodes);
    medic_mutex_lock(&v->lock);
    struct slurm_node_list old = v->nodes;
    v->nodes = l;
    v->maint_on = c->policies.safety.maintenance_from_slurm;
    v->reads++;
    v->total++;
    v->read_at = began;
    v->interval = c->slurm_read_interval;
    medic_mutex_unlock(&v->lock);
    slurm_node_list_release(&old);
}

/* Not needed any more (a reload): nothing is held by an old list. */
static void forget(struct engine_slurm_view *v)
{
    medic_mutex_lock(&v->lock);
    struct slurm_node_list old = v->nodes;
    memset(&v->nodes, 0, sizeof(v->nodes));
    v->reads = 0;
    v->maint_on = 0;
    medic_mutex_unlock(&v->lock);
    slurm_node_list_release(&old);
}

static void *view_main(void *arg)
{
    struct engine_slurm_view *v = arg;
    pthread_setname_np(pthread_self(), "medic-slurm");
    medic_mutex_lock(&v->lock);
    while (!v->stopping) {
        v->refresh = 0;
        medic_mutex_unlock(&v->lock);
        const struct medic_config *c = config_slot_acquire(v->configs);
        if (needed(c))
            read_slurm(v, c);
        else
            forget(v);
        medic_config_unref(c);
        /* while the list is unknown (never read, or the last read failed)
         * disruptive steps on Slurm nodes wait: ask again sooner */
        medic_mutex_lock(&v->lock);
        int64_t wait = v->failing || !v->reads ? ENGINE_SLURM_VIEW_RETRY : v->interval;
        struct timespec until = medic_time_deadline_in(wait);
        while (!v->stopping && !v->refresh && medic_cond_timedwait(&v->cond, &v->lock, &until) == 0)
            ;
    }
    medic_mutex_unlock(&v->lock);
    return NULL;
}

int engine_slurm_view_start(struct config_slot *configs, struct engine_slurm_view **out)
{
    struct engine_slurm_view *v = calloc(1, sizeof(*v));
    if (!v)
        return MEDIC_E_NOMEM;
    v->configs = configs;
    medic_mutex_init(&v->lock, MEDIC_LOCK_SLURM_MAINT);
    medic_cond_init(&v->cond);
    if (pthread_create(&v->thread, NULL, view_main, v) != 0) {
        pthread_cond_destroy(&v->cond);
        medic_mutex_destroy(&v->lock);
        free(v);
        return MEDIC_E_IO;
    }
    *out = v;
    return 0;
}

void engine_slurm_view_stop(struct engine_slurm_view *v)
{
    if (!v)
        return;
    medic_mutex_lock(&v->lock);
    v->stopping = 1;
    pthread_cond_broadcast(&v->cond);
    medic_mutex_unlock(&v->lock);
    pthread_join(v->thread, NULL);
    pthread_cond_destroy(&v->cond);
    medic_mutex_destroy(&v->lock);
    slurm_node_list_release(&v->nodes);
    free(v);
}

void engine_slurm_view_refresh(struct engine_slurm_view *v)
{
    if (!v)
        return;
    medic_mutex_lock(&v->lock);
    v->refresh = 1;
    pthread_cond_broadcast(&v->cond);
    medic_mutex_unlock(&v->lock);
}

/* Under the lock: a list read, and not too old. */
static int fresh(const struct engine_slurm_view *v)
{
    return v->reads && medic_time_monotonic() - v->read_at <= 3 * v->interval;
}

static int in_maintenance(void *arg, const char *slurm_node, int64_t *read_at)
{
    struct engine_slurm_view *v = arg;
    medic_mutex_lock(&v->lock);
    int known = fresh(v) && v->maint_on;
    const struct slurm_node_info *n = find(v, slurm_node);
    int found = n && n->maint;
    /* the wall-clock time of the last read, for the reason */
    *read_at =
        v->reads ? medic_time_now() - (medic_time_monotonic() - v->read_at) : MEDIC_TIME_UNSET;
    medic_mutex_unlock(&v->lock);
    return known ? found : -1; /* unknown: held, never taken as "not in maintenance" */
}

static int node_shown(void *arg, const char *slurm_node, char *state, size_t state_size,
                      char *reason, size_t reason_size)
{
    struct engine_slurm_view *v = arg;
    medic_mutex_lock(&v->lock);
    int known = fresh(v);
    const struct slurm_node_info *n = known ? find(v, slurm_node) : NULL;
    if (n) {
        snprintf(state, state_size, "%s", n->state ? n->state : "");
        snprintf(reason, reason_size, "%s", n->reason ? n->reason : "");
    }
    medic_mutex_unlock(&v->lock);
    return !known ? -1 : n ? 1 : 0;
}

long engine_slurm_view_maint_count(struct engine_slurm_view *v)
{
    if (!v)
        return -1;
    medic_mutex_lock(&v->lock);
    long count = -1;
    if (fresh(v) && v->maint_on) {
        count = 0;
        for (size_t i = 0; i < v->nodes.count; i++)
            count += v->nodes.items[i].maint != 0;
    }
    medic_mutex_unlock(&v->lock);
    return count;
}

uint64_t engine_slurm_view_latest(struct engine_slurm_view *v, int64_t *began)
{
    if (!v)
        return 0;
    medic_mutex_lock(&v->lock);
    uint64_t reads = fresh(v) ? v->reads : 0;
    *began = v->read_at;
    medic_mutex_unlock(&v->lock);
    return reads;
}

uint64_t engine_slurm_view_reads(struct engine_slurm_view *v)
{
    if (!v)
        return 0;
    medic_mutex_lock(&v->lock);
    uint64_t total = v->total;
    medic_mutex_unlock(&v->lock);
    return total;
}

void engine_slurm_view_context(struct engine_slurm_view *v, struct policy_context *ctx)
{
    if (!v)
        return;
    ctx->slurm_maint = in_maintenance;
    ctx->slurm_node = node_shown;
    ctx->slurm_arg = v;
}

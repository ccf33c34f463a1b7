#include "engine_fleet.h"
#include "log.h"
#include "risk.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fleet_risk {
    char node[128];
    char gpu[32];
    float risk;
};

struct engine_fleet {
    struct config_slot *configs;
    pthread_t thread;
    pthread_mutex_t lock; /* guards stopping, risks */
    pthread_cond_t cond;
    int stopping;
    struct fleet_risk *risks;
    size_t risk_count;
    atomic_llong last_success; /* unix seconds of the last complete cycle */
    atomic_ullong cycles, nodes_failed;
};

static void publish(struct engine_fleet *f, struct fleet_risk *risks, size_t count)
{
    pthread_mutex_lock(&f->lock);
    free(f->risks);
    f->risks = risks;
    f->risk_count = count;
    pthread_mutex_unlock(&f->lock);
}

static int stopping(struct engine_fleet *f)
{
    pthread_mutex_lock(&f->lock);
    int s = f->stopping;
    pthread_mutex_unlock(&f->lock);
    return s;
}

/* One cycle with the snapshot c (its model and Prometheus). */
static void cycle(struct engine_fleet *f, const struct medic_config *c)
{
    struct risk_scorer scorer;
    struct medic_error err = {0};
    char label[64];
    long timeout_ms = (long)(c->prometheus_timeout / MEDIC_NS_PER_MS);
    const char *url = c->prometheus_url;
    if (features_node_label(&c->features.items[0], label, sizeof(label)) ||
        risk_scorer_init(&scorer, &c->model, &c->features)) {
        medic_log_warn("fleet scoring: the model cannot score the fleet (its features need a "
                       "{{node}} label)",
                       NULL);
        return;
    }
    char **nodes = NULL;
    size_t node_count = 0;
    struct fleet_risk *risks = NULL;
    size_t count = 0, failed = 0;
    if (prometheus_label_values(url, timeout_ms, label, ENGINE_FLEET_MAX_NODES, &nodes, &node_count,
                                &err)) {
        medic_log_warn("fleet scoring: cannot list the nodes", "error", err.msg, NULL);
        goto out;
    }
    risks = calloc(node_count * PROMETHEUS_MAX_SERIES + 1, sizeof(*risks));
    if (!risks)
        goto out;
    int64_t now = medic_time_now();
    for (size_t i = 0; i < node_count && !stopping(f); i++) {
        struct risk_score score;
        if (risk_score_prometheus(&scorer, url, timeout_ms, nodes[i], NULL, now, &score, &err)) {
            if (err.code != MEDIC_E_NOTFOUND) /* a node without GPUs is not a failure */
                failed++;
            continue;
        }
        for (size_t g = 0; g < score.count; g++) {
            struct fleet_risk *r = &risks[count++];
            snprintf(r->node, sizeof(r->node), "%s", nodes[i]);
            snprintf(r->gpu, sizeof(r->gpu), "%s", score.gpu[g]);
            r->risk = score.gpu_risk[g];
        }
    }
    publish(f, risks, count);
    risks = NULL;
    atomic_fetch_add(&f->nodes_failed, failed);
    atomic_fetch_add(&f->cycles, 1);
    atomic_store(&f->last_success, (long long)(medic_time_now() / MEDIC_NS_PER_SEC));
    char scored[24];
    snprintf(scored, sizeof(scored), "%zu", count);
    medic_log_debug("fleet scored", "gpus", scored, NULL);
out:
    free(risks);
    for (size_t i = 0; i < node_count; i++)
        free(nodes[i]);
    free(nodes);
    risk_scorer_release(&scorer);
}

static void *fleet_main(void *arg)
{
    struct engine_fleet *f = arg;
    pthread_setname_np(pthread_self(), "medic-fleet");
    while (!stopping(f)) {
        int64_t started = medic_time_now();
        /* a reference for the cycle: a reload meanwhile takes effect at the
         * next one, and no lock is held while Prometheus answers */
        const struct medic_config *c = config_slot_acquire(f->configs);
        int on = c->prometheus_url && c->fleet_interval > 0;
        int64_t interval = on ? c->fleet_interval : 5 * MEDIC_NS_PER_SEC;
        if (on)
            cycle(f, c);
        else
            publish(f, NULL, 0);
        medic_config_unref(c);
        int64_t due = started + interval;
        struct timespec until = {(time_t)(due / MEDIC_NS_PER_SEC), (long)(due % MEDIC_NS_PER_SEC)};
        pthread_mutex_lock(&f->lock);
        while (!f->stopping && pthread_cond_timedwait(&f->cond, &f->lock, &until) == 0)
            ;
        pthread_mutex_unlock(&f->lock);
    }
    return NULL;
}

int engine_fleet_start(struct config_slot *configs, struct engine_fleet **out)
{
    struct engine_fleet *f = calloc(1, sizeof(*f));
    if (!f)
        return MEDIC_E_NOMEM;
    f->configs = configs;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    if (pthread_create(&f->thread, NULL, fleet_main, f) != 0) {
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return MEDIC_E_IO;
    }
    *out = f;
    return 0;
}

void engine_fleet_stop(struct engine_fleet *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stopping = 1;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f->risks);
    free(f);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(struct medic_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            medic_buf_printf(b, "\\%c", *s);
        else if (*s == '\n')
            medic_buf_puts(b, "\\n");
        else
            medic_buf_append(b, s, 1);
    }
}

void engine_fleet_metrics(struct engine_fleet *f, struct medic_buf *b)
{
    medic_buf_printf(b,
                     "# HELP medic_fleet_scoring_cycles_total Completed fleet scoring cycles.\n"
                     "# TYPE medic_fleet_scoring_cycles_total counter\n"
                     "medic_fleet_scoring_cycles_total %llu\n"
                     "# HELP medic_fleet_scoring_node_failures_total Nodes whose window could "
                     "not be scored (gaps, Prometheus errors).\n"
                     "# TYPE medic_fleet_scoring_node_failures_total counter\n"
                     "medic_fleet_scoring_node_failures_total %llu\n"
                     "# HELP medic_fleet_scoring_last_success_timestamp_seconds When the last "
                     "cycle completed.\n"
                     "# TYPE medic_fleet_scoring_last_success_timestamp_seconds gauge\n"
                     "medic_fleet_scoring_last_success_timestamp_seconds %lld\n"
                     "# HELP medic_gpu_failure_risk The model's failure risk of each GPU, from "
                     "the last fleet scoring cycle.\n"
                     "# TYPE medic_gpu_failure_risk gauge\n",
                     (unsigned long long)atomic_load(&f->cycles),
                     (unsigned long long)atomic_load(&f->nodes_failed),
                     (long long)atomic_load(&f->last_success));
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->risk_count; i++) {
        medic_buf_puts(b, "medic_gpu_failure_risk{node=\"");
        label_value(b, f->risks[i].node);
        medic_buf_puts(b, "\",gpu=\"");
        label_value(b, f->risks[i].gpu);
        medic_buf_printf(b, "\"} %.6f\n", (double)f->risks[i].risk);
    }
    pthread_mutex_unlock(&f->lock);
}

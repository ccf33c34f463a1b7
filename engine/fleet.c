#include "engine_fleet.h"
#include "log.h"
#include "lstm.h"
#include "prometheus_fleet.h"
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
    atomic_llong last_duration_us;
    atomic_ullong cycles, cycle_failures, gpu_failures, requests;
};

static void publish(struct engine_fleet *f, struct fleet_risk *risks, size_t count)
{
    pthread_mutex_lock(&f->lock);
    free(f->risks);
    f->risks = risks;
    f->risk_count = count;
    pthread_mutex_unlock(&f->lock);
}

static int stopping(void *arg)
{
    struct engine_fleet *f = arg;
    pthread_mutex_lock(&f->lock);
    int s = f->stopping;
    pthread_mutex_unlock(&f->lock);
    return s;
}

/* Scores the usable windows of fleet through the LSTM, ENGINE_FLEET_BATCH
 * at a time, into risks (one per usable window); returns how many. */
static size_t score(const struct model *model, const struct feature_spec *spec,
                    struct prometheus_fleet *fleet, struct fleet_risk *risks)
{
    struct model_workspace w;
    const size_t per = spec->window * spec->count;
    float *batch = malloc(ENGINE_FLEET_BATCH * per * sizeof(float));
    float out[ENGINE_FLEET_BATCH];
    size_t members[ENGINE_FLEET_BATCH];
    size_t count = 0;
    if (!batch || model_workspace_init(&w, model, ENGINE_FLEET_BATCH, spec->window)) {
        free(batch);
        return 0;
    }
    for (size_t i = 0, n = 0; i <= fleet->count; i++) {
        if (i < fleet->count && fleet->series[i].usable) {
            memcpy(batch + n * per, prometheus_fleet_rows(fleet, spec, i), per * sizeof(float));
            features_scale(spec, batch + n * per, spec->window);
            members[n++] = i;
        }
        if (n == ENGINE_FLEET_BATCH || (i == fleet->count && n)) {
            if (model_predict(model, &w, batch, n, spec->window, out, NULL) == 0)
                for (size_t b = 0; b < n; b++) {
                    const struct prometheus_series *s = &fleet->series[members[b]];
                    struct fleet_risk *r = &risks[count++];
                    snprintf(r->node, sizeof(r->node), "%s", s->node);
                    snprintf(r->gpu, sizeof(r->gpu), "%s", s->gpu);
                    r->risk = out[b];
                }
            n = 0;
        }
    }
    model_workspace_release(&w);
    free(batch);
    return count;
}

/* One cycle with the snapshot c (its model and Prometheus): the fleet's
 * windows in one request per feature, then every GPU scored in batches.
 * On failure nothing is exported: a stale risk would read as a current one. */
static void cycle(struct engine_fleet *f, const struct medic_config *c)
{
    struct medic_error err = {0};
    struct prometheus_fleet fleet;
    int64_t started = medic_time_monotonic();
    struct prometheus_fleet_query q = {
        .url = c->prometheus_url,
        .timeout_ms = (long)(c->prometheus_timeout / MEDIC_NS_PER_MS),
        .max_series = ENGINE_FLEET_MAX_GPUS,
        .parallel = ENGINE_FLEET_PARALLEL,
        .cancelled = stopping,
        .arg = f,
    };
    int rc = prometheus_fetch_fleet(&q, &c->features, medic_time_now(), &fleet, &err);
    atomic_fetch_add(&f->requests, fleet.requests);
    if (rc) {
        publish(f, NULL, 0);
        atomic_fetch_add(&f->cycle_failures, 1);
        medic_log_warn("fleet scoring: no risks this cycle", "error", err.msg, NULL);
        return;
    }
    struct fleet_risk *risks = calloc(fleet.count + 1, sizeof(*risks));
    size_t count = risks ? score(&c->model, &c->features, &fleet, risks) : 0;
    publish(f, risks, count);
    if (fleet.unusable)
        medic_log_debug("fleet scoring: GPUs left out", "first", fleet.first_problem, NULL);
    atomic_fetch_add(&f->gpu_failures, fleet.count - count);
    atomic_fetch_add(&f->cycles, 1);
    atomic_store(&f->last_success, (long long)(medic_time_now() / MEDIC_NS_PER_SEC));
    atomic_store(&f->last_duration_us, (long long)((medic_time_monotonic() - started) / 1000));
    prometheus_fleet_release(&fleet);
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
    medic_buf_printf(
        b,
        "# HELP medic_fleet_scoring_cycles_total Completed fleet scoring cycles.\n"
        "# TYPE medic_fleet_scoring_cycles_total counter\n"
        "medic_fleet_scoring_cycles_total %llu\n"
        "# HELP medic_fleet_scoring_failures_total Cycles that exported no risks "
        "(Prometheus unreachable, slow or failing, or an answer medic could not use).\n"
        "# TYPE medic_fleet_scoring_failures_total counter\n"
        "medic_fleet_scoring_failures_total %llu\n"
        "# HELP medic_fleet_scoring_gpu_failures_total GPUs left out of a cycle (a gap in "
        "their window, or no data at its start).\n"
        "# TYPE medic_fleet_scoring_gpu_failures_total counter\n"
        "medic_fleet_scoring_gpu_failures_total %llu\n"
        "# HELP medic_fleet_scoring_prometheus_requests_total query_range requests made by "
        "fleet scoring (one per model feature and cycle).\n"
        "# TYPE medic_fleet_scoring_prometheus_requests_total counter\n"
        "medic_fleet_scoring_prometheus_requests_total %llu\n"
        "# HELP medic_fleet_scoring_duration_seconds How long the last complete cycle took.\n"
        "# TYPE medic_fleet_scoring_duration_seconds gauge\n"
        "medic_fleet_scoring_duration_seconds %.6f\n"
        "# HELP medic_fleet_scoring_last_success_timestamp_seconds When the last "
        "cycle completed.\n"
        "# TYPE medic_fleet_scoring_last_success_timestamp_seconds gauge\n"
        "medic_fleet_scoring_last_success_timestamp_seconds %lld\n"
        "# HELP medic_gpu_failure_risk The model's failure risk of each GPU, from "
        "the last fleet scoring cycle.\n"
        "# TYPE medic_gpu_failure_risk gauge\n",
        (unsigned long long)atomic_load(&f->cycles),
        (unsigned long long)atomic_load(&f->cycle_failures),
        (unsigned long long)atomic_load(&f->gpu_failures),
        (unsigned long long)atomic_load(&f->requests),
        (double)atomic_load(&f->last_duration_us) / 1e6, (long long)atomic_load(&f->last_success));
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

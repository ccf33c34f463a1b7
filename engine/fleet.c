/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_fleet.h"
#include "lock.h"
#include "log.h"
#include "risk.h"
#include "timeutil.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fleet_risk {
    char node[128];
    char gpu[32];
    float risk;
    struct prometheus_silence lost; /* with steps: the GPU is lost */
    float last[FEATURES_MAX];       /* the window's latest raw values */
    unsigned fired;                 /* the rule's terms above 0 */
};

/* The risks of one cycle. */
struct published {
    struct fleet_risk *risks;
    size_t count;
    struct medic_map by_key; /* "node\037gpu" -> index + 1; "node\037" -> its worst GPU's */
    int64_t window_end;
    int64_t step;        /* the windows' step (ns) */
    char model_hash[65]; /* the model that scored them */
};

struct engine_fleet {
    struct config_slot *configs;
    pthread_t thread;
    struct medic_mutex lock; /* guards stopping, the risks; previous while it changes */
    pthread_cond_t cond;
    int stopping;
    /* the last cycle's risks (exported), and those of the window a step
     * earlier while alerts may still ask for it (a cycle run ahead of a
     * step scores the window ending at that step) */
    struct published current, older;
    int64_t ahead_until;       /* the step the last cycle ran ahead for (wall clock) */
    atomic_llong last_success; /* unix seconds of the last complete cycle */
    atomic_llong last_duration_us;
    atomic_ullong cycles, cycle_failures, gpu_failures, requests, full_fetches;
    atomic_ullong alert_requests; /* query_range requests of alerts' own fetches */
    /* the last cycle's windows, whose steps the next cycle reuses, and for
     * which model and Prometheus: changed by the fleet thread under the
     * lock, read by others (engine_fleet_carry) under it */
    struct prometheus_fleet previous;
    char previous_model[65];
    char previous_url[512];
    int64_t full_at; /* when the last whole-window fetch ran (monotonic) */
    int full_next;   /* the last cycle found GPUs it had not seen: fetch all */
};

static void published_release(struct published *p)
{
    free(p->risks);
    medic_map_release(&p->by_key);
    memset(p, 0, sizeof(*p));
}

/* Makes risks the current ones (taking them), indexed for lookups; the
 * current ones of the window a step earlier are kept for alerts of that
 * window. NULL drops both. */
static void publish(struct engine_fleet *f, struct fleet_risk *risks, size_t count,
                    int64_t window_end, int64_t step, const char *model_hash)
{
    struct published next = {
        .risks = risks, .count = count, .window_end = window_end, .step = step};
    snprintf(next.model_hash, sizeof(next.model_hash), "%s", model_hash ? model_hash : "");
    for (size_t i = 0; i < count; i++) {
        char key[sizeof(risks[i].node) + sizeof(risks[i].gpu) + 1];
        snprintf(key, sizeof(key), "%s\037%s", risks[i].node, risks[i].gpu);
        medic_map_put(&next.by_key, key, (void *)(uintptr_t)(i + 1));
        snprintf(key, sizeof(key), "%s\037", risks[i].node);
        uintptr_t worst = (uintptr_t)medic_map_get(&next.by_key, key);
        if (risks[i].gpu[0] && (!worst || risks[worst - 1].risk < risks[i].risk))
            medic_map_put(&next.by_key, key, (void *)(uintptr_t)(i + 1));
    }
    struct published gone;
    medic_mutex_lock(&f->lock);
    if (risks && f->current.risks && f->current.window_end < window_end) {
        gone = f->older;
        f->older = f->current;
    } else {
        gone = f->current;
        if (!risks)
            published_release(&f->older);
    }
    f->current = next;
    medic_mutex_unlock(&f->lock);
    published_release(&gone);
}

static int find(const struct published *p, const char *model_hash, int64_t window_end,
                const char *key)
{
    return p->risks && p->window_end == window_end && strcmp(p->model_hash, model_hash) == 0
               ? (int)(uintptr_t)medic_map_get(&p->by_key, key)
               : 0;
}

int engine_fleet_lookup(struct engine_fleet *f, const char *model_hash, int64_t window_end,
                        const char *node, const char *gpu, struct engine_fleet_score *out)
{
    if (!f)
        return MEDIC_E_NOTFOUND;
    char key[128 + 32 + 1];
    snprintf(key, sizeof(key), "%s\037%s", node, gpu);
    int rc = MEDIC_E_NOTFOUND;
    medic_mutex_lock(&f->lock);
    const struct published *p = &f->current;
    int at = find(p, model_hash, window_end, key);
    if (!at)
        at = find(p = &f->older, model_hash, window_end, key);
    if (at) {
        const struct fleet_risk *r = &p->risks[at - 1];
        out->risk = r->risk;
        out->lost = r->lost;
        snprintf(out->gpu, sizeof(out->gpu), "%s", r->gpu);
        memcpy(out->last, r->last, sizeof(out->last));
        out->fired = r->fired;
        rc = 0;
    }
    medic_mutex_unlock(&f->lock);
    return rc;
}

static int stopping(void *arg)
{
    struct engine_fleet *f = arg;
    medic_mutex_lock(&f->lock);
    int s = f->stopping;
    medic_mutex_unlock(&f->lock);
    return s;
}

/* Whether the next fetch may reuse the previous cycle's steps: the same
 * model and Prometheus, GPUs it had all seen, and a whole-window fetch less
 * than ENGINE_FLEET_FULL_EVERY ago (so that a GPU Prometheus did not answer
 * for at a step, or one that appeared, is fetched whole again soon). */
static const struct prometheus_fleet *reusable(struct engine_fleet *f, const struct medic_config *c,
                                               int64_t started)
{
    if (!f->previous.count || f->full_next || strcmp(f->previous_model, c->model.hash) != 0 ||
        strcmp(f->previous_url, c->prometheus_url) != 0 ||
        started - f->full_at >= ENGINE_FLEET_FULL_EVERY)
        return NULL;
    return &f->previous;
}

/* One cycle with the snapshot c (its model and Prometheus): the fleet's
 * windows in one request per feature, then every GPU scored in batches.
 * On failure nothing is exported: a stale risk would read as a current one. */
static void cycle(struct engine_fleet *f, const struct medic_config *c, int64_t now)
{
    struct medic_error err = {0};
    struct prometheus_fleet fleet;
    int64_t started = medic_time_monotonic();
    /* a cycle may take its interval: the 2 s an alert's round waits is no
     * bound for fetching a large fleet's whole windows, and a slow cycle
     * only delays the next */
    const int64_t budget =
        c->fleet_interval > c->prometheus_timeout ? c->fleet_interval : c->prometheus_timeout;
    struct prometheus_fleet_query q = {
        .url = c->prometheus_url,
        .timeout_ms = (long)(budget / MEDIC_NS_PER_MS),
        .max_series = ENGINE_FLEET_MAX_GPUS,
        .parallel = ENGINE_FLEET_PARALLEL,
        .cancelled = stopping,
        .arg = f,
        .previous = reusable(f, c, started),
    };
    const int64_t step = c->features.step;
    int rc = prometheus_fetch_fleet(&q, &c->features, now, &fleet, &err);
    atomic_fetch_add(&f->requests, fleet.requests);
    if (rc) {
        medic_mutex_lock(&f->lock);
        prometheus_fleet_release(&f->previous);
        medic_mutex_unlock(&f->lock);
        publish(f, NULL, 0, 0, 0, NULL);
        atomic_fetch_add(&f->cycle_failures, 1);
        medic_log_warn("fleet scoring: no risks this cycle", "error", err.msg, NULL);
        return;
    }
    struct fleet_risk *risks = calloc(fleet.count + 1, sizeof(*risks));
    float *risk = malloc((fleet.count + 1) * sizeof(*risk));
    unsigned *fired = malloc((fleet.count + 1) * sizeof(*fired));
    size_t count = 0;
    if (risks && risk && fired &&
        risk_score_fleet(&c->model, &c->features, &fleet, risk, fired) == 0)
        for (size_t i = 0; i < fleet.count; i++) {
            if (isnan(risk[i]))
                continue;
            struct fleet_risk *r = &risks[count++];
            snprintf(r->node, sizeof(r->node), "%s", fleet.series[i].node);
            snprintf(r->gpu, sizeof(r->gpu), "%s", fleet.series[i].gpu);
            r->risk = risk[i];
            r->lost = fleet.series[i].lost;
            r->fired = fired[i];
            memcpy(r->last,
                   prometheus_fleet_rows(&fleet, &c->features, i) +
                       (c->features.window - 1) * c->features.count,
                   c->features.count * sizeof(float));
        }
    free(risk);
    free(fired);
    publish(f, risks, count, now / step * step, step, c->model.hash);
    if (fleet.unusable)
        medic_log_debug("fleet scoring: GPUs left out", "first", fleet.first_problem, NULL);
    atomic_fetch_add(&f->gpu_failures, fleet.count - count);
    atomic_fetch_add(&f->cycles, 1);
    atomic_store(&f->last_success, (long long)(medic_time_now() / MEDIC_NS_PER_SEC));
    atomic_store(&f->last_duration_us, (long long)((medic_time_monotonic() - started) / 1000));
    if (!q.previous) {
        f->full_at = started;
        atomic_fetch_add(&f->full_fetches, 1);
    }
    f->full_next = fleet.fresh > 0;
    /* the next cycle, and alerts' own fetches, start from these steps */
    medic_mutex_lock(&f->lock);
    struct prometheus_fleet old = f->previous;
    f->previous = fleet;
    snprintf(f->previous_model, sizeof(f->previous_model), "%s", c->model.hash);
    snprintf(f->previous_url, sizeof(f->previous_url), "%s", c->prometheus_url);
    medic_mutex_unlock(&f->lock);
    prometheus_fleet_release(&old);
}

int engine_fleet_carry(struct engine_fleet *f, const char *model_hash, const char *url,
                       const struct feature_spec *spec, const char *const *nodes, size_t n,
                       struct prometheus_fleet *out)
{
    if (!f)
        return MEDIC_E_NOTFOUND;
    int rc = MEDIC_E_NOTFOUND;
    medic_mutex_lock(&f->lock);
    if (f->previous.count && strcmp(f->previous_model, model_hash) == 0 &&
        strcmp(f->previous_url, url) == 0)
        rc = prometheus_fleet_subset(&f->previous, spec, nodes, n, out);
    medic_mutex_unlock(&f->lock);
    return rc;
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
        const int64_t step = c->features.step;
        /* after a cycle run ahead of a step, the cycles until that step
         * score its window again (with what Prometheus has stored since) */
        const int64_t at = started > f->ahead_until ? started : f->ahead_until;
        if (on)
            cycle(f, c, at);
        else
            publish(f, NULL, 0, 0, 0, NULL);
        medic_config_unref(c);
        int64_t due = started + interval;
        /* A cycle more often than the model's step also runs ahead of each
         * step, by the last cycle's duration and a margin, scoring the
         * window that ends at that step: otherwise, from the step until a
         * cycle after it has finished, alerts could not take its risks
         * (their window ends a step later) and would fetch their own. */
        int64_t next_step = step > 0 ? (started / step + 1) * step : 0;
        const int64_t last = atomic_load(&f->last_duration_us) * 1000;
        const int64_t lead = last + last / 4 + ENGINE_FLEET_AHEAD_MARGIN;
        if (on && step > 0 && interval < step && lead < step / 2 && f->ahead_until < next_step &&
            next_step - lead < due) {
            due = next_step - lead > started ? next_step - lead : started;
            f->ahead_until = next_step;
        }
        /* due is a wall-clock instant (steps are Prometheus time); the wait
         * is measured on the monotonic clock and never longer than an
         * interval, so that a step of the wall clock backwards does not
         * stall scoring (forwards, the next cycle runs at once) */
        int64_t wait = due - medic_time_now();
        struct timespec until = medic_time_deadline_in(wait < interval ? wait : interval);
        medic_mutex_lock(&f->lock);
        while (!f->stopping && medic_cond_timedwait(&f->cond, &f->lock, &until) == 0)
            ;
        medic_mutex_unlock(&f->lock);
    }
    return NULL;
}

int engine_fleet_start(struct config_slot *configs, struct engine_fleet **out)
{
    struct engine_fleet *f = calloc(1, sizeof(*f));
    if (!f)
        return MEDIC_E_NOMEM;
    f->configs = configs;
    medic_map_init(&f->current.by_key);
    medic_map_init(&f->older.by_key);
    medic_mutex_init(&f->lock, MEDIC_LOCK_FLEET);
    medic_cond_init(&f->cond);
    if (pthread_create(&f->thread, NULL, fleet_main, f) != 0) {
        pthread_cond_destroy(&f->cond);
        medic_mutex_destroy(&f->lock);
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
    medic_mutex_lock(&f->lock);
    f->stopping = 1;
    pthread_cond_broadcast(&f->cond);
    medic_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->cond);
    medic_mutex_destroy(&f->lock);
    published_release(&f->current);
    published_release(&f->older);
    prometheus_fleet_release(&f->previous);
    free(f);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
void engine_prometheus_label(struct medic_buf *b, const char *s)
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
        "# HELP medic_fleet_scoring_full_fetches_total Cycles that asked Prometheus for the "
        "whole window (the others ask for the steps since the last cycle).\n"
        "# TYPE medic_fleet_scoring_full_fetches_total counter\n"
        "medic_fleet_scoring_full_fetches_total %llu\n"
        "# HELP medic_fleet_scoring_duration_seconds How long the last complete cycle took.\n"
        "# TYPE medic_fleet_scoring_duration_seconds gauge\n"
        "medic_fleet_scoring_duration_seconds %.6f\n"
        "# HELP medic_fleet_scoring_last_success_timestamp_seconds When the last "
        "cycle completed.\n"
        "# TYPE medic_fleet_scoring_last_success_timestamp_seconds gauge\n"
        "medic_fleet_scoring_last_success_timestamp_seconds %lld\n"
        "# HELP medic_risk_prometheus_requests_total query_range requests made for alerts "
        "whose GPU the fleet's cycles had not scored on the alert's window.\n"
        "# TYPE medic_risk_prometheus_requests_total counter\n"
        "medic_risk_prometheus_requests_total %llu\n"
        "# HELP medic_gpu_failure_risk The failure risk of each GPU from the last fleet "
        "scoring cycle: the model's, or 1 for a GPU whose telemetry is lost "
        "(medic_gpu_telemetry_lost_seconds).\n"
        "# TYPE medic_gpu_failure_risk gauge\n",
        (unsigned long long)atomic_load(&f->cycles),
        (unsigned long long)atomic_load(&f->cycle_failures),
        (unsigned long long)atomic_load(&f->gpu_failures),
        (unsigned long long)atomic_load(&f->requests),
        (unsigned long long)atomic_load(&f->full_fetches),
        (double)atomic_load(&f->last_duration_us) / 1e6, (long long)atomic_load(&f->last_success),
        (unsigned long long)atomic_load(&f->alert_requests));
    medic_mutex_lock(&f->lock);
    if (f->current.risks)
        medic_buf_printf(b,
                         "# HELP medic_fleet_scoring_window_end_timestamp_seconds Where the "
                         "window of the exported risks ends (a cycle ahead of a step scores "
                         "the window ending at it).\n"
                         "# TYPE medic_fleet_scoring_window_end_timestamp_seconds gauge\n"
                         "medic_fleet_scoring_window_end_timestamp_seconds %lld\n",
                         (long long)(f->current.window_end / MEDIC_NS_PER_SEC));
    for (size_t i = 0; i < f->current.count; i++) {
        medic_buf_puts(b, "medic_gpu_failure_risk{node=\"");
        engine_prometheus_label(b, f->current.risks[i].node);
        medic_buf_puts(b, "\",gpu=\"");
        engine_prometheus_label(b, f->current.risks[i].gpu);
        medic_buf_printf(b, "\"} %.6f\n", (double)f->current.risks[i].risk);
    }
    medic_buf_puts(b, "# HELP medic_gpu_telemetry_lost_seconds How long each lost GPU sent "
                      "nothing while its node's other GPUs reported, in the last cycle's "
                      "window (only lost GPUs are listed).\n"
                      "# TYPE medic_gpu_telemetry_lost_seconds gauge\n");
    for (size_t i = 0; i < f->current.count; i++) {
        const struct fleet_risk *r = &f->current.risks[i];
        if (!r->lost.steps)
            continue;
        medic_buf_puts(b, "medic_gpu_telemetry_lost_seconds{node=\"");
        engine_prometheus_label(b, r->node);
        medic_buf_puts(b, "\",gpu=\"");
        engine_prometheus_label(b, r->gpu);
        medic_buf_printf(b, "\"} %lld\n",
                         (long long)(r->lost.steps * f->current.step / MEDIC_NS_PER_SEC));
    }
    medic_mutex_unlock(&f->lock);
}

void engine_fleet_count_alert_requests(struct engine_fleet *f, size_t n)
{
    if (f)
        atomic_fetch_add(&f->alert_requests, n);
}

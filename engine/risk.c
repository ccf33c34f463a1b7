/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_risk.h"
#include "log.h"
#include "prometheus_fleet.h"
#include "risk.h"
#include "rule_score.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void engine_risk_begin(struct engine_risk *r, const struct medic_config *config,
                       struct engine_fleet *fleet, int64_t now)
{
    memset(r, 0, sizeof(*r));
    r->config = config;
    r->fleet = fleet;
    r->now = now;
    r->deadline = medic_time_monotonic() + config->prometheus_timeout;
    r->enabled = config->prometheus_url != NULL; /* the model is always there */
    medic_arena_init(&r->arena);
    medic_map_init(&r->entries);
    medic_map_init(&r->asked);
    medic_map_init(&r->fetched);
}

void engine_risk_end(struct engine_risk *r)
{
    medic_map_release(&r->entries);
    medic_map_release(&r->asked);
    medic_map_release(&r->fetched);
    medic_arena_release(&r->arena);
    free(r->wanted);
    r->wanted = NULL;
    r->wanted_count = r->wanted_cap = 0;
    r->enabled = 0;
}

/* The alert's node and GPU ("" without one); -1 when it is not scored. */
static int alert_key(const struct engine_risk *r, const struct medic_alert *a, char *node,
                     size_t size, const char **gpu)
{
    if (!r->enabled || a->status != MEDIC_STATUS_FIRING)
        return -1;
    if (medic_alert_node(&a->labels, (const char *const *)r->config->node_labels,
                         r->config->node_label_count, node, size))
        return -1;
    *gpu = medic_labels_get(&a->labels, "gpu");
    if (!*gpu || strlen(*gpu) >= sizeof(((struct engine_risk_entry *)0)->gpu))
        *gpu = "";
    return 0;
}

/* The entry of (node, gpu): found, or created (unknown risk) when create
 * is set; NULL when absent or out of memory. */
static struct engine_risk_entry *entry(struct engine_risk *r, const char *node, const char *gpu,
                                       int create)
{
    char key[sizeof(((struct engine_risk_entry *)0)->node) + 40];
    snprintf(key, sizeof(key), "%s\037%s", node, gpu);
    struct engine_risk_entry *e = medic_map_get(&r->entries, key);
    if (e || !create)
        return e;
    e = medic_arena_alloc(&r->arena, sizeof(*e));
    if (!e || medic_map_put(&r->entries, key, e))
        return NULL;
    snprintf(e->node, sizeof(e->node), "%s", node);
    snprintf(e->gpu, sizeof(e->gpu), "%s", gpu);
    e->risk = NAN;
    return e;
}

static void unknown(struct engine_risk_entry *e, const char *why)
{
    e->risk = NAN;
    snprintf(e->note, sizeof(e->note), "risk unknown: %.200s", why);
}

/* "risk 0.83 gpu 3 (rule: ecc_sbe, pcie_replay; ecc_sbe_log_increase_15m=3.7
 * temp_rise_1h=12.5 ...)": the rule's terms that fired (fired, when the
 * model blends the rule into its risk), then the GPU's latest values of the
 * RISK_NOTE_INPUTS inputs furthest from the model's centre, in units of
 * their scale (what stands out, most first); for a lost GPU, "risk 1 gpu 3
 * (telemetry lost: ...)". */
#define RISK_NOTE_INPUTS 4
static void summarise(const struct feature_spec *spec, struct engine_risk_entry *e, double risk,
                      const char *gpu, const float *last, unsigned fired,
                      const struct prometheus_silence *lost)
{
    e->risk = risk;
    char shown_risk[24];
    medic_risk_format(risk, shown_risk, sizeof(shown_risk));
    size_t at = (size_t)snprintf(e->note, sizeof(e->note), "risk %s gpu %s (", shown_risk,
                                 gpu[0] ? gpu : "-");
    if (lost->steps) {
        char why[160];
        prometheus_silence_describe(lost, spec->step, why, sizeof(why));
        snprintf(e->note + at, sizeof(e->note) - at, "%s)", why);
        return;
    }
    if (spec->blend.on && fired) {
        char terms[160];
        rule_fired_describe(fired, terms, sizeof(terms));
        at += (size_t)snprintf(e->note + at, sizeof(e->note) - at, "rule: %s; ", terms);
    }
    size_t shown[RISK_NOTE_INPUTS], count = 0;
    for (size_t d = 0; d < spec->count; d++) {
        const struct feature *f = &spec->items[d];
        double z = fabs(((double)last[d] - f->center) / f->scale);
        size_t k = count < RISK_NOTE_INPUTS ? count++ : RISK_NOTE_INPUTS;
        for (; k > 0; k--) { /* insertion into the top list, largest first */
            const struct feature *g = &spec->items[shown[k - 1]];
            if (fabs(((double)last[shown[k - 1]] - g->center) / g->scale) >= z)
                break;
            if (k < RISK_NOTE_INPUTS)
                shown[k] = shown[k - 1];
        }
        if (k < RISK_NOTE_INPUTS)
            shown[k] = d;
    }
    for (size_t i = 0; i < count && at < sizeof(e->note); i++)
        at += (size_t)snprintf(e->note + at, sizeof(e->note) - at, "%s%s=%.4g", i ? " " : "",
                               spec->items[shown[i]].name, (double)last[shown[i]]);
    if (at < sizeof(e->note))
        snprintf(e->note + at, sizeof(e->note) - at, ")");
}

/* The entry of (node, gpu) from the fleet's last cycle, when it scored the
 * round's window; NULL otherwise. */
static struct engine_risk_entry *from_fleet(struct engine_risk *r, const char *node,
                                            const char *gpu)
{
    const struct feature_spec *spec = &r->config->features;
    struct engine_fleet_score s;
    if (engine_fleet_lookup(r->fleet, r->config->model.hash, r->now / spec->step * spec->step, node,
                            gpu, &s))
        return NULL;
    struct engine_risk_entry *e = entry(r, node, gpu, 1);
    if (e)
        summarise(spec, e, s.risk, s.gpu, s.last, s.fired, &s.lost);
    return e;
}

void engine_risk_want(struct engine_risk *r, const struct medic_alert *a)
{
    char node[128];
    const char *gpu;
    if (alert_key(r, a, node, sizeof(node), &gpu) || entry(r, node, gpu, 0) ||
        from_fleet(r, node, gpu) || medic_map_get(&r->asked, node))
        return;
    if (r->wanted_count == r->wanted_cap) {
        size_t cap = r->wanted_cap ? r->wanted_cap * 2 : 64;
        const char **w = realloc(r->wanted, cap * sizeof(*w));
        if (!w)
            return; /* fetched on its own when scored */
        r->wanted = w;
        r->wanted_cap = cap;
    }
    char *name = medic_arena_strdup(&r->arena, node);
    if (name && medic_map_put(&r->asked, node, name) == 0)
        r->wanted[r->wanted_count++] = name;
}

/* The entries of the nodes of one fetch: each GPU's, and each node's
 * (gpu ""), its worst usable GPU's. */
static void record(struct engine_risk *r, const struct prometheus_fleet *f, const float *risk,
                   const unsigned *fired)
{
    const struct feature_spec *spec = &r->config->features;
    const size_t F = spec->count, last = (spec->window - 1) * F;
    for (size_t i = 0; i < f->count; i++) {
        const struct prometheus_series *s = &f->series[i];
        struct engine_risk_entry *e = entry(r, s->node, s->gpu, 1);
        if (!e)
            continue;
        if (isnan(risk[i])) {
            char why[200];
            prometheus_series_problem(spec, s, why, sizeof(why));
            unknown(e, why);
        } else {
            summarise(spec, e, risk[i], s->gpu, prometheus_fleet_rows(f, spec, i) + last, fired[i],
                      &s->lost);
        }
        struct engine_risk_entry *n = s->gpu[0] ? entry(r, s->node, "", 1) : NULL;
        if (!n || isnan(risk[i]))
            continue;
        if (isnan(n->risk) || risk[i] > n->risk)
            summarise(spec, n, risk[i], s->gpu, prometheus_fleet_rows(f, spec, i) + last, fired[i],
                      &s->lost);
    }
    /* a node none of whose GPUs could be scored: the first one's reason */
    for (size_t i = 0; i < f->count; i++) {
        struct engine_risk_entry *n = entry(r, f->series[i].node, "", 1);
        if (n && isnan(n->risk) && !n->note[0]) {
            char why[200];
            prometheus_series_problem(spec, &f->series[i], why, sizeof(why));
            unknown(n, why);
        }
    }
}

/* One fetch of q's nodes within what is left of the round's budget,
 * counted as the alerts' own requests. */
static int fetch_counted(struct engine_risk *r, struct prometheus_fleet_query *q,
                         struct prometheus_fleet *f, struct medic_error *err)
{
    q->timeout_ms = (long)((r->deadline - medic_time_monotonic()) / MEDIC_NS_PER_MS);
    if (q->timeout_ms <= 0) {
        memset(f, 0, sizeof(*f));
        return medic_error_set(err, MEDIC_E_IO, "the round's Prometheus budget is spent");
    }
    int rc = prometheus_fetch_fleet(q, &r->config->features, r->now, f, err);
    engine_fleet_count_alert_requests(r->fleet, f->requests);
    return rc;
}

/* Fetches and scores the announced nodes, ENGINE_RISK_NODES_PER_FETCH at a
 * time, within the round's budget. */
static void fetch_wanted(struct engine_risk *r)
{
    const struct medic_config *c = r->config;
    while (r->wanted_count) {
        size_t n = r->wanted_count < ENGINE_RISK_NODES_PER_FETCH ? r->wanted_count
                                                                 : ENGINE_RISK_NODES_PER_FETCH;
        for (size_t i = 0; i < n; i++)
            medic_map_put(&r->fetched, r->wanted[i], (void *)r->wanted[i]);
        struct medic_buf regex;
        medic_buf_init(&regex, 0);
        if (!r->unavailable[0] && features_nodes_regex(r->wanted, n, &regex) == 0) {
            struct prometheus_fleet_query q = {
                .url = c->prometheus_url,
                .node_regex = regex.data,
                .max_series = n * PROMETHEUS_MAX_SERIES,
                .parallel = ENGINE_RISK_PARALLEL,
            };
            /* the fleet's last windows of these nodes, when it has all of
             * them: only the steps since are asked for (at a step boundary,
             * before the fleet's next cycle, a whole window here would wait
             * behind the fleet's queries); a GPU it lacked, whole windows */
            struct prometheus_fleet carry, f;
            int carried = engine_fleet_carry(r->fleet, c->model.hash, c->prometheus_url,
                                             &c->features, r->wanted, n, &carry) == 0;
            q.previous = carried ? &carry : NULL;
            struct medic_error err = {0};
            int rc = fetch_counted(r, &q, &f, &err);
            if (rc == 0 && carried && f.fresh) {
                prometheus_fleet_release(&f);
                q.previous = NULL;
                rc = fetch_counted(r, &q, &f, &err);
            }
            if (carried)
                prometheus_fleet_release(&carry);
            float *risk = rc ? NULL : malloc((f.count + 1) * sizeof(*risk));
            unsigned *fired = rc ? NULL : malloc((f.count + 1) * sizeof(*fired));
            if (rc == 0 && risk && fired &&
                risk_score_fleet(&c->model, &c->features, &f, risk, fired) == 0)
                record(r, &f, risk, fired);
            free(risk);
            free(fired);
            if (rc == 0)
                prometheus_fleet_release(&f);
            else if (rc != MEDIC_E_NOTFOUND) { /* Prometheus itself: the rest would fail too */
                snprintf(r->unavailable, sizeof(r->unavailable), "%.199s", err.msg);
                medic_log_warn("risk unknown", "error", err.msg, NULL);
            }
        }
        medic_buf_release(&regex);
        memmove(r->wanted, r->wanted + n, (r->wanted_count - n) * sizeof(*r->wanted));
        r->wanted_count -= n;
    }
}

const struct engine_risk_entry *engine_risk_alert(struct engine_risk *r,
                                                  const struct medic_alert *a)
{
    char node[128];
    const char *gpu;
    if (alert_key(r, a, node, sizeof(node), &gpu))
        return NULL;
    struct engine_risk_entry *e = entry(r, node, gpu, 0);
    if (e || (e = from_fleet(r, node, gpu)))
        return e;
    if (!medic_map_get(&r->fetched, node)) {
        engine_risk_want(r, a);
        fetch_wanted(r);
        if ((e = entry(r, node, gpu, 0)))
            return e;
    }
    if (!(e = entry(r, node, gpu, 1)))
        return NULL;
    char why[256];
    if (r->unavailable[0])
        snprintf(why, sizeof(why), "%s", r->unavailable);
    else
        snprintf(why, sizeof(why),
                 "prometheus has no %.64s series for node %.64s%s%.31s in the window",
                 r->config->features.items[0].name, node, gpu[0] ? " gpu " : "", gpu);
    unknown(e, why);
    return e;
}

void engine_risk_notification(struct engine_risk *r, const struct medic_notification *n,
                              double *risks, const struct engine_risk_entry **scored)
{
    for (size_t k = 0; k < n->alert_count; k++) /* fetched together */
        engine_risk_want(r, &n->alerts[k]);
    for (size_t k = 0; k < n->alert_count; k++) {
        scored[k] = engine_risk_alert(r, &n->alerts[k]);
        risks[k] = scored[k] ? scored[k]->risk : NAN;
    }
}

#include "engine_risk.h"
#include "log.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void engine_risk_begin(struct engine_risk *r, const struct medic_config *config, int64_t now)
{
    r->config = config;
    r->now = now;
    r->count = 0;
    r->unavailable[0] = 0;
    r->deadline = medic_time_monotonic() + config->prometheus_timeout;
    r->enabled = config->prometheus_url != NULL; /* the model is always there */
    r->scorer_ready = 0;
}

void engine_risk_end(struct engine_risk *r)
{
    if (r->scorer_ready)
        risk_scorer_release(&r->scorer);
    r->enabled = r->scorer_ready = 0;
}

static void summarise(const struct feature_spec *spec, const struct risk_score *s,
                      struct engine_risk_entry *e)
{
    size_t at = (size_t)snprintf(e->note, sizeof(e->note), "risk %.3f gpu %s (", s->risk,
                                 s->gpu[s->worst][0] ? s->gpu[s->worst] : "-");
    for (size_t d = 0; d < spec->count && at < sizeof(e->note); d++)
        at += (size_t)snprintf(e->note + at, sizeof(e->note) - at, "%s%s=%.4g", d ? " " : "",
                               spec->items[d].name, (double)s->last[d]);
    if (at < sizeof(e->note))
        snprintf(e->note + at, sizeof(e->note) - at, ")");
}

static void score(struct engine_risk *r, struct engine_risk_entry *e)
{
    e->risk = NAN;
    if (r->unavailable[0]) {
        snprintf(e->note, sizeof(e->note), "risk unknown: %.199s", r->unavailable);
        return;
    }
    long left = (long)((r->deadline - medic_time_monotonic()) / MEDIC_NS_PER_MS);
    if (left <= 0) {
        snprintf(r->unavailable, sizeof(r->unavailable), "the round's Prometheus budget is spent");
        snprintf(e->note, sizeof(e->note), "risk unknown: %.199s", r->unavailable);
        return;
    }
    if (!r->scorer_ready &&
        risk_scorer_init(&r->scorer, &r->config->model, &r->config->features) != 0) {
        snprintf(e->note, sizeof(e->note), "risk unknown: out of memory");
        return;
    }
    r->scorer_ready = 1;
    struct risk_score s;
    struct medic_error err = {0};
    int rc = risk_score_prometheus(&r->scorer, r->config->prometheus_url, left, e->node,
                                   e->gpu[0] ? e->gpu : NULL, r->now, &s, &err);
    if (rc == 0) {
        e->risk = s.risk;
        summarise(&r->config->features, &s, e);
        return;
    }
    if (rc == MEDIC_E_IO) /* Prometheus itself: the rest of the round would fail too */
        snprintf(r->unavailable, sizeof(r->unavailable), "%.180s", err.msg);
    snprintf(e->note, sizeof(e->note), "risk unknown: %.200s", err.msg);
    medic_log_warn("risk unknown", "node", e->node, "gpu", e->gpu, "error", err.msg, NULL);
}

const struct engine_risk_entry *engine_risk_alert(struct engine_risk *r,
                                                  const struct medic_alert *a)
{
    if (!r->enabled || a->status != MEDIC_STATUS_FIRING)
        return NULL;
    char node[128];
    if (medic_alert_node(&a->labels, (const char *const *)r->config->node_labels,
                         r->config->node_label_count, node, sizeof(node)))
        return NULL;
    const char *gpu = medic_labels_get(&a->labels, "gpu");
    if (!gpu || strlen(gpu) >= sizeof(r->items[0].gpu))
        gpu = "";
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->items[i].node, node) == 0 && strcmp(r->items[i].gpu, gpu) == 0)
            return &r->items[i];
    if (r->count == ENGINE_RISK_MAX)
        return NULL;
    struct engine_risk_entry *e = &r->items[r->count++];
    snprintf(e->node, sizeof(e->node), "%s", node);
    snprintf(e->gpu, sizeof(e->gpu), "%s", gpu);
    score(r, e);
    return e;
}

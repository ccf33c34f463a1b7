/* SPDX-License-Identifier: Apache-2.0 */
#include "risk.h"
#include "rule_score.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int risk_scorer_init(struct risk_scorer *s, const struct model *m, const struct feature_spec *spec)
{
    memset(s, 0, sizeof(*s));
    s->model = m;
    s->spec = spec;
    s->rows = calloc(PROMETHEUS_MAX_SERIES * spec->window * spec->count, sizeof(float));
    if (!s->rows || model_workspace_init(&s->w, m, PROMETHEUS_MAX_SERIES, spec->window)) {
        free(s->rows);
        s->rows = NULL;
        return MEDIC_E_NOMEM;
    }
    return 0;
}

void risk_scorer_release(struct risk_scorer *s)
{
    if (s->rows)
        model_workspace_release(&s->w);
    free(s->rows);
    memset(s, 0, sizeof(*s));
}

int risk_score_rows(struct risk_scorer *s, size_t count, size_t steps, struct risk_score *out)
{
    const size_t per = s->spec->window * s->spec->count;
    if (count == 0 || count > PROMETHEUS_MAX_SERIES || steps == 0 || steps > s->spec->window)
        return MEDIC_E_INVALID;
    const size_t F = s->spec->count;
    float last[PROMETHEUS_MAX_SERIES][FEATURES_MAX];
    struct rule_inputs in;
    rule_inputs_find(s->spec, &in);
    for (size_t i = 0; i < count; i++) {
        memcpy(last[i], s->rows + i * per + (steps - 1) * F, F * sizeof(float));
        out->rule[i] = rule_score(&in, s->rows + i * per, steps, F, &out->fired[i]);
        features_scale(s->spec, s->rows + i * per, steps);
    }
    if (model_predict(s->model, &s->w, s->rows, count, steps, out->gpu_risk, NULL))
        return MEDIC_E_INVALID;
    for (size_t i = 0; i < count; i++)
        out->gpu_risk[i] = rule_blend(&s->spec->blend, out->gpu_risk[i], out->rule[i]);
    out->count = count;
    out->worst = 0;
    for (size_t i = 1; i < count; i++)
        if (out->gpu_risk[i] > out->gpu_risk[out->worst])
            out->worst = i;
    out->risk = out->gpu_risk[out->worst];
    memcpy(out->last, last[out->worst], F * sizeof(float));
    return 0;
}

/* The node's window, every GPU of it, so that a GPU silent while the
 * others report is lost (as the engine sees it), cut to gpu when one is
 * asked for; gpu's alone when the node as a whole cannot be read (another
 * GPU's gap). */
static int fetch_window(const struct feature_spec *spec, const char *url, long timeout_ms,
                        const char *node, const char *gpu, int64_t now,
                        struct prometheus_window *pw, struct medic_error *err)
{
    int rc = prometheus_fetch_window(url, timeout_ms, spec, node, NULL, now, pw, err);
    if (!gpu || (rc && rc != MEDIC_E_INVALID))
        return rc;
    if (rc == 0) {
        size_t keep = pw->count;
        for (size_t i = 0; i < pw->count && keep == pw->count; i++)
            if (strcmp(pw->gpu[i], gpu) == 0)
                keep = i;
        if (keep < pw->count) {
            for (size_t i = 0; i < pw->count; i++)
                if (i != keep)
                    free(pw->rows[i]);
            pw->rows[0] = pw->rows[keep];
            memmove(pw->gpu[0], pw->gpu[keep], sizeof(pw->gpu[0]));
            pw->lost[0] = pw->lost[keep];
            pw->count = 1;
            return 0;
        }
        prometheus_window_release(pw);
    }
    return prometheus_fetch_window(url, timeout_ms, spec, node, gpu, now, pw, err);
}

int risk_score_prometheus(struct risk_scorer *s, const char *url, long timeout_ms, const char *node,
                          const char *gpu, int64_t now, struct risk_score *out,
                          struct medic_error *err)
{
    struct prometheus_window pw = {0};
    int rc = fetch_window(s->spec, url, timeout_ms, node, gpu, now, &pw, err);
    if (rc)
        return rc;
    /* the windows the model scores, in order; the lost GPUs between them */
    const size_t per = s->spec->window * s->spec->count;
    size_t scored = 0;
    for (size_t i = 0; i < pw.count; i++)
        if (!pw.lost[i].steps)
            memcpy(s->rows + scored++ * per, pw.rows[i], per * sizeof(float));
    struct risk_score model = {0};
    rc = scored ? risk_score_rows(s, scored, s->spec->window, &model) : 0;
    if (rc) {
        prometheus_window_release(&pw);
        return medic_error_set(err, rc, "the model could not score the window");
    }
    out->count = pw.count;
    out->worst = 0;
    for (size_t i = 0, k = 0; i < pw.count; i++) {
        snprintf(out->gpu[i], sizeof(out->gpu[i]), "%s", pw.gpu[i]);
        out->lost[i] = pw.lost[i];
        out->fired[i] = 0;
        out->rule[i] = 0;
        if (pw.lost[i].steps) {
            out->gpu_risk[i] = PROMETHEUS_LOST_RISK;
        } else {
            out->fired[i] = model.fired[k];
            out->rule[i] = model.rule[k];
            out->gpu_risk[i] = model.gpu_risk[k++];
        }
        if (out->gpu_risk[i] > out->gpu_risk[out->worst])
            out->worst = i;
    }
    out->risk = out->gpu_risk[out->worst];
    for (size_t d = 0; d < FEATURES_MAX; d++)
        out->last[d] = out->lost[out->worst].steps ? NAN : model.last[d];
    prometheus_window_release(&pw);
    return 0;
}

int risk_score_fleet(const struct model *m, const struct feature_spec *spec,
                     const struct prometheus_fleet *fleet, float *risk, unsigned *fired)
{
    struct model_workspace w;
    const size_t per = spec->window * spec->count;
    float *batch = malloc(RISK_FLEET_BATCH * per * sizeof(float));
    float out[RISK_FLEET_BATCH];
    double rule[RISK_FLEET_BATCH];
    size_t members[RISK_FLEET_BATCH];
    struct rule_inputs in;
    rule_inputs_find(spec, &in);
    if (!batch || model_workspace_init(&w, m, RISK_FLEET_BATCH, spec->window)) {
        free(batch);
        return MEDIC_E_NOMEM;
    }
    int rc = 0;
    for (size_t i = 0, n = 0; i <= fleet->count && rc == 0; i++) {
        if (i < fleet->count) {
            risk[i] = fleet->series[i].lost.steps ? PROMETHEUS_LOST_RISK : NAN;
            if (fired)
                fired[i] = 0;
            if (fleet->series[i].usable) {
                memcpy(batch + n * per, prometheus_fleet_rows(fleet, spec, i), per * sizeof(float));
                rule[n] = rule_score(&in, batch + n * per, spec->window, spec->count,
                                     fired ? &fired[i] : NULL);
                features_scale(spec, batch + n * per, spec->window);
                members[n++] = i;
            }
        }
        if (n == RISK_FLEET_BATCH || (i == fleet->count && n)) {
            if (model_predict(m, &w, batch, n, spec->window, out, NULL))
                rc = MEDIC_E_INVALID;
            for (size_t b = 0; b < n && rc == 0; b++)
                risk[members[b]] = rule_blend(&spec->blend, out[b], rule[b]);
            n = 0;
        }
    }
    model_workspace_release(&w);
    free(batch);
    return rc;
}

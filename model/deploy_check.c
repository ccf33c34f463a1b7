/* SPDX-License-Identifier: Apache-2.0 */
#include "deploy_check.h"
#include "rule_score.h"
#include "random.h"
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Windows scored at once. */
#define DEPLOY_BATCH 256

struct keyed {
    char *key;
    size_t window;
};

static int by_key(const void *a, const void *b)
{
    return strcmp(((const struct keyed *)a)->key, ((const struct keyed *)b)->key);
}

/* Each window's group from the samples metadata: a positive's fault is
 * its node and the action it came before (source); a negative's draw is
 * its node and time. */
static int group_windows(struct deploy_dataset *d, const char *samples, struct medic_error *err)
{
    cJSON *list = samples ? cJSON_Parse(samples) : NULL;
    if (!list || !cJSON_IsArray(list) || (size_t)cJSON_GetArraySize(list) != d->count) {
        cJSON_Delete(list);
        for (size_t i = 0; i < d->count; i++)
            d->group[i] = i;
        d->groups = d->count;
        d->faults = d->positives;
        return 0;
    }
    struct keyed *k = calloc(d->count ? d->count : 1, sizeof(*k));
    int rc = k ? 0 : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    size_t i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, list)
    {
        if (rc)
            break;
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(s, "node");
        const cJSON *source = cJSON_GetObjectItemCaseSensitive(s, "source");
        const cJSON *end = cJSON_GetObjectItemCaseSensitive(s, "end");
        char *what =
            d->labels[i] > 0.5f ? cJSON_PrintUnformatted(source) : cJSON_PrintUnformatted(end);
        char *where = cJSON_PrintUnformatted(node);
        size_t len = (what ? strlen(what) : 0) + (where ? strlen(where) : 0) + 4;
        k[i].key = what && where ? malloc(len) : NULL;
        if (k[i].key)
            snprintf(k[i].key, len, "%c%s\x1f%s", d->labels[i] > 0.5f ? 'p' : 'n', where, what);
        else
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        k[i].window = i;
        free(what);
        free(where);
        i++;
    }
    cJSON_Delete(list);
    if (rc == 0) {
        qsort(k, d->count, sizeof(*k), by_key);
        d->groups = d->faults = 0;
        for (size_t j = 0; j < d->count; j++) {
            if (j == 0 || strcmp(k[j].key, k[j - 1].key) != 0) {
                d->groups++;
                d->faults += k[j].key[0] == 'p';
            }
            d->group[k[j].window] = d->groups - 1;
        }
        d->grouped = 1;
    }
    for (size_t j = 0; k && j < d->count; j++)
        free(k[j].key);
    free(k);
    return rc;
}

/* The dataset in file (released here). */
static int dataset_from(struct safetensors *file_in, struct deploy_dataset *d,
                        struct medic_error *err)
{
    struct safetensors file = *file_in;
    int rc = 0;
    const char *format = safetensors_meta(&file, "format");
    const struct safetensor *w = safetensors_find(&file, "windows");
    if (!format || strcmp(format, "medic-dataset") != 0 || !w || w->dims != 3) {
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "not a dataset of `medic model dataset` (format medic-dataset, "
                             "windows [N, window, features], labels [N])");
        goto out;
    }
    if ((rc = features_from_metadata(&file, w->shape[2], &d->spec, err)))
        goto out;
    if (d->spec.window != w->shape[1]) {
        rc = medic_error_set(err, MEDIC_E_INVALID, "windows of %zu steps, metadata window %zu",
                             w->shape[1], d->spec.window);
        goto out;
    }
    d->count = w->shape[0];
    size_t n = d->count ? d->count : 1, values = d->count * d->spec.window * d->spec.count;
    size_t lshape[1] = {d->count};
    d->windows = malloc((values ? values : 1) * sizeof(float));
    d->labels = malloc(n * sizeof(float));
    d->group = malloc(n * sizeof(size_t));
    if (!d->windows || !d->labels || !d->group) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = safetensors_f32(&file, "windows", w->shape, 3, d->windows, err)) ||
        (rc = safetensors_f32(&file, "labels", lshape, 1, d->labels, err)))
        goto out;
    for (size_t i = 0; i < d->count; i++) {
        if (d->labels[i] != 0.0f && d->labels[i] != 1.0f) {
            rc = medic_error_set(err, MEDIC_E_INVALID, "labels[%zu] is %g, not 0 or 1", i,
                                 (double)d->labels[i]);
            goto out;
        }
        d->positives += d->labels[i] == 1.0f;
    }
    for (size_t i = 0; i < values; i++)
        if (!isfinite(d->windows[i])) {
            rc = medic_error_set(err, MEDIC_E_INVALID, "windows hold a value that is not finite");
            goto out;
        }
    const char *horizon = safetensors_meta(&file, "horizon");
    snprintf(d->horizon, sizeof(d->horizon), "%s", horizon ? horizon : "unknown");
    rc = group_windows(d, safetensors_meta(&file, "samples"), err);
out:
    safetensors_release(&file);
    if (rc)
        deploy_dataset_release(d);
    return rc;
}

int deploy_dataset_load(const char *path, struct deploy_dataset *d, struct medic_error *err)
{
    memset(d, 0, sizeof(*d));
    struct safetensors file;
    int rc = safetensors_load_capped(path, DEPLOY_DATASET_MAX_FILE, DEPLOY_DATASET_MAX_HEADER,
                                     &file, err);
    return rc ? rc : dataset_from(&file, d, err);
}

int deploy_dataset_parse(unsigned char *bytes, size_t size, struct deploy_dataset *d,
                         struct medic_error *err)
{
    memset(d, 0, sizeof(*d));
    struct safetensors file;
    int rc = safetensors_parse_capped(bytes, size, DEPLOY_DATASET_MAX_HEADER, &file, err);
    return rc ? rc : dataset_from(&file, d, err);
}

void deploy_dataset_release(struct deploy_dataset *d)
{
    free(d->windows);
    free(d->labels);
    free(d->group);
    memset(d, 0, sizeof(*d));
}

/* m's features, checked against the dataset's, into spec. */
static int model_spec(const struct model *m, const struct deploy_dataset *d,
                      struct feature_spec *spec, struct medic_error *err)
{
    int rc = features_from_metadata(&m->file, m->D, spec, err);
    if (rc)
        return rc;
    if (spec->count != d->spec.count || spec->window != d->spec.window ||
        spec->step != d->spec.step)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "the model reads %zu features over %zu steps, the dataset holds "
                               "%zu over %zu: export the dataset with this model's features "
                               "(medic model dataset --model FILE)",
                               spec->count, spec->window, d->spec.count, d->spec.window);
    for (size_t f = 0; f < spec->count; f++)
        if (strcmp(spec->items[f].name, d->spec.items[f].name) != 0 ||
            strcmp(spec->items[f].query, d->spec.items[f].query) != 0)
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "feature %zu is %s in the model and %s in the dataset (or its "
                                   "query differs): export the dataset with this model's "
                                   "features (medic model dataset --model FILE)",
                                   f + 1, spec->items[f].name, d->spec.items[f].name);
    return 0;
}

/* m's risk of every window of d, with feature raise (when not SIZE_MAX)
 * raised by one over the last DEPLOY_PROBE_STEPS steps. */
static int score(const struct model *m, const struct feature_spec *spec,
                 const struct deploy_dataset *d, size_t raise, double *out, struct medic_error *err)
{
    size_t per = spec->window * spec->count, T = spec->window, D = spec->count;
    size_t from = T > DEPLOY_PROBE_STEPS ? T - DEPLOY_PROBE_STEPS : 0;
    struct model_workspace w;
    float *rows = malloc(DEPLOY_BATCH * per * sizeof(float));
    float *risk = malloc(DEPLOY_BATCH * sizeof(float));
    double rule[DEPLOY_BATCH];
    struct rule_inputs in;
    rule_inputs_find(spec, &in);
    int rc = 0;
    if (!rows || !risk || model_workspace_init(&w, m, DEPLOY_BATCH, T)) {
        free(rows);
        free(risk);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    for (size_t at = 0; at < d->count && rc == 0; at += DEPLOY_BATCH) {
        size_t b = d->count - at < DEPLOY_BATCH ? d->count - at : DEPLOY_BATCH;
        memcpy(rows, d->windows + at * per, b * per * sizeof(float));
        for (size_t i = 0; raise != SIZE_MAX && i < b; i++)
            for (size_t t = from; t < T; t++)
                rows[(i * T + t) * D + raise] += 1.0f;
        for (size_t i = 0; i < b; i++) /* the blend's part, from the raw values */
            rule[i] = spec->blend.on ? rule_score(&in, rows + i * per, T, D, NULL) : 0;
        features_scale(spec, rows, b * T);
        if (model_predict(m, &w, rows, b, T, risk, NULL))
            rc = medic_error_set(err, MEDIC_E_INVALID, "the model cannot run these windows");
        for (size_t i = 0; i < b && rc == 0; i++)
            out[at + i] = rule_blend(&spec->blend, risk[i], rule[i]);
    }
    model_workspace_release(&w);
    free(rows);
    free(risk);
    return rc;
}

int deploy_model_scores(const struct model *m, const struct deploy_dataset *d, double *out,
                        struct medic_error *err)
{
    struct feature_spec spec;
    int rc = model_spec(m, d, &spec, err);
    return rc ? rc : score(m, &spec, d, SIZE_MAX, out, err);
}

const char *const deploy_evidence[DEPLOY_EVIDENCE_MAX] = {
    "ecc_sbe_log_increase_15m",  "ecc_dbe_increase_1h",
    "remapped_rows_increase_1h", "pcie_replay_log_increase_15m",
    "xid_changes_30m",           "xid_hardware_new_30m",
    "xid_hardware_held",         "hw_throttle",
};

int deploy_monotone_probe(const struct model *m, const struct deploy_dataset *d, const double *base,
                          struct deploy_report *r, struct medic_error *err)
{
    struct feature_spec spec;
    r->monotone_count = 0;
    int rc = model_spec(m, d, &spec, err);
    double *raised = malloc((d->count ? d->count : 1) * sizeof(double));
    if (rc == 0 && !raised)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t e = 0; rc == 0 && e < DEPLOY_EVIDENCE_MAX; e++) {
        size_t f = 0;
        while (f < spec.count && strcmp(spec.items[f].name, deploy_evidence[e]) != 0)
            f++;
        if (f == spec.count || (rc = score(m, &spec, d, f, raised, err)))
            continue;
        struct deploy_monotone *x = &r->monotone[r->monotone_count++];
        snprintf(x->name, sizeof(x->name), "%s", deploy_evidence[e]);
        size_t falls = 0;
        x->lowest = 1;
        for (size_t i = 0; i < d->count; i++) {
            double ratio = raised[i] / (base[i] > 1e-12 ? base[i] : 1e-12);
            falls += ratio < 1 - 1e-4;
            if (ratio < x->lowest)
                x->lowest = ratio;
        }
        x->falls = d->count ? (double)falls / (double)d->count : 0;
    }
    free(raised);
    return rc;
}

void deploy_rule_scores(const struct deploy_dataset *d, double *out, char *used, size_t size)
{
    struct rule_inputs in;
    rule_inputs_find(&d->spec, &in);
    rule_inputs_used(&in, used, size);
    const size_t D = d->spec.count, T = d->spec.window;
    for (size_t i = 0; i < d->count; i++)
        out[i] = rule_score(&in, d->windows + i * T * D, T, D, NULL);
}

/* Windows by score, highest first, and where each run of equal scores
 * ends. */
struct ranking {
    size_t *order;
    unsigned char *run_end;
};

static int by_score(const void *a, const void *b, void *arg)
{
    const double *score = arg;
    double x = score[*(const size_t *)a], y = score[*(const size_t *)b];
    if (x != y)
        return x > y ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int rank(const double *score, size_t n, struct ranking *r)
{
    r->order = malloc((n ? n : 1) * sizeof(size_t));
    r->run_end = malloc(n ? n : 1);
    if (!r->order || !r->run_end)
        return MEDIC_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        r->order[i] = i;
    qsort_r(r->order, n, sizeof(size_t), by_score, (void *)score);
    for (size_t i = 0; i < n; i++)
        r->run_end[i] = i + 1 == n || score[r->order[i]] != score[r->order[i + 1]];
    return 0;
}

/* Average precision (the area under the step curve, as scikit-learn's)
 * and recall at DEPLOY_FPR, the windows weighed by their group's weight
 * (NULL: 1 each). */
static struct deploy_stats stats(const struct deploy_dataset *d, const struct ranking *r,
                                 const double *weight)
{
    double all_pos = 0, all_neg = 0;
    for (size_t i = 0; i < d->count; i++) {
        double w = weight ? weight[d->group[i]] : 1;
        *(d->labels[i] > 0.5f ? &all_pos : &all_neg) += w;
    }
    struct deploy_stats s = {0, 0};
    if (all_pos <= 0)
        return s;
    double tp = 0, fp = 0, recall_before = 0;
    for (size_t k = 0; k < d->count; k++) {
        size_t i = r->order[k];
        double w = weight ? weight[d->group[i]] : 1;
        *(d->labels[i] > 0.5f ? &tp : &fp) += w;
        if (!r->run_end[k])
            continue;
        double recall = tp / all_pos;
        if (tp + fp > 0)
            s.ap += (recall - recall_before) * tp / (tp + fp);
        recall_before = recall;
        if (all_neg <= 0 || fp / all_neg <= DEPLOY_FPR)
            s.recall = recall;
    }
    return s;
}

/* A Poisson(1) count (Knuth's method): the bootstrap's weight of a group. */
static double poisson1(uint64_t *state)
{
    double p = 1, limit = exp(-1.0);
    int k = 0;
    do {
        k++;
        p *= (double)(medic_random_next(state) >> 11) / 9007199254740992.0;
    } while (p > limit);
    return k - 1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The 5th percentile of n values (sorted in place). */
static double lower_bound(double *v, size_t n)
{
    qsort(v, n, sizeof(double), by_value);
    return v[(size_t)floor(0.05 * (double)(n - 1))];
}

int deploy_compare(const struct deploy_dataset *d, const double *model, const double *against,
                   const double *rule, size_t draws, uint64_t seed, struct deploy_report *r)
{
    memset(r, 0, sizeof(*r));
    struct ranking rk[3] = {{0}};
    double *weight = malloc((d->groups ? d->groups : 1) * sizeof(double));
    double *lead_a = malloc((draws ? draws : 1) * sizeof(double));
    double *lead_r = malloc((draws ? draws : 1) * sizeof(double));
    int rc = weight && lead_a && lead_r ? 0 : MEDIC_E_NOMEM;
    const double *scores[3] = {model, against, rule};
    for (int k = 0; k < 3 && rc == 0; k++)
        rc = rank(scores[k], d->count, &rk[k]);
    if (rc == 0) {
        r->model = stats(d, &rk[0], NULL);
        r->against = stats(d, &rk[1], NULL);
        r->rule = stats(d, &rk[2], NULL);
        r->over_against.mean = r->model.ap - r->against.ap;
        r->over_rule.mean = r->model.ap - r->rule.ap;
        uint64_t state = seed;
        for (size_t b = 0; b < draws; b++) {
            for (size_t g = 0; g < d->groups; g++)
                weight[g] = poisson1(&state);
            double m = stats(d, &rk[0], weight).ap;
            lead_a[b] = m - stats(d, &rk[1], weight).ap;
            lead_r[b] = m - stats(d, &rk[2], weight).ap;
        }
        r->draws = draws;
        r->over_against.lower = draws ? lower_bound(lead_a, draws) : r->over_against.mean;
        r->over_rule.lower = draws ? lower_bound(lead_r, draws) : r->over_rule.mean;
    }
    for (int k = 0; k < 3; k++) {
        free(rk[k].order);
        free(rk[k].run_end);
    }
    free(weight);
    free(lead_a);
    free(lead_r);
    return rc;
}

int deploy_verdict(const struct deploy_dataset *d, const struct deploy_report *r, char *why,
                   size_t size)
{
    if (d->faults < DEPLOY_MIN_FAULTS || d->positives == d->count) {
        snprintf(why, size,
                 "the dataset holds %zu fault%s and %zu negative windows: at least %d faults "
                 "and some negatives are needed to tell a lead from chance (a longer --since, "
                 "or more --negatives)",
                 d->faults, d->faults == 1 ? "" : "s", d->count - d->positives, DEPLOY_MIN_FAULTS);
        return 0;
    }
    for (size_t k = 0; k < r->monotone_count; k++)
        if (r->monotone[k].falls > DEPLOY_MONOTONE_LIMIT) {
            snprintf(why, size,
                     "one more %s lowers its risk of %.1f%% of the windows (to %.2f of it at "
                     "worst): more evidence of a failing GPU must never lower its risk",
                     r->monotone[k].name, 100 * r->monotone[k].falls, r->monotone[k].lowest);
            return 0;
        }
    if (!(r->over_against.lower > 0)) {
        snprintf(why, size,
                 "its lead over the model in use (%+.3f PR-AUC) is not above zero at 95%% "
                 "(lower bound %+.3f)",
                 r->over_against.mean, r->over_against.lower);
        return 0;
    }
    if (!(r->over_rule.lower > 0)) {
        snprintf(why, size,
                 "its lead over the rule (%+.3f PR-AUC) is not above zero at 95%% (lower bound "
                 "%+.3f)",
                 r->over_rule.mean, r->over_rule.lower);
        return 0;
    }
    if (r->model.recall < r->rule.recall) {
        snprintf(why, size, "its recall at %g%% false positives (%.3f) is below the rule's (%.3f)",
                 DEPLOY_FPR * 100, r->model.recall, r->rule.recall);
        return 0;
    }
    why[0] = 0;
    return 1;
}

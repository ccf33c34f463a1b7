/* SPDX-License-Identifier: Apache-2.0 */
/* The check a retrained model passes before it replaces the model in use:
 * average precision and recall as scikit-learn computes them, a verdict
 * that follows the better ranking and refuses the worse one, a lead that
 * chance could give, too few faults, and files that are not what they
 * should be. The datasets are made here with the built-in model's
 * features, and labelled from a known ranking (the built-in model's, or
 * the rule's), so the right verdict is known; the monotone probe finds
 * the risk of a model made to fall for a double-bit error doing so. */
#include "default_model.h"
#include "deploy_check.h"
#include "safetensors.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define WINDOWS 600
#define PER_FAULT 4

static char dir[] = "/tmp/medic-deploy-XXXXXX";

/* Average precision over tie groups, and recall at 1% false positives,
 * on examples small enough to do by hand. */
static void test_statistics(void **state)
{
    (void)state;
    float labels[4] = {1, 0, 1, 0};
    size_t group[4] = {0, 1, 2, 3};
    struct deploy_dataset d = {
        .count = 4, .labels = labels, .group = group, .groups = 4, .positives = 2, .faults = 2};
    double a[4] = {0.9, 0.8, 0.7, 0.6}, b[4] = {0.5, 0.5, 0.1, 0.1}, c[4] = {0.1, 0.9, 0.2, 0.8};
    struct deploy_report r;
    assert_int_equal(deploy_compare(&d, a, b, c, 0, 1, &r), 0);
    /* 1 x 1/2 + 2/3 x 1/2 */
    assert_true(fabs(r.model.ap - (0.5 + 1.0 / 3)) < 1e-12);
    assert_true(fabs(r.model.recall - 0.5) < 1e-12);
    /* ties count as one step: 1/2 x 1/2 + 1/2 x 1/2 */
    assert_true(fabs(r.against.ap - 0.5) < 1e-12);
    assert_true(fabs(r.against.recall - 0.0) < 1e-12);
    /* both negatives first: 1/3 x 1/2 + 1/2 x 1/2 */
    assert_true(fabs(r.rule.ap - (1.0 / 6 + 0.25)) < 1e-12);
    assert_true(fabs(r.over_against.mean - (r.model.ap - r.against.ap)) < 1e-12);
    assert_true(r.over_against.lower == r.over_against.mean); /* no draws */
}

static double gauss(uint32_t *s)
{
    double u = 0;
    for (int i = 0; i < 12; i++) {
        *s = *s * 1664525u + 1013904223u;
        u += (double)(*s >> 8) / 16777216.0;
    }
    return u - 6;
}

static double *sort_by;
static int descending(const void *a, const void *b)
{
    double x = sort_by[*(const int *)a], y = sort_by[*(const int *)b];
    return x > y ? -1 : x < y;
}

/* Writes count windows of m's features, their labels and the samples'
 * list as `medic model dataset` does. */
static void write_windows(const char *path, const struct model *m, size_t count, float *w,
                          float *labels, char *samples)
{
    struct feature_spec spec;
    struct medic_error err = {0};
    assert_int_equal(features_from_metadata(&m->file, m->D, &spec, &err), 0);
    size_t wshape[3] = {count, spec.window, spec.count}, lshape[1] = {count};
    const struct safetensors_out tensors[] = {{"labels", lshape, 1, labels},
                                              {"windows", wshape, 3, w}};
    const struct safetensors_meta meta[] = {
        {"format", "medic-dataset"},
        {"features", (char *)safetensors_meta(&m->file, "features")},
        {"window", (char *)safetensors_meta(&m->file, "window")},
        {"step", (char *)safetensors_meta(&m->file, "step")},
        {"horizon", "3600s"},
        {"samples", samples},
    };
    assert_int_equal(safetensors_write(path, tensors, 2, meta, 6, 0, &err), 0);
}

/* Writes a dataset of WINDOWS noisy windows of the built-in model's
 * features whose positives are the faults of the top ones by score (or
 * with score NULL, a dataset of the raw windows for scoring first), in
 * faults of PER_FAULT windows. */
static const char *write_dataset(const char *name, const double *score, size_t faults)
{
    struct model m;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    struct feature_spec spec;
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    size_t T = spec.window, D = spec.count;
    float *w = malloc(WINDOWS * T * D * sizeof(float)), labels[WINDOWS] = {0};
    uint32_t s = 99;
    for (size_t i = 0; i < WINDOWS; i++)
        for (size_t t = 0; t < T; t++)
            for (size_t f = 0; f < D; f++) {
                double v = spec.items[f].center + spec.items[f].scale * 1.5 * gauss(&s);
                if (strstr(spec.items[f].name, "increase") || strstr(spec.items[f].name, "xid") ||
                    strstr(spec.items[f].name, "throttle"))
                    v = fabs(v); /* counts are never negative */
                w[(i * T + t) * D + f] = (float)v;
            }
    int order[WINDOWS];
    for (int i = 0; i < WINDOWS; i++)
        order[i] = i;
    if (score) {
        sort_by = (double *)(uintptr_t)score;
        qsort(order, WINDOWS, sizeof(int), descending);
    }
    static char samples[WINDOWS * 96];
    size_t len = (size_t)snprintf(samples, sizeof(samples), "[");
    int fault_of[WINDOWS];
    for (int i = 0; i < WINDOWS; i++)
        fault_of[i] = -1;
    for (size_t k = 0; score && k < faults * PER_FAULT; k++) {
        labels[order[k]] = 1;
        fault_of[order[k]] = (int)(k / PER_FAULT);
    }
    for (int i = 0; i < WINDOWS; i++)
        len += (size_t)snprintf(samples + len, sizeof(samples) - len,
                                "%s{\"node\":\"n%d\",\"gpu\":\"0\",\"end\":\"t%d\",\"label\":%d,"
                                "\"source\":\"drain after X\"}",
                                i ? "," : "", fault_of[i] >= 0 ? fault_of[i] : 1000 + i, i,
                                (int)labels[i]);
    snprintf(samples + len, sizeof(samples) - len, "]");
    static char path[300];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_windows(path, &m, WINDOWS, w, labels, samples);
    free(w);
    model_release(&m);
    return path;
}

/* A copy of the built-in model written to name: the double-bit error
 * input's weights into the LSTM multiplied by dbe (-40: a model whose
 * risk falls as that evidence grows, whatever the built-in model does
 * with it), and without its blend with the rule score unless blend. */
static void load_copy(const char *name, float dbe, int blend, struct model *out)
{
    struct model m;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    struct feature_spec spec;
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    assert_true(spec.blend.on); /* what the copies without it differ by */
    size_t at = spec.count;
    for (size_t f = 0; f < spec.count; f++)
        if (strcmp(spec.items[f].name, "ecc_dbe_increase_1h") == 0)
            at = f;
    assert_true(at < spec.count);
    const struct safetensors *st = &m.file;
    struct safetensors_out tensors[16];
    struct safetensors_meta meta[64];
    float *copies[16];
    size_t kept = 0;
    assert_true(st->count <= 16 && st->meta_count <= 64);
    for (size_t i = 0; i < st->meta_count; i++)
        if (blend || strcmp(st->meta[i].key, "blend") != 0)
            meta[kept++] = st->meta[i];
    for (size_t i = 0; i < st->count; i++) {
        const struct safetensor *t = &st->tensors[i];
        copies[i] = malloc(t->end - t->begin);
        memcpy(copies[i], st->data + t->begin, t->end - t->begin);
        if (strcmp(t->name, "lstm.weight_ih_l0") == 0)
            for (size_t r = 0; r < t->shape[0]; r++)
                copies[i][r * t->shape[1] + at] *= dbe;
        tensors[i] = (struct safetensors_out){t->name, t->shape, t->dims, copies[i]};
    }
    char path[300];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(safetensors_write(path, tensors, st->count, meta, kept, 0, &err), 0);
    for (size_t i = 0; i < st->count; i++)
        free(copies[i]);
    model_release(&m);
    assert_int_equal(model_load(path, out, &err), 0);
}

/* The built-in model, and one that answers the same for every window:
 * its LSTM's output a constant, without the rule score's part. */
static void load_models(struct model *builtin, struct model *flat)
{
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(builtin, &err), 0);
    load_copy("flat.safetensors", 1, 0, flat);
    memset(flat->c2_w, 0, 32 * sizeof(float));
    flat->c2_b = 0;
}

struct scored {
    struct deploy_dataset d;
    double builtin[WINDOWS], flat[WINDOWS], rule[WINDOWS];
};

static void score(const char *path, const struct model *builtin, const struct model *flat,
                  struct scored *s)
{
    struct medic_error err = {0};
    char used[512];
    assert_int_equal(deploy_dataset_load(path, &s->d, &err), 0);
    assert_int_equal(deploy_model_scores(builtin, &s->d, s->builtin, &err), 0);
    assert_int_equal(deploy_model_scores(flat, &s->d, s->flat, &err), 0);
    deploy_rule_scores(&s->d, s->rule, used, sizeof(used));
    assert_non_null(strstr(used, "ecc_sbe_log_increase_15m"));
    assert_non_null(strstr(used, "hw_throttle"));
}

static void test_verdicts(void **state)
{
    (void)state;
    struct model builtin, flat;
    load_models(&builtin, &flat);
    static struct scored raw, by_model, by_rule, few;
    score(write_dataset("raw.safetensors", NULL, 0), &builtin, &flat, &raw);
    assert_int_equal(raw.d.positives, 0);

    /* labelled by the built-in model's ranking: it is deployed over a
     * model that tells nothing, and the reverse is refused */
    score(write_dataset("by-model.safetensors", raw.builtin, 30), &builtin, &flat, &by_model);
    assert_int_equal(by_model.d.positives, 30 * PER_FAULT);
    assert_int_equal(by_model.d.faults, 30);
    assert_int_equal(by_model.d.groups, 30 + WINDOWS - 30 * PER_FAULT);
    assert_true(by_model.d.grouped);
    struct deploy_report r;
    char why[512];
    assert_int_equal(
        deploy_compare(&by_model.d, by_model.builtin, by_model.flat, by_model.rule, 500, 1, &r), 0);
    assert_true(fabs(r.model.ap - 1.0) < 1e-9);
    assert_true(fabs(r.against.ap - 0.2) < 1e-9); /* the base rate: 120 of 600 */
    assert_true(r.over_against.lower > 0.5 && r.over_rule.lower > 0);
    assert_int_equal(deploy_verdict(&by_model.d, &r, why, sizeof(why)), 1);
    assert_int_equal(
        deploy_compare(&by_model.d, by_model.flat, by_model.builtin, by_model.rule, 500, 1, &r), 0);
    assert_int_equal(deploy_verdict(&by_model.d, &r, why, sizeof(why)), 0);
    assert_non_null(
        strstr(why, "its lead over the model in use (-0.800 PR-AUC) is not above zero"));
    /* a model is never deployed over itself */
    assert_int_equal(
        deploy_compare(&by_model.d, by_model.builtin, by_model.builtin, by_model.rule, 500, 1, &r),
        0);
    assert_true(r.over_against.mean == 0 && r.over_against.lower == 0);
    assert_int_equal(deploy_verdict(&by_model.d, &r, why, sizeof(why)), 0);

    /* a model whose risk falls when the evidence grows is refused however
     * well it ranks; one that answers the same for everything never falls */
    assert_int_equal(
        deploy_compare(&by_model.d, by_model.builtin, by_model.flat, by_model.rule, 100, 1, &r), 0);
    struct medic_error err = {0};
    assert_int_equal(deploy_monotone_probe(&flat, &by_model.d, by_model.flat, &r, &err), 0);
    assert_int_equal(r.monotone_count, 8);
    for (size_t k = 0; k < r.monotone_count; k++)
        assert_true(r.monotone[k].falls == 0 && r.monotone[k].lowest > 0.9999);
    assert_int_equal(deploy_verdict(&by_model.d, &r, why, sizeof(why)), 1);
    struct model reversed; /* with the blend: the rule's part cannot make up for it */
    load_copy("reversed.safetensors", -40.0f, 1, &reversed);
    static double reversed_risk[WINDOWS];
    assert_int_equal(deploy_model_scores(&reversed, &by_model.d, reversed_risk, &err), 0);
    assert_int_equal(deploy_monotone_probe(&reversed, &by_model.d, reversed_risk, &r, &err), 0);
    model_release(&reversed);
    assert_string_equal(r.monotone[1].name, "ecc_dbe_increase_1h");
    assert_true(r.monotone[1].falls > DEPLOY_MONOTONE_LIMIT && r.monotone[1].lowest < 1);
    assert_int_equal(deploy_verdict(&by_model.d, &r, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "lowers its risk of"));
    assert_non_null(strstr(why, "more evidence of a failing GPU must never lower its risk"));

    /* labelled by the rule's ranking: beating the model in use is not
     * enough */
    score(write_dataset("by-rule.safetensors", raw.rule, 30), &builtin, &flat, &by_rule);
    assert_int_equal(
        deploy_compare(&by_rule.d, by_rule.builtin, by_rule.flat, by_rule.rule, 500, 1, &r), 0);
    assert_true(r.rule.ap > 0.99);
    assert_int_equal(deploy_verdict(&by_rule.d, &r, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "its lead over the rule"));

    /* five faults tell nothing, however clear */
    score(write_dataset("few.safetensors", raw.builtin, 5), &builtin, &flat, &few);
    assert_int_equal(few.d.faults, 5);
    assert_int_equal(deploy_compare(&few.d, few.builtin, few.flat, few.rule, 500, 1, &r), 0);
    assert_int_equal(deploy_verdict(&few.d, &r, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "the dataset holds 5 faults and 580 negative windows: at least "
                                "10 faults"));

    deploy_dataset_release(&raw.d);
    deploy_dataset_release(&by_model.d);
    deploy_dataset_release(&by_rule.d);
    deploy_dataset_release(&few.d);
    model_release(&builtin);
    model_release(&flat);
}

#define LSTM_DIR MEDIC_FIXTURES "/../data/lstm/"

/* A model of other features, and a file that is no dataset, are refused
 * with what to do. */
static void test_refused_files(void **state)
{
    (void)state;
    struct model other, builtin, flat;
    struct medic_error err = {0};
    load_models(&builtin, &flat);
    static struct scored raw;
    score(write_dataset("raw2.safetensors", NULL, 0), &builtin, &flat, &raw);
    assert_int_equal(model_load(LSTM_DIR "dcgm-d8-w30.model.safetensors", &other, &err), 0);
    double out[WINDOWS];
    assert_int_equal(deploy_model_scores(&other, &raw.d, out, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "the model reads 8 features over 30 steps, the dataset holds "
                                    "18 over 30: export the dataset with this model's features"));
    struct deploy_dataset d;
    assert_int_equal(deploy_dataset_load(LSTM_DIR "dcgm-d8-w30.model.safetensors", &d, &err),
                     MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "not a dataset of `medic model dataset`"));
    deploy_dataset_release(&raw.d);
    model_release(&other);
    model_release(&builtin);
    model_release(&flat);
}

/* A dataset's header lists every window: 12,000 windows' list is more
 * than the 1 MiB a model file's header may be, and medic model check reads
 * it; the same file read as a model is refused at that cap. */
static void test_large_header(void **state)
{
    (void)state;
    struct model m;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    struct feature_spec spec;
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    enum { MANY = 12000 };
    const size_t T = spec.window, D = spec.count;
    float *w = calloc((size_t)MANY * T * D, sizeof(float)), *labels = calloc(MANY, sizeof(float));
    char *samples = malloc((size_t)MANY * 128);
    assert_non_null(w);
    assert_non_null(labels);
    assert_non_null(samples);
    size_t len = (size_t)sprintf(samples, "[");
    for (int i = 0; i < MANY; i++) {
        labels[i] = i % 10 == 0;
        len += (size_t)sprintf(samples + len,
                               "%s{\"node\":\"gpu-node-%05d\",\"gpu\":\"%d\",\"end\":"
                               "\"2026-11-01T00:%02d:00Z\",\"label\":%d,\"source\":\"drain "
                               "after GPUFellOffBus\"}",
                               i ? "," : "", i / 8, i % 8, i % 60, (int)labels[i]);
    }
    sprintf(samples + len, "]");
    assert_true(len > SAFETENSORS_MAX_HEADER);
    char path[300];
    snprintf(path, sizeof(path), "%s/large.safetensors", dir);
    write_windows(path, &m, MANY, w, labels, samples);
    struct deploy_dataset d;
    assert_int_equal(deploy_dataset_load(path, &d, &err), 0);
    assert_int_equal(d.count, MANY);
    assert_int_equal(d.positives, MANY / 10);
    assert_true(d.grouped);
    deploy_dataset_release(&d);
    struct model big;
    assert_int_equal(model_load(path, &big, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "the 1 MiB cap"));
    free(w);
    free(labels);
    free(samples);
    model_release(&m);
}

int main(void)
{
    assert_non_null(mkdtemp(dir));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_large_header),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}

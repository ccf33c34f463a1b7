/* SPDX-License-Identifier: Apache-2.0 */
/* The rule score term by term on a window whose every term is known, its
 * terms named as fired; the built-in model's risk is its LSTM's joined
 * with the rule as its metadata says; a blend that could lower the risk
 * for more evidence, or that reads an input the model lacks, is refused. */
#include "default_model.h"
#include "risk.h"
#include "rule_score.h"
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

static int at(const struct feature_spec *spec, const char *name)
{
    for (size_t d = 0; d < spec->count; d++)
        if (strcmp(spec->items[d].name, name) == 0)
            return (int)d;
    fail_msg("the built-in model has no feature %s", name);
    return -1;
}

static void test_terms(void **state)
{
    (void)state;
    struct model m;
    struct feature_spec spec;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    struct rule_inputs in;
    rule_inputs_find(&spec, &in);
    for (size_t i = 0; i < RULE_INPUTS; i++)
        assert_true(in.at[i] >= 0);
    const size_t D = spec.count, T = spec.window;
    float *w = calloc(T * D, sizeof(float));
    unsigned fired = ~0u;
    assert_true(rule_score(&in, w, T, D, &fired) == 0 && fired == 0);
    float *last = w + (T - 1) * D;
    last[at(&spec, "xid_changes_30m")] = 1; /* a hardware Xid that just came: 1 */
    last[at(&spec, "xid_hardware_held")] = 1;
    last[at(&spec, "ecc_sbe_log_increase_15m")] = logf(6);      /* 5 errors: 0.5 */
    last[at(&spec, "ecc_dbe_increase_1h")] = 2;                 /* clipped to 1 */
    last[at(&spec, "pcie_replay_log_increase_15m")] = logf(11); /* 10 replays: 0.5 */
    last[at(&spec, "gpu_temp")] = 85;                           /* 5 C over 80: 0.5 */
    last[at(&spec, "temp_rise_1h")] = -3;                       /* cooling: 0 */
    last[at(&spec, "power_jitter_10m")] = 0.03f;                /* 0.2 */
    last[at(&spec, "sm_clock_jitter_10m")] = NAN;               /* missing: 0 */
    for (size_t t = 0; t < 6; t++)                              /* throttled 6 of 30 steps */
        w[t * D + (size_t)at(&spec, "hw_throttle")] = 1;
    double s = rule_score(&in, w, T, D, &fired);
    assert_true(fabs(s - (1 + 0.5 + 1 + 0.5 + 0.5 + 0.2 + 0.2)) < 1e-5);
    char names[200];
    rule_fired_describe(fired, names, sizeof(names));
    assert_string_equal(names, "hardware_xid, ecc_sbe, ecc_dbe, pcie_replay, hot, hw_throttle, "
                               "power_jitter");
    /* a held Xid alone is no new one */
    last[at(&spec, "xid_changes_30m")] = 0;
    assert_true(fabs(rule_score(&in, w, T, D, NULL) - (s - 1)) < 1e-5);
    free(w);
    model_release(&m);
}

/* The built-in model's risk is sigmoid(logit_weight * logit + rule_weight
 * * rule + bias) of its LSTM's risk alone and the window's rule score. */
static void test_builtin_blend(void **state)
{
    (void)state;
    struct model m;
    struct feature_spec spec, alone;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    assert_true(spec.blend.on && spec.blend.rule_weight > 0 && spec.blend.logit_weight > 0);
    alone = spec;
    alone.blend.on = 0;
    struct risk_scorer a, b;
    assert_int_equal(risk_scorer_init(&a, &m, &alone), 0);
    assert_int_equal(risk_scorer_init(&b, &m, &spec), 0);
    const size_t D = spec.count, T = spec.window;
    for (int k = 0; k < 3; k++) { /* healthy, an ECC burst, that and heat */
        for (size_t t = 0; t < T; t++) {
            float *row = &a.rows[t * D];
            memset(row, 0, D * sizeof(float));
            row[at(&spec, "gpu_temp")] = k == 2 ? 88 : 65;
            row[at(&spec, "ecc_exported")] = 1;
            row[at(&spec, "throttle_exported")] = 1;
            row[at(&spec, "ecc_sbe_log_increase_15m")] = k ? logf(1 + (float)t) : 0;
        }
        memcpy(b.rows, a.rows, T * D * sizeof(float));
        struct risk_score p, q;
        assert_int_equal(risk_score_rows(&a, 1, T, &p), 0);
        assert_int_equal(risk_score_rows(&b, 1, T, &q), 0);
        assert_true(p.rule[0] == q.rule[0] && (k == 0) == (q.rule[0] == 0));
        double x = p.gpu_risk[0];
        double z = spec.blend.logit_weight * log(x / (1 - x)) + spec.blend.rule_weight * q.rule[0] +
                   spec.blend.bias;
        double want = 1 / (1 + exp(-z));
        if (fabs(q.gpu_risk[0] - want) > 1e-6 * (want > 1e-3 ? want : 1e-3) + 1e-9)
            fail_msg("window %d: blended %.9g, want %.9g", k, q.gpu_risk[0], want);
    }
    risk_scorer_release(&a);
    risk_scorer_release(&b);
    model_release(&m);
}

/* The built-in model's file with its blend metadata replaced by text. */
static int blend_refused(const char *text, const char *expected)
{
    struct model m;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    struct safetensors_meta meta[64];
    const struct safetensors *st = &m.file;
    assert_true(st->meta_count <= 64);
    for (size_t i = 0; i < st->meta_count; i++) {
        meta[i] = st->meta[i];
        if (strcmp(meta[i].key, "blend") == 0)
            meta[i].value = (char *)text;
    }
    struct safetensors_out tensors[16];
    for (size_t i = 0; i < st->count; i++)
        tensors[i] =
            (struct safetensors_out){st->tensors[i].name, st->tensors[i].shape, st->tensors[i].dims,
                                     (const float *)(st->data + st->tensors[i].begin)};
    char path[] = "/tmp/medic-blend-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(safetensors_write(path, tensors, st->count, meta, st->meta_count, 0, &err), 0);
    model_release(&m);
    struct model back;
    assert_int_equal(model_load(path, &back, &err), 0);
    unlink(path);
    struct feature_spec spec;
    int rc = features_from_metadata(&back.file, back.D, &spec, &err);
    model_release(&back);
    if (rc && !strstr(err.msg, expected))
        fail_msg("refused with \"%s\", not \"%s\"", err.msg, expected);
    return rc == MEDIC_E_INVALID;
}

static void test_bad_blend(void **state)
{
    (void)state;
    const char *why = "metadata blend: expected a JSON object";
    assert_false(blend_refused("{\"logit_weight\":1,\"rule_weight\":0.5,\"bias\":-2}", why));
    assert_true(blend_refused("{\"logit_weight\":1,\"rule_weight\":-0.5,\"bias\":-2}", why));
    assert_true(blend_refused("{\"logit_weight\":1,\"rule_weight\":0.5}", why));
    assert_true(blend_refused("[1, 0.5, -2]", why));
    assert_true(blend_refused("{\"logit_weight\":1e400,\"rule_weight\":0.5,\"bias\":0}", why));
    /* a model without an input the rule reads cannot blend it */
    struct model m;
    struct feature_spec spec;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    snprintf(spec.items[at(&spec, "hw_throttle")].name, sizeof(spec.items[0].name), "other");
    assert_int_equal(rule_blend_from_metadata(&m.file, &spec, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "the rule score reads hw_throttle"));
    assert_false(spec.blend.on);
    model_release(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terms),
        cmocka_unit_test(test_builtin_blend),
        cmocka_unit_test(test_bad_blend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

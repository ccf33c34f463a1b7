/* SPDX-License-Identifier: Apache-2.0 */
/* The safetensors loader and the model: PyTorch's numbers, and hostile
 * files refused with a message instead of a crash. */
#include "default_model.h"
#include "deploy_check.h"
#include "feature_spec.h"
#include "lstm.h"
#include "risk.h"
#include "sha256.h"
#include "prometheus.h"
#include "prometheus_fleet.h"
#include "timeutil.h"
#include "safetensors.h"
#include "yaml_tree.h"

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

static unsigned char *read_all(const char *name, size_t *len)
{
    char path[512], *data;
    struct medic_error err = {0};
    snprintf(path, sizeof(path), "%s/../data/lstm/%s", MEDIC_FIXTURES, name);
    assert_int_equal(medic_read_file(path, SAFETENSORS_MAX_FILE, &data, len, &err), 0);
    return (unsigned char *)data;
}

static void check_case(const char *name, enum model_kernel kernel)
{
    char file[256];
    size_t mlen, vlen;
    snprintf(file, sizeof(file), "%s.model.safetensors", name);
    unsigned char *mb = read_all(file, &mlen);
    snprintf(file, sizeof(file), "%s.vectors.safetensors", name);
    unsigned char *vb = read_all(file, &vlen);
    struct model m;
    struct safetensors v;
    struct medic_error err = {0};
    if (model_load_bytes(mb, mlen, &m, &err) || safetensors_parse(vb, vlen, &v, &err))
        fail_msg("%s: %s", name, err.msg);
    m.kernel = kernel;
    const struct safetensor *in = safetensors_find(&v, "input");
    size_t B = in->shape[0], T = in->shape[1];
    size_t s_in[] = {B, T, m.D}, s_out[] = {B, 1}, s_h[] = {B, m.H};
    float *x = malloc(B * T * m.D * 4), *y = malloc(B * 4), *hy = malloc(B * m.H * 4);
    float *got = malloc(B * 4), *got_h = malloc(B * m.H * 4);
    assert_int_equal(safetensors_f32(&v, "input", s_in, 3, x, &err), 0);
    assert_int_equal(safetensors_f32(&v, "output", s_out, 2, y, &err), 0);
    assert_int_equal(safetensors_f32(&v, "last_hidden", s_h, 2, hy, &err), 0);
    struct model_workspace w;
    assert_int_equal(model_workspace_init(&w, &m, B, T), 0);
    assert_int_equal(model_predict(&m, &w, x, B, T, got, got_h), 0);
    for (size_t i = 0; i < B; i++)
        if (!(fabsf(got[i] - y[i]) <= 1e-5f))
            fail_msg("%s: output %zu is %g, PyTorch says %g", name, i, got[i], y[i]);
    for (size_t i = 0; i < B * m.H; i++)
        if (!(fabsf(got_h[i] - hy[i]) <= 1e-5f))
            fail_msg("%s: last_hidden %zu is %g, PyTorch says %g", name, i, got_h[i], hy[i]);
    /* one sequence at a time gives the same as the batch */
    for (size_t b = 0; b < B; b++) {
        float one;
        assert_int_equal(model_predict(&m, &w, x + b * T * m.D, 1, T, &one, NULL), 0);
        assert_true(fabsf(one - got[b]) <= 1e-6f);
    }
    /* the cases tiled into a batch of 11: two groups of four at once and
     * three alone give PyTorch's numbers too */
    enum { TILED = 11 };
    struct model_workspace wt;
    float *xt = malloc(TILED * T * m.D * 4), tiled[TILED], *tiled_h = malloc(TILED * m.H * 4);
    for (size_t b = 0; b < TILED; b++)
        memcpy(xt + b * T * m.D, x + (b % B) * T * m.D, T * m.D * 4);
    assert_int_equal(model_workspace_init(&wt, &m, TILED, T), 0);
    assert_int_equal(model_predict(&m, &wt, xt, TILED, T, tiled, tiled_h), 0);
    for (size_t b = 0; b < TILED; b++) {
        if (!(fabsf(tiled[b] - y[b % B]) <= 1e-5f))
            fail_msg("%s: tiled output %zu is %g, PyTorch says %g", name, b, tiled[b], y[b % B]);
        for (size_t k = 0; k < m.H; k++)
            if (!(fabsf(tiled_h[b * m.H + k] - hy[(b % B) * m.H + k]) <= 1e-5f))
                fail_msg("%s: tiled last_hidden %zu,%zu differs from PyTorch", name, b, k);
    }
    model_workspace_release(&wt);
    free(xt);
    free(tiled_h);
    /* NaN input is refused, not propagated */
    x[0] = NAN;
    assert_int_equal(model_predict(&m, &w, x, B, T, got, NULL), MEDIC_E_INVALID);
    model_workspace_release(&w);
    free(x);
    free(y);
    free(hy);
    free(got);
    free(got_h);
    safetensors_release(&v);
    model_release(&m);
}

static void test_matches_pytorch(void **state)
{
    (void)state;
    static const char *const cases[] = {"v1_d8_h64_t60_b4",         "v2_d8_h64_t1_b1",
                                        "v3_d8_h64_t300_b2",        "v4_d8_h32_t6_b3",
                                        "v5_d12_h16_t24_b5",        "v6_d8_h64_t60_b4_large",
                                        "v7_d8_h64_t60_b2_extreme", "v8_d5_h20_t30_b6",
                                        "v9_d10_h80_t40_b5",        "v10_d16_h64_t60_b4"};
    /* every kernel this CPU runs; the portable one always */
    const enum model_kernel kernels[] = {MODEL_KERNEL_PORTABLE, MODEL_KERNEL_AVX2,
                                         MODEL_KERNEL_AVX512};
    size_t ran = 0;
    for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++) {
        if (!model_kernel_usable(kernels[k]))
            continue;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            check_case(cases[i], kernels[k]);
        ran++;
    }
    assert_true(ran >= 1);
}

/* A kernel the CPU lacks is refused, not run. */
static void test_kernel_choice(void **state)
{
    (void)state;
    size_t mlen;
    unsigned char *mb = read_all("v4_d8_h32_t6_b3.model.safetensors", &mlen);
    struct model m;
    struct medic_error err = {0};
    assert_int_equal(model_load_bytes(mb, mlen, &m, &err), 0);
    /* the loader picks the fastest the CPU runs */
    assert_int_equal(m.kernel, model_kernel_usable(MODEL_KERNEL_AVX512) ? MODEL_KERNEL_AVX512
                               : model_kernel_usable(MODEL_KERNEL_AVX2) ? MODEL_KERNEL_AVX2
                                                                        : MODEL_KERNEL_PORTABLE);
    assert_string_equal(model_kernel_name(MODEL_KERNEL_AVX512), "avx512");
    assert_string_equal(model_kernel_name(MODEL_KERNEL_AVX2), "avx2");
    assert_string_equal(model_kernel_name(MODEL_KERNEL_PORTABLE), "portable");
    struct model_workspace w;
    assert_int_equal(model_workspace_init(&w, &m, 1, 6), 0);
    float x[6 * 8] = {0}, y = -1.0f;
    m.kernel = (enum model_kernel)7;
    assert_int_equal(model_predict(&m, &w, x, 1, 6, &y, NULL), MEDIC_E_INVALID);
    assert_true(y == -1.0f);
    model_workspace_release(&w);
    model_release(&m);
}

/* A small valid file to break in different ways. */
static unsigned char *file_with(const char *header, size_t data_len, size_t *size)
{
    size_t hlen = strlen(header);
    *size = 8 + hlen + data_len;
    unsigned char *b = calloc(1, *size);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    return b;
}

static void expect_refused(const char *header, size_t data_len, const char *message)
{
    size_t size;
    unsigned char *b = file_with(header, data_len, &size);
    struct safetensors st;
    struct medic_error err = {0};
    int rc = safetensors_parse(b, size, &st, &err);
    if (rc == 0) {
        safetensors_release(&st);
        fail_msg("accepted: %s", header);
    }
    if (!strstr(err.msg, message))
        fail_msg("'%s': got '%s', wanted '%s'", header, err.msg, message);
}

static void test_hostile_files(void **state)
{
    (void)state;
    expect_refused("[1]", 0, "does not start with");
    expect_refused("{nope", 0, "not a JSON object");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                   "data_offsets outside");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
                   "8 bytes of data for 3 elements");
    expect_refused("{\"a\":{\"dtype\":\"X9\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                   "unknown dtype");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   12, "overlap");
    expect_refused("{\"__metadata__\":{\"x\":1}}", 0, "values must be strings");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
                   "bad shape");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
                   "data_offsets outside");
    /* a header length beyond the file */
    unsigned char *b = calloc(1, 16);
    b[0] = 0xff;
    b[1] = 0xff;
    struct safetensors st;
    struct medic_error err = {0};
    assert_int_equal(safetensors_parse(b, 16, &st, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "not a safetensors file: its header length"));
    /* a valid safetensors file that is not a FaultPredictor */
    size_t size;
    unsigned char *other =
        file_with("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &size);
    struct model m;
    assert_int_equal(model_load_bytes(other, size, &m, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "lstm.weight_ih_l0"));
}

static void test_non_finite_weights(void **state)
{
    (void)state;
    size_t len;
    unsigned char *bytes = read_all("v4_d8_h32_t6_b3.model.safetensors", &len);
    struct safetensors st;
    struct medic_error err = {0};
    unsigned char *copy = malloc(len);
    memcpy(copy, bytes, len);
    assert_int_equal(safetensors_parse(copy, len, &st, &err), 0);
    const struct safetensor *t = safetensors_find(&st, "lstm.weight_hh_l0");
    assert_non_null(t);
    size_t at = (size_t)(st.data - st.file) + t->begin + 4 * 5;
    safetensors_release(&st);
    const float nan = NAN;
    memcpy(bytes + at, &nan, sizeof(nan));
    struct model m;
    assert_int_equal(model_load_bytes(bytes, len, &m, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "lstm.weight_hh_l0"));
}

static int spec_from(const char *meta, size_t D, struct feature_spec *spec, struct medic_error *err)
{
    char header[4096];
    snprintf(header, sizeof(header), "{\"__metadata__\":%s}", meta);
    size_t size;
    unsigned char *b = file_with(header, 0, &size);
    struct safetensors st;
    assert_int_equal(safetensors_parse(b, size, &st, err), 0);
    int rc = features_from_metadata(&st, D, spec, err);
    safetensors_release(&st);
    return rc;
}

#define TWO_FEATURES                                                                               \
    "\"[{\\\"name\\\":\\\"temp\\\",\\\"query\\\":\\\"T{Hostname=\\\\\\\"{{node}}\\\\\\\","         \
    "gpu=\\\\\\\"{{gpu}}\\\\\\\"}\\\",\\\"center\\\":60,\\\"scale\\\":10},"                        \
    "{\\\"name\\\":\\\"power\\\",\\\"query\\\":\\\"P{Hostname=\\\\\\\"{{node}}\\\\\\\","           \
    "gpu=\\\\\\\"{{gpu}}\\\\\\\"}\\\",\\\"center\\\":250,\\\"scale\\\":50}]\""

static void test_feature_metadata(void **state)
{
    (void)state;
    struct feature_spec spec;
    struct medic_error err = {0};
    const char *meta = "{\"window\":\"30\",\"step\":\"60s\",\"features\":" TWO_FEATURES "}";
    if (spec_from(meta, 2, &spec, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(spec.window, 30);
    assert_int_equal(spec.step, 60 * MEDIC_NS_PER_SEC);
    assert_int_equal(spec.count, 2);
    assert_string_equal(spec.items[1].name, "power");
    /* label values are escaped for PromQL; no gpu selects every GPU */
    char q[512], label[64];
    assert_int_equal(features_query(&spec.items[0], "n\"1\\", "3", q, sizeof(q)), 0);
    assert_string_equal(q, "T{Hostname=\"n\\\"1\\\\\",gpu=\"3\"}");
    assert_int_equal(features_query(&spec.items[0], "n1", NULL, q, sizeof(q)), 0);
    assert_string_equal(q, "T{Hostname=\"n1\",gpu=~\".+\"}");
    /* no node selects the whole fleet */
    assert_int_equal(features_query(&spec.items[0], NULL, NULL, q, sizeof(q)), 0);
    assert_string_equal(q, "T{Hostname=~\".+\",gpu=~\".+\"}");
    assert_int_equal(features_node_label(&spec.items[1], label, sizeof(label)), 0);
    assert_string_equal(label, "Hostname");
    /* the scaler: (raw - center) / scale */
    float rows[4] = {70, 350, 60, 200};
    features_scale(&spec, rows, 2);
    assert_float_equal(rows[0], 1.0, 1e-6);
    assert_float_equal(rows[1], 2.0, 1e-6);
    assert_float_equal(rows[2], 0.0, 1e-6);
    assert_float_equal(rows[3], -1.0, 1e-6);
    /* refused: a count that is not the model's input size, a bad window */
    assert_int_equal(spec_from(meta, 3, &spec, &err), MEDIC_E_INVALID);
    assert_int_equal(spec_from("{\"window\":\"0\",\"step\":\"60s\",\"features\":" TWO_FEATURES "}",
                               2, &spec, &err),
                     MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "window"));
    assert_int_equal(spec_from("{\"arch\":\"x\"}", 2, &spec, &err), MEDIC_E_NOTFOUND);
}

static void test_prometheus_answer(void **state)
{
    (void)state;
    struct feature_spec spec = {.window = 3, .step = 60 * MEDIC_NS_PER_SEC, .count = 2};
    strcpy(spec.items[0].name, "temp");
    strcpy(spec.items[1].name, "power");
    const int64_t start = 1000 * MEDIC_NS_PER_SEC;
    const char *temp =
        "{\"status\":\"success\",\"data\":{\"result\":["
        "{\"metric\":{\"gpu\":\"0\"},\"values\":[[1000,\"50\"],[1060,\"51\"],[1120,\"52\"]]},"
        "{\"metric\":{\"gpu\":\"1\"},\"values\":[[1000,\"60\"],[1121,\"62\"],[1e12,\"9\"]]}]}}";
    const char *power = "{\"data\":{\"result\":[{\"metric\":{\"gpu\":\"1\"},"
                        "\"values\":[[1060,\"300\"],[1120,\"1e300\"]]},"
                        "{\"metric\":{\"gpu\":\"7\"},\"values\":[[1000,\"1\"]]}]}}";
    struct prometheus_window w = {0};
    struct medic_error err = {0};
    assert_int_equal(prometheus_parse_range(temp, strlen(temp), &spec, 0, NULL, start, &w, &err),
                     0);
    assert_int_equal(prometheus_parse_range(power, strlen(power), &spec, 1, NULL, start, &w, &err),
                     0);
    assert_int_equal(w.count, 2); /* gpu 7 has no first feature: not a GPU of the window */
    assert_string_equal(w.gpu[1], "1");
    assert_float_equal(w.rows[0][2 * 2], 52.0, 0);
    assert_float_equal(w.rows[1][2 * 2], 62.0, 0); /* 1121 lands on the 1120 step */
    assert_true(isnan(w.rows[1][1 * 2]));          /* no sample at 1060 */
    assert_float_equal(w.rows[1][1 * 2 + 1], 300.0, 0);
    assert_true(isnan(w.rows[1][2 * 2 + 1])); /* beyond float: ignored */
    assert_true(isnan(w.rows[0][1]));         /* gpu 0 has no power */
    prometheus_window_release(&w);
    assert_int_equal(
        prometheus_parse_range("{\"status\":\"error\"}", 18, &spec, 0, NULL, start, &w, &err),
        MEDIC_E_INVALID);
    prometheus_window_release(&w);
}

/* The whole fleet's answer is split by the node label and gpu: a series
 * without the node label or with a value too long to keep is left out, the
 * cap on series is an error, a GPU silent for longer than the gap filled
 * while another of its node reports is lost, and any other window with a
 * long gap, or a feature missing, is kept out with the reason while short
 * gaps are filled. */
static void test_prometheus_parse_fleet(void **state)
{
    (void)state;
    struct feature_spec spec = {.window = 8, .step = 60 * MEDIC_NS_PER_SEC, .count = 2};
    strcpy(spec.items[0].name, "temp");
    strcpy(spec.items[1].name, "power");
    const int64_t start = 1000 * MEDIC_NS_PER_SEC;
    char long_node[200];
    memset(long_node, 'n', sizeof(long_node) - 1);
    long_node[sizeof(long_node) - 1] = 0;
    char temp[2048];
    snprintf(temp, sizeof(temp),
             "{\"data\":{\"result\":["
             "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"0\"},\"values\":[[1000,\"50\"],"
             "[1060,\"51\"],[1120,\"52\"],[1180,\"53\"],[1240,\"54\"],[1300,\"55\"],"
             "[1360,\"56\"],[1420,\"57\"]]},"
             /* gpu 0 of b: one gap of 2 steps, filled */
             "{\"metric\":{\"Hostname\":\"b\",\"gpu\":\"0\"},\"values\":[[1000,\"60\"],"
             "[1060,\"61\"],[1240,\"64\"],[1300,\"65\"],[1360,\"66\"],[1420,\"67\"]]},"
             /* gpu 1 of b: data only from the 7th step while b/0 reports: lost */
             "{\"metric\":{\"Hostname\":\"b\",\"gpu\":\"1\"},\"values\":[[1360,\"70\"]]},"
             "{\"metric\":{\"gpu\":\"2\"},\"values\":[[1000,\"1\"]]},"
             "{\"metric\":{\"Hostname\":\"%s\",\"gpu\":\"0\"},\"values\":[[1000,\"1\"]]}"
             "]}}",
             long_node);
    const char *power = "{\"data\":{\"result\":["
                        "{\"metric\":{\"Hostname\":\"b\",\"gpu\":\"0\"},\"values\":"
                        "[[1000,\"300\"],[1060,\"301\"],[1120,\"302\"],[1180,\"303\"],"
                        "[1240,\"304\"],[1300,\"305\"],[1360,\"306\"],[1420,\"307\"]]},"
                        "{\"metric\":{\"Hostname\":\"c\",\"gpu\":\"0\"},\"values\":"
                        "[[1000,\"1\"]]}]}}";
    struct prometheus_fleet f = {0};
    struct medic_error err = {0};
    medic_map_init(&f.index);
    assert_int_equal(
        prometheus_parse_fleet(temp, strlen(temp), &spec, 0, "Hostname", start, 10, &f, &err), 0);
    assert_int_equal(
        prometheus_parse_fleet(power, strlen(power), &spec, 1, "Hostname", start, 10, &f, &err), 0);
    assert_int_equal(f.count, 4); /* a/0, b/0, b/1, c/0; not the unlabelled or the too long */
    assert_string_equal(f.series[1].node, "b");
    assert_string_equal(f.series[1].gpu, "0");
    const float *raw = f.raw + 1 * spec.window * spec.count; /* as Prometheus answered */
    assert_float_equal(raw[4 * 2], 64.0, 0);
    assert_float_equal(raw[4 * 2 + 1], 304.0, 0);
    assert_true(isnan(raw[2 * 2]));
    /* a has no power at all, c (no other GPU) no temperature: their windows
     * are kept out; b/1 is lost for its first 6 steps */
    prometheus_fleet_fill(&spec, &f);
    const float *b0 = prometheus_fleet_rows(&f, &spec, 1);
    assert_true(isnan(raw[2 * 2])); /* the answer stays as it was */
    assert_int_equal(f.unusable, 2);
    assert_int_equal(f.lost, 1);
    assert_false(f.series[0].usable);
    assert_true(f.series[1].usable);
    assert_false(f.series[2].usable);
    assert_false(f.series[3].usable);
    assert_int_equal(f.series[2].lost.steps, 6);
    assert_int_equal(f.series[2].lost.ago, 2); /* its last step, 1420, has no sample again */
    assert_int_equal(f.series[0].lost.steps + f.series[1].lost.steps + f.series[3].lost.steps, 0);
    char said[160];
    prometheus_silence_describe(&f.series[2].lost, spec.step, said, sizeof(said));
    assert_string_equal(said, "telemetry lost: nothing for 6m until 2m ago while the node's "
                              "other GPUs reported");
    assert_float_equal(b0[2 * 2], 61.0, 0); /* filled with the value before */
    assert_float_equal(b0[3 * 2], 61.0, 0);
    assert_int_equal(f.filled, 2);
    assert_non_null(strstr(f.first_problem, "node a: feature power"));
    prometheus_fleet_release(&f);
    /* more series than the cap */
    medic_map_init(&f.index);
    assert_int_equal(
        prometheus_parse_fleet(temp, strlen(temp), &spec, 0, "Hostname", start, 2, &f, &err),
        MEDIC_E_LIMIT);
    prometheus_fleet_release(&f);
    medic_map_init(&f.index);
    assert_int_equal(prometheus_parse_fleet("[]", 2, &spec, 0, "Hostname", start, 2, &f, &err),
                     MEDIC_E_INVALID);
    prometheus_fleet_release(&f);
}

/* next, fetched one step after from: the answer to its steps placed over
 * from's windows, moved back a step, and its gaps filled */
/* A first fleet, its window starting at second 1000: answer parsed and
 * filled. */
static void first_fleet(const char *answer, const struct feature_spec *spec,
                        struct prometheus_fleet *out)
{
    struct medic_error err = {0};
    medic_map_init(&out->index);
    assert_int_equal(prometheus_parse_fleet(answer, strlen(answer), spec, 0, "Hostname",
                                            1000 * MEDIC_NS_PER_SEC, 10, out, &err),
                     0);
    prometheus_fleet_fill(spec, out);
}

static void carry_one_step(const struct prometheus_fleet *from, const char *answer,
                           const struct feature_spec *spec, struct prometheus_fleet *next)
{
    struct medic_error err = {0};
    medic_map_init(&next->index);
    next->carry_from = from;
    next->carry_shift = 1;
    assert_int_equal(prometheus_parse_fleet(answer, strlen(answer), spec, 0, "Hostname",
                                            1060 * MEDIC_NS_PER_SEC, 10, next, &err),
                     0);
    prometheus_fleet_fill(spec, next);
}

/* A fleet fetched after another starts from its steps: a GPU it had keeps
 * them, moved back by the steps since, with the steps asked again replacing
 * them; a GPU it did not have has nothing before them (kept out, counted as
 * fresh). */
static void test_prometheus_fleet_carry(void **state)
{
    (void)state;
    struct feature_spec spec = {.window = 4, .step = 60 * MEDIC_NS_PER_SEC, .count = 1};
    strcpy(spec.items[0].name, "temp");
    struct prometheus_fleet prev = {0}, next = {0};
    first_fleet("{\"data\":{\"result\":["
                "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"0\"},\"values\":"
                "[[1000,\"1\"],[1060,\"2\"],[1120,\"3\"],[1180,\"4\"]]}]}}",
                &spec, &prev);
    /* one step later: the last step asked again (revised) and the new one */
    carry_one_step(&prev,
                   "{\"data\":{\"result\":["
                   "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"0\"},\"values\":"
                   "[[1180,\"4.5\"],[1240,\"5\"]]},"
                   "{\"metric\":{\"Hostname\":\"c\",\"gpu\":\"0\"},\"values\":"
                   "[[1180,\"7\"],[1240,\"8\"]]}]}}",
                   &spec, &next);
    assert_int_equal(next.count, 2);
    const float *a0 = prometheus_fleet_rows(&next, &spec, 0);
    assert_float_equal(a0[0], 2.0, 0);
    assert_float_equal(a0[1], 3.0, 0);
    assert_float_equal(a0[2], 4.5, 0);
    assert_float_equal(a0[3], 5.0, 0);
    assert_true(next.series[0].usable);
    assert_int_equal(next.fresh, 1);
    assert_false(next.series[1].usable); /* c: nothing before the steps asked */
    assert_true(next.series[1].bad_at_start);
    prometheus_fleet_release(&next);
    prometheus_fleet_release(&prev);
}

/* The windows of a few nodes, taken from a fleet to start their own fetch
 * from: every GPU of those nodes with its raw steps and the same end,
 * nothing of the others; a node the fleet lacks is MEDIC_E_NOTFOUND. A
 * fetch carried from the subset gives the windows one carried from the
 * whole fleet gives. */
static void test_prometheus_fleet_subset(void **state)
{
    (void)state;
    struct feature_spec spec = {.window = 4, .step = 60 * MEDIC_NS_PER_SEC, .count = 1};
    strcpy(spec.items[0].name, "temp");
    struct prometheus_fleet fleet = {0}, some = {0}, next = {0};
    const char *first = "{\"data\":{\"result\":["
                        "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"0\"},\"values\":"
                        "[[1000,\"1\"],[1060,\"2\"],[1120,\"3\"],[1180,\"4\"]]},"
                        "{\"metric\":{\"Hostname\":\"b\",\"gpu\":\"0\"},\"values\":"
                        "[[1000,\"9\"],[1060,\"9\"],[1120,\"9\"],[1180,\"9\"]]},"
                        "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"1\"},\"values\":"
                        "[[1000,\"11\"],[1060,\"12\"],[1120,\"13\"],[1180,\"14\"]]}]}}";
    first_fleet(first, &spec, &fleet);
    fleet.end = 1180 * MEDIC_NS_PER_SEC;
    const char *const both[] = {"a", "zz"};
    assert_int_equal(prometheus_fleet_subset(&fleet, &spec, both, 2, &some), MEDIC_E_NOTFOUND);
    assert_int_equal(some.count, 0);
    const char *const only_a[] = {"a", "a"};
    assert_int_equal(prometheus_fleet_subset(&fleet, &spec, only_a, 2, &some), 0);
    assert_int_equal(some.count, 2);
    assert_int_equal(some.end, fleet.end);
    assert_string_equal(some.series[0].gpu, "0");
    assert_string_equal(some.series[1].gpu, "1");
    assert_float_equal(some.raw[4 + 3], 14.0, 0);
    /* one step later, from the subset */
    carry_one_step(&some,
                   "{\"data\":{\"result\":["
                   "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"1\"},\"values\":"
                   "[[1180,\"14.5\"],[1240,\"15\"]]},"
                   "{\"metric\":{\"Hostname\":\"a\",\"gpu\":\"0\"},\"values\":"
                   "[[1180,\"4.5\"],[1240,\"5\"]]}]}}",
                   &spec, &next);
    assert_int_equal(next.count, 2);
    assert_int_equal(next.fresh, 0);
    const float *a1 = prometheus_fleet_rows(&next, &spec, 0),
                *a0 = prometheus_fleet_rows(&next, &spec, 1);
    assert_string_equal(next.series[0].gpu, "1");
    const float want1[] = {12, 13, 14.5, 15}, want0[] = {2, 3, 4.5, 5};
    for (int k = 0; k < 4; k++) {
        assert_float_equal(a1[k], want1[k], 0);
        assert_float_equal(a0[k], want0[k], 0);
    }
    assert_true(next.series[0].usable && next.series[1].usable);
    prometheus_fleet_release(&next);
    prometheus_fleet_release(&some);
    prometheus_fleet_release(&fleet);
}

/* The built-in model is model/default.safetensors byte for byte, reads
 * features of DCGM telemetry (some relative to the node's GPUs), is
 * calibrated (a steady healthy GPU's risk is small), and has learned the
 * simulator's lesson: a GPU whose correctable errors climb, with rows
 * remapped and a double-bit error whose Xid arrives, is riskier than a
 * steady healthy one, and more of any evidence lowers neither's risk. */
static size_t feature_index(const struct feature_spec *spec, const char *name)
{
    for (size_t d = 0; d < spec->count; d++)
        if (strcmp(spec->items[d].name, name) == 0)
            return d;
    fail_msg("the built-in model has no feature %s", name);
    return 0;
}

static void test_builtin_model(void **state)
{
    (void)state;
    struct model m;
    struct feature_spec spec;
    struct medic_error err = {0};
    assert_int_equal(model_load_builtin(&m, &err), 0);
    assert_int_equal(features_from_metadata(&m.file, m.D, &spec, &err), 0);
    assert_int_equal(spec.count, 18);
    assert_int_equal(spec.window, 30);
    assert_true(spec.step == 60 * MEDIC_NS_PER_SEC);
    assert_string_equal(spec.items[0].name, "gpu_temp");
    assert_non_null(strstr(spec.items[0].query, "DCGM_FI_DEV_GPU_TEMP"));
    assert_non_null(strstr(spec.items[feature_index(&spec, "ecc_sbe_log_increase_15m")].query,
                           "ln(1 + increase(DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"));
    assert_non_null(strstr(spec.items[feature_index(&spec, "temp_rise_over_node_1h")].query,
                           "avg by (Hostname)"));
    assert_non_null(safetensors_meta(&m.file, "threshold"));
    assert_non_null(strstr(safetensors_meta(&m.file, "description"), "SYNTHETIC"));

    char path[512], *data, hex[65];
    size_t len;
    snprintf(path, sizeof(path), "%s/../../model/default.safetensors", MEDIC_FIXTURES);
    assert_int_equal(medic_read_file(path, SAFETENSORS_MAX_FILE, &data, &len, &err), 0);
    medic_sha256_hex(data, len, hex);
    assert_string_equal(hex, m.hash);
    free(data);

    struct risk_scorer scorer;
    struct risk_score healthy, failing;
    assert_int_equal(risk_scorer_init(&scorer, &m, &spec), 0);
    /* a busy GPU, every family exported, nothing happening */
    const size_t D = spec.count;
    float steady[18] = {0};
    steady[feature_index(&spec, "gpu_temp")] = 70;
    steady[feature_index(&spec, "power_of_1h_max")] = 0.92f;
    steady[feature_index(&spec, "power_jitter_10m")] = 0.03f;
    steady[feature_index(&spec, "sm_clock_of_1h_max")] = 1;
    steady[feature_index(&spec, "sm_clock_jitter_10m")] = 0.004f;
    steady[feature_index(&spec, "throttle_exported")] = 1;
    steady[feature_index(&spec, "ecc_exported")] = 1;
    for (size_t t = 0; t < spec.window; t++)
        memcpy(&scorer.rows[t * D], steady, sizeof(steady));
    assert_int_equal(risk_score_rows(&scorer, 1, spec.window, &healthy), 0);
    for (size_t t = 0; t < spec.window; t++) {
        float *row = &scorer.rows[t * D];
        memcpy(row, steady, sizeof(steady));
        row[feature_index(&spec, "ecc_sbe_log_increase_15m")] = logf(1 + 2.0f * (float)t);
        row[feature_index(&spec, "remapped_rows_increase_1h")] = (float)(t / 6);
        if (t >= 27) { /* a double-bit error at the end, and its Xid */
            row[feature_index(&spec, "ecc_dbe_increase_1h")] = 1;
            row[feature_index(&spec, "xid_changes_30m")] = 1;
            row[feature_index(&spec, "xid_hardware_new_30m")] = 1;
            row[feature_index(&spec, "xid_hardware_held")] = 1;
        }
    }
    float base[30 * 18]; /* the failing GPU's raw rows (scoring scales them in place) */
    memcpy(base, scorer.rows, sizeof(base));
    assert_int_equal(risk_score_rows(&scorer, 1, spec.window, &failing), 0);
    assert_true(healthy.risk >= 0 && failing.risk <= 1);
    /* calibrated: a steady GPU's chance of failing within the hour is small */
    assert_true(healthy.risk < 0.01);
    assert_true(failing.risk > 0.05 && failing.risk > 100 * healthy.risk);
    /* monotone in the evidence: one more of any count over the last five
     * minutes never lowers either GPU's risk */
    for (size_t e = 0; e < DEPLOY_EVIDENCE_MAX; e++)
        for (int which = 0; which < 2; which++) {
            const struct risk_score *before = which ? &failing : &healthy;
            struct risk_score after;
            for (size_t t = 0; t < spec.window; t++) {
                memcpy(&scorer.rows[t * D], which ? &base[t * D] : steady, sizeof(steady));
                if (t + 5 >= spec.window)
                    scorer.rows[t * D + feature_index(&spec, deploy_evidence[e])] += 1;
            }
            assert_int_equal(risk_score_rows(&scorer, 1, spec.window, &after), 0);
            if (after.risk < before->risk * (1 - 1e-4))
                fail_msg("one more %s lowers the %s GPU's risk from %.5f to %.5f",
                         deploy_evidence[e], which ? "failing" : "healthy", before->risk,
                         after.risk);
        }
    risk_scorer_release(&scorer);
    model_release(&m);
}

/* What safetensors_write writes, safetensors_load reads back, within a
 * header cap both sides count alike. */
static void test_safetensors_write(void **state)
{
    (void)state;
    char path[] = "/tmp/medic-test-st-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    static const float a[6] = {1, -2.5f, 3, 4, 5, 6e-7f}, b[1] = {42};
    size_t ashape[2] = {2, 3}, bshape[1] = {1};
    const struct safetensors_out tensors[] = {{"a", ashape, 2, a}, {"b", bshape, 1, b}};
    const struct safetensors_meta meta[] = {{"note", "quotes \" and \\ survive"}};
    struct medic_error err = {0};
    assert_int_equal(safetensors_write(path, tensors, 2, meta, 1, 0, &err), 0);
    struct safetensors st;
    assert_int_equal(safetensors_load(path, &st, &err), 0);
    assert_int_equal((st.data - st.file) % 8, 0); /* the header is padded */
    float got[6];
    assert_int_equal(safetensors_f32(&st, "a", ashape, 2, got, &err), 0);
    assert_memory_equal(got, a, sizeof(a));
    assert_int_equal(safetensors_f32(&st, "b", bshape, 1, got, &err), 0);
    assert_true(got[0] == 42);
    assert_string_equal(safetensors_meta(&st, "note"), "quotes \" and \\ survive");
    size_t header = (size_t)(st.data - st.file) - 8;
    safetensors_release(&st);
    /* the cap counts the header as written, escapes and padding included:
     * exactly at it is written, a byte under is refused and writes nothing */
    assert_int_equal(safetensors_write(path, tensors, 2, meta, 1, header, &err), 0);
    assert_int_equal(safetensors_load_capped(path, 1 << 20, header, &st, &err), 0);
    safetensors_release(&st);
    unlink(path);
    assert_int_equal(safetensors_write(path, tensors, 2, meta, 1, header - 1, &err), MEDIC_E_LIMIT);
    assert_int_equal(access(path, F_OK), -1);
    char bad[] = "/nonexistent-dir/x.safetensors";
    assert_int_equal(safetensors_write(bad, tensors, 2, meta, 1, 0, &err), MEDIC_E_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_kernel_choice),
        cmocka_unit_test(test_hostile_files),
        cmocka_unit_test(test_non_finite_weights),
        cmocka_unit_test(test_feature_metadata),
        cmocka_unit_test(test_prometheus_answer),
        cmocka_unit_test(test_prometheus_parse_fleet),
        cmocka_unit_test(test_prometheus_fleet_carry),
        cmocka_unit_test(test_prometheus_fleet_subset),
        cmocka_unit_test(test_builtin_model),
        cmocka_unit_test(test_safetensors_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

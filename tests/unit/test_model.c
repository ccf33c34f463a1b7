/* The safetensors loader and the model: PyTorch's numbers, and hostile
 * files refused with a message instead of a crash. */
#include "lstm.h"
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

#include <cmocka.h>

static unsigned char *read_all(const char *name, size_t *len)
{
    char path[512], *data;
    struct medic_error err = {0};
    snprintf(path, sizeof(path), "%s/../data/lstm/%s", MEDIC_FIXTURES, name);
    assert_int_equal(medic_read_file(path, SAFETENSORS_MAX_FILE, &data, len, &err), 0);
    return (unsigned char *)data;
}

static void check_case(const char *name)
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
    static const char *const cases[] = {
        "v1_d8_h64_t60_b4",  "v2_d8_h64_t1_b1",        "v3_d8_h64_t300_b2",       "v4_d8_h32_t6_b3",
        "v5_d12_h16_t24_b5", "v6_d8_h64_t60_b4_large", "v7_d8_h64_t60_b2_extreme"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_case(cases[i]);
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
    assert_non_null(strstr(err.msg, "does not fit"));
    /* a valid safetensors file that is not a FaultPredictor */
    size_t size;
    unsigned char *other =
        file_with("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &size);
    struct model m;
    assert_int_equal(model_load_bytes(other, size, &m, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "lstm.weight_ih_l0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_hostile_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

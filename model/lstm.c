/* SPDX-License-Identifier: Apache-2.0 */
#include "lstm_internal.h"
#include "sha256.h"
#include "yaml_tree.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *alloc_floats(size_t n)
{
    /* 64-byte aligned, so that vector loads of rows never split lines */
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

void model_release(struct model *m)
{
    free(m->w);
    free(m->bias);
    free(m->c0_w_t);
    free(m->c0_b);
    free(m->c2_w);
    safetensors_release(&m->file);
    memset(m, 0, sizeof(*m));
}

int model_kernel_usable(enum model_kernel k)
{
    if (k == MODEL_KERNEL_PORTABLE)
        return 1;
#if defined(__x86_64__) && defined(__GNUC__)
    if (k == MODEL_KERNEL_AVX512)
        return __builtin_cpu_supports("avx512f");
    if (k == MODEL_KERNEL_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return 0;
}

const char *model_kernel_name(enum model_kernel k)
{
    return k == MODEL_KERNEL_AVX512 ? "avx512" : k == MODEL_KERNEL_AVX2 ? "avx2" : "portable";
}

/* Every weight finite: a NaN would poison every prediction. */
static int check_finite(const float *v, size_t n, const char *name, struct medic_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return medic_error_set(err, MEDIC_E_INVALID, "%s holds NaN or inf", name);
    return 0;
}

/* Lays PyTorch's W_ih [4H][D], W_hh [4H][H] and biases out as struct model
 * describes. */
static void fuse(struct model *m, const float *w_ih, const float *w_hh, const float *b_ih,
                 const float *b_hh)
{
    const size_t D = m->D, H = m->H;
    for (size_t gate = 0; gate < 4; gate++)
        for (size_t j = 0; j < H; j++) {
            const size_t row = gate * H + j, block = j / 16, col = gate * 16 + j % 16;
            const float scale = gate == 2 ? 2.0f : 1.0f; /* exact: a power of two */
            m->bias[block * 64 + col] = (b_ih[row] + b_hh[row]) * scale;
            size_t stride;
            float *out = (float *)model_block_weights(m, block, &stride) + col;
            for (size_t d = 0; d < D; d++)
                out[d * stride] = w_ih[row * D + d] * scale;
            for (size_t k = 0; k < H; k++)
                out[(D + k) * stride] = w_hh[row * H + k] * scale;
        }
}

/* Builds m from an already parsed file, which m takes over. */
static int model_from_file(struct safetensors *file, struct model *m, struct medic_error *err)
{
    int rc = 0;
    m->file = *file;
    medic_sha256_hex(file->file, file->size, m->hash);
    const struct safetensor *ih = safetensors_find(&m->file, "lstm.weight_ih_l0");
    if (!ih || ih->dims != 2 || ih->shape[0] % 4 || !ih->shape[0] || !ih->shape[1] ||
        ih->shape[0] / 4 > MODEL_MAX_DIM || ih->shape[1] > MODEL_MAX_DIM) {
        model_release(m);
        return medic_error_set(err, MEDIC_E_INVALID,
                               "lstm.weight_ih_l0 missing or not [4H, D] with H, D <= %d",
                               MODEL_MAX_DIM);
    }
    size_t H = ih->shape[0] / 4, D = ih->shape[1], G = 4 * H, C = MODEL_CLASSIFIER_HIDDEN;
    m->D = D;
    m->H = H;
    m->Hp = (H + 15) / 16 * 16;
    m->K = D + m->Hp;
    m->kernel = model_kernel_usable(MODEL_KERNEL_AVX512) ? MODEL_KERNEL_AVX512
                : model_kernel_usable(MODEL_KERNEL_AVX2) ? MODEL_KERNEL_AVX2
                                                         : MODEL_KERNEL_PORTABLE;
    float *w_ih = alloc_floats(G * D), *w_hh = alloc_floats(G * H), *b_ih = alloc_floats(G),
          *b_hh = alloc_floats(G);
    float c2_b[1];
    m->w = alloc_floats(m->Hp / 16 * m->K * 64);
    m->bias = alloc_floats(m->Hp * 4);
    float *c0_w = alloc_floats(C * H);
    m->c0_w_t = alloc_floats(H * C);
    m->c0_b = alloc_floats(C);
    m->c2_w = alloc_floats(C);
    if (!w_ih || !w_hh || !b_ih || !b_hh || !m->w || !m->bias || !c0_w || !m->c0_w_t || !m->c0_b ||
        !m->c2_w) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    memset(m->w, 0, m->Hp / 16 * m->K * 64 * sizeof(float));
    memset(m->bias, 0, m->Hp * 4 * sizeof(float));
    size_t s_ih[] = {G, D}, s_hh[] = {G, H}, s_g[] = {G}, s_c0w[] = {C, H}, s_c[] = {C},
           s_c2w[] = {1, C}, s_1[] = {1};
    if ((rc = safetensors_f32(&m->file, "lstm.weight_ih_l0", s_ih, 2, w_ih, err)) ||
        (rc = safetensors_f32(&m->file, "lstm.weight_hh_l0", s_hh, 2, w_hh, err)) ||
        (rc = safetensors_f32(&m->file, "lstm.bias_ih_l0", s_g, 1, b_ih, err)) ||
        (rc = safetensors_f32(&m->file, "lstm.bias_hh_l0", s_g, 1, b_hh, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.0.weight", s_c0w, 2, c0_w, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.0.bias", s_c, 1, m->c0_b, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.2.weight", s_c2w, 2, m->c2_w, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.2.bias", s_1, 1, c2_b, err)))
        goto out;
    m->c2_b = c2_b[0];
    if ((rc = check_finite(w_ih, G * D, "lstm.weight_ih_l0", err)) ||
        (rc = check_finite(w_hh, G * H, "lstm.weight_hh_l0", err)) ||
        (rc = check_finite(b_ih, G, "lstm.bias_ih_l0", err)) ||
        (rc = check_finite(b_hh, G, "lstm.bias_hh_l0", err)) ||
        (rc = check_finite(c0_w, C * H, "classifier.0.weight", err)) ||
        (rc = check_finite(m->c0_b, C, "classifier.0.bias", err)) ||
        (rc = check_finite(m->c2_w, C, "classifier.2.weight", err)) ||
        (rc = check_finite(c2_b, 1, "classifier.2.bias", err)))
        goto out;
    /* the sums of the two biases must be finite too */
    for (size_t j = 0; j < G; j++)
        if (!isfinite(b_ih[j] + b_hh[j])) {
            rc = medic_error_set(err, MEDIC_E_INVALID,
                                 "lstm.bias_ih_l0 + lstm.bias_hh_l0 holds NaN or inf");
            goto out;
        }
    fuse(m, w_ih, w_hh, b_ih, b_hh);
    for (size_t r = 0; r < C; r++)
        for (size_t k = 0; k < H; k++)
            m->c0_w_t[k * C + r] = c0_w[r * H + k];
out:
    free(c0_w);
    free(w_ih);
    free(w_hh);
    free(b_ih);
    free(b_hh);
    if (rc)
        model_release(m);
    return rc;
}

int model_load_bytes(unsigned char *bytes, size_t size, struct model *m, struct medic_error *err)
{
    struct safetensors file;
    memset(m, 0, sizeof(*m));
    int rc = safetensors_parse(bytes, size, &file, err);
    return rc ? rc : model_from_file(&file, m, err);
}

int model_load(const char *path, struct model *m, struct medic_error *err)
{
    struct safetensors file;
    memset(m, 0, sizeof(*m));
    int rc = safetensors_load(path, &file, err);
    if (rc == 0 && (rc = model_from_file(&file, m, err)))
        medic_error_prefix(err, path);
    return rc;
}

int model_workspace_init(struct model_workspace *w, const struct model *m, size_t max_batch,
                         size_t max_steps)
{
    memset(w, 0, sizeof(*w));
    w->max_batch = max_batch;
    w->max_steps = max_steps;
    w->Hp = m->Hp;
    w->K = m->K;
    w->v = alloc_floats(2 * max_batch * m->K);
    w->h = alloc_floats(max_batch * m->Hp);
    w->c = alloc_floats(max_batch * m->Hp);
    if (!w->v || !w->h || !w->c) {
        model_workspace_release(w);
        return MEDIC_E_NOMEM;
    }
    return 0;
}

void model_workspace_release(struct model_workspace *w)
{
    free(w->v);
    free(w->h);
    free(w->c);
    memset(w, 0, sizeof(*w));
}

/* Linear(H, 32), ReLU, Linear(32, 1), sigmoid on each last hidden state;
 * the 32 sums run side by side over the transposed weights (so the loop
 * vectorises without reordering any sum). */
static void classify(const struct model *m, const struct model_workspace *w, size_t batch,
                     float *out, float *last_hidden)
{
    const size_t H = m->H, C = MODEL_CLASSIFIER_HIDDEN;
    for (size_t b = 0; b < batch; b++) {
        const float *h = w->h + b * m->Hp;
        float a[MODEL_CLASSIFIER_HIDDEN];
        memcpy(a, m->c0_b, sizeof(a));
        for (size_t k = 0; k < H; k++)
            for (size_t r = 0; r < C; r++)
                a[r] += m->c0_w_t[k * C + r] * h[k];
        float z = m->c2_b;
        for (size_t r = 0; r < C; r++) {
            /* ReLU; a NaN stays NaN so that it cannot hide (NaN > 0 is false) */
            float v = a[r] > 0.0f ? a[r] : (a[r] == a[r] ? 0.0f : a[r]);
            z += m->c2_w[r] * v;
        }
        out[b] = lstm__sigmoid(z);
        if (last_hidden)
            memcpy(last_hidden + b * H, h, H * sizeof(float));
    }
}

int model_predict(const struct model *m, struct model_workspace *w, const float *input,
                  size_t batch, size_t steps, float *out, float *last_hidden)
{
    if (batch == 0 || steps == 0 || batch > w->max_batch || steps > w->max_steps ||
        w->Hp != m->Hp || w->K != m->K || !model_kernel_usable(m->kernel))
        return MEDIC_E_INVALID;
    /* features are finite by construction; say so if not (all exponent
     * bits set: inf or NaN; on the bits, so that the loop vectorises) */
    uint32_t bad = 0;
    for (size_t i = 0; i < batch * steps * m->D; i++) {
        uint32_t bits;
        memcpy(&bits, input + i, sizeof(bits));
        bad |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    if (bad)
        return MEDIC_E_INVALID;
#if defined(__x86_64__) && defined(__GNUC__)
    if (m->kernel == MODEL_KERNEL_AVX512)
        lstm__run_avx512(m, w, input, batch, steps);
    else if (m->kernel == MODEL_KERNEL_AVX2)
        lstm__run_avx2(m, w, input, batch, steps);
    else
#endif
        lstm__run_portable(m, w, input, batch, steps);
    classify(m, w, batch, out, last_hidden);
    return 0;
}

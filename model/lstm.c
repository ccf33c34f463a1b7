#include "lstm.h"
#include "sha256.h"
#include "yaml_tree.h"

#include <math.h>
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
    free(m->w_ih);
    free(m->w_ih_t);
    free(m->w_hh_t);
    free(m->bias);
    free(m->c0_w);
    free(m->c0_b);
    free(m->c2_w);
    safetensors_release(&m->file);
    memset(m, 0, sizeof(*m));
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
    float *w_hh = alloc_floats(G * H), *b_ih = alloc_floats(G), *b_hh = alloc_floats(G);
    float c2_b[1];
    m->w_ih = alloc_floats(G * D);
    m->w_ih_t = alloc_floats(D * G);
    m->w_hh_t = alloc_floats(H * G);
    m->bias = alloc_floats(G);
    m->c0_w = alloc_floats(C * H);
    m->c0_b = alloc_floats(C);
    m->c2_w = alloc_floats(C);
    if (!w_hh || !b_ih || !b_hh || !m->w_ih || !m->w_ih_t || !m->w_hh_t || !m->bias || !m->c0_w ||
        !m->c0_b || !m->c2_w) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    size_t s_ih[] = {G, D}, s_hh[] = {G, H}, s_g[] = {G}, s_c0w[] = {C, H}, s_c[] = {C},
           s_c2w[] = {1, C}, s_1[] = {1};
    if ((rc = safetensors_f32(&m->file, "lstm.weight_ih_l0", s_ih, 2, m->w_ih, err)) ||
        (rc = safetensors_f32(&m->file, "lstm.weight_hh_l0", s_hh, 2, w_hh, err)) ||
        (rc = safetensors_f32(&m->file, "lstm.bias_ih_l0", s_g, 1, b_ih, err)) ||
        (rc = safetensors_f32(&m->file, "lstm.bias_hh_l0", s_g, 1, b_hh, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.0.weight", s_c0w, 2, m->c0_w, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.0.bias", s_c, 1, m->c0_b, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.2.weight", s_c2w, 2, m->c2_w, err)) ||
        (rc = safetensors_f32(&m->file, "classifier.2.bias", s_1, 1, c2_b, err)))
        goto out;
    m->c2_b = c2_b[0];
    for (size_t j = 0; j < G; j++) {
        m->bias[j] = b_ih[j] + b_hh[j];
        for (size_t d = 0; d < D; d++)
            m->w_ih_t[d * G + j] = m->w_ih[j * D + d];
        for (size_t k = 0; k < H; k++)
            m->w_hh_t[k * G + j] = w_hh[j * H + k];
    }
    /* weights must be finite: a NaN would poison every prediction */
    {
        const struct {
            const float *v;
            size_t n;
            const char *name;
        } all[] = {{m->w_ih, G * D, "lstm.weight_ih_l0"},
                   {m->w_hh_t, G * H, "lstm.weight_hh_l0"},
                   {m->bias, G, "lstm.bias_ih_l0 + lstm.bias_hh_l0"},
                   {m->c0_w, C * H, "classifier.0.weight"},
                   {m->c0_b, C, "classifier.0.bias"},
                   {m->c2_w, C, "classifier.2.weight"},
                   {&m->c2_b, 1, "classifier.2.bias"}};
        for (size_t t = 0; t < sizeof(all) / sizeof(all[0]); t++)
            for (size_t i = 0; i < all[t].n; i++)
                if (!isfinite(all[t].v[i])) {
                    rc = medic_error_set(err, MEDIC_E_INVALID, "%s holds NaN or inf", all[t].name);
                    goto out;
                }
    }
out:
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
    size_t G = 4 * m->H;
    w->max_batch = max_batch;
    w->max_steps = max_steps;
    w->H = m->H;
    w->xproj = alloc_floats(max_batch * max_steps * G);
    w->gates = alloc_floats(max_batch * G);
    w->h = alloc_floats(max_batch * m->H);
    w->c = alloc_floats(max_batch * m->H);
    if (!w->xproj || !w->gates || !w->h || !w->c) {
        model_workspace_release(w);
        return MEDIC_E_NOMEM;
    }
    return 0;
}

void model_workspace_release(struct model_workspace *w)
{
    free(w->xproj);
    free(w->gates);
    free(w->h);
    free(w->c);
    memset(w, 0, sizeof(*w));
}

/* exp(x) for x <= 0 (the callers pass -|z|), accurate to about 1 ulp, in
 * plain arithmetic the compiler vectorises (Cephes' polynomial; the power
 * of two is built in the exponent bits). */
static inline float exp_neg(float x)
{
    /* written so that NaN (only an overflowing, hostile model makes one)
     * becomes -87 too: the conversion to int below must stay in range */
    x = x >= -87.0f ? x : -87.0f;
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    union {
        int i;
        float f;
    } scale = {.i = ((int)n + 127) << 23};
    return y * scale.f;
}

/* σ(z) for every finite z: e = exp(-|z|) never overflows. */
static inline float sigmoid(float z)
{
    float e = exp_neg(-fabsf(z));
    float s = 1.0f / (1.0f + e);
    return z >= 0 ? s : 1.0f - s;
}

/* tanh(z) = sign(z) (1 - e) / (1 + e) with e = exp(-2|z|). */
static inline float tanh_(float z)
{
    float e = exp_neg(-2.0f * fabsf(z));
    float t = (1.0f - e) / (1.0f + e);
    return z >= 0 ? t : -t;
}

/* The hot loops, compiled for AVX-512 and AVX2 as well as the baseline;
 * the dynamic loader picks one for the machine at start. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define MODEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MODEL_CLONES
#endif

/* Gate rows are accumulated 64 at a time in four 16-float vectors (GCC's
 * vector extensions: AVX-512 registers in that clone, two or four narrower
 * ones in the others), so a block's sums stay in registers while the H
 * recurrent columns stream by. */
#define GATE_BLOCK 64
typedef float vec16 __attribute__((vector_size(64)));

static inline vec16 load16(const float *p)
{
    vec16 v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Activations in place: σ on i, f (rows 0..2H) and o (3H..4H), tanh on g
 * (2H..3H). */
static inline void activate(float *g, size_t H)
{
    for (size_t j = 0; j < 2 * H; j++)
        g[j] = sigmoid(g[j]);
    for (size_t j = 2 * H; j < 3 * H; j++)
        g[j] = tanh_(g[j]);
    for (size_t j = 3 * H; j < 4 * H; j++)
        g[j] = sigmoid(g[j]);
}

/* y[j] = init[j] + sum over k < n of mat[k*stride + j] * v[k], for j from
 * j0 to stride: 64 outputs at a time in registers, then one at a time.
 * Always inlined, so that it is compiled for the caller's clone. */
static inline __attribute__((always_inline)) void sum_columns(float *y, const float *init,
                                                              const float *mat, size_t stride,
                                                              const float *v, size_t n, size_t j0)
{
    for (; j0 + GATE_BLOCK <= stride; j0 += GATE_BLOCK) {
        vec16 a0 = load16(init + j0), a1 = load16(init + j0 + 16);
        vec16 a2 = load16(init + j0 + 32), a3 = load16(init + j0 + 48);
        const float *row = mat + j0;
        for (size_t k = 0; k < n; k++, row += stride) {
            const float vk = v[k];
            a0 += load16(row) * vk;
            a1 += load16(row + 16) * vk;
            a2 += load16(row + 32) * vk;
            a3 += load16(row + 48) * vk;
        }
        memcpy(y + j0, &a0, sizeof(a0));
        memcpy(y + j0 + 16, &a1, sizeof(a1));
        memcpy(y + j0 + 32, &a2, sizeof(a2));
        memcpy(y + j0 + 48, &a3, sizeof(a3));
    }
    for (size_t j = j0; j < stride; j++) {
        float a = init[j];
        for (size_t k = 0; k < n; k++)
            a += mat[k * stride + j] * v[k];
        y[j] = a;
    }
}

MODEL_CLONES
static void run_batch(const struct model *m, struct model_workspace *w, const float *input,
                      size_t batch, size_t steps, float *out, float *last_hidden)
{
    const size_t D = m->D, H = m->H, G = 4 * H, C = MODEL_CLASSIFIER_HIDDEN;
    /* input projections for every step at once: xproj = x W_ih^T + bias */
    for (size_t s = 0; s < batch * steps; s++)
        sum_columns(w->xproj + s * G, m->bias, m->w_ih_t, G, input + s * D, D, 0);
    memset(w->h, 0, batch * H * sizeof(float));
    memset(w->c, 0, batch * H * sizeof(float));
    for (size_t t = 0; t < steps; t++) {
        size_t b = 0;
        /* eight sequences at once: each load of the recurrent weights
         * serves sixteen multiply-adds, so the weights stream from L2 a
         * quarter as often as with pairs */
        for (; b + 8 <= batch && G % 32 == 0; b += 8) {
            const float *h = w->h + b * H;
            for (size_t j0 = 0; j0 < G; j0 += 32) {
                vec16 lo[8], hi[8];
#pragma GCC unroll 8
                for (size_t s = 0; s < 8; s++) {
                    const float *x = w->xproj + ((b + s) * steps + t) * G + j0;
                    lo[s] = load16(x);
                    hi[s] = load16(x + 16);
                }
                const float *row = m->w_hh_t + j0;
                for (size_t k = 0; k < H; k++, row += G) {
                    const vec16 r0 = load16(row), r1 = load16(row + 16);
#pragma GCC unroll 8
                    for (size_t s = 0; s < 8; s++) {
                        const float p = h[s * H + k];
                        lo[s] += r0 * p;
                        hi[s] += r1 * p;
                    }
                }
#pragma GCC unroll 8
                for (size_t s = 0; s < 8; s++) {
                    float *g = w->gates + (b + s) * G + j0;
                    memcpy(g, &lo[s], sizeof(lo[s]));
                    memcpy(g + 16, &hi[s], sizeof(hi[s]));
                }
            }
            for (size_t s = 0; s < 8; s++)
                activate(w->gates + (b + s) * G, H);
        }
        /* two sequences at once share every load of the recurrent weights */
        for (; b + 2 <= batch && G % GATE_BLOCK == 0; b += 2) {
            float *g0 = w->gates + b * G, *g1 = g0 + G;
            const float *x0 = w->xproj + (b * steps + t) * G, *x1 = x0 + steps * G;
            const float *h0 = w->h + b * H, *h1 = h0 + H;
            for (size_t j0 = 0; j0 < G; j0 += GATE_BLOCK) {
                vec16 a0 = load16(x0 + j0), a1 = load16(x0 + j0 + 16);
                vec16 a2 = load16(x0 + j0 + 32), a3 = load16(x0 + j0 + 48);
                vec16 c0 = load16(x1 + j0), c1 = load16(x1 + j0 + 16);
                vec16 c2 = load16(x1 + j0 + 32), c3 = load16(x1 + j0 + 48);
                const float *row = m->w_hh_t + j0;
                for (size_t k = 0; k < H; k++, row += G) {
                    const vec16 r0 = load16(row), r1 = load16(row + 16);
                    const vec16 r2 = load16(row + 32), r3 = load16(row + 48);
                    const float p = h0[k], q = h1[k];
                    a0 += r0 * p;
                    a1 += r1 * p;
                    a2 += r2 * p;
                    a3 += r3 * p;
                    c0 += r0 * q;
                    c1 += r1 * q;
                    c2 += r2 * q;
                    c3 += r3 * q;
                }
                memcpy(g0 + j0, &a0, sizeof(a0));
                memcpy(g0 + j0 + 16, &a1, sizeof(a1));
                memcpy(g0 + j0 + 32, &a2, sizeof(a2));
                memcpy(g0 + j0 + 48, &a3, sizeof(a3));
                memcpy(g1 + j0, &c0, sizeof(c0));
                memcpy(g1 + j0 + 16, &c1, sizeof(c1));
                memcpy(g1 + j0 + 32, &c2, sizeof(c2));
                memcpy(g1 + j0 + 48, &c3, sizeof(c3));
            }
            activate(g0, H);
            activate(g1, H);
        }
        for (; b < batch; b++) {
            float *g = w->gates + b * G;
            const float *xp = w->xproj + (b * steps + t) * G;
            const float *h = w->h + b * H;
            size_t j0 = 0;
            /* two blocks at once: eight independent sums hide the FMA latency */
            for (; j0 + 2 * GATE_BLOCK <= G; j0 += 2 * GATE_BLOCK) {
                vec16 a0 = load16(xp + j0), a1 = load16(xp + j0 + 16);
                vec16 a2 = load16(xp + j0 + 32), a3 = load16(xp + j0 + 48);
                vec16 a4 = load16(xp + j0 + 64), a5 = load16(xp + j0 + 80);
                vec16 a6 = load16(xp + j0 + 96), a7 = load16(xp + j0 + 112);
                const float *row = m->w_hh_t + j0;
                for (size_t k = 0; k < H; k++, row += G) {
                    const float hk = h[k];
                    a0 += load16(row) * hk;
                    a1 += load16(row + 16) * hk;
                    a2 += load16(row + 32) * hk;
                    a3 += load16(row + 48) * hk;
                    a4 += load16(row + 64) * hk;
                    a5 += load16(row + 80) * hk;
                    a6 += load16(row + 96) * hk;
                    a7 += load16(row + 112) * hk;
                }
                memcpy(g + j0, &a0, sizeof(a0));
                memcpy(g + j0 + 16, &a1, sizeof(a1));
                memcpy(g + j0 + 32, &a2, sizeof(a2));
                memcpy(g + j0 + 48, &a3, sizeof(a3));
                memcpy(g + j0 + 64, &a4, sizeof(a4));
                memcpy(g + j0 + 80, &a5, sizeof(a5));
                memcpy(g + j0 + 96, &a6, sizeof(a6));
                memcpy(g + j0 + 112, &a7, sizeof(a7));
            }
            sum_columns(g, xp, m->w_hh_t, G, h, H, j0);
            activate(g, H);
        }
        for (size_t s = 0; s < batch; s++) {
            const float *g = w->gates + s * G;
            float *h = w->h + s * H, *c = w->c + s * H;
            for (size_t j = 0; j < H; j++)
                c[j] = g[H + j] * c[j] + g[j] * g[2 * H + j];
            for (size_t j = 0; j < H; j++)
                h[j] = g[3 * H + j] * tanh_(c[j]);
        }
    }
    for (size_t b = 0; b < batch; b++) {
        const float *h = w->h + b * H;
        float z = m->c2_b;
        for (size_t r = 0; r < C; r++) {
            float a = m->c0_b[r];
            const float *row = m->c0_w + r * H;
            for (size_t k = 0; k < H; k++)
                a += row[k] * h[k];
            /* ReLU; a NaN stays NaN so that it cannot hide (NaN > 0 is false) */
            a = a > 0.0f ? a : (a == a ? 0.0f : a);
            z += m->c2_w[r] * a;
        }
        out[b] = sigmoid(z);
        if (last_hidden)
            memcpy(last_hidden + b * H, h, H * sizeof(float));
    }
}

int model_predict(const struct model *m, struct model_workspace *w, const float *input,
                  size_t batch, size_t steps, float *out, float *last_hidden)
{
    if (batch == 0 || steps == 0 || batch > w->max_batch || steps > w->max_steps || w->H != m->H)
        return MEDIC_E_INVALID;
    for (size_t i = 0; i < batch * steps * m->D; i++)
        if (!isfinite(input[i]))
            return MEDIC_E_INVALID; /* features are finite by construction; say so if not */
    run_batch(m, w, input, batch, steps, out, last_hidden);
    return 0;
}

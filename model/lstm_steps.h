/* SPDX-License-Identifier: Apache-2.0 */
/* The LSTM recurrence over the fused weights (see struct model), written
 * once and compiled once per instruction set. The file that includes this
 * one defines, before the include:
 *   LSTM_RUN     the function's name;
 *   LSTM_LANES   floats per vector register (16 or 8), with
 *                `typedef float vec __attribute__((vector_size(LSTM_LANES * 4)))`
 *                and `static inline vec sigmoid_v(vec z)`;
 *   LSTM_GROUP   sequences a batched pass carries at once;
 *   LSTM_SINGLE  blocks one sequence's pass carries at once (1, 2 or 4).
 * Both are chosen so that the sums fit the register file.
 *
 * A step computes the gates of 16 hidden units at a time (a block: the
 * four 16-wide gate vectors, i, f, g, o, of those units) as sums over the
 * K = D + Hp rows of the fused weights times [x_t, h_{t-1}], in vector
 * registers, then applies the activations and the cell update in the same
 * registers: nothing but c and the next h goes back to memory. The g gate's
 * weights were doubled when the model was loaded, so every gate is a
 * sigmoid and tanh(a) is 2σ(2a) - 1.
 *
 * Passes alternate direction through the weights (rows ascending, then
 * descending): the rows a pass ends on are the ones the next begins with,
 * still in the L1 cache when the weights are larger than it. */
#if !defined(LSTM_RUN) || !defined(LSTM_LANES) || !defined(LSTM_GROUP) || !defined(LSTM_SINGLE)
#error "define LSTM_RUN, LSTM_LANES, LSTM_GROUP and LSTM_SINGLE before including lstm_steps.h"
#endif

#include <stddef.h>
#include <string.h>

/* vectors per gate of a block (16 units), and per block row (4 gates) */
#define LSTM_PER_GATE (16 / LSTM_LANES)
#define LSTM_PER_BLOCK (64 / LSTM_LANES)
#define LSTM_MAX_SUMS ((LSTM_GROUP > LSTM_SINGLE ? LSTM_GROUP : LSTM_SINGLE) * LSTM_PER_BLOCK)

static inline __attribute__((always_inline)) vec load_v(const float *p)
{
    vec v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline __attribute__((always_inline)) void store_v(float *p, vec v)
{
    memcpy(p, &v, sizeof(v));
}

/* One pass over blocks q0 .. q0+nb for ns sequences whose [x_t, h_{t-1}]
 * rows (K floats each) start at in, writing their h_t into out's rows and
 * updating c (Hp floats per sequence). ns and nb are constants after
 * inlining, so the sums stay in registers. */
static inline __attribute__((always_inline)) void pass(const int ns, const int nb,
                                                       const struct model *m, const float *in,
                                                       float *out, float *c, size_t q0, int reverse)
{
    const size_t K = m->K, Hp = m->Hp, D = m->D;
    const int per = nb * LSTM_PER_BLOCK; /* sums per sequence */
    vec acc[LSTM_MAX_SUMS];
#pragma GCC unroll 4
    for (int s = 0; s < ns; s++)
#pragma GCC unroll 16
        for (int v = 0; v < per; v++)
            acc[s * per + v] = load_v(m->bias + q0 * 64 + (size_t)v * LSTM_LANES);
    size_t row;
    const float *w = model_block_weights(m, q0, &row);
    const ptrdiff_t wstep = reverse ? -(ptrdiff_t)row : (ptrdiff_t)row, xstep = reverse ? -1 : 1;
    w += reverse ? (K - 1) * row : 0;
    const float *x = in + (reverse ? K - 1 : 0);
    for (size_t i = 0; i < K; i++, w += wstep, x += xstep) {
        vec r[LSTM_MAX_SUMS];
#pragma GCC unroll 16
        for (int v = 0; v < per; v++)
            r[v] = load_v(w + (size_t)v * LSTM_LANES);
#pragma GCC unroll 4
        for (int s = 0; s < ns; s++) {
            const float xs = x[(size_t)s * K];
#pragma GCC unroll 16
            for (int v = 0; v < per; v++)
                acc[s * per + v] += r[v] * xs;
        }
    }
    /* the activations of every sum at once, then the cell updates: each
     * phase is many independent chains for the CPU to overlap */
#pragma GCC unroll 16
    for (int v = 0; v < ns * per; v++)
        acc[v] = sigmoid_v(acc[v]);
    /* u numbers the (sequence, block) pairs: sequence u / nb, block u % nb */
    vec cn[LSTM_MAX_SUMS / 4];
#pragma GCC unroll 16
    for (int u = 0; u < ns * nb; u++)
#pragma GCC unroll 2
        for (int h = 0; h < LSTM_PER_GATE; h++) {
            const vec *a = acc + u * LSTM_PER_BLOCK + h;
            float *cp =
                c + (size_t)(u / nb) * Hp + (q0 + (size_t)(u % nb)) * 16 + (size_t)h * LSTM_LANES;
            cn[u * LSTM_PER_GATE + h] =
                a[LSTM_PER_GATE] * load_v(cp) + a[0] * (2.0f * a[2 * LSTM_PER_GATE] - 1.0f);
            store_v(cp, cn[u * LSTM_PER_GATE + h]);
        }
#pragma GCC unroll 16
    for (int u = 0; u < ns * nb; u++)
#pragma GCC unroll 2
        for (int h = 0; h < LSTM_PER_GATE; h++)
            store_v(out + (size_t)(u / nb) * K + D + (q0 + (size_t)(u % nb)) * 16 +
                        (size_t)h * LSTM_LANES,
                    acc[u * LSTM_PER_BLOCK + 3 * LSTM_PER_GATE + h] *
                        (2.0f * sigmoid_v(2.0f * cn[u * LSTM_PER_GATE + h]) - 1.0f));
}

/* One sequence's pass over nb (1 to LSTM_SINGLE) blocks from q0, with nb
 * made a constant for pass. */
static inline __attribute__((always_inline)) void pass_one(const struct model *m, const float *in,
                                                           float *out, float *c, size_t q0,
                                                           size_t nb, int reverse)
{
    if (LSTM_SINGLE >= 4 && nb == 4)
        pass(1, 4, m, in, out, c, q0, reverse);
    else if (LSTM_SINGLE >= 3 && nb == 3)
        pass(1, 3, m, in, out, c, q0, reverse);
    else if (LSTM_SINGLE >= 2 && nb == 2)
        pass(1, 2, m, in, out, c, q0, reverse);
    else
        pass(1, 1, m, in, out, c, q0, reverse);
}

void LSTM_RUN(const struct model *m, struct model_workspace *w, const float *input, size_t batch,
              size_t steps)
{
    const size_t K = m->K, D = m->D, Hp = m->Hp, blocks = Hp / 16;
    float *buf[2] = {w->v, w->v + w->max_batch * K};
    int reverse = 0;
    for (size_t b = 0; b < batch;) {
        const size_t ns = batch - b >= LSTM_GROUP ? LSTM_GROUP : 1;
        float *cur = buf[0] + b * K, *next = buf[1] + b * K, *c = w->c + b * Hp;
        for (size_t s = 0; s < ns; s++) {
            memset(cur + s * K + D, 0, Hp * sizeof(float));
            memset(c + s * Hp, 0, Hp * sizeof(float));
        }
        for (size_t t = 0; t < steps; t++) {
            for (size_t s = 0; s < ns; s++)
                memcpy(cur + s * K, input + ((b + s) * steps + t) * D, D * sizeof(float));
            if (ns == LSTM_GROUP) {
                for (size_t i = 0; i < blocks; i++)
                    pass(LSTM_GROUP, 1, m, cur, next, c, reverse ? blocks - 1 - i : i, reverse);
            } else {
                /* one sequence: up to LSTM_SINGLE blocks of a chunk at
                 * once, for more independent sums in flight */
                const size_t chunks = (blocks + 3) / 4;
                for (size_t i = 0; i < chunks; i++) {
                    const size_t q0 = (reverse ? chunks - 1 - i : i) * 4;
                    const size_t n = blocks - q0 < 4 ? blocks - q0 : 4;
                    for (size_t j = 0; j < n; j += LSTM_SINGLE) {
                        const size_t len = n - j < LSTM_SINGLE ? n - j : LSTM_SINGLE;
                        pass_one(m, cur, next, c, reverse ? q0 + n - j - len : q0 + j, len,
                                 reverse);
                    }
                }
            }
            float *tmp = cur;
            cur = next;
            next = tmp;
            reverse = !reverse;
        }
        for (size_t s = 0; s < ns; s++)
            memcpy(w->h + (b + s) * Hp, cur + s * K + D, Hp * sizeof(float));
        b += ns;
    }
}

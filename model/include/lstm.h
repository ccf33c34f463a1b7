/* SPDX-License-Identifier: Apache-2.0 */
/* The FaultPredictor LSTM: one LSTM layer (input D, hidden H, gates i, f,
 * g, o as PyTorch stacks them), then Linear(H, 32), ReLU, Linear(32, 1),
 * sigmoid on the last hidden state. Loaded from a safetensors file holding
 * the PyTorch state_dict; its output matches PyTorch within 1e-5.
 *
 * A prediction allocates nothing: the caller owns a workspace sized for the
 * longest window and largest batch it will use. */
#ifndef MEDIC_MODEL_LSTM_H
#define MEDIC_MODEL_LSTM_H

#include "error.h"
#include "safetensors.h"

#include <stddef.h>

#define MODEL_CLASSIFIER_HIDDEN 32
#define MODEL_MAX_DIM 4096

/* The recurrence's implementations: the best the CPU runs is chosen when a
 * model is loaded; tests and `medic model bench` may pick another. */
enum model_kernel { MODEL_KERNEL_PORTABLE, MODEL_KERNEL_AVX2, MODEL_KERNEL_AVX512 };

/* The weights are rearranged when loaded. The hidden size is padded to Hp,
 * a multiple of 16 (padding units have zero weights, so their state stays
 * 0); W_ih and W_hh are fused into K = D + Hp rows, one per element of
 * [x_t, h_{t-1}]; and the 4Hp gate columns are grouped in blocks of 16
 * hidden units, each block holding those units' i, f, g and o columns
 * (64 floats per row). Blocks are stored in chunks of four (the last chunk
 * may hold fewer), row after row: w[chunk][k][block in chunk][64], so that
 * one sequence's step reads each chunk as one stream. The g
 * gate's weights and bias are doubled, so that tanh(a) = 2σ(2a) - 1 makes
 * every gate a sigmoid. */
struct model {
    size_t D, H;
    size_t Hp, K;
    float *w;    /* chunks of [K][4][64] */
    float *bias; /* [Hp/16][64]: bias_ih + bias_hh, same layout */
    enum model_kernel kernel;
    float *c0_w_t; /* [H][32]: classifier.0.weight transposed */
    float *c0_b;   /* [32] */
    float *c2_w;   /* [32] */
    float c2_b;
    char hash[65];           /* SHA-256 of the file */
    struct safetensors file; /* kept for metadata */
};

/* Loads and validates: every tensor F32 with the FaultPredictor's shapes
 * for some D and H (taken from weight_ih_l0). */
int model_load(const char *path, struct model *out, struct medic_error *err);
/* The same from bytes in memory (takes ownership of them). */
int model_load_bytes(unsigned char *bytes, size_t size, struct model *out, struct medic_error *err);
void model_release(struct model *m);

/* Where block q's row 0 starts in m->w, and (in *row) the distance between
 * its rows, in floats. */
static inline const float *model_block_weights(const struct model *m, size_t q, size_t *row)
{
    size_t blocks = m->Hp / 16, first = q / 4 * 4;
    *row = (blocks - first < 4 ? blocks - first : 4) * 64;
    return m->w + first * m->K * 64 + q % 4 * 64;
}

/* Whether this CPU runs kernel k (AVX2 means AVX2 with FMA); its name
 * ("portable", "avx2", "avx512"). */
int model_kernel_usable(enum model_kernel k);
const char *model_kernel_name(enum model_kernel k);

struct model_workspace {
    size_t max_batch, max_steps, Hp, K;
    float *v;     /* [2][batch][K]: [x_t, h_{t-1}] and the next step's */
    float *h, *c; /* [batch][Hp] */
};

int model_workspace_init(struct model_workspace *w, const struct model *m, size_t max_batch,
                         size_t max_steps);
void model_workspace_release(struct model_workspace *w);

/* Runs batch sequences of steps x D inputs (batch-first: element (b, t, d)
 * at (b*steps + t)*D + d). Writes batch probabilities into out and, when
 * last_hidden is not NULL, the final hidden states [batch][H]. */
int model_predict(const struct model *m, struct model_workspace *w, const float *input,
                  size_t batch, size_t steps, float *out, float *last_hidden);

#endif

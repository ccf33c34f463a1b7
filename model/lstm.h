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

struct model {
    size_t D, H;
    float *w_ih;   /* [4H][D], gate rows i, f, g, o */
    float *w_ih_t; /* [D][4H]: transposed, so projections stream along rows */
    float *w_hh_t; /* [H][4H]: weight_hh transposed, so a step is H row updates */
    float *bias;   /* [4H]: bias_ih + bias_hh */
    float *c0_w;   /* [32][H] */
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

struct model_workspace {
    size_t max_batch, max_steps, H;
    float *xproj; /* [batch][steps][4H] */
    float *gates; /* [batch][4H] */
    float *h, *c; /* [batch][H] */
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

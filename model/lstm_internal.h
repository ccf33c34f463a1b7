/* What lstm.c shares with the recurrence kernels: the scalar sigmoid the
 * portable kernel and the classifier use, and the kernels themselves. */
#ifndef MEDIC_MODEL_LSTM_INTERNAL_H
#define MEDIC_MODEL_LSTM_INTERNAL_H

#include "lstm.h"

#include <math.h>

/* exp(x) for x <= 0 (the callers pass -|z|), accurate to about 1 ulp, in
 * plain arithmetic the compiler vectorises (Cephes' polynomial; the power
 * of two is built in the exponent bits). */
static inline float lstm__exp_neg(float x)
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
static inline float lstm__sigmoid(float z)
{
    float e = lstm__exp_neg(-fabsf(z));
    float s = 1.0f / (1.0f + e);
    return z >= 0 ? s : 1.0f - s;
}

/* Runs the recurrence over steps for batch sequences (input as
 * model_predict takes it) and leaves each one's last hidden state in
 * w->h ([batch][Hp]). The AVX-512 kernel exists on x86-64 only; callers
 * check model_kernel_usable first. */
void lstm__run_portable(const struct model *m, struct model_workspace *w, const float *input,
                        size_t batch, size_t steps);
void lstm__run_avx512(const struct model *m, struct model_workspace *w, const float *input,
                      size_t batch, size_t steps);

#endif

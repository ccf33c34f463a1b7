/* SPDX-License-Identifier: Apache-2.0 */
/* What lstm.c shares with the recurrence kernels: the kernels themselves,
 * and the sigmoid the classifier uses. */
#ifndef MEDIC_MODEL_LSTM_INTERNAL_H
#define MEDIC_MODEL_LSTM_INTERNAL_H

#include "lstm.h"

/* σ(z) for one value: the portable kernel's vector sigmoid on one lane
 * (the classifier's last step). */
float lstm__sigmoid(float z);

/* Runs the recurrence over steps for batch sequences (input as
 * model_predict takes it) and leaves each one's last hidden state in
 * w->h ([batch][Hp]). The AVX2 and AVX-512 kernels exist on x86-64 only;
 * callers check model_kernel_usable first. */
void lstm__run_portable(const struct model *m, struct model_workspace *w, const float *input,
                        size_t batch, size_t steps);
void lstm__run_avx2(const struct model *m, struct model_workspace *w, const float *input,
                    size_t batch, size_t steps);
void lstm__run_avx512(const struct model *m, struct model_workspace *w, const float *input,
                      size_t batch, size_t steps);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The recurrence in portable C (GCC vector extensions), for CPUs with
 * neither AVX-512 nor AVX2 with FMA. */
#include "lstm_internal.h"

/* 8 lanes: on SSE2, GCC splits each vector in two */
#define LSTM_LANES 8
#define LSTM_GROUP 1
#define LSTM_SINGLE 1
#include "lstm_vector.h"

float lstm__sigmoid(float z)
{
    return sigmoid_v((vec){} + z)[0];
}

#define LSTM_RUN lstm__run_portable
#include "lstm_steps.h"

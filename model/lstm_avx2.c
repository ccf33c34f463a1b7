/* SPDX-License-Identifier: Apache-2.0 */
/* The recurrence for x86-64 CPUs with AVX2 and FMA, the vector unit of
 * most x86 servers without AVX-512 (this file is compiled with -mavx2
 * -mfma; lstm.c calls it only where the CPU has both): the portable
 * kernel's steps with every multiply-add fused. Batched, two sequences
 * share each row of weights (16 sums: one block of each), which measured
 * 11 % more predictions/s than one at a time; one sequence runs one block
 * at a time (8 sums, the weights read straight from memory by the FMAs). */
#include "lstm_internal.h"

#define LSTM_LANES 8
#define LSTM_GROUP 2
#define LSTM_SINGLE 1
#include "lstm_vector.h"

#define LSTM_RUN lstm__run_avx2
#include "lstm_steps.h"

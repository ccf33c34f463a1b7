/* SPDX-License-Identifier: Apache-2.0 */
/* The recurrence for x86-64 CPUs with AVX-512 (this file is compiled with
 * -mavx512f; lstm.c calls it only where the CPU has it). The sigmoid is
 * the one part written with intrinsics: the exponent is rounded and scaled
 * in one instruction each (vrndscaleps, vscalefps), and the reciprocal is
 * vrcp14ps refined by one Newton step (about 1 ulp), where a division would
 * cost as much as the rest of the activation. */
#include "lstm_internal.h"

#include <immintrin.h>

#define LSTM_LANES 16
#define LSTM_GROUP 4  /* 4 x 4 sums, 4 rows of weights: 20 of 32 registers */
#define LSTM_SINGLE 4 /* 16 sums */
typedef float vec __attribute__((vector_size(LSTM_LANES * 4)));

/* 1 / (1 + exp(-z)); z is clamped to ±87 so that exp stays finite. */
static inline __attribute__((always_inline)) vec sigmoid_v(vec z)
{
    __m512 x =
        _mm512_max_ps(_mm512_min_ps(-(__m512)z, _mm512_set1_ps(87.0f)), _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 d = _mm512_add_ps(_mm512_scalef_ps(y, n), _mm512_set1_ps(1.0f));
    __m512 e = _mm512_rcp14_ps(d);
    e = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, e, _mm512_set1_ps(1.0f)), e, e);
    return (vec)e;
}

#define LSTM_RUN lstm__run_avx512
#include "lstm_steps.h"

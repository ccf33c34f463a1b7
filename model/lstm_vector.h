/* SPDX-License-Identifier: Apache-2.0 */
/* The vector sigmoid in GCC vector extensions, shared by the kernels that
 * do not write theirs with intrinsics (portable, AVX2): the file that
 * includes this one defines LSTM_LANES first, and gets vec and veci. */
#ifndef MEDIC_MODEL_LSTM_VECTOR_H
#define MEDIC_MODEL_LSTM_VECTOR_H

#ifndef LSTM_LANES
#error "define LSTM_LANES before including lstm_vector.h"
#endif

#include <stdint.h>

typedef float vec __attribute__((vector_size(LSTM_LANES * 4)));
typedef int32_t veci __attribute__((vector_size(LSTM_LANES * 4)));

/* where mask (all ones or zeros per lane) is set, a; elsewhere b */
static inline __attribute__((always_inline)) vec select_v(veci mask, vec a, vec b)
{
    return (vec)((mask & (veci)a) | (~mask & (veci)b));
}

/* σ(z) on every lane for every finite z: e = exp(-|z|) never overflows,
 * accurate to about 1 ulp (Cephes' polynomial; n rounded by adding and
 * subtracting 1.5 * 2^23, exact for |t| < 2^22; the power of two built in
 * the exponent bits). */
static inline __attribute__((always_inline)) vec sigmoid_v(vec z)
{
    const veci abs_mask = (veci){} + 0x7fffffff;
    vec x = -(vec)((veci)z & abs_mask);
    x = select_v(x >= -87.0f, x, (vec){} - 87.0f); /* NaN becomes -87 */
    const vec magic = (vec){} + 12582912.0f;
    vec n = (x * 1.44269504088896341f + magic) - magic;
    vec r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vec p = (vec){} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    vec y = p * r * r + r + 1.0f;
    veci bits = (__builtin_convertvector(n, veci) + 127) << 23;
    vec s = 1.0f / (1.0f + y * (vec)bits);
    return select_v(z >= 0.0f, s, 1.0f - s);
}

#endif

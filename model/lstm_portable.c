/* The recurrence in portable C (GCC vector extensions), for CPUs without
 * AVX-512; GCC also builds an AVX2 clone the loader picks where it can. */
#include "lstm_internal.h"

#include <stdint.h>

/* AVX2's width: 16 ymm registers hold one block's 8 sums and its row of
 * weights, so one sequence and one block at a time */
#define LSTM_LANES 8
#define LSTM_GROUP 1
#define LSTM_SINGLE 1
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

float lstm__sigmoid(float z)
{
    return sigmoid_v((vec){} + z)[0];
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define LSTM_ATTRS __attribute__((target_clones("avx2", "default")))
#else
#define LSTM_ATTRS
#endif
#define LSTM_RUN lstm__run_portable
#include "lstm_steps.h"

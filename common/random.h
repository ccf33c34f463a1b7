/* SPDX-License-Identifier: Apache-2.0 */
/* Seeded pseudo-random numbers for sampling that must repeat from a seed
 * (datasets, resamplings): splitmix64, not for secrets. */
#ifndef MEDIC_RANDOM_H
#define MEDIC_RANDOM_H

#include <stdint.h>

/* The next number of the sequence that *state walks. */
static inline uint64_t medic_random_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif

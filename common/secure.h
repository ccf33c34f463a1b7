/* SPDX-License-Identifier: Apache-2.0 */
/* Comparing secrets without leaking them through timing. */
#ifndef MEDIC_SECURE_H
#define MEDIC_SECURE_H

#include <stddef.h>

/* 1 when candidate (candidate_len bytes) equals secret, in time that
 * depends only on the secret's length. */
int medic_secure_equals(const char *candidate, size_t candidate_len, const char *secret);

#endif

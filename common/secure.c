/* SPDX-License-Identifier: Apache-2.0 */
#include "secure.h"

#include <string.h>

int medic_secure_equals(const char *candidate, size_t candidate_len, const char *secret)
{
    size_t secret_len = strlen(secret);
    volatile unsigned char diff = (unsigned char)(candidate_len != secret_len);
    for (size_t i = 0; i < secret_len; i++) {
        unsigned char c = i < candidate_len ? (unsigned char)candidate[i] : 0;
        diff |= (unsigned char)(c ^ (unsigned char)secret[i]);
    }
    return diff == 0;
}

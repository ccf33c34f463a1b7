/* SPDX-License-Identifier: Apache-2.0 */
#include "sha256.h"
#include "error.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <string.h>

static void to_hex(const unsigned char *digest, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

struct medic_sha256 *medic_sha256_new(void)
{
    gnutls_hash_hd_t hd;
    if (gnutls_hash_init(&hd, GNUTLS_DIG_SHA256) < 0)
        MEDIC_BUG("gnutls cannot provide sha-256");
    /* gnutls_hash_hd_t is already a pointer to the state */
    return (struct medic_sha256 *)hd;
}

void medic_sha256_update(struct medic_sha256 *h, const void *data, size_t len)
{
    if (len)
        gnutls_hash((gnutls_hash_hd_t)h, data, len);
}

void medic_sha256_field(struct medic_sha256 *h, const char *s)
{
    char prefix[24];
    size_t len = s ? strlen(s) : 0;
    int n =
        s ? snprintf(prefix, sizeof(prefix), "%zu:", len) : snprintf(prefix, sizeof(prefix), "-:");
    medic_sha256_update(h, prefix, (size_t)n);
    medic_sha256_update(h, s, len);
}

void medic_sha256_finish(struct medic_sha256 *h, char hex[MEDIC_SHA256_HEX_LEN + 1])
{
    unsigned char digest[32];
    gnutls_hash_deinit((gnutls_hash_hd_t)h, digest);
    to_hex(digest, hex);
}

void medic_sha256_hex(const void *data, size_t len, char hex[MEDIC_SHA256_HEX_LEN + 1])
{
    unsigned char digest[32];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, digest) < 0)
        MEDIC_BUG("gnutls cannot provide sha-256");
    to_hex(digest, hex);
}

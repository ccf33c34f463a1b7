/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 through GnuTLS (already a dependency of libmicrohttpd). */
#ifndef MEDIC_SHA256_H
#define MEDIC_SHA256_H

#include <stddef.h>

#define MEDIC_SHA256_HEX_LEN 64

struct medic_sha256;

/* Incremental hashing: new, update any number of times, then finish, which
 * writes 64 lowercase hex digits and a NUL into hex and frees the state. */
struct medic_sha256 *medic_sha256_new(void);
void medic_sha256_update(struct medic_sha256 *h, const void *data, size_t len);
/* Adds a length-prefixed field, so that ("ab","c") and ("a","bc") differ. */
void medic_sha256_field(struct medic_sha256 *h, const char *s);
void medic_sha256_finish(struct medic_sha256 *h, char hex[MEDIC_SHA256_HEX_LEN + 1]);

/* One-shot hash of a buffer. */
void medic_sha256_hex(const void *data, size_t len, char hex[MEDIC_SHA256_HEX_LEN + 1]);

#endif

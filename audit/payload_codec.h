/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MEDIC_AUDIT_PAYLOAD_CODEC_H
#define MEDIC_AUDIT_PAYLOAD_CODEC_H

#include "buf.h"

#include <stddef.h>
#include <stdint.h>

/* How a notification's body is stored (the payload_encoding column):
 * "lz4" (an LZ4 block; what medic writes), "deflate" (zlib; what earlier
 * versions wrote, still read) or "identity" (as received). */
#define AUDIT_PAYLOAD_LZ4 "lz4"

/* Compresses a notification body into a new buffer the caller frees, as
 * one LZ4 block. LZ4 rather than zlib: about 2 us for a 1.7 kB body where
 * zlib's fastest level took 24 us, the largest single cost of a webhook,
 * for 640 bytes where zlib made 500. Returns the compressed length, or 0
 * where the body does not get smaller or memory ran out (store it as it
 * came). */
size_t audit__payload_compress(const void *in, size_t len, unsigned char **out);

/* Appends the body stored as data (len bytes) in encoding, whose length as
 * received was bytes, to out. MEDIC_E_STORE when the stored bytes do not
 * decode to exactly that length (or the encoding is unknown), MEDIC_E_NOMEM
 * when it does not fit in memory. */
int audit__payload_decode(const char *encoding, const void *data, size_t len, int64_t bytes,
                          struct medic_buf *out);

#endif

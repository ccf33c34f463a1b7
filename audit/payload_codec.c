/* SPDX-License-Identifier: Apache-2.0 */
#include "payload_codec.h"
#include "error.h"

#include <limits.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

size_t audit__payload_compress(const void *in, size_t len, unsigned char **out)
{
    *out = NULL;
    if (len == 0 || len > (size_t)LZ4_MAX_INPUT_SIZE)
        return 0;
    int bound = LZ4_compressBound((int)len);
    unsigned char *buf = malloc((size_t)bound);
    if (!buf)
        return 0;
    int n = LZ4_compress_default(in, (char *)buf, (int)len, bound);
    if (n <= 0 || (size_t)n >= len) {
        free(buf);
        return 0;
    }
    *out = buf;
    return (size_t)n;
}

int audit__payload_decode(const char *encoding, const void *data, size_t len, int64_t bytes,
                          struct medic_buf *out)
{
    if (!encoding || strcmp(encoding, "identity") == 0)
        return (int64_t)len == bytes ? medic_buf_append(out, data, len) : MEDIC_E_STORE;
    if (bytes < 0 || bytes > INT_MAX || len > INT_MAX || !data)
        return MEDIC_E_STORE;
    char *raw = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!raw)
        return MEDIC_E_NOMEM;
    int ok;
    if (strcmp(encoding, AUDIT_PAYLOAD_LZ4) == 0) {
        ok = LZ4_decompress_safe(data, raw, (int)len, (int)bytes) == bytes;
    } else if (strcmp(encoding, "deflate") == 0) {
        uLongf n = (uLongf)bytes;
        ok = uncompress((Bytef *)raw, &n, data, (uLong)len) == Z_OK && n == (uLongf)bytes;
    } else {
        ok = 0;
    }
    int rc = ok ? medic_buf_append(out, raw, (size_t)bytes) : MEDIC_E_STORE;
    free(raw);
    return rc;
}

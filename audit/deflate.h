#ifndef MEDIC_AUDIT_DEFLATE_H
#define MEDIC_AUDIT_DEFLATE_H

#include <stddef.h>

/* Compresses a notification body (zlib format, fastest level) into a new
 * buffer the caller frees. Each thread keeps one deflate stream and resets
 * it between bodies: setting one up allocates over 100 kB, and allocating
 * and freeing that per request made the allocator map, fault in and trim
 * pages on every webhook. Returns the compressed length, or 0 where the
 * body does not get smaller or memory ran out (store it as it came). */
size_t audit__deflate(const void *in, size_t len, unsigned char **out);

#endif

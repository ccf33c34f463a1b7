#include "deflate.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <zlib.h>

static pthread_key_t stream_key;
static pthread_once_t stream_once = PTHREAD_ONCE_INIT;

static void stream_free(void *p)
{
    z_stream *z = p;
    deflateEnd(z);
    free(z);
}

static void stream_key_create(void)
{
    pthread_key_create(&stream_key, stream_free);
}

/* This thread's stream, set up on first use and freed when the thread ends. */
static z_stream *thread_stream(void)
{
    pthread_once(&stream_once, stream_key_create);
    z_stream *z = pthread_getspecific(stream_key);
    if (z)
        return deflateReset(z) == Z_OK ? z : NULL;
    z = calloc(1, sizeof(*z));
    if (!z)
        return NULL;
    /* memLevel 4 instead of zlib's 8: a sixteenth of the hash table to
     * clear at each reset, for bodies that compress the same */
    if (deflateInit2(z, Z_BEST_SPEED, Z_DEFLATED, 15, 4, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(z);
        return NULL;
    }
    if (pthread_setspecific(stream_key, z) != 0) {
        stream_free(z);
        return NULL;
    }
    return z;
}

size_t audit__deflate(const void *in, size_t len, unsigned char **out)
{
    *out = NULL;
    z_stream *z = thread_stream();
    if (!z || len > UINT_MAX / 2)
        return 0;
    uLong bound = deflateBound(z, (uLong)len);
    unsigned char *buf = malloc(bound);
    if (!buf)
        return 0;
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)len;
    z->next_out = buf;
    z->avail_out = (uInt)bound;
    if (deflate(z, Z_FINISH) != Z_STREAM_END || z->total_out >= len) {
        free(buf);
        return 0;
    }
    *out = buf;
    return z->total_out;
}

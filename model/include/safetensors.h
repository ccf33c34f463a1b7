/* SPDX-License-Identifier: Apache-2.0 */
/* Reading safetensors files (the format PyTorch's ecosystem writes): an
 * 8-byte little-endian header length, a JSON header, then raw tensor data.
 * Everything is checked before use: header size capped and inside the file,
 * dtypes, shapes against byte ranges, ranges inside the data and not
 * overlapping, metadata strings only. A hostile file gets an error, never a
 * crash. */
#ifndef MEDIC_MODEL_SAFETENSORS_H
#define MEDIC_MODEL_SAFETENSORS_H

#include "error.h"

#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_FILE ((size_t)256 << 20)
#define SAFETENSORS_MAX_HEADER ((size_t)1 << 20)
#define SAFETENSORS_MAX_TENSORS 1024
#define SAFETENSORS_MAX_DIMS 8

struct safetensor {
    char *name;
    char dtype[8];
    size_t shape[SAFETENSORS_MAX_DIMS];
    size_t dims;
    size_t begin, end; /* byte range in the data buffer */
};

struct safetensors_meta {
    char *key, *value;
};

struct safetensors {
    unsigned char *file; /* the whole file, owned */
    size_t size;
    const unsigned char *data; /* the data buffer inside file */
    size_t data_size;
    struct safetensor *tensors;
    size_t count;
    struct safetensors_meta *meta;
    size_t meta_count;
};

/* Parses a file already in memory; takes ownership of bytes (malloc'd). */
int safetensors_parse(unsigned char *bytes, size_t size, struct safetensors *out,
                      struct medic_error *err);
/* Reads and parses path. */
int safetensors_load(const char *path, struct safetensors *out, struct medic_error *err);
/* The same two with the caller's caps on the header's and the file's size
 * in place of SAFETENSORS_MAX_HEADER and SAFETENSORS_MAX_FILE (a `medic
 * model dataset` file's header lists every window). */
int safetensors_parse_capped(unsigned char *bytes, size_t size, size_t max_header,
                             struct safetensors *out, struct medic_error *err);
int safetensors_load_capped(const char *path, size_t max_file, size_t max_header,
                            struct safetensors *out, struct medic_error *err);
void safetensors_release(struct safetensors *st);

const struct safetensor *safetensors_find(const struct safetensors *st, const char *name);
const char *safetensors_meta(const struct safetensors *st, const char *key);

/* Copies an F32 tensor of exactly the given shape into out (floats).
 * MEDIC_E_INVALID naming what differs. */
int safetensors_f32(const struct safetensors *st, const char *name, const size_t *shape,
                    size_t dims, float *out, struct medic_error *err);

/* A tensor to write: F32, row-major, shape[0..dims). */
struct safetensors_out {
    const char *name;
    const size_t *shape;
    size_t dims;
    const float *data;
};

/* Writes a safetensors file (through path.tmp, renamed into place): the
 * tensors in the order given (give them sorted by name, as PyTorch's
 * writer does) and the metadata strings. max_header: the most bytes the
 * JSON header may take, as the reader's cap (safetensors_parse_capped)
 * counts them, escapes and padding included; 0 for no cap. A longer one
 * is MEDIC_E_LIMIT and writes nothing. */
int safetensors_write(const char *path, const struct safetensors_out *tensors, size_t count,
                      const struct safetensors_meta *meta, size_t meta_count, size_t max_header,
                      struct medic_error *err);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "safetensors.h"
#include "yaml_tree.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void safetensors_release(struct safetensors *st)
{
    for (size_t i = 0; i < st->count; i++)
        free(st->tensors[i].name);
    for (size_t i = 0; i < st->meta_count; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->tensors);
    free(st->meta);
    free(st->file);
    memset(st, 0, sizeof(*st));
}

static int compare_ranges(const void *a, const void *b)
{
    const struct safetensor *x = *(const struct safetensor *const *)a;
    const struct safetensor *y = *(const struct safetensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static size_t dtype_size(const char *dtype)
{
    static const struct {
        const char *name;
        size_t size;
    } types[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
                 {"U16", 2}, {"U32", 4}, {"U64", 8}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(dtype, types[i].name) == 0)
            return types[i].size;
    return 0;
}

static int parse_tensor(const cJSON *item, struct safetensor *t, size_t data_size,
                        struct medic_error *err)
{
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return medic_error_set(err, MEDIC_E_INVALID, "tensor '%.100s': not an object", name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offsets) ||
        cJSON_GetArraySize(offsets) != 2)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "tensor '%.100s': needs dtype, shape and data_offsets [begin, end]",
                               name);
    size_t esize = dtype_size(dtype->valuestring);
    if (!esize)
        return medic_error_set(err, MEDIC_E_INVALID, "tensor '%.100s': unknown dtype '%.16s'", name,
                               dtype->valuestring);
    snprintf(t->dtype, sizeof(t->dtype), "%s", dtype->valuestring);
    if (cJSON_GetArraySize(shape) > SAFETENSORS_MAX_DIMS)
        return medic_error_set(err, MEDIC_E_INVALID, "tensor '%.100s': more than %d dimensions",
                               name, SAFETENSORS_MAX_DIMS);
    size_t elements = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape)
    {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12 ||
            (double)(size_t)d->valuedouble != d->valuedouble)
            return medic_error_set(err, MEDIC_E_INVALID, "tensor '%.100s': bad shape", name);
        t->shape[t->dims++] = (size_t)d->valuedouble;
        if (t->shape[t->dims - 1] && elements > SAFETENSORS_MAX_FILE / t->shape[t->dims - 1])
            return medic_error_set(err, MEDIC_E_INVALID, "tensor '%.100s': shape too large", name);
        elements *= t->shape[t->dims - 1];
    }
    const cJSON *b = cJSON_GetArrayItem(offsets, 0), *e = cJSON_GetArrayItem(offsets, 1);
    if (!cJSON_IsNumber(b) || !cJSON_IsNumber(e) || b->valuedouble < 0 ||
        e->valuedouble < b->valuedouble || e->valuedouble > (double)data_size ||
        (double)(size_t)b->valuedouble != b->valuedouble ||
        (double)(size_t)e->valuedouble != e->valuedouble)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "tensor '%.100s': data_offsets outside the %zu bytes of data", name,
                               data_size);
    t->begin = (size_t)b->valuedouble;
    t->end = (size_t)e->valuedouble;
    if (t->end - t->begin != elements * esize)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "tensor '%.100s': %zu bytes of data for %zu elements of %s", name,
                               t->end - t->begin, elements, t->dtype);
    if (!(t->name = strdup(name)))
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return 0;
}

int safetensors_parse(unsigned char *bytes, size_t size, struct safetensors *out,
                      struct medic_error *err)
{
    return safetensors_parse_capped(bytes, size, SAFETENSORS_MAX_HEADER, out, err);
}

int safetensors_parse_capped(unsigned char *bytes, size_t size, size_t max_header,
                             struct safetensors *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    out->file = bytes;
    out->size = size;
    int rc = 0;
    cJSON *root = NULL;
    if (size < 8) {
        rc = medic_error_set(err, MEDIC_E_INVALID, "not a safetensors file: %zu bytes", size);
        goto out;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | bytes[i];
    if (n > max_header || n > size - 8 || n < 2) {
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "not a safetensors file: its header length %llu does not fit the "
                             "file (%zu bytes) or the %zu MiB cap",
                             (unsigned long long)n, size, max_header >> 20);
        goto out;
    }
    if (bytes[8] != '{') {
        rc = medic_error_set(err, MEDIC_E_INVALID, "the header does not start with '{'");
        goto out;
    }
    out->data = bytes + 8 + n;
    out->data_size = size - 8 - (size_t)n;
    root = cJSON_ParseWithLength((const char *)bytes + 8, (size_t)n);
    if (!cJSON_IsObject(root)) {
        rc = medic_error_set(err, MEDIC_E_INVALID, "the header is not a JSON object");
        goto out;
    }
    size_t items = (size_t)cJSON_GetArraySize(root);
    if (items > SAFETENSORS_MAX_TENSORS + 1) {
        rc = medic_error_set(err, MEDIC_E_INVALID, "more than %d tensors", SAFETENSORS_MAX_TENSORS);
        goto out;
    }
    out->tensors = calloc(items ? items : 1, sizeof(*out->tensors));
    if (!out->tensors) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    for (const cJSON *item = root->child; item && rc == 0; item = item->next) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(item) || out->meta) {
                rc = medic_error_set(err, MEDIC_E_INVALID, "__metadata__: expected one object");
                break;
            }
            size_t m = (size_t)cJSON_GetArraySize(item);
            out->meta = calloc(m ? m : 1, sizeof(*out->meta));
            if (!out->meta) {
                rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
                break;
            }
            for (const cJSON *kv = item->child; kv; kv = kv->next) {
                if (!cJSON_IsString(kv)) {
                    rc = medic_error_set(err, MEDIC_E_INVALID,
                                         "__metadata__.%.100s: values must be strings", kv->string);
                    break;
                }
                out->meta[out->meta_count].key = strdup(kv->string);
                out->meta[out->meta_count].value = strdup(kv->valuestring);
                out->meta_count++;
                if (!out->meta[out->meta_count - 1].key || !out->meta[out->meta_count - 1].value) {
                    rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
                    break;
                }
            }
            continue;
        }
        for (size_t k = 0; k < out->count; k++)
            if (strcmp(out->tensors[k].name, item->string) == 0)
                rc = medic_error_set(err, MEDIC_E_INVALID, "tensor '%.100s' appears twice",
                                     item->string);
        if (rc == 0) {
            rc = parse_tensor(item, &out->tensors[out->count], out->data_size, err);
            if (rc == 0)
                out->count++;
        }
    }
    if (rc == 0 && out->count) {
        /* ranges must not overlap */
        const struct safetensor **order = calloc(out->count, sizeof(*order));
        if (!order) {
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < out->count; i++)
            order[i] = &out->tensors[i];
        qsort(order, out->count, sizeof(*order), compare_ranges);
        for (size_t i = 1; i < out->count && rc == 0; i++)
            if (order[i]->begin < order[i - 1]->end)
                rc = medic_error_set(err, MEDIC_E_INVALID, "tensors '%.100s' and '%.100s' overlap",
                                     order[i - 1]->name, order[i]->name);
        free(order);
    }
out:
    cJSON_Delete(root);
    if (rc)
        safetensors_release(out);
    return rc;
}

int safetensors_load(const char *path, struct safetensors *out, struct medic_error *err)
{
    return safetensors_load_capped(path, SAFETENSORS_MAX_FILE, SAFETENSORS_MAX_HEADER, out, err);
}

int safetensors_load_capped(const char *path, size_t max_file, size_t max_header,
                            struct safetensors *out, struct medic_error *err)
{
    char *bytes;
    size_t len;
    int rc = medic_read_config_file(path, max_file, &bytes, &len, err);
    if (rc)
        return rc;
    rc = safetensors_parse_capped((unsigned char *)bytes, len, max_header, out, err);
    if (rc)
        medic_error_prefix(err, path);
    return rc;
}

const struct safetensor *safetensors_find(const struct safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

const char *safetensors_meta(const struct safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

int safetensors_f32(const struct safetensors *st, const char *name, const size_t *shape,
                    size_t dims, float *out, struct medic_error *err)
{
    const struct safetensor *t = safetensors_find(st, name);
    if (!t)
        return medic_error_set(err, MEDIC_E_INVALID, "tensor '%s' is missing", name);
    if (strcmp(t->dtype, "F32") != 0)
        return medic_error_set(err, MEDIC_E_INVALID, "tensor '%s' is %s, expected F32", name,
                               t->dtype);
    int same = t->dims == dims;
    for (size_t i = 0; same && i < dims; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char want[96] = "", got[96] = "";
        for (size_t i = 0; i < dims; i++)
            snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%zu", i ? "," : "",
                     shape[i]);
        for (size_t i = 0; i < t->dims; i++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%zu", i ? "," : "",
                     t->shape[i]);
        return medic_error_set(err, MEDIC_E_INVALID, "tensor '%s' has shape [%s], expected [%s]",
                               name, got, want);
    }
    /* little-endian F32, possibly only 4-aligned: copy */
    memcpy(out, st->data + t->begin, t->end - t->begin);
    return 0;
}

int safetensors_write(const char *path, const struct safetensors_out *tensors, size_t count,
                      const struct safetensors_meta *meta, size_t meta_count, size_t max_header,
                      struct medic_error *err)
{
    cJSON *header = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(header, "__metadata__");
    size_t offset = 0;
    int ok = header && m;
    for (size_t i = 0; ok && i < meta_count; i++)
        ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].value) != NULL;
    for (size_t i = 0; ok && i < count; i++) {
        const struct safetensors_out *t = &tensors[i];
        size_t n = 1;
        cJSON *o = cJSON_AddObjectToObject(header, t->name), *shape = NULL, *range = NULL;
        ok = o && cJSON_AddStringToObject(o, "dtype", "F32") &&
             (shape = cJSON_AddArrayToObject(o, "shape"));
        for (size_t d = 0; ok && d < t->dims; d++) {
            n *= t->shape[d];
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        }
        ok = ok && (range = cJSON_AddArrayToObject(o, "data_offsets")) &&
             cJSON_AddItemToArray(range, cJSON_CreateNumber((double)offset)) &&
             cJSON_AddItemToArray(range, cJSON_CreateNumber((double)(offset + 4 * n)));
        offset += 4 * n;
    }
    char *text = ok ? cJSON_PrintUnformatted(header) : NULL;
    cJSON_Delete(header);
    if (!text)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    size_t len = strlen(text), padded = len + (8 - (8 + len) % 8) % 8;
    if (max_header && padded > max_header) {
        free(text);
        return medic_error_set(err, MEDIC_E_LIMIT, "%s: a header of %zu bytes, over %zu", path,
                               padded, max_header);
    }
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
        free(text);
        return medic_error_set(err, MEDIC_E_LIMIT, "%s: path too long", path);
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(text);
        return medic_error_set(err, MEDIC_E_IO, "%s: %s", tmp, strerror(errno));
    }
    unsigned char size_le[8];
    for (int i = 0; i < 8; i++)
        size_le[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int wrote = fwrite(size_le, 1, 8, f) == 8 && fwrite(text, 1, len, f) == len;
    for (size_t i = len; wrote && i < padded; i++)
        wrote = fputc(' ', f) != EOF;
    for (size_t i = 0; wrote && i < count; i++) {
        size_t n = 1;
        for (size_t d = 0; d < tensors[i].dims; d++)
            n *= tensors[i].shape[d];
        wrote = fwrite(tensors[i].data, sizeof(float), n, f) == n; /* little-endian hosts */
    }
    free(text);
    if (fclose(f) != 0 || !wrote || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return medic_error_set(err, MEDIC_E_IO, "%s: %s", path, strerror(e));
    }
    return 0;
}

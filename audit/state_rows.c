/* SPDX-License-Identifier: Apache-2.0 */
/* The engine's changed rows as bytes: built on the engine's thread, read
 * by the audit writer (rows.c), which only writes them. */
#include "audit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void audit_rows_init(struct audit_rows *r)
{
    memset(r, 0, sizeof(*r));
    medic_buf_init(&r->data, 0);
}

void audit_rows_release(struct audit_rows *r)
{
    medic_buf_release(&r->data);
    free(r->items);
    free(r->refs);
    memset(r, 0, sizeof(*r));
}

static int grow(void **items, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < want)
        n *= 2;
    void *p = realloc(*items, n * size);
    if (!p)
        return MEDIC_E_NOMEM;
    *items = p;
    *cap = n;
    return 0;
}

/* Appends s (len bytes) and a NUL; its offset in *at. */
static int put(struct audit_rows *r, const char *s, size_t len, size_t *at)
{
    *at = r->data.len;
    medic_buf_append(&r->data, s, len);
    medic_buf_append(&r->data, "", 1);
    return r->data.error ? MEDIC_E_NOMEM : 0;
}

int audit_rows_add(struct audit_rows *r, const char *kind, const char *key, const char *value,
                   size_t len, const struct audit_row_ref *refs, size_t ref_count)
{
    if (!kind) {
        r->clear_first = 1;
        r->count = r->ref_count = 0;
        medic_buf_reset(&r->data);
        return 0;
    }
    if (grow((void **)&r->items, &r->cap, r->count + 1, sizeof(*r->items)) ||
        grow((void **)&r->refs, &r->ref_cap, r->ref_count + ref_count, sizeof(*r->refs)))
        return MEDIC_E_NOMEM;
    struct audit_row row = {.value = SIZE_MAX, .first_ref = r->ref_count, .ref_count = ref_count};
    int rc = put(r, kind, strlen(kind), &row.kind);
    if (rc == 0)
        rc = put(r, key, strlen(key), &row.key);
    if (rc == 0 && value) {
        rc = put(r, value, len, &row.value);
        row.value_len = len;
    }
    if (rc)
        return rc;
    for (size_t i = 0; i < ref_count; i++) {
        if (!value || refs[i].offset + refs[i].len > len)
            return MEDIC_E_INVALID;
        r->refs[r->ref_count++] = refs[i];
    }
    r->items[r->count++] = row;
    return 0;
}

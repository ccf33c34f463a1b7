/* SPDX-License-Identifier: Apache-2.0 */
/* PostgreSQL statements of rows (db_prepare_rows): each column's values
 * gathered as the elements of an array in PostgreSQL's binary form, sent
 * as one parameter. */
#include "pg.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

int db_pg_rows_init(struct pg_stmt *st, const char *types, struct medic_error *err)
{
    int n = (int)strlen(types);
    if (n == 0 || n != st->nparams || strspn(types, "itbr") != (size_t)n)
        return medic_error_set(err, MEDIC_E_INVALID, "a statement of rows: %d types for %d arrays",
                               n, st->nparams);
    st->types = strdup(types);
    st->values = calloc((size_t)n, sizeof(*st->values));
    st->arrays = calloc((size_t)n, sizeof(*st->arrays));
    st->counts = calloc((size_t)n, sizeof(*st->counts));
    if (!st->types || !st->values || !st->arrays || !st->counts)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    st->columns = n;
    for (int k = 0; k < n; k++) {
        medic_buf_init(&st->values[k], 0);
        medic_buf_init(&st->arrays[k], 0);
    }
    return 0;
}

void db_pg_rows_free(struct pg_stmt *st)
{
    for (int k = 0; k < st->columns; k++) {
        medic_buf_release(&st->values[k]);
        medic_buf_release(&st->arrays[k]);
    }
    free(st->values);
    free(st->arrays);
    free(st->counts);
    free(st->types);
}

void db_pg_rows_clear(struct pg_stmt *st)
{
    for (int k = 0; k < st->columns; k++) {
        medic_buf_reset(&st->values[k]);
        st->counts[k] = 0;
        st->params[k] = NULL;
    }
    st->mistyped = 0;
}

/* Row (i - 1) / columns's value of column (i - 1) % columns, appended to
 * that column's elements: kind 'i' an int64 at v, 'r' a double at v, 't'
 * len bytes at v, 'n' NULL. */
void db_pg_put_element(struct pg_stmt *st, int i, char kind, const void *v, size_t len)
{
    if (i < 1)
        return;
    int col = (i - 1) % st->columns;
    char want = st->types[col];
    struct medic_buf *b = &st->values[col];
    uint32_t n;
    if (kind == 'n') {
        n = htonl(UINT32_MAX); /* -1: NULL */
        medic_buf_append(b, &n, 4);
    } else if ((kind == 'i' && want == 'i') || (kind == 'r' && want == 'r')) {
        uint64_t bits;
        memcpy(&bits, v, 8);
        uint32_t be[3] = {htonl(8), htonl((uint32_t)(bits >> 32)), htonl((uint32_t)bits)};
        medic_buf_append(b, be, 12);
    } else if (kind == 't' && (want == 't' || want == 'b') && len <= INT32_MAX) {
        n = htonl((uint32_t)len);
        medic_buf_append(b, &n, 4);
        medic_buf_append(b, v, len);
    } else {
        st->mistyped = 1;
    }
    st->counts[col]++;
}

/* A statement of rows: each column's array (PostgreSQL's binary form: its
 * dimensions, then each element's length and bytes) as its parameter. */
int db_pg_build_arrays(struct pg_stmt *st, struct medic_error *err)
{
    static const uint32_t oids[] = {
        ['i'] = PG_INT8, ['t'] = PG_TEXT, ['b'] = PG_BYTEA, ['r'] = PG_FLOAT8};
    if (st->mistyped)
        return medic_error_set(err, MEDIC_E_INVALID, "a value of the wrong type for its column");
    for (int k = 0; k < st->columns; k++) {
        if (st->counts[k] != st->counts[0] || st->counts[k] > INT32_MAX)
            return medic_error_set(err, MEDIC_E_INVALID, "rows of unequal length");
        struct medic_buf *a = &st->arrays[k];
        medic_buf_reset(a);
        int empty = st->counts[k] == 0;
        uint32_t head[5] = {htonl(empty ? 0 : 1), 0, htonl(oids[(unsigned char)st->types[k]]),
                            htonl((uint32_t)st->counts[k]), htonl(1)};
        medic_buf_append(a, head, empty ? 12 : 20);
        if (st->values[k].len)
            medic_buf_append(a, st->values[k].data, st->values[k].len);
        if (a->error || st->values[k].error)
            return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        st->params[k] = a->data;
        st->lengths[k] = (int)a->len;
        st->formats[k] = 1;
    }
    return 0;
}

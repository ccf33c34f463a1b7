/* SPDX-License-Identifier: Apache-2.0 */
/* A small result table (column names, rows of nullable strings with a type
 * hint per column) and its renderings: aligned text, CSV (RFC 4180) and
 * JSON (an array of objects). The audit queries produce it; the CLI and
 * the HTTP API print it. */
#ifndef MEDIC_TABLE_H
#define MEDIC_TABLE_H

#include "buf.h"

#include <stddef.h>

enum medic_column_type { MEDIC_COL_TEXT, MEDIC_COL_INT, MEDIC_COL_REAL, MEDIC_COL_JSON };

struct medic_table {
    size_t ncols;
    const char **names;
    enum medic_column_type *types;
    size_t nrows;
    size_t cap_rows;
    char **cells; /* nrows * ncols, NULL for SQL NULL */
};

enum medic_table_format { MEDIC_FORMAT_TABLE, MEDIC_FORMAT_JSON, MEDIC_FORMAT_CSV };

/* Parses "table", "json" or "csv"; returns -1 when unknown. */
int medic_table_parse_format(const char *name);

/* names and types are copied. */
int medic_table_init(struct medic_table *t, size_t ncols, const char *const *names,
                     const enum medic_column_type *types);
void medic_table_release(struct medic_table *t);
/* Appends a row; values (ncols of them, NULL allowed) are copied. */
int medic_table_add_row(struct medic_table *t, const char *const *values);
int medic_table_render(const struct medic_table *t, enum medic_table_format format,
                       struct medic_buf *out);
/* Keeps only the columns named in columns ("a,b,c", in that order; the
 * same name twice is kept once). 0; MEDIC_E_INVALID naming the columns
 * there are when one is not; MEDIC_E_NOMEM (t is unchanged then). */
int medic_table_select(struct medic_table *t, const char *columns, char *why, size_t size);

#endif

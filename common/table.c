/* SPDX-License-Identifier: Apache-2.0 */
#include "table.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int medic_table_parse_format(const char *name)
{
    if (strcmp(name, "table") == 0)
        return MEDIC_FORMAT_TABLE;
    if (strcmp(name, "json") == 0)
        return MEDIC_FORMAT_JSON;
    if (strcmp(name, "csv") == 0)
        return MEDIC_FORMAT_CSV;
    return -1;
}

int medic_table_init(struct medic_table *t, size_t ncols, const char *const *names,
                     const enum medic_column_type *types)
{
    memset(t, 0, sizeof(*t));
    t->names = calloc(ncols, sizeof(*t->names));
    t->types = calloc(ncols, sizeof(*t->types));
    if (!t->names || !t->types) {
        medic_table_release(t);
        return MEDIC_E_NOMEM;
    }
    t->ncols = ncols;
    for (size_t i = 0; i < ncols; i++) {
        t->names[i] = strdup(names[i]);
        t->types[i] = types ? types[i] : MEDIC_COL_TEXT;
        if (!t->names[i]) {
            medic_table_release(t);
            return MEDIC_E_NOMEM;
        }
    }
    return 0;
}

void medic_table_release(struct medic_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    for (size_t i = 0; t->names && i < t->ncols; i++)
        free((char *)t->names[i]);
    free(t->cells);
    free(t->names);
    free(t->types);
    memset(t, 0, sizeof(*t));
}

int medic_table_add_row(struct medic_table *t, const char *const *values)
{
    if (t->nrows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
        char **cells = realloc(t->cells, cap * t->ncols * sizeof(*cells));
        if (!cells)
            return MEDIC_E_NOMEM;
        t->cells = cells;
        t->cap_rows = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        row[i] = values[i] ? strdup(values[i]) : NULL;
        if (values[i] && !row[i]) {
            while (i-- > 0)
                free(row[i]);
            return MEDIC_E_NOMEM;
        }
    }
    t->nrows++;
    return 0;
}

int medic_table_select(struct medic_table *t, const char *columns, char *why, size_t size)
{
    size_t pick[64], n = 0;
    const char *p = columns;
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t k = 0;
        while (k < t->ncols && (strlen(t->names[k]) != len || strncmp(t->names[k], p, len) != 0))
            k++;
        if (k == t->ncols) {
            int at = snprintf(why, size, "no column '%.*s'; the columns are ", (int)len, p);
            for (size_t i = 0; i < t->ncols && at >= 0 && (size_t)at < size; i++)
                at += snprintf(why + at, size - (size_t)at, "%s%s", i ? "," : "", t->names[i]);
            return MEDIC_E_INVALID;
        }
        int twice = 0;
        for (size_t i = 0; i < n; i++)
            twice |= pick[i] == k;
        if (!twice && n < sizeof(pick) / sizeof(pick[0]))
            pick[n++] = k;
        p += len + (p[len] == ',');
    }
    if (n == 0) {
        snprintf(why, size, "name at least one column");
        return MEDIC_E_INVALID;
    }
    const char *names[64];
    enum medic_column_type types[64];
    for (size_t i = 0; i < n; i++) {
        names[i] = t->names[pick[i]];
        types[i] = t->types[pick[i]];
    }
    struct medic_table out;
    if (medic_table_init(&out, n, names, types))
        return MEDIC_E_NOMEM;
    const char *row[64];
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t i = 0; i < n; i++)
            row[i] = t->cells[r * t->ncols + pick[i]];
        if (medic_table_add_row(&out, row)) {
            medic_table_release(&out);
            return MEDIC_E_NOMEM;
        }
    }
    medic_table_release(t);
    *t = out;
    return 0;
}

static int render_json(const struct medic_table *t, struct medic_buf *out)
{
    int rc = medic_buf_puts(out, "[");
    for (size_t r = 0; r < t->nrows && rc == 0; r++) {
        rc = medic_buf_puts(out, r ? ",\n {" : "\n {");
        for (size_t c = 0; c < t->ncols && rc == 0; c++) {
            const char *v = t->cells[r * t->ncols + c];
            if (c)
                rc = medic_buf_puts(out, ",");
            if (rc == 0)
                rc = medic_buf_json_string(out, t->names[c]);
            if (rc == 0)
                rc = medic_buf_puts(out, ":");
            if (rc)
                break;
            if (!v)
                rc = medic_buf_puts(out, "null");
            else if (t->types[c] == MEDIC_COL_TEXT)
                rc = medic_buf_json_string(out, v);
            else
                rc = medic_buf_puts(out, v); /* numbers and stored JSON go in as they are */
        }
        if (rc == 0)
            rc = medic_buf_puts(out, "}");
    }
    if (rc == 0)
        rc = medic_buf_puts(out, t->nrows ? "\n]\n" : "]\n");
    return rc;
}

static int csv_field(struct medic_buf *out, const char *v)
{
    if (!v)
        return 0;
    if (!strpbrk(v, ",\"\r\n"))
        return medic_buf_puts(out, v);
    int rc = medic_buf_puts(out, "\"");
    for (const char *p = v; *p && rc == 0; p++)
        rc = *p == '"' ? medic_buf_puts(out, "\"\"") : medic_buf_append(out, p, 1);
    return rc ? rc : medic_buf_puts(out, "\"");
}

static int render_csv(const struct medic_table *t, struct medic_buf *out)
{
    int rc = 0;
    for (size_t c = 0; c < t->ncols && rc == 0; c++) {
        rc = c ? medic_buf_puts(out, ",") : 0;
        if (rc == 0)
            rc = csv_field(out, t->names[c]);
    }
    if (rc == 0)
        rc = medic_buf_puts(out, "\r\n");
    for (size_t r = 0; r < t->nrows && rc == 0; r++) {
        for (size_t c = 0; c < t->ncols && rc == 0; c++) {
            rc = c ? medic_buf_puts(out, ",") : 0;
            if (rc == 0)
                rc = csv_field(out, t->cells[r * t->ncols + c]);
        }
        if (rc == 0)
            rc = medic_buf_puts(out, "\r\n");
    }
    return rc;
}

/* Text cells longer than this are cut with "..." so that rows stay readable. */
#define TABLE_MAX_CELL 60

static size_t display_width(const char *v)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p & 0xc0) != 0x80)
            w++;
    return w;
}

static int table_cell(struct medic_buf *out, const char *v, size_t width, int last)
{
    char cut[TABLE_MAX_CELL * 4 + 4];
    const char *shown = v ? v : "-";
    size_t w = display_width(shown);
    if (w > TABLE_MAX_CELL) {
        size_t bytes = 0, chars = 0;
        while (shown[bytes] && chars < TABLE_MAX_CELL - 3) {
            bytes++;
            while ((shown[bytes] & 0xc0) == 0x80)
                bytes++;
            chars++;
        }
        memcpy(cut, shown, bytes);
        memcpy(cut + bytes, "...", 4);
        shown = cut;
        w = TABLE_MAX_CELL;
    }
    /* control characters would break the layout: show them as spaces */
    int rc = 0;
    for (const char *p = shown; *p && rc == 0; p++)
        rc = medic_buf_append(out, (unsigned char)*p < 0x20 ? " " : p, 1);
    for (size_t i = w; !last && i < width + 2 && rc == 0; i++)
        rc = medic_buf_append(out, " ", 1);
    return rc;
}

static int render_text(const struct medic_table *t, struct medic_buf *out)
{
    size_t *width = calloc(t->ncols ? t->ncols : 1, sizeof(*width));
    if (!width)
        return MEDIC_E_NOMEM;
    for (size_t c = 0; c < t->ncols; c++) {
        width[c] = display_width(t->names[c]);
        for (size_t r = 0; r < t->nrows; r++) {
            const char *v = t->cells[r * t->ncols + c];
            size_t w = v ? display_width(v) : 1;
            if (w > TABLE_MAX_CELL)
                w = TABLE_MAX_CELL;
            if (w > width[c])
                width[c] = w;
        }
    }
    int rc = 0;
    char upper[64];
    for (size_t c = 0; c < t->ncols && rc == 0; c++) {
        size_t i;
        for (i = 0; t->names[c][i] && i < sizeof(upper) - 1; i++)
            upper[i] = (char)(t->names[c][i] >= 'a' && t->names[c][i] <= 'z' ? t->names[c][i] - 32
                                                                             : t->names[c][i]);
        upper[i] = '\0';
        rc = table_cell(out, upper, width[c], c + 1 == t->ncols);
    }
    if (rc == 0)
        rc = medic_buf_puts(out, "\n");
    for (size_t r = 0; r < t->nrows && rc == 0; r++) {
        for (size_t c = 0; c < t->ncols && rc == 0; c++)
            rc = table_cell(out, t->cells[r * t->ncols + c], width[c], c + 1 == t->ncols);
        if (rc == 0)
            rc = medic_buf_puts(out, "\n");
    }
    free(width);
    return rc;
}

int medic_table_render(const struct medic_table *t, enum medic_table_format format,
                       struct medic_buf *out)
{
    switch (format) {
    case MEDIC_FORMAT_JSON:
        return render_json(t, out);
    case MEDIC_FORMAT_CSV:
        return render_csv(t, out);
    case MEDIC_FORMAT_TABLE:
    default:
        return render_text(t, out);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer with a size cap (curl's dynbuf habit): appends
 * past the cap fail with MEDIC_E_LIMIT and leave the content unchanged.
 * The failure sticks (b->error, cleared by reset): every later append
 * fails too, so a document built from many appends is either whole or
 * known to be broken, never silently missing a piece.
 * `data` is always NUL-terminated once anything was appended. */
#ifndef MEDIC_BUF_H
#define MEDIC_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct medic_buf {
    char *data;
    size_t len;
    size_t cap;   /* allocated bytes */
    size_t limit; /* maximum len; 0 means 64 MiB */
    int error;    /* the first failed append's code: later appends fail too */
};

void medic_buf_init(struct medic_buf *b, size_t limit);
void medic_buf_release(struct medic_buf *b);
void medic_buf_reset(struct medic_buf *b);
/* Drops everything after the first len bytes (a rollback point taken from
 * b->len before a composite append). */
void medic_buf_truncate(struct medic_buf *b, size_t len);
int medic_buf_append(struct medic_buf *b, const void *data, size_t len);
int medic_buf_puts(struct medic_buf *b, const char *s);
int medic_buf_printf(struct medic_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int medic_buf_vprintf(struct medic_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Appends s as a JSON string literal, quotes included: control characters
 * escaped, invalid UTF-8 replaced by U+FFFD; on failure nothing is
 * appended. */
int medic_buf_json_string(struct medic_buf *b, const char *s);
/* Appends the same, for a string of known length (may hold NULs). */
int medic_buf_json_stringn(struct medic_buf *b, const char *s, size_t n);
/* Takes the content: returns it (caller frees) and leaves b empty. */
char *medic_buf_detach(struct medic_buf *b);

#endif

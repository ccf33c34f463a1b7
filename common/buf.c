/* SPDX-License-Identifier: Apache-2.0 */
#include "buf.h"
#include "utf8.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEDIC_BUF_DEFAULT_LIMIT ((size_t)64 << 20)

void medic_buf_init(struct medic_buf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit ? limit : MEDIC_BUF_DEFAULT_LIMIT;
    b->error = 0;
}

void medic_buf_release(struct medic_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->error = 0;
}

void medic_buf_reset(struct medic_buf *b)
{
    b->len = 0;
    b->error = 0;
    if (b->data)
        b->data[0] = '\0';
}

void medic_buf_truncate(struct medic_buf *b, size_t len)
{
    if (len >= b->len)
        return;
    b->len = len;
    b->data[len] = '\0';
}

static int buf_reserve(struct medic_buf *b, size_t extra)
{
    if (b->error)
        return b->error;
    if (extra > b->limit || b->len > b->limit - extra)
        return b->error = MEDIC_E_LIMIT;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return b->error = MEDIC_E_NOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int medic_buf_append(struct medic_buf *b, const void *data, size_t len)
{
    int rc = buf_reserve(b, len);
    if (rc)
        return rc;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int medic_buf_puts(struct medic_buf *b, const char *s)
{
    return medic_buf_append(b, s, strlen(s));
}

int medic_buf_vprintf(struct medic_buf *b, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return MEDIC_E_INVALID;
    int rc = buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int medic_buf_printf(struct medic_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = medic_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int medic_buf_json_stringn(struct medic_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t mark = b->len;
    int rc = medic_buf_append(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            /* valid UTF-8 passes; a broken byte becomes U+FFFD, so that the
             * output is always valid JSON text */
            size_t len = medic_utf8_char_len(s + i, n - i);
            if (len) {
                i += len;
                continue;
            }
            rc = medic_buf_append(b, s + start, i - start);
            if (rc == 0)
                rc = medic_buf_append(b, "\\ufffd", 6);
            start = ++i;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        rc = medic_buf_append(b, s + start, i - start);
        if (rc)
            break;
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t elen = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        rc = medic_buf_append(b, esc, elen);
        start = ++i;
    }
    if (rc == 0)
        rc = medic_buf_append(b, s + start, n - start);
    if (rc == 0)
        rc = medic_buf_append(b, "\"", 1);
    if (rc)
        medic_buf_truncate(b, mark); /* nothing partial */
    return rc;
}

int medic_buf_json_string(struct medic_buf *b, const char *s)
{
    if (!s)
        return medic_buf_puts(b, "null");
    return medic_buf_json_stringn(b, s, strlen(s));
}

char *medic_buf_detach(struct medic_buf *b)
{
    char *p = b->data;
    if (!p)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "utf8.h"

size_t medic_utf8_check(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        } else {
            return i;
        }
        if (len - i <= need)
            return i;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return i;
        for (size_t k = 2; k <= need; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xbf)
                return i;
        i += need + 1;
    }
    return len;
}

size_t medic_utf8_char_len(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    size_t window = len < 4 ? len : 4;
    if (medic_utf8_check(s, window) == 0)
        return 0;
    unsigned char c = (unsigned char)s[0];
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

size_t medic_utf8_boundary(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0)
        return 0;
    /* the start of the last character: back over continuation bytes */
    size_t j = n - 1;
    while (j > 0 && n - j < 4 && (p[j] & 0xc0) == 0x80)
        j--;
    unsigned char c = p[j];
    size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return j + want <= n ? n : j;
}

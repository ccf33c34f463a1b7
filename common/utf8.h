/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 validation (RFC 3629: no overlongs, no surrogates, max U+10FFFF). */
#ifndef MEDIC_UTF8_H
#define MEDIC_UTF8_H

#include <stddef.h>

/* Returns len when s[0..len) is valid UTF-8, else the offset of the first
 * byte of the first invalid sequence. */
size_t medic_utf8_check(const char *s, size_t len);

/* The length of the valid UTF-8 character at s (at most len bytes), or 0
 * when s does not start with one. */
size_t medic_utf8_char_len(const char *s, size_t len);

/* The largest k <= n such that s[0..k) does not end inside a character:
 * where to cut a string of valid UTF-8 to at most n bytes. */
size_t medic_utf8_boundary(const char *s, size_t n);

#endif

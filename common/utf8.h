/* UTF-8 validation (RFC 3629: no overlongs, no surrogates, max U+10FFFF). */
#ifndef MEDIC_UTF8_H
#define MEDIC_UTF8_H

#include <stddef.h>

/* Returns len when s[0..len) is valid UTF-8, else the offset of the first
 * byte of the first invalid sequence. */
size_t medic_utf8_check(const char *s, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "html.h"

#include <string.h>

int medic_html_text(struct medic_buf *b, const char *s)
{
    int rc = 0;
    for (const char *p = s ? s : ""; *p && rc == 0;) {
        size_t plain = strcspn(p, "&<>\"'");
        rc = medic_buf_append(b, p, plain);
        p += plain;
        if (rc || !*p)
            break;
        static const char *const entity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
        rc = medic_buf_puts(b, entity[strchr("&<>\"'", *p) - "&<>\"'"]);
        p++;
    }
    return rc;
}

int medic_html_path_segment(struct medic_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && rc == 0; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            char one = (char)c;
            rc = medic_buf_append(b, &one, 1);
        } else {
            char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc = medic_buf_append(b, enc, 3);
        }
    }
    return rc;
}

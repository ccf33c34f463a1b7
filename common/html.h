/* SPDX-License-Identifier: Apache-2.0 */
/* Writing HTML safely: text and attribute values escaped, path segments
 * percent-encoded. Everything from an alert goes through these. */
#ifndef MEDIC_HTML_H
#define MEDIC_HTML_H

#include "buf.h"

/* Appends s (NULL: nothing) with & < > " ' escaped: safe in element text
 * and in quoted attribute values. */
int medic_html_text(struct medic_buf *b, const char *s);

/* Appends s percent-encoded as one URL path segment: every byte but
 * A-Z a-z 0-9 - . _ ~ as %XX. */
int medic_html_path_segment(struct medic_buf *b, const char *s);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Between the page's files: the fleet and node pages (fleet.c), the places
 * to act and their forms (forms.c), a node's GPUs (gpus.c). */
#ifndef MEDIC_PAGE_INTERNAL_H
#define MEDIC_PAGE_INTERNAL_H

#include "page.h"

/* A page's head, with its style (a page with a form never reloads itself). */
void page__start(struct medic_buf *out, const char *title);
/* GET /approvals/ID, GET /pause and GET /release/NODE: HTML into out, the
 * HTTP status returned (503 when the engine's state cannot be read). */
int page__approval(const struct page_source *src, int64_t id, const char *authorization,
                   struct medic_buf *out);
int page__pause(const struct page_source *src, const char *authorization, struct medic_buf *out);
int page__release(const struct page_source *src, const char *node, const char *authorization,
                  struct medic_buf *out);
/* The node's GPUs as its agent reports them now. */
void page__gpus(struct medic_buf *out, const struct page_source *src, const char *node);

#endif

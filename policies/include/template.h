/* SPDX-License-Identifier: Apache-2.0 */
/* Templates for reasons and messages: plain text with a small, safe set of
 * expressions, checked when the policy loads:
 *   {{ $labels.NAME }}  {{ $annotations.NAME }}  {{ $risk }}  {{ $node }}
 *   {{ $previous }}: what came of the incident's step before this one
 * A missing label renders as the empty string; the risk renders with two
 * decimals, or "unknown". Output is text: it is never given to a shell. */
#ifndef MEDIC_POLICIES_TEMPLATE_H
#define MEDIC_POLICIES_TEMPLATE_H

#include "action.h"
#include "alert.h"
#include "buf.h"
#include "error.h"

#include <stddef.h>

enum template_part_kind { TPL_TEXT, TPL_LABEL, TPL_ANNOTATION, TPL_RISK, TPL_NODE, TPL_PREVIOUS };

struct template_part {
    enum template_part_kind kind;
    char *text; /* literal text, or the label/annotation name */
};

struct policy_template {
    struct template_part *parts;
    size_t count;
};

#define POLICY_TEMPLATE_MAX_BYTES 4096
/* Rendering stops one byte past this (so a caller can tell the text was
 * longer); callers cut it with medic_text_fit, which marks the cut. */
#define POLICY_TEMPLATE_MAX_OUTPUT MEDIC_ACTION_TEXT_MAX

/* Parses text; on error returns MEDIC_E_INVALID with the 1-based column in
 * *col and a message in err. */
int policy_template_parse(const char *text, struct policy_template *out, int *col,
                          struct medic_error *err);
void policy_template_release(struct policy_template *t);

/* What a template may refer to while rendering. risk is NAN when unknown. */
struct template_vars {
    const struct medic_labels *labels;
    const struct medic_labels *annotations;
    double risk;
    const char *node;
    /* what came of the incident's step before (`drain succeeded: ...`,
     * `drain denied by bob: ...`); NULL: "no step before" */
    const char *previous;
};

/* Appends the rendering to out, at most POLICY_TEMPLATE_MAX_OUTPUT + 1
 * bytes (possibly ending inside a character: cut it with medic_text_fit). */
int policy_template_render(const struct policy_template *t, const struct template_vars *vars,
                           struct medic_buf *out);

#endif

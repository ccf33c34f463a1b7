/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm's one-line node text (`scontrol -o show node`), read by the drain
 * (slurm.c) and the node list (slurm_nodes.c). Private to actions/. */
#ifndef MEDIC_ACTIONS_SLURM_TEXT_H
#define MEDIC_ACTIONS_SLURM_TEXT_H

#include <stddef.h>

/* The value of the first KEY= field of a node's line (len bytes; a field
 * starts the line or follows a blank): up to the next blank or line end,
 * except Reason, which may hold blanks (and whatever text a person gave)
 * and runs to the stamp Slurm appends to it, " [user@time]", or to the
 * end: medic's own reasons hold no brackets (slurm.c's clean_char), so the
 * first "]" that ends a field is the stamp's, whatever the text says (a
 * "Comment=" in it included). Fields before Reason= are Slurm's own, so
 * the first occurrence is the field, not a person's text. "" when absent;
 * cut to size. */
void slurm_field(const char *line, size_t len, const char *key, char *out, size_t size);

#endif

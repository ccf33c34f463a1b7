/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm hostlist expressions, as operators write node names: comma-
 * separated entries, each a name with bracketed numeric ranges:
 * `gpu-[0001-0100,0200]`, `rack[1-2]-gpu[01-08]`, `login01`. A range whose
 * low bound has leading zeros (`[0001-0100]`) matches that many digits
 * exactly; one without (`[1-10]`) matches the numbers as written, without
 * leading zeros. Matched without expanding, so a large range costs
 * nothing. */
#ifndef MEDIC_HOSTLIST_H
#define MEDIC_HOSTLIST_H

#include <stddef.h>

#define MEDIC_HOSTLIST_MAX_BYTES 4096

struct medic_hostlist;

/* Parses text (at most MEDIC_HOSTLIST_MAX_BYTES). Returns 0, or -1 with
 * what is wrong in why. */
int medic_hostlist_parse(const char *text, struct medic_hostlist **out, char *why, size_t size);
/* 1 when name is one of the hosts. */
int medic_hostlist_match(const struct medic_hostlist *h, const char *name);
/* Calls fn with each name of h, in the order written, until it returns
 * non-zero (that is returned). -1 when there are more than max names, before
 * any call; else 0. */
int medic_hostlist_expand(const struct medic_hostlist *h, size_t max,
                          int (*fn)(void *arg, const char *name), void *arg);
void medic_hostlist_free(struct medic_hostlist *h);

#endif

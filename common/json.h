/* SPDX-License-Identifier: Apache-2.0 */
/* cJSON trees that live in a medic_arena: parsing a large or frequent
 * document (a Prometheus answer, a webhook) without a malloc and a free
 * per node. cJSON's allocation hooks are set once for the process; they
 * call malloc and free unless the calling thread is inside
 * medic_json_parse_in, so every other cJSON use is unchanged. */
#ifndef MEDIC_JSON_H
#define MEDIC_JSON_H

#include "arena.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* Sets cJSON's hooks; called by medic_json_parse_in, and by main before
 * any thread starts. */
void medic_json_init(void);

/* cJSON_ParseWithLengthOpts (no NUL required) with every node and string
 * allocated in a: the tree lives until a is released and must never be
 * given to cJSON_Delete. NULL for invalid JSON (or out of memory), with
 * *end where parsing stopped when end is not NULL. */
cJSON *medic_json_parse_in(struct medic_arena *a, const char *body, size_t len, const char **end);

#endif

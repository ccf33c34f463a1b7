/* SPDX-License-Identifier: Apache-2.0 */
#include "json.h"

#include <pthread.h>
#include <stdlib.h>

/* the arena of the parse running on this thread, if any */
static __thread struct medic_arena *parse_arena;

static void *json_malloc(size_t size)
{
    return parse_arena ? medic_arena_alloc_uninit(parse_arena, size) : malloc(size);
}

/* inside a parse, what cJSON frees (a string or node it gave up on) stays
 * in the arena until the arena is released */
static void json_free(void *p)
{
    if (!parse_arena)
        free(p);
}

static void install(void)
{
    cJSON_Hooks hooks = {.malloc_fn = json_malloc, .free_fn = json_free};
    cJSON_InitHooks(&hooks);
}

void medic_json_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
}

cJSON *medic_json_parse_in(struct medic_arena *a, const char *body, size_t len, const char **end)
{
    medic_json_init();
    parse_arena = a;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, end, 0);
    parse_arena = NULL;
    return root;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* A bump allocator for data that lives and dies together, such as one
 * parsed notification: many small allocations, one free. */
#ifndef MEDIC_ARENA_H
#define MEDIC_ARENA_H

#include <stddef.h>

struct medic_arena_block;

struct medic_arena {
    struct medic_arena_block *head;
    size_t used; /* total bytes handed out, for caps */
};

void medic_arena_init(struct medic_arena *a);
void medic_arena_release(struct medic_arena *a);
/* Returns zeroed, 16-byte aligned memory, or NULL when out of memory. */
void *medic_arena_alloc(struct medic_arena *a, size_t size);
/* The same, not zeroed. */
void *medic_arena_alloc_uninit(struct medic_arena *a, size_t size);
/* Copies len bytes of s and a terminating NUL. */
char *medic_arena_strndup(struct medic_arena *a, const char *s, size_t len);
char *medic_arena_strdup(struct medic_arena *a, const char *s);
/* Whether p lies in one of a's blocks; how many blocks a holds. */
int medic_arena_owns(const struct medic_arena *a, const void *p);
size_t medic_arena_blocks(const struct medic_arena *a);

#endif

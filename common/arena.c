/* SPDX-License-Identifier: Apache-2.0 */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK_SIZE 8192
/* blocks double up to this, so that a large document costs few mallocs */
#define ARENA_BLOCK_MAX ((size_t)1 << 20)

struct medic_arena_block {
    struct medic_arena_block *next;
    size_t size;
    size_t used;
    _Alignas(16) unsigned char data[];
};

void medic_arena_init(struct medic_arena *a)
{
    a->head = NULL;
    a->used = 0;
}

void medic_arena_release(struct medic_arena *a)
{
    struct medic_arena_block *b = a->head;
    while (b) {
        struct medic_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *medic_arena_alloc_uninit(struct medic_arena *a, size_t size)
{
    size_t rounded = (size + 15) & ~(size_t)15;
    if (rounded < size)
        return NULL;
    struct medic_arena_block *b = a->head;
    if (!b || b->size - b->used < rounded) {
        size_t bsize = b ? b->size * 2 : ARENA_BLOCK_SIZE;
        if (bsize > ARENA_BLOCK_MAX)
            bsize = ARENA_BLOCK_MAX;
        if (rounded > bsize)
            bsize = rounded;
        if (bsize > SIZE_MAX - sizeof(*b))
            return NULL;
        b = malloc(sizeof(*b) + bsize);
        if (!b)
            return NULL;
        b->size = bsize;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += rounded;
    a->used += rounded;
    return p;
}

void *medic_arena_alloc(struct medic_arena *a, size_t size)
{
    void *p = medic_arena_alloc_uninit(a, size);
    if (p)
        memset(p, 0, size);
    return p;
}

char *medic_arena_strndup(struct medic_arena *a, const char *s, size_t len)
{
    char *p = medic_arena_alloc_uninit(a, len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

char *medic_arena_strdup(struct medic_arena *a, const char *s)
{
    return medic_arena_strndup(a, s, strlen(s));
}

int medic_arena_owns(const struct medic_arena *a, const void *p)
{
    for (const struct medic_arena_block *b = a->head; b; b = b->next)
        if ((const unsigned char *)p >= b->data && (const unsigned char *)p < b->data + b->size)
            return 1;
    return 0;
}

size_t medic_arena_blocks(const struct medic_arena *a)
{
    size_t n = 0;
    for (const struct medic_arena_block *b = a->head; b; b = b->next)
        n++;
    return n;
}

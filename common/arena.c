#include "arena.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK_SIZE 8192

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

void *medic_arena_alloc(struct medic_arena *a, size_t size)
{
    size_t rounded = (size + 15) & ~(size_t)15;
    if (rounded < size)
        return NULL;
    struct medic_arena_block *b = a->head;
    if (!b || b->size - b->used < rounded) {
        size_t bsize = rounded > ARENA_BLOCK_SIZE ? rounded : ARENA_BLOCK_SIZE;
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
    memset(p, 0, size);
    return p;
}

char *medic_arena_strndup(struct medic_arena *a, const char *s, size_t len)
{
    char *p = medic_arena_alloc(a, len + 1);
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

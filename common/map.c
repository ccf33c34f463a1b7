/* SPDX-License-Identifier: Apache-2.0 */
#include "map.h"
#include "error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct medic_map_slot {
    char *key; /* NULL: empty; TOMBSTONE: removed */
    void *value;
    uint64_t hash;
};

static char tombstone_marker;
#define TOMBSTONE (&tombstone_marker)

static uint64_t hash_key(const char *key)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

void medic_map_init(struct medic_map *m)
{
    memset(m, 0, sizeof(*m));
}

void medic_map_release(struct medic_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key && m->slots[i].key != TOMBSTONE)
            free(m->slots[i].key);
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static struct medic_map_slot *find(const struct medic_map *m, const char *key, uint64_t h)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct medic_map_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->key != TOMBSTONE && s->hash == h && strcmp(s->key, key) == 0)
            return s;
    }
}

void *medic_map_get(const struct medic_map *m, const char *key)
{
    struct medic_map_slot *s = find(m, key, hash_key(key));
    return s ? s->value : NULL;
}

static int resize(struct medic_map *m, size_t cap)
{
    struct medic_map_slot *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return MEDIC_E_NOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        struct medic_map_slot *s = &m->slots[i];
        if (!s->key || s->key == TOMBSTONE)
            continue;
        size_t j = (size_t)s->hash & (cap - 1);
        while (slots[j].key)
            j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    m->dead = 0;
    return 0;
}

int medic_map_put(struct medic_map *m, const char *key, void *value)
{
    uint64_t h = hash_key(key);
    struct medic_map_slot *s = find(m, key, h);
    if (s) {
        s->value = value;
        return 0;
    }
    if ((m->used + m->dead + 1) * 4 >= m->cap * 3 &&
        resize(m, m->cap ? (m->used * 2 >= m->cap ? m->cap * 2 : m->cap) : 16))
        return MEDIC_E_NOMEM;
    char *copy = strdup(key);
    if (!copy)
        return MEDIC_E_NOMEM;
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    while (m->slots[i].key && m->slots[i].key != TOMBSTONE)
        i = (i + 1) & mask;
    if (m->slots[i].key == TOMBSTONE)
        m->dead--;
    m->slots[i] = (struct medic_map_slot){copy, value, h};
    m->used++;
    return 0;
}

void medic_map_remove(struct medic_map *m, const char *key)
{
    struct medic_map_slot *s = find(m, key, hash_key(key));
    if (!s)
        return;
    free(s->key);
    s->key = TOMBSTONE;
    s->value = NULL;
    m->used--;
    m->dead++;
}

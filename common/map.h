/* SPDX-License-Identifier: Apache-2.0 */
/* A hash map from strings to pointers (open addressing, FNV-1a). Keys are
 * copied; values are the caller's. */
#ifndef MEDIC_MAP_H
#define MEDIC_MAP_H

#include <stddef.h>

struct medic_map_slot;

struct medic_map {
    struct medic_map_slot *slots;
    size_t cap;  /* a power of two, or 0 */
    size_t used; /* live entries */
    size_t dead; /* tombstones */
};

void medic_map_init(struct medic_map *m);
/* Frees the keys (not the values). */
void medic_map_release(struct medic_map *m);
void *medic_map_get(const struct medic_map *m, const char *key);
/* Inserts or replaces; returns 0 or MEDIC_E_NOMEM. */
int medic_map_put(struct medic_map *m, const char *key, void *value);
/* Removes key when present. */
void medic_map_remove(struct medic_map *m, const char *key);

#endif

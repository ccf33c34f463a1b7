/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"
#include "lock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct config_slot {
    struct medic_mutex lock; /* guards current; held only to copy or swap it */
    struct medic_config *current;
};

struct medic_config *medic_config_snapshot(struct medic_config *config)
{
    struct medic_config *heap = malloc(sizeof(*heap));
    if (!heap) {
        medic_config_release(config);
        return NULL;
    }
    *heap = *config;
    memset(config, 0, sizeof(*config));
    atomic_init(&heap->refs, 1);
    return heap;
}

const struct medic_config *medic_config_ref(const struct medic_config *config)
{
    atomic_fetch_add(&((struct medic_config *)config)->refs, 1);
    return config;
}

void medic_config_unref(const struct medic_config *config)
{
    struct medic_config *c = (struct medic_config *)config;
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
        medic_config_release(c);
        free(c);
    }
}

struct config_slot *config_slot_new(struct medic_config *first)
{
    struct config_slot *slot = calloc(1, sizeof(*slot));
    if (!slot)
        return NULL;
    medic_mutex_init(&slot->lock, MEDIC_LOCK_CONFIG_SLOT);
    slot->current = first;
    return slot;
}

void config_slot_free(struct config_slot *slot)
{
    if (!slot)
        return;
    medic_config_unref(slot->current);
    medic_mutex_destroy(&slot->lock);
    free(slot);
}

const struct medic_config *config_slot_acquire(struct config_slot *slot)
{
    medic_mutex_lock(&slot->lock);
    const struct medic_config *c = medic_config_ref(slot->current);
    medic_mutex_unlock(&slot->lock);
    return c;
}

void config_slot_publish(struct config_slot *slot, struct medic_config *fresh)
{
    medic_mutex_lock(&slot->lock);
    struct medic_config *old = slot->current;
    slot->current = fresh;
    medic_mutex_unlock(&slot->lock);
    medic_config_unref(old); /* outside the lock: freeing is not free */
}

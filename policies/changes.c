/* SPDX-License-Identifier: Apache-2.0 */
/* Which rows of the policy engine's state changed since they were last
 * written (persist.c writes them): a flag on each item whose row changed,
 * the keys of rows that went, and the engine's own row. Off unless the
 * daemon turns it on. */
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

static int remember_dirty(struct policy_state *st, enum row_kind kind, void *item)
{
    struct policy_changes *c = &st->changes;
    if (policy__grow((void **)&c->dirty, c->dirty_count, &c->dirty_cap, sizeof(*c->dirty))) {
        c->failed = 1; /* every row is written at the next round */
        return MEDIC_E_NOMEM;
    }
    c->dirty[c->dirty_count++] = (struct dirty_ref){kind, item};
    return 0;
}

void policy__touch_incident(struct incident *in)
{
    struct policy_state *st = in->owner;
    st->tick_due[in->slot] = INT64_MIN; /* the next tick visits it */
    if (st->changes.on && !in->dirty && remember_dirty(st, ROW_INCIDENT, in) == 0)
        in->dirty = 1;
}

void policy__touch_node(struct policy_state *st, struct node_state *n)
{
    if (st->changes.on && !n->dirty && remember_dirty(st, ROW_NODE, n) == 0)
        n->dirty = 1;
}

void policy__touch_unmatched(struct policy_state *st, struct unmatched *u)
{
    if (st->changes.on && !u->dirty && remember_dirty(st, ROW_UNMATCHED, u) == 0)
        u->dirty = 1;
}

void policy__touch_resolved(struct policy_state *st, struct resolved_alert *r)
{
    if (st->changes.on && !r->dirty && remember_dirty(st, ROW_RESOLVED, r) == 0)
        r->dirty = 1;
}

void policy__touch_engine(struct policy_state *st)
{
    st->changes.engine = 1;
}

void policy__row_gone(struct policy_state *st, enum row_kind kind, const char *key, void *item,
                      int dirty)
{
    struct policy_changes *c = &st->changes;
    if (!c->on)
        return;
    if (dirty) /* the pointer is about to be freed */
        for (size_t i = 0; i < c->dirty_count; i++)
            if (c->dirty[i].item == item)
                c->dirty[i].item = NULL;
    char *copy = strdup(key);
    if (!copy || policy__grow((void **)&c->gone, c->gone_count, &c->gone_cap, sizeof(*c->gone))) {
        free(copy);
        c->failed = 1;
        return;
    }
    c->gone[c->gone_count++] = (struct gone_row){kind, copy};
}

static void changes_clear(struct policy_changes *c)
{
    for (size_t i = 0; i < c->gone_count; i++)
        free(c->gone[i].key);
    c->gone_count = 0;
    c->dirty_count = 0;
    c->engine = 0;
    c->failed = 0;
}

static void clear_dirty_flags(struct policy_state *st)
{
    struct policy_changes *c = &st->changes;
    for (size_t i = 0; i < c->dirty_count; i++) {
        struct dirty_ref *d = &c->dirty[i];
        if (!d->item)
            continue;
        switch (d->kind) {
        case ROW_INCIDENT:
            ((struct incident *)d->item)->dirty = 0;
            break;
        case ROW_NODE:
            ((struct node_state *)d->item)->dirty = 0;
            break;
        case ROW_UNMATCHED:
            ((struct unmatched *)d->item)->dirty = 0;
            break;
        case ROW_RESOLVED:
            ((struct resolved_alert *)d->item)->dirty = 0;
            break;
        default:
            break;
        }
    }
}

void policy__changes_written(struct policy_state *st)
{
    clear_dirty_flags(st);
    changes_clear(&st->changes);
}

void policy__changes_release(struct policy_changes *c)
{
    changes_clear(c);
    free(c->dirty);
    free(c->gone);
}

void policy_state_track_changes(struct policy_state *st)
{
    st->changes.on = 1;
    st->changes.engine = 1; /* a new state has its engine row still to write */
}

void policy_state_changed_all(struct policy_state *st)
{
    st->changes.failed = 1;
}

int policy_state_changed(const struct policy_state *st)
{
    const struct policy_changes *c = &st->changes;
    return c->dirty_count || c->gone_count || c->engine || c->failed;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The caps on topology groups (safety.group_caps): a disruptive step on a
 * node is held while its rack, PDU, partition or hostlist already has as
 * many disrupted nodes as its cap allows, as the fleet caps hold it; and
 * what each group holds now, for /metrics and the page. Quarantined nodes
 * count, as they count against max_disrupted_fraction. */
#include "engine_internal.h"
#include "inventory.h"

#include <stdio.h>
#include <string.h>

/* The disrupted nodes of the state in group of cap. */
static size_t disrupted_in(const struct policy_state *st, const struct group_cap *cap,
                           const char *group, const struct inventory *inv)
{
    size_t n = 0;
    for (size_t i = 0; i < st->node_count; i++) {
        if (!policy__node_disrupted(st->nodes[i]))
            continue;
        const struct inventory_node *node = inventory_find(inv, st->nodes[i]->name);
        const char *g = node ? policy_group_of(cap, node) : NULL;
        n += g && strcmp(g, group) == 0;
    }
    return n;
}

int policy__group_caps_hold(const struct policy_context *ctx, const struct policy_state *st,
                            const char *node, char *reason, size_t size)
{
    const struct policy_safety *s = &ctx->policies->safety;
    const struct inventory_node *n =
        s->group_cap_count && ctx->inventory ? inventory_find(ctx->inventory, node) : NULL;
    for (size_t i = 0; n && i < s->group_cap_count; i++) {
        const struct group_cap *cap = &s->group_caps[i];
        const char *group = policy_group_of(cap, n);
        if (!group)
            continue;
        size_t members = policy_group_size(cap, group, ctx->inventory);
        size_t limit = policy_group_limit(cap, members);
        size_t disrupted = disrupted_in(st, cap, group, ctx->inventory);
        if (disrupted + 1 <= limit)
            continue;
        snprintf(reason, size,
                 "group cap: %zu of the %zu nodes of %s%s%s already disrupted (safety.group_caps "
                 "entry %zu: at most %zu)",
                 disrupted, members, cap->label ? cap->label : "nodes ", cap->label ? "=" : "",
                 group, i + 1, limit);
        return 1;
    }
    return 0;
}

size_t policy_group_usage(const struct policy_state *st, const struct policy_safety *s,
                          const struct inventory *inv, struct policy_group_use *out, size_t max)
{
    size_t count = 0;
    for (size_t k = 0; k < st->node_count && inv; k++) {
        if (!policy__node_disrupted(st->nodes[k]))
            continue;
        const struct inventory_node *node = inventory_find(inv, st->nodes[k]->name);
        for (size_t i = 0; node && i < s->group_cap_count; i++) {
            const struct group_cap *cap = &s->group_caps[i];
            const char *group = policy_group_of(cap, node);
            if (!group)
                continue;
            size_t u = 0;
            while (u < count && !(out[u].cap == i && strcmp(out[u].group, group) == 0))
                u++;
            if (u == count) {
                if (count == max)
                    continue;
                out[u].cap = i;
                snprintf(out[u].label, sizeof(out[u].label), "%s",
                         cap->label ? cap->label : "nodes");
                snprintf(out[u].group, sizeof(out[u].group), "%s", group);
                out[u].disrupted = 0;
                out[u].limit = policy_group_limit(cap, policy_group_size(cap, group, inv));
                count++;
            }
            out[u].disrupted++;
        }
    }
    return count;
}

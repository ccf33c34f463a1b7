/* SPDX-License-Identifier: Apache-2.0 */
/* After a reload, incidents follow what they are: their node through the
 * inventory (a node renamed, its old name kept as an alias), and their
 * policy through a rename (a policy that takes the incident's alert and
 * undoes what the incident holds). An incident whose policy is really gone
 * is closed by the tick, which tells on-call first when its alerts still
 * fire. */
#include "engine_internal.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Moves the incident to key, when no other open incident holds it. */
static int rekey(struct policy_state *st, struct incident *in, const char *key)
{
    if (medic_map_get(&st->incidents_by_key, key))
        return -1;
    if (medic_map_put(&st->incidents_by_key, key, in))
        return -1;
    if (medic_map_get(&st->incidents_by_key, in->key) == in)
        medic_map_remove(&st->incidents_by_key, in->key);
    snprintf(in->key, sizeof(in->key), "%s", key);
    policy__touch_incident(in);
    return 0;
}

/* What medic holds on node from (drains, limits, actions in flight, recent
 * actions for cooldowns and budgets) now counts for node to. */
static void merge_node(struct policy_state *st, const char *from, const char *to)
{
    struct node_state *old = policy__node_get(st, from, 0);
    if (!old || (!policy__node_disrupted(old) && old->history_count == 0))
        return;
    struct node_state *n = policy__node_get(st, to, 1);
    if (!n)
        return;
    policy__touch_node(st, old);
    int was_old = policy__node_disrupted(old), was_new = policy__node_disrupted(n);
    n->drained_by_medic |= old->drained_by_medic;
    n->limited_by_medic |= old->limited_by_medic;
    n->acting += old->acting;
    if (old->quarantined && !n->quarantined) {
        n->quarantined = 1;
        n->quarantined_at = old->quarantined_at;
    }
    for (size_t i = 0; i < old->history_count; i++)
        if (policy__grow((void **)&n->history, n->history_count, &n->history_cap,
                         sizeof(*n->history)) == 0)
            n->history[n->history_count++] = old->history[i];
    if (old->last_alerting != MEDIC_TIME_UNSET &&
        (n->last_alerting == MEDIC_TIME_UNSET || old->last_alerting > n->last_alerting))
        n->last_alerting = old->last_alerting;
    old->drained_by_medic = 0;
    old->limited_by_medic = 0;
    old->acting = 0;
    old->quarantined = 0;
    old->history_count = 0;
    policy__node_recount(st, old, was_old);
    policy__node_recount(st, n, was_new);
}

static void follow_node(const struct policy_context *ctx, struct policy_state *st,
                        struct incident *in, int64_t now, struct policy_decisions *out)
{
    if (!in->in_inventory)
        return;
    const struct inventory_node *inv = inventory_find(ctx->inventory, in->node);
    if (!inv || strcmp(inv->name, in->node) == 0)
        return;
    char key[INCIDENT_KEY_SIZE], old[sizeof(in->node)];
    policy__incident_key(inv->name, in->policy, "", key, sizeof(key));
    if (rekey(st, in, key))
        return; /* the new name already has an incident of this policy: it stays apart */
    snprintf(old, sizeof(old), "%s", in->node);
    merge_node(st, old, inv->name);
    snprintf(in->node, sizeof(in->node), "%s", inv->name);
    policy__incident_change(in, in->state, -1, now, out,
                            "the inventory renamed node '%s' to '%s' (the old name is an alias): "
                            "the incident follows it",
                            old, inv->name);
}

/* Whether pol undoes what the incident holds (its on_resolved resumes a
 * drain and restores a limit): taking the incident over must not strand
 * its node. */
static int undoes_holds(const struct policy *pol, const struct incident *in)
{
    int resume = 0, restore = 0;
    for (size_t k = 0; k < pol->on_resolved_count; k++) {
        resume |= pol->on_resolved[k].action.kind == MEDIC_ACTION_RESUME;
        restore |= pol->on_resolved[k].action.kind == MEDIC_ACTION_RESTORE_POWER_LIMIT;
    }
    return (!in->drained || resume) && (!in->limit_watts || restore);
}

/* The policy of the new set that the incident is: the first whose name
 * has no incident on the node, which takes the alert that opened it, and
 * which undoes what it holds. */
static const struct policy *same_policy(const struct policy_context *ctx, struct policy_state *st,
                                        const struct incident *in)
{
    const struct policy_set *ps = ctx->policies;
    struct medic_labels labels = {in->labels.items, in->labels.count};
    for (size_t p = 0; p < ps->count; p++) {
        const struct policy *pol = &ps->items[p];
        char key[INCIDENT_KEY_SIZE];
        policy__incident_key(in->node, pol->name, "", key, sizeof(key));
        if (in->node[0] && policy__incident_find(st, key))
            continue;
        if (policy_matchers_match(&pol->match, &labels) && undoes_holds(pol, in))
            return pol;
    }
    return NULL;
}

/* Cooldowns and budgets recorded under the old name count for the new. */
static void rename_history(struct policy_state *st, const char *node, const char *from,
                           const char *to)
{
    struct node_state *n = policy__node_get(st, node, 0);
    if (!n)
        return;
    for (size_t i = 0; i < n->history_count; i++)
        if (strcmp(n->history[i].policy, from) == 0) {
            snprintf(n->history[i].policy, sizeof(n->history[i].policy), "%s", to);
            policy__touch_node(st, n);
        }
}

static void follow_policy(const struct policy_context *ctx, struct policy_state *st,
                          struct incident *in, int64_t now, struct policy_decisions *out)
{
    if (policy__incident_policy(ctx, in) || !in->node[0])
        return;
    const struct policy *pol = same_policy(ctx, st, in);
    if (!pol)
        return;
    char key[INCIDENT_KEY_SIZE], old[sizeof(in->policy)];
    policy__incident_key(in->node, pol->name, "", key, sizeof(key));
    if (rekey(st, in, key))
        return;
    snprintf(old, sizeof(old), "%s", in->policy);
    snprintf(in->policy, sizeof(in->policy), "%s", pol->name);
    in->cached_policy = pol;
    rename_history(st, in->node, old, pol->name);
    policy__incident_change(in, in->state, -1, now, out,
                            "policy %s is no longer configured; policy %s takes its alert and "
                            "undoes what it holds: the incident goes on under it (a rename)",
                            old, pol->name);
}

void policy__follow_reload(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                           struct policy_decisions *out)
{
    const struct policy_set *ps = ctx->policies;
    if (ps == st->followed_set && ps->generation == st->followed_generation && ps->generation)
        return;
    st->followed_set = ps;
    st->followed_generation = ps->generation;
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *in = st->incidents[i];
        if (in->final || in->closing)
            continue;
        follow_node(ctx, st, in, now, out);
        follow_policy(ctx, st, in, now, out);
    }
}

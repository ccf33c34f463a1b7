/* SPDX-License-Identifier: Apache-2.0 */
/* What medic records, set right against the world: its own drains against
 * what Slurm shows (a drain someone else undid or replaced is not medic's
 * any more: policy_reconcile_drains), and the ladders a stale alert
 * stopped once medic's clock is set right (policy_clock_set_right). */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What medic writes into the reasons of its drains. */
#define DRAIN_MARK "(medic policy "

/* Whether an action of medic's on the node may be under way: its outcome
 * would change the node after Slurm was read. */
static int in_flight(const struct policy_state *st, const struct node_state *n)
{
    if (n->acting > 0)
        return 1;
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (!in->final && strcmp(in->node, n->name) == 0 && (in->awaiting || in->undo_count))
            return 1;
    }
    return 0;
}

/* The reason medic's drain left on the node, as its incidents recorded it
 * ("" when not known). */
static const char *recorded_reason(const struct policy_state *st, const struct node_state *n)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (!in->final && in->drained && strcmp(in->node, n->name) == 0 && in->drained_as[0])
            return in->drained_as;
    }
    return "";
}

/* Lets go of medic's drain of node n: why says what Slurm shows. */
static void let_go(const struct policy_context *ctx, struct policy_state *st, struct node_state *n,
                   const char *why, int64_t now, struct policy_decisions *out)
{
    struct incident *told = NULL;
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *in = st->incidents[i];
        if (in->final || !in->drained || strcmp(in->node, n->name) != 0)
            continue;
        in->drained = 0;
        in->drained_as[0] = '\0';
        if (in->state == INCIDENT_QUARANTINED) {
            policy__incident_change(in, INCIDENT_QUARANTINED, -1, now, out,
                                    "%s: medic holds no drain there now; the node stays "
                                    "quarantined until a person releases it",
                                    why);
        } else {
            /* a step offered, or approved and held, is not taken on a node
             * someone else took over */
            policy__withdraw_pending(ctx, in, now, out, why);
            free(in->approved_offer);
            in->approved_offer = NULL;
            in->held = 0;
            in->halted = 1;
            snprintf(in->halted_by, sizeof(in->halted_by), "%.280s (medic's drain is gone)", why);
            policy__incident_change(in, INCIDENT_OPEN, -1, now, out,
                                    "%s: medic holds no drain there now, and takes no later step",
                                    why);
        }
        told = told ? told : in;
    }
    int was = policy__node_disrupted(n);
    n->drained_by_medic = 0;
    policy__touch_node(st, n);
    policy__node_recount(st, n, was);
    if (!told)
        return;
    char message[2048];
    snprintf(message, sizeof(message),
             "medic's drain of node '%.127s' is gone: %.1400s. medic no longer holds the node (it "
             "does not "
             "count as disrupted by medic) and takes no later step of its incidents%s",
             n->name, why,
             n->quarantined ? "; it stays quarantined: release it with `medic node release` "
                              "once it is checked"
                            : "");
    policy__tell_oncall(ctx, told, now, out, message);
}

int policy_reconcile_drains(const struct policy_context *ctx, struct policy_state *st,
                            int64_t seen_at, int64_t now, struct policy_decisions *out)
{
    if (!ctx->live || !ctx->slurm_node || !ctx->inventory)
        return 0;
    for (size_t i = 0; i < st->node_count && !out->failed; i++) {
        struct node_state *n = st->nodes[i];
        const struct inventory_node *inode = inventory_find(ctx->inventory, n->name);
        if (!n->drained_by_medic || !inode || !inode->slurm_node || n->drained_since >= seen_at ||
            in_flight(st, n))
            continue;
        char state[128], reason[1100], why[1400];
        if (ctx->slurm_node(ctx->slurm_arg, inode->slurm_node, state, sizeof(state), reason,
                            sizeof(reason)) != 1)
            continue; /* Slurm's view unknown, or Slurm has no such node: nothing said */
        const char *mine = recorded_reason(st, n);
        int drained = strstr(state, "DRAIN") != NULL;
        int medics = mine[0] ? strcmp(reason, mine) == 0 : strstr(reason, DRAIN_MARK) != NULL;
        if (drained && medics)
            continue;
        if (drained)
            snprintf(why, sizeof(why),
                     "Slurm shows node %s drained again by someone else (State=%.100s "
                     "Reason=%.600s)",
                     inode->slurm_node, state, reason);
        else
            snprintf(why, sizeof(why),
                     "Slurm shows node %s in service (State=%.100s): someone resumed it",
                     inode->slurm_node, state);
        let_go(ctx, st, n, why, now, out);
    }
    return out->failed;
}

void policy_clock_set_right(struct policy_state *st, int64_t step, int64_t now,
                            struct policy_decisions *out)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *in = st->incidents[i];
        if (in->final || !in->halted || !in->stale_step)
            continue;
        in->halted = 0;
        in->halted_by[0] = '\0';
        in->next_step = (size_t)(in->stale_step - 1);
        in->stale_step = 0;
        policy__incident_change(in, in->state, -1, now, out,
                                "medic's clock was set right (a step of %+.0fs): step %zu, "
                                "suppressed as stale on the wrong clock, is decided again",
                                (double)step / 1e9, in->next_step + 1);
    }
}

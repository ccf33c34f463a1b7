#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The alert's node: the first node label present, port stripped, then
 * looked up by name or alias. */
static const struct inventory_node *resolve_node(const struct policy_context *ctx,
                                                 const struct medic_labels *labels, char *raw,
                                                 size_t size)
{
    if (medic_alert_node(labels, ctx->node_labels, ctx->node_label_count, raw, size))
        return NULL;
    return inventory_find(ctx->inventory, raw);
}

/* A decision with verdict no_match for alert a on node, its reason left to
 * the caller; NULL when it cannot be made (out->failed says why). */
static struct policy_decision *no_match(const struct policy_alert *a, const char *node,
                                        int in_inventory, int64_t now, struct policy_decisions *out)
{
    struct policy_decision *d = policy__new_decision(out);
    if (!d)
        return NULL;
    snprintf(d->node, sizeof(d->node), "%s", node);
    d->in_inventory = in_inventory;
    const char *alertname = medic_labels_get(a->labels, "alertname");
    snprintf(d->alertname, sizeof(d->alertname), "%s", alertname ? alertname : "");
    snprintf(d->fingerprint, sizeof(d->fingerprint), "%s", a->fingerprint);
    d->verdict = VERDICT_NO_MATCH;
    d->risk = a->risk;
    d->time = now;
    return d;
}

/* A firing copy of an alert that already resolved (another Alertmanager
 * replica's older view, or a resolve that overtook its firing): it never
 * reopens the alert. The first such copy is recorded, the rest are not. */
static void late_firing_copy(struct resolved_alert *r, const struct policy_alert *a,
                             const char *node, int in_inventory, int64_t now,
                             struct policy_decisions *out)
{
    if (r->noted)
        return;
    struct policy_decision *d = no_match(a, node, in_inventory, now, out);
    if (!d)
        return;
    r->noted = 1;
    char when[40];
    medic_time_format(r->at, when, sizeof(when));
    snprintf(d->reason, sizeof(d->reason),
             "this alert resolved at %s; a firing copy that arrives later (another "
             "Alertmanager's older view) does not reopen it",
             when);
}

static void evaluate_firing(const struct policy_context *ctx, struct policy_state *st,
                            const struct policy_alert *a, const char *identity, int64_t starts_at,
                            int64_t now, struct policy_decisions *out)
{
    const struct policy_set *ps = ctx->policies;
    char raw[128];
    const struct inventory_node *inv = resolve_node(ctx, a->labels, raw, sizeof(raw));
    const char *node = inv ? inv->name : raw;
    struct resolved_alert *resolved = policy__resolved(st, identity, starts_at);
    if (resolved) {
        late_firing_copy(resolved, a, node, inv != NULL, now, out);
        return;
    }

    /* the storm window counts every alerting node, known or not */
    struct node_state *ns = policy__node_get(st, node[0] ? node : "(no node)", 1);
    if (ns)
        ns->last_alerting = now;
    policy__update_storm(ctx, st, now, out);

    char skipped[384] = "";
    int taken = 0;
    struct instance *existing = policy__alert_instances(st, identity, starts_at);
    for (size_t p = 0; p < ps->count; p++) {
        const struct policy *pol = &ps->items[p];
        struct instance *in = existing;
        while (in && strcmp(in->policy, pol->name) != 0)
            in = in->next_same_alert;
        if (!in) {
            if (!policy_matchers_match(&pol->match, a->labels))
                continue;
            int risk_ok = isnan(a->risk) ? pol->act_on_unknown_risk : a->risk >= pol->risk_at_least;
            if (!risk_ok) {
                size_t used = strlen(skipped);
                if (isnan(a->risk))
                    snprintf(skipped + used, sizeof(skipped) - used,
                             "%spolicy %s skips alerts of unknown risk", used ? "; " : "",
                             pol->name);
                else
                    snprintf(skipped + used, sizeof(skipped) - used,
                             "%spolicy %s: risk %.2f below %.2f", used ? "; " : "", pol->name,
                             a->risk, pol->risk_at_least);
                continue;
            }
            in = policy__new_instance(st, a, identity, starts_at, pol, node, inv != NULL);
            if (!in)
                return;
        }
        taken = 1;
        policy__run_due_steps(ctx, st, pol, in, now, out);
        if (!pol->continue_matching)
            break;
    }
    if (taken || policy__remember_unmatched(st, identity, starts_at, now))
        return;
    struct policy_decision *d = no_match(a, node, inv != NULL, now, out);
    if (!d)
        return;
    snprintf(d->reason, sizeof(d->reason), "%s",
             skipped[0] ? skipped : "no policy matches the alert's labels");
}

static void evaluate_resolved(const struct policy_context *ctx, struct policy_state *st,
                              const char *identity, int64_t starts_at, int64_t now,
                              struct policy_decisions *out)
{
    /* remembered first: even a resolve that overtakes its firing copy
     * keeps that copy from opening anything */
    if (policy__remember_resolved(st, identity, starts_at, now))
        out->failed = MEDIC_E_NOMEM;
    policy__forget_unmatched(st, identity, starts_at);
    struct instance *first = policy__alert_instances(st, identity, starts_at);
    /* this alert lets go of what it holds first, so that its own resume
     * sees whether other open alerts still need the node out */
    for (struct instance *in = first; in; in = in->next_same_alert) {
        struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 0) : NULL;
        if (n && in->drained && n->drain_holders > 0)
            n->drain_holders--;
        if (n && in->limited && n->limit_holders > 0)
            n->limit_holders--;
        in->drained = in->limited = 0;
    }
    for (struct instance *in = first; in; in = in->next_same_alert) {
        const struct policy *pol = policy__instance_policy(ctx, in);
        if (pol && in->acted)
            for (size_t k = 0; k < pol->on_resolved_count; k++)
                policy__decide_step(ctx, st, pol, in, &pol->on_resolved[k], (int)k, 1, now, out);
        if (in->disrupting && in->in_inventory) {
            struct node_state *n = policy__node_get(st, in->node, 0);
            if (n && n->disrupting_instances > 0)
                n->disrupting_instances--;
        }
    }
    if (first)
        policy__remove_alert_instances(st, first);
}

int policy_evaluate(const struct policy_context *ctx, struct policy_state *st,
                    const struct policy_alert *alert, int64_t now, struct policy_decisions *out)
{
    int64_t starts_at = alert->starts_at == MEDIC_TIME_UNSET ? now : alert->starts_at;
    char identity[ALERT_IDENTITY_SIZE];
    policy__alert_identity(alert->fingerprint, alert->labels, identity, sizeof(identity));
    if (alert->status == MEDIC_STATUS_FIRING)
        evaluate_firing(ctx, st, alert, identity, starts_at, now, out);
    else
        evaluate_resolved(ctx, st, identity, starts_at, now, out);
    return out->failed;
}

int policy_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out)
{
    policy__update_storm(ctx, st, now, out);
    policy__expire_unmatched(st, now);
    policy__expire_resolved(st, now);
    for (size_t i = 0; i < st->instance_count; i++) {
        struct instance *in = st->instances[i];
        const struct policy *pol = in->removed ? NULL : policy__instance_policy(ctx, in);
        if (pol && in->next_step < pol->step_count)
            policy__run_due_steps(ctx, st, pol, in, now, out);
    }
    return out->failed;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The repair loop's part of the policy engine: a verify before a node
 * returns, fallback steps (if_failed) after a step that did not succeed,
 * quarantine of a node that waits for a person (a failed verify, a repeat
 * offender, a hold no step undoes) and a person's release of it. */
#include "engine_internal.h"
#include "timeutil.h"

#include <stdio.h>
#include <string.h>

int policy__skip_fallback(const struct policy *pol, struct incident *in, size_t index, int64_t now,
                          struct policy_decisions *out)
{
    if (in->last_failed || in->halted)
        return 0; /* it runs (a halted ladder suppresses it as any other step) */
    struct policy_decision *d = policy__incident_decision(out, in, now);
    policy__touch_incident(in);
    if (!d)
        return 1;
    const struct policy_step *step = &pol->steps[index];
    d->step = (int)index;
    d->disruptive = medic_action_disruptive(step->action.kind);
    d->verdict = VERDICT_SUPPRESSED;
    if (medic_action_copy(&d->action, &step->action) == 0)
        d->has_action = 1;
    else
        out->failed = MEDIC_E_NOMEM;
    snprintf(d->reason, sizeof(d->reason),
             "not needed: step %zu succeeded, and step %zu (%s) is if_failed: it runs only when "
             "the step before it does not succeed",
             index, index + 1, medic_action_name(step->action.kind));
    return 1;
}

/* Distinct failures (alert episodes) of the node's recent repairs
 * (drains, power cycles, GPU resets: not power limits) within window: two
 * policies that took one alert are one failure. The first incident of each
 * into ids (up to max), its episode into keys; returns how many, and the
 * repairs in *actions. */
static size_t recent_incidents(const struct node_state *n, int64_t now, int64_t window,
                               int64_t *ids, int64_t *keys, size_t max, size_t *actions)
{
    size_t count = 0;
    *actions = 0;
    for (size_t i = 0; n && i < n->history_count; i++) {
        const struct action_record *r = &n->history[i];
        if (now - r->time >= window || !r->repair)
            continue;
        ++*actions;
        /* rows of an earlier medic have no episode: their incident is one */
        int64_t key = r->episode ? r->episode : -r->incident;
        size_t k = 0;
        while (k < count && k < max && keys[k] != key && ids[k] != r->incident)
            k++;
        if (k == count) {
            if (count < max) {
                ids[count] = r->incident;
                keys[count] = key;
            }
            count++;
        }
    }
    return count;
}

/* "3 incidents within 7d (ids 4, 9, 12), 5 disruptive actions; this one's
 * alert: GPUXidError, GPU 3 (GPU-...)": what an RMA ticket needs. */
static void history_text(const struct policy_context *ctx, const struct policy_state *st,
                         const struct incident *in, int64_t now, char *out, size_t size)
{
    const struct policy_safety *s = &ctx->policies->safety;
    int64_t window = s->quarantine_window > 0 ? s->quarantine_window : 7 * 86400 * MEDIC_NS_PER_SEC;
    struct node_state *n = policy__node_get((struct policy_state *)st, in->node, 0);
    int64_t ids[16], keys[16];
    size_t actions = 0;
    size_t count = recent_incidents(n, now, window, ids, keys, 16, &actions);
    char w[32], list[200] = "";
    medic_duration_format(window, w, sizeof(w));
    for (size_t i = 0; i < count && i < 16; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof(list) - at, "%s%lld", i ? ", " : "", (long long)ids[i]);
    }
    struct medic_labels labels = {in->labels.items, in->labels.count};
    const char *gpu = medic_labels_get(&labels, "gpu");
    const char *uuid = medic_labels_get(&labels, "UUID");
    snprintf(out, size,
             "%zu failure(s) with repairs (drain, power cycle, GPU reset) within %s%s%s%s, %zu "
             "repair action(s); "
             "this incident's alert: %s%s%s%s%s%s",
             count, w, count ? " (ids " : "", list, count ? ")" : "", actions, in->alertname,
             gpu && gpu[0] ? ", GPU " : "", gpu ? gpu : "", uuid && uuid[0] ? " (" : "",
             uuid ? uuid : "", uuid && uuid[0] ? ")" : "");
}

void policy__quarantine(const struct policy_context *ctx, struct policy_state *st,
                        struct incident *in, int64_t now, struct policy_decisions *out,
                        const char *why)
{
    char because[sizeof(in->quarantine_why)];
    snprintf(because, sizeof(because), "%s", why);
    policy__touch_incident(in);
    in->quarantining = 0;
    in->closing = 0; /* its alerts may go: it still waits for a person */
    in->halted = 1;
    snprintf(in->halted_by, sizeof(in->halted_by), "the node is quarantined");
    snprintf(in->quarantine_why, sizeof(in->quarantine_why), "%s", because);
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 1) : NULL;
    int already = n && n->quarantined; /* another incident quarantined the node: told then */
    if (n && !n->quarantined) {
        int was = policy__node_disrupted(n);
        n->quarantined = 1;
        n->quarantined_at = now;
        policy__touch_node(st, n);
        policy__node_recount(st, n, was);
    }
    policy__incident_change(in, INCIDENT_QUARANTINED, -1, now, out, "quarantined: %s", because);
    if (already)
        return;
    char history[600], message[2048];
    history_text(ctx, st, in, now, history, sizeof(history));
    snprintf(message, sizeof(message),
             "medic quarantined node '%s' (incident %lld, policy %s): %s. It stays %s and medic "
             "takes no disruptive action on it until a person releases it after the repair: "
             "`medic node release %s --reason TEXT`%s%s. History: %s",
             in->node, (long long)in->id, in->policy, because, in->drained ? "drained" : "as it is",
             in->node, ctx->external_url ? " or on " : "",
             ctx->external_url ? ctx->external_url : "", history);
    policy__tell_oncall(ctx, in, now, out, message);
}

/* The time a verify gives the node: the ladder's verify's, else 10m. */
static int verify_within(const struct policy *pol)
{
    int within = MEDIC_VERIFY_DEFAULT_WITHIN;
    for (size_t k = 0; pol && k < pol->step_count; k++)
        if (pol->steps[k].action.kind == MEDIC_ACTION_VERIFY)
            within = pol->steps[k].action.u.verify.within;
    return within;
}

int policy__verify_first(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, struct incident *in, int64_t now,
                         struct policy_decisions *out)
{
    /* verified: a verify passed, and no step since changed the node */
    if (!pol->verify_before_resume || !in->drained || in->state == INCIDENT_VERIFIED ||
        !in->in_inventory || in->closing_as == INCIDENT_CLOSED)
        return 0;
    int resumes = 0;
    for (size_t k = 0; k < pol->on_resolved_count; k++)
        resumes |= pol->on_resolved[k].action.kind == MEDIC_ACTION_RESUME;
    /* another incident still holds the drain: its last holder verifies */
    if (!resumes || policy__holders(st, in->node, in, HOLD_DRAIN) > 0)
        return 0;
    int within = verify_within(pol);
    struct policy_decision *d = policy__incident_decision(out, in, now);
    if (!d)
        return 0;
    int live = ctx->live && !pol->dry_run;
    d->step = -1;
    d->on_resolved = 1;
    medic_action_init(&d->action, MEDIC_ACTION_VERIFY);
    d->action.u.verify.within = within;
    d->has_action = 1;
    d->verdict = live ? VERDICT_EXECUTE : VERDICT_DRY_RUN;
    snprintf(d->reason, sizeof(d->reason),
             "policy %s: %s, and the node was disrupted: it returns to service only once it "
             "passes a health check (verify_before_resume)%s",
             pol->name, in->closing_cause,
             live ? "" : (ctx->live ? "; the policy is dry_run" : "; medic is in dry-run mode"));
    policy__take_verify(in, d, live, now, out);
    return live;
}

/* "st", "nd", "rd" or "th", as English writes 1st, 2nd, 3rd, 11th. */
static const char *ordinal_suffix(size_t n)
{
    if (n % 100 >= 11 && n % 100 <= 13)
        return "th";
    return n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

int policy__repeat_offender(const struct policy_context *ctx, struct policy_state *st,
                            struct incident *in, struct policy_decision *d, int64_t now,
                            struct policy_decisions *out)
{
    const struct policy_safety *s = &ctx->policies->safety;
    if (!s->quarantine_incidents || !in->in_inventory || in->quarantining)
        return 0;
    struct node_state *n = policy__node_get(st, in->node, 0);
    int64_t ids[64], keys[64];
    size_t actions = 0;
    size_t count = recent_incidents(n, now, s->quarantine_window, ids, keys, 64, &actions);
    int counted = 0; /* this failure was repaired already (by this or another policy) */
    for (size_t i = 0; i < count && i < 64; i++)
        counted |= ids[i] == in->id || keys[i] == in->opened_at;
    if (count + !counted < s->quarantine_incidents)
        return 0;
    char w[32];
    medic_duration_format(s->quarantine_window, w, sizeof(w));
    size_t nth = count + !counted;
    snprintf(in->quarantine_why, sizeof(in->quarantine_why),
             "a repeat offender: incident %lld is the node's %zu%s failure with repairs (drain, "
             "power cycle, GPU reset) within %s, however many policies took each "
             "(safety.quarantine: %zu)",
             (long long)in->id, nth, ordinal_suffix(nth), w, s->quarantine_incidents);
    policy__touch_incident(in);
    if (n && n->drained_by_medic) { /* drained already: quarantined now */
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason), "not taken: the node is quarantined, %.400s",
                 in->quarantine_why);
        policy__quarantine(ctx, st, in, now, out, in->quarantine_why);
        return 1;
    }
    /* the step becomes the drain that keeps the node for a person */
    if (policy__quarantine_drain(in, &d->action))
        out->failed = MEDIC_E_NOMEM;
    in->quarantining = 1;
    return 0;
}

int policy__quarantine_drain(const struct incident *in, struct medic_action *a)
{
    /* Slurm's reason says why */
    char reason[200];
    snprintf(reason, sizeof(reason), "medic quarantine: repeat offender (medic policy %s)",
             in->policy);
    medic_action_release(a);
    medic_action_init(a, MEDIC_ACTION_DRAIN);
    return medic_action_set_text(a, "reason", reason, strlen(reason));
}

int policy__repair_outcome(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, struct incident *in,
                           enum medic_action_kind kind, enum medic_outcome outcome,
                           const char *cause, int64_t now, struct policy_decisions *out)
{
    int ok = outcome == MEDIC_OUTCOME_SUCCEEDED;
    if (in->quarantining) {
        /* a drain that found the node drained already says whose drain it is */
        int found = ok && kind == MEDIC_ACTION_DRAIN && !in->drained;
        char why[sizeof(in->quarantine_why)];
        snprintf(why, sizeof(why), "%.180s%s%.200s", in->quarantine_why,
                 found ? "; the node was drained already, not by medic: "
                 : ok  ? ""
                       : "; its drain: ",
                 ok && !found ? "" : cause);
        policy__quarantine(ctx, st, in, now, out, why);
        return 1;
    }
    if (ok)
        return 0;
    struct policy_decision *d;
    if (kind == MEDIC_ACTION_VERIFY && outcome == MEDIC_OUTCOME_INTERRUPTED &&
        (d = policy__incident_decision(out, in, now)) != NULL) {
        /* a verify only looks: one cut short by a stop looks again */
        d->step = -1;
        d->on_resolved = in->closing;
        medic_action_init(&d->action, MEDIC_ACTION_VERIFY);
        d->action.u.verify.within = verify_within(pol);
        d->has_action = 1;
        d->verdict = VERDICT_EXECUTE;
        snprintf(d->reason, sizeof(d->reason),
                 "the node's verify was cut short (%.300s): medic looks at it again", cause);
        policy__take_verify(in, d, 1, now, out);
        return 1;
    }
    if (pol && !in->closing && in->next_step < pol->step_count &&
        pol->steps[in->next_step].if_failed) {
        in->last_failed = 1;
        policy__incident_change(in, INCIDENT_OPEN, -1, now, out,
                                "%s; step %zu (%s) runs as its fallback", cause, in->next_step + 1,
                                medic_action_name(pol->steps[in->next_step].action.kind));
        return 1;
    }
    if (kind == MEDIC_ACTION_VERIFY) {
        char why[sizeof(in->quarantine_why)];
        snprintf(why, sizeof(why), "the node did not pass its health check: %s", cause);
        policy__quarantine(ctx, st, in, now, out, why);
        return 1;
    }
    return 0;
}

int policy_release(const struct policy_context *ctx, struct policy_state *st,
                   const struct policy_release *r, int64_t now, struct policy_decisions *out,
                   char *why, size_t why_size)
{
    const struct inventory_node *inv =
        ctx->inventory ? inventory_find(ctx->inventory, r->node) : NULL;
    const char *node = inv ? inv->name : r->node;
    char cause[600];
    snprintf(cause, sizeof(cause), "released by %s: %s", r->by,
             r->reason && r->reason[0] ? r->reason : "no reason given");
    size_t released = 0;
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *in = st->incidents[i];
        if (in->final || in->state != INCIDENT_QUARANTINED || strcmp(in->node, node) != 0)
            continue;
        released++;
        policy__touch_incident(in);
        in->closing = 1;
        in->closing_as = INCIDENT_RELEASED;
        snprintf(in->closing_cause, sizeof(in->closing_cause), "%.190s", cause);
        size_t before = out->count;
        policy__undo_holds(ctx, st, in, now, out);
        for (size_t k = before; k < out->count; k++)
            if (out->items[k].incident == in->id)
                snprintf(out->items[k].reason, sizeof(out->items[k].reason),
                         "%.200s: medic gives the node back (quarantined: %.250s)", cause,
                         in->quarantine_why);
        in->drained = 0;
        in->limit_watts = 0;
        if (in->undo_count > 0)
            policy__incident_change(in, INCIDENT_UNDOING, -1, now, out, "%s; undoing", cause);
        else
            policy__incident_final(st, in, INCIDENT_RELEASED, now, out, cause);
    }
    struct node_state *n = policy__node_get(st, node, 0);
    if (!released && !(n && n->quarantined)) {
        snprintf(why, why_size, "node '%s' is not quarantined (medic audit quarantined lists them)",
                 node);
        return MEDIC_E_NOTFOUND;
    }
    if (n && n->quarantined) {
        int was = policy__node_disrupted(n);
        n->quarantined = 0;
        policy__touch_node(st, n);
        policy__node_recount(st, n, was);
    }
    return out->failed;
}

int policy_quarantined(const struct policy_state *st, policy_quarantined_fn fn, void *arg)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (in->final || in->state != INCIDENT_QUARANTINED)
            continue;
        struct node_state *n = policy__node_get((struct policy_state *)st, in->node, 0);
        struct policy_quarantined_node q = {.node = in->node,
                                            .incident = in->id,
                                            .policy = in->policy,
                                            .since = n ? n->quarantined_at : 0,
                                            .why = in->quarantine_why,
                                            .drained = in->drained};
        int rc = fn(arg, &q);
        if (rc)
            return rc;
    }
    return 0;
}

void policy__take_verify(struct incident *in, struct policy_decision *d, int live, int64_t now,
                         struct policy_decisions *out)
{
    const char *which = d->step < 0 ? "a verify before the resume" : "verify";
    if (!live) { /* a dry run: as if the node passed at once */
        policy__incident_change(in, INCIDENT_VERIFIED, policy__decision_index(out, d), now, out,
                                "%s decided in dry-run", which);
        return;
    }
    if (policy__verify_evidence(in, &d->action))
        out->failed = MEDIC_E_NOMEM;
    d->awaited = 1;
    in->awaiting = 1;
    in->awaiting_decision = 0;
    in->awaiting_kind = MEDIC_ACTION_VERIFY;
    in->awaiting_watts = 0;
    policy__incident_change(in, INCIDENT_VERIFYING, policy__decision_index(out, d), now, out,
                            "%s decided: the node must pass within %ds", which,
                            d->action.u.verify.within);
}

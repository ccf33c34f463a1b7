/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decision about incident in at now, its verdict and action left to the
 * caller; NULL when it cannot be made (out->failed says why). */
struct policy_decision *policy__incident_decision(struct policy_decisions *out,
                                                  const struct incident *in, int64_t now)
{
    struct policy_decision *d = policy__new_decision(out);
    if (!d)
        return NULL;
    snprintf(d->node, sizeof(d->node), "%s", in->node);
    d->in_inventory = in->in_inventory;
    snprintf(d->alertname, sizeof(d->alertname), "%s", in->alertname);
    snprintf(d->fingerprint, sizeof(d->fingerprint), "%s",
             in->member_count ? in->members[0].fingerprint : "");
    snprintf(d->policy, sizeof(d->policy), "%s", in->policy);
    d->incident = in->id;
    d->risk = in->risk;
    d->time = now;
    return d;
}

static enum policy_incident_state acting_state(enum medic_action_kind kind)
{
    return kind == MEDIC_ACTION_DRAIN         ? INCIDENT_DRAINING
           : kind == MEDIC_ACTION_POWER_LIMIT ? INCIDENT_LIMITING
           : kind == MEDIC_ACTION_GPU_RESET   ? INCIDENT_RESETTING
           : kind == MEDIC_ACTION_VERIFY      ? INCIDENT_VERIFYING
                                              : INCIDENT_CYCLING;
}

static enum policy_incident_state done_state(enum medic_action_kind kind)
{
    return kind == MEDIC_ACTION_DRAIN         ? INCIDENT_DRAINED
           : kind == MEDIC_ACTION_POWER_LIMIT ? INCIDENT_LIMITED
           : kind == MEDIC_ACTION_GPU_RESET   ? INCIDENT_RESET
           : kind == MEDIC_ACTION_VERIFY      ? INCIDENT_VERIFIED
                                              : INCIDENT_CYCLED;
}

long policy__decision_index(const struct policy_decisions *out, const struct policy_decision *d)
{
    return d ? (long)(d - out->items) : -1;
}

/* Slurm's reason as a drain left it, from the drain's detail
 * (MEDIC_DRAIN_DETAIL_PREFIX); "" when the detail does not say (a dry run,
 * a node an operator had drained already). */
static void drained_as(const char *detail, char *out, size_t size)
{
    out[0] = '\0';
    if (!detail || strncmp(detail, MEDIC_DRAIN_DETAIL_PREFIX, strlen(MEDIC_DRAIN_DETAIL_PREFIX)))
        return;
    const char *r = strstr(detail, MEDIC_DRAIN_DETAIL_REASON);
    size_t len = r ? strlen(r += strlen(MEDIC_DRAIN_DETAIL_REASON)) : 0;
    if (len == 0 || r[len - 1] != '"' || len > size)
        return; /* cut short: unknown */
    snprintf(out, size, "%.*s", (int)(len - 1), r);
}

/* The reason medic's latest drain of node left: every incident holding
 * that drain resumes only while the node still shows it. */
static void set_drained_as(struct policy_state *st, const char *node, const char *reason)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *other = st->incidents[i];
        if (!other->final && other->drained && strcmp(other->node, node) == 0 &&
            strcmp(other->drained_as, reason) != 0) {
            snprintf(other->drained_as, sizeof(other->drained_as), "%s", reason);
            policy__touch_incident(other);
        }
    }
}

/* What a succeeded action of kind (a power limit of watts) means for the
 * node and the incident; undo: one of its on_resolved steps; detail: the
 * action's. */
static void succeeded(struct policy_state *st, struct incident *in, enum medic_action_kind kind,
                      int watts, int undo, const char *detail, int64_t now)
{
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 1) : NULL;
    policy__touch_incident(in);
    if (!n)
        return;
    int was = policy__node_disrupted(n);
    switch (kind) {
    case MEDIC_ACTION_DRAIN: {
        char reason[sizeof(in->drained_as)];
        if (detail &&
            strncmp(detail, MEDIC_DRAIN_FOUND_PREFIX, strlen(MEDIC_DRAIN_FOUND_PREFIX)) == 0)
            break; /* an operator's drain: medic holds nothing, and never undoes it */
        n->drained_by_medic = 1;
        n->drained_since = now;
        in->drained = 1;
        drained_as(detail, reason, sizeof(reason));
        set_drained_as(st, in->node, reason);
        break;
    }
    case MEDIC_ACTION_SLURM_REBOOT: {
        /* the reboot re-stamped medic's drain: a resume must find the new reason */
        const char *as = detail ? strstr(detail, "; " MEDIC_DRAIN_DETAIL_PREFIX) : NULL;
        char reason[sizeof(in->drained_as)];
        drained_as(as ? as + 2 : NULL, reason, sizeof(reason));
        if (n->drained_by_medic && reason[0])
            set_drained_as(st, in->node, reason);
        break;
    }
    case MEDIC_ACTION_POWER_LIMIT:
        n->limited_by_medic = 1;
        if (!undo) /* a raise back to another incident's limit holds nothing new */
            in->limit_watts = watts;
        break;
    case MEDIC_ACTION_RESUME:
        if (policy__holders(st, in->node, in, HOLD_DRAIN) == 0)
            n->drained_by_medic = 0;
        break;
    case MEDIC_ACTION_RESTORE_POWER_LIMIT:
        if (policy__holders(st, in->node, in, HOLD_LIMIT) == 0)
            n->limited_by_medic = 0;
        break;
    default:
        break;
    }
    policy__node_recount(st, n, was);
}

/* Why an undo step may not run ("" when it may); a restore that would
 * drop below another incident's stricter limit becomes a power_limit back
 * to that limit. */
static void check_undo(struct policy_state *st, struct incident *in, struct policy_decision *d,
                       char *reason, size_t size)
{
    policy__touch_incident(in);
    if (!in->in_inventory) {
        snprintf(reason, size, "node '%s' is not in the inventory", in->node);
        return;
    }
    if (d->action.kind == MEDIC_ACTION_RESUME) {
        int others = policy__holders(st, in->node, in, HOLD_DRAIN);
        if (!in->drained)
            snprintf(reason, size,
                     "this incident holds no drain on node '%s' (medic's drain did not "
                     "succeed, or an operator drained it): an operator's drain is never undone",
                     in->node);
        else if (others > 0)
            snprintf(reason, size,
                     "%d other incident(s) on node '%s' still hold its drain; the last to close "
                     "resumes it",
                     others, in->node);
        else if (in->drained_as[0] && medic_action_set_text(&d->action, "drained_as",
                                                            in->drained_as, strlen(in->drained_as)))
            snprintf(reason, size, "out of memory");
        in->drained = 0; /* it lets go either way */
        return;
    }
    /* restore_power_limit */
    int strictest = policy__strictest_limit(st, in->node, in);
    if (!in->limit_watts)
        snprintf(reason, size, "this incident holds no power limit on node '%s'", in->node);
    else if (strictest && strictest <= in->limit_watts)
        snprintf(reason, size,
                 "another incident on node '%s' holds a limit of %d W, as strict or stricter: "
                 "it stays",
                 in->node, strictest);
    else if (strictest) {
        medic_action_release(&d->action);
        medic_action_init(&d->action, MEDIC_ACTION_POWER_LIMIT);
        d->action.u.power_limit.watts = strictest;
    }
    in->limit_watts = 0;
}

/* Why a disruptive step may not run ("" when it may); *transient: the
 * reason clears by itself (the step is held). A power limit no stricter
 * than one another incident holds is not applied: the incident holds it
 * as well (it stays in force), and the ladder goes on (returns 1). */
int policy__check_disruptive(const struct policy_context *ctx, struct policy_state *st,
                             const struct policy *pol, struct incident *in,
                             struct policy_decision *d, int64_t now, char *reason, size_t size,
                             int *transient)
{
    *transient = 0;
    if (in->halted) {
        snprintf(reason, size, "the ladder stopped: %s", in->halted_by);
        return 0;
    }
    *transient = policy__check_guards(ctx, st, pol, in, now, reason, size);
    if (reason[0] || d->action.kind != MEDIC_ACTION_POWER_LIMIT)
        return 0;
    int strictest = policy__strictest_limit(st, in->node, in);
    if (strictest && strictest <= d->action.u.power_limit.watts) {
        snprintf(reason, size,
                 "node '%s' is already held at %d W by another incident: a weaker limit never "
                 "raises it",
                 in->node, strictest);
        return 1;
    }
    return 0;
}

static void decide_step(const struct policy_context *ctx, struct policy_state *st,
                        const struct policy *pol, struct incident *in,
                        const struct policy_step *step, int index, int on_resolved, int64_t now,
                        struct policy_decisions *out);

void policy__decide_step(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, struct incident *in,
                         const struct policy_step *step, int index, int on_resolved, int64_t now,
                         struct policy_decisions *out)
{
    size_t at = out->count;
    decide_step(ctx, st, pol, in, step, index, on_resolved, now, out);
    if (at >= out->count || out->items[at].incident != in->id || !out->items[at].has_action)
        return;
    const struct policy_decision *d = &out->items[at];
    const char *what = d->verdict == VERDICT_EXECUTE        ? "decided"
                       : d->verdict == VERDICT_PENDING      ? "waits for a person's approval"
                       : d->verdict == VERDICT_DRY_RUN      ? "decided in dry-run"
                       : strncmp(d->reason, "held", 4) == 0 ? "held"
                                                            : "not taken";
    policy__remember_step(
        in, d->action.kind, what,
        d->verdict == VERDICT_EXECUTE || d->verdict == VERDICT_PENDING ? NULL : d->reason);
}

static void decide_step(const struct policy_context *ctx, struct policy_state *st,
                        const struct policy *pol, struct incident *in,
                        const struct policy_step *step, int index, int on_resolved, int64_t now,
                        struct policy_decisions *out)
{
    struct policy_decision *d = policy__incident_decision(out, in, now);
    policy__touch_incident(in);
    if (!d)
        return;
    d->step = index;
    d->on_resolved = on_resolved;
    d->disruptive = medic_action_disruptive(step->action.kind);
    if (policy__build_action(step, in, d)) {
        out->failed = MEDIC_E_NOMEM;
        return;
    }
    char reason[sizeof(d->reason)] = "";
    int weaker = 0;    /* a weaker power limit: kept by the incident, not applied */
    int transient = 0; /* a guard that clears by itself: the step is held */
    enum medic_action_kind kind = step->action.kind;
    if (!on_resolved)
        in->held = 0;
    if (kind == MEDIC_ACTION_RESUME || kind == MEDIC_ACTION_RESTORE_POWER_LIMIT)
        check_undo(st, in, d, reason, sizeof(reason));
    else if (kind == MEDIC_ACTION_VERIFY && in->halted) /* nothing was repaired to check */
        snprintf(reason, sizeof(reason), "the ladder stopped: %s", in->halted_by);
    else if (d->disruptive)
        weaker =
            policy__check_disruptive(ctx, st, pol, in, d, now, reason, sizeof(reason), &transient);
    if (reason[0]) {
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason), "%s", reason);
        if (transient && !on_resolved) {
            /* held, not dropped: decided again once the guard clears, while
             * the alert is fresh (policy__run_due_steps) */
            in->held = 1;
            in->next_step = (size_t)index;
            snprintf(in->held_by, sizeof(in->held_by), "%.*s", (int)sizeof(in->held_by) - 1,
                     reason);
            snprintf(d->reason, sizeof(d->reason),
                     "held: %.400s; step %d is decided again when that clears, while the alert "
                     "is fresh",
                     reason, index + 1);
        } else if (weaker) {
            in->acted = 1;
            in->limit_watts = step->action.u.power_limit.watts;
            policy__incident_change(in, INCIDENT_LIMITED, policy__decision_index(out, d), now, out,
                                    "step %d (power_limit %d W) held: a stricter limit is in "
                                    "force",
                                    index + 1, in->limit_watts);
        } else if (d->disruptive && !in->halted) {
            in->halted = 1;
            in->stale_step = strstr(reason, POLICY_STALE_REASON) ? index + 1 : 0;
            snprintf(in->halted_by, sizeof(in->halted_by), "step %d (%s) was suppressed: %.250s",
                     index + 1, medic_action_name(kind), reason);
        }
        /* a broken node stays in service: on-call hears of it in the next
         * held steps' notice */
        if (d->disruptive && !on_resolved && !weaker && !in->unreported &&
            policy__guard_worth_telling(reason)) {
            in->unreported = 1;
            st->unreported++;
        }
        return;
    }
    if (pol && !on_resolved && d->disruptive && policy__repeat_offender(ctx, st, in, d, now, out))
        return;
    if (pol && !on_resolved && d->disruptive && policy__needs_approval(ctx, pol, step)) {
        if (!policy__take_approved(ctx, st, pol, in, d, step, index, now, out))
            policy__await_approval(ctx, pol, in, d, index, now, out);
        return;
    }
    policy__take_step(ctx, st, pol, in, d, step, index, on_resolved, "", now, out);
}

/* The step, every guard passed, executed (or decided in a dry run): the
 * reason says why, after prefix (who approved it). */
void policy__take_step(const struct policy_context *ctx, struct policy_state *st,
                       const struct policy *pol, struct incident *in, struct policy_decision *d,
                       const struct policy_step *step, int index, int on_resolved,
                       const char *prefix, int64_t now, struct policy_decisions *out)
{
    /* a ladder step may have become the drain that quarantines its node */
    enum medic_action_kind kind = on_resolved ? step->action.kind : d->action.kind;
    int live = ctx->live && (!pol || !pol->dry_run);
    d->verdict = live ? VERDICT_EXECUTE : VERDICT_DRY_RUN;
    const char *mode =
        live ? "" : (ctx->live ? "; the policy is dry_run" : "; medic is in dry-run mode");
    char after[32];
    medic_duration_format(step->after, after, sizeof(after));
    if (!pol)
        snprintf(d->reason, sizeof(d->reason),
                 "policy %s is no longer configured (a reload removed or renamed it): medic "
                 "undoes what it did for the incident%s",
                 in->policy, mode);
    else if (on_resolved)
        snprintf(d->reason, sizeof(d->reason), "policy %s: the incident's alerts are gone%s",
                 pol->name, mode);
    else if (in->quarantining)
        snprintf(d->reason, sizeof(d->reason),
                 "%spolicy %s step %d becomes a drain: %.300s; the node is quarantined once it "
                 "is drained%s",
                 prefix, pol->name, index + 1, in->quarantine_why, mode);
    else if (step->after_previous)
        snprintf(d->reason, sizeof(d->reason), "%spolicy %s step %d: %s after step %d ended%s",
                 prefix, pol->name, index + 1, after, index, mode);
    else
        snprintf(d->reason, sizeof(d->reason), "%spolicy %s step %d: firing for %s or more%s",
                 prefix, pol->name, index + 1, after, mode);
    in->acted = 1;
    if (!on_resolved) { /* its outcome, when it has one, moves this on */
        in->step_ended_at = now;
        policy__touch_incident(in);
    }
    if (!in->in_inventory || kind == MEDIC_ACTION_NOTIFY)
        return;
    if (kind == MEDIC_ACTION_VERIFY) {
        policy__take_verify(in, d, live, now, out);
        return;
    }
    if (!live) { /* a dry run: as if it succeeded at once */
        succeeded(st, in, kind, d->action.u.power_limit.watts, on_resolved, NULL, now);
        if (d->disruptive) {
            policy__record_action(ctx, st, pol, in, kind, now);
            policy__incident_change(in, done_state(kind), policy__decision_index(out, d), now, out,
                                    "step %d (%s) decided in dry-run", index + 1,
                                    medic_action_name(kind));
            if (in->quarantining)
                policy__quarantine(ctx, st, in, now, out, in->quarantine_why);
        }
        return;
    }
    if (on_resolved || !d->disruptive) {
        if (in->undo_count < INCIDENT_MAX_UNDO) {
            d->awaited = 1;
            in->undo[in->undo_count].decision = 0;
            in->undo[in->undo_count++].kind = d->action.kind;
        }
        return;
    }
    d->awaited = 1;
    in->awaiting_since = now; /* the command leaves after this */
    struct node_state *n = policy__node_get(st, in->node, 1);
    if (n) {
        int was = policy__node_disrupted(n);
        n->acting++;
        policy__node_recount(st, n, was);
    }
    policy__record_action(ctx, st, pol, in, kind, now);
    /* after the ladder's drain, also one that found an operator's drain
     * (medic holds nothing then, but the node must still be drained) */
    int drained_before = in->drained;
    for (int k = 0; pol && k < index && (size_t)k < pol->step_count; k++)
        drained_before |=
            pol->steps[k].action.kind == MEDIC_ACTION_DRAIN && !pol->steps[k].if_failed;
    d->require_drained =
        (kind == MEDIC_ACTION_IPMI_POWER_CYCLE || kind == MEDIC_ACTION_GPU_RESET) && drained_before;
    in->awaiting = 1;
    in->awaiting_decision = 0;
    in->awaiting_kind = kind;
    in->awaiting_watts = kind == MEDIC_ACTION_POWER_LIMIT ? d->action.u.power_limit.watts : 0;
    policy__incident_change(in, acting_state(kind), policy__decision_index(out, d), now, out,
                            "step %d (%s) decided", index + 1, medic_action_name(kind));
}

/* Whether the step the incident holds is still held: its guard (or
 * another that clears by itself) still says no. Nothing is recorded while
 * it does; once it does not, the step is decided again, by every guard. */
static int still_held(const struct policy_context *ctx, struct policy_state *st,
                      const struct policy *pol, const struct incident *in, int64_t now)
{
    char reason[sizeof(in->held_by)];
    return policy__check_guards(ctx, st, pol, in, now, reason, sizeof(reason)) && reason[0];
}

void policy__run_due_steps(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, struct incident *in, int64_t now,
                           struct policy_decisions *out)
{
    while (!in->awaiting && !in->pending && in->state != INCIDENT_FAILED &&
           in->state != INCIDENT_UNDOING && in->state != INCIDENT_QUARANTINED &&
           in->member_count > 0 && in->next_step < pol->step_count &&
           now >= policy__step_due(in, &pol->steps[in->next_step])) {
        const struct policy_step *step = &pol->steps[in->next_step];
        if (step->if_failed && policy__skip_fallback(pol, in, in->next_step, now, out)) {
            in->next_step++;
            continue;
        }
        /* after a restart, nothing disruptive before the alert is seen again
         * or safety.restart_grace has passed (Alertmanager's retries, a
         * resolve sent while medic was down, have come by then) */
        int fresh = 1;
        if (medic_action_disruptive(step->action.kind) && !in->halted &&
            !(fresh = policy__incident_fresh(in, ctx->policies->safety.restart_grace, now)))
            return;
        if (in->held && still_held(ctx, st, pol, in, now))
            return;
        size_t k = in->next_step++, before = out->count;
        policy__touch_incident(in);
        policy__decide_step(ctx, st, pol, in, step, (int)k, 0, now, out);
        if (fresh == 2 && out->count > before) {
            struct policy_decision *d = &out->items[out->count - 1];
            size_t at = strlen(d->reason);
            snprintf(d->reason + at, sizeof(d->reason) - at,
                     "; medic restarted and no alert of the incident was re-sent within "
                     "safety.restart_grace: decided from the stored state");
        }
    }
}

void policy__undo_holds(const struct policy_context *ctx, struct policy_state *st,
                        struct incident *in, int64_t now, struct policy_decisions *out)
{
    static const enum medic_action_kind kinds[] = {MEDIC_ACTION_RESUME,
                                                   MEDIC_ACTION_RESTORE_POWER_LIMIT};
    for (size_t i = 0; i < 2; i++) {
        if ((i == 0 && !in->drained) || (i == 1 && !in->limit_watts))
            continue;
        struct policy_step step = {0};
        medic_action_init(&step.action, kinds[i]);
        policy__decide_step(ctx, st, NULL, in, &step, (int)i, 1, now, out);
    }
}

void policy__undo(const struct policy_context *ctx, struct policy_state *st, struct incident *in,
                  enum policy_incident_state final, int64_t now, struct policy_decisions *out,
                  const char *why)
{
    policy__touch_incident(in);
    if (in->state == INCIDENT_QUARANTINED)
        return; /* it waits for a person: policy_release */
    policy__withdraw_pending(ctx, in, now, out, why);
    if (!in->closing) {
        in->closing = 1;
        in->closing_as = final;
        if (why != in->closing_cause)
            snprintf(in->closing_cause, sizeof(in->closing_cause), "%s", why);
    }
    if (in->awaiting) /* undone once the action in flight has its outcome */
        return;
    const struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 0) : NULL;
    if (n && n->quarantined && (in->drained || in->limit_watts)) {
        /* quarantine is the node's, not one incident's: what this one
         * holds stays until a person releases the node */
        char why_held[400];
        snprintf(why_held, sizeof(why_held),
                 "%.200s; the node is quarantined, so what policy %.64s holds on it stays until "
                 "a person releases it",
                 in->closing_cause, in->policy);
        policy__quarantine(ctx, st, in, now, out, why_held);
        return;
    }
    const struct policy *pol = policy__incident_policy(ctx, in);
    if (pol && in->acted && policy__verify_first(ctx, st, pol, in, now, out))
        return; /* the undo goes on once the node passed */
    if (!pol)
        policy__undo_holds(ctx, st, in, now, out);
    else if (in->acted)
        for (size_t k = 0; k < pol->on_resolved_count; k++)
            policy__decide_step(ctx, st, pol, in, &pol->on_resolved[k], (int)k, 1, now, out);
    if (pol && (in->drained || in->limit_watts) && in->in_inventory) {
        /* what medic holds and will not undo itself waits for a person */
        char why_held[400];
        snprintf(why_held, sizeof(why_held),
                 "%s; policy %s holds the node %s%s%s and does not undo it: held for a person",
                 in->closing_cause, in->policy, in->drained ? "drained" : "",
                 in->drained && in->limit_watts ? " and " : "",
                 in->limit_watts ? "power-limited" : "");
        in->closing = 0;
        policy__quarantine(ctx, st, in, now, out, why_held);
        return;
    }
    /* holds no step undid are let go (the node stays as it is) */
    in->drained = 0;
    in->limit_watts = 0;
    if (in->undo_count > 0) {
        policy__incident_change(in, INCIDENT_UNDOING, -1, now, out, "%s; undoing",
                                in->closing_cause);
        return;
    }
    policy__incident_final(st, in, in->closing_as, now, out, in->closing_cause);
}

/* medic's drain of in's node is not there any more (someone else's
 * reason replaced it): when no other incident holds it, the node no
 * longer counts as drained by medic. */
static void let_go_of_drain(struct policy_state *st, struct incident *in)
{
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 0) : NULL;
    in->drained = 0;
    if (!n || !n->drained_by_medic || policy__holders(st, in->node, in, HOLD_DRAIN) > 0)
        return;
    int was = policy__node_disrupted(n);
    n->drained_by_medic = 0;
    policy__touch_node(st, n);
    policy__node_recount(st, n, was);
}

/* The outcome of undo action i. */
static void undo_outcome(const struct policy_context *ctx, struct policy_state *st,
                         struct incident *in, int i, enum medic_outcome outcome, const char *detail,
                         int64_t now, struct policy_decisions *out)
{
    policy__touch_incident(in);
    enum medic_action_kind kind = in->undo[i].kind;
    memmove(&in->undo[i], &in->undo[i + 1], (size_t)(in->undo_count - i - 1) * sizeof(in->undo[0]));
    in->undo_count--;
    /* a resume that was tried and may not have happened, or that its fence
     * did not send (the lease lapsed), leaves medic's drain where it was:
     * the node is held for a person (never counted as disrupted for ever
     * with no way out); one refused because the drain is someone else's
     * now lets go of it */
    int fenced = outcome == MEDIC_OUTCOME_REFUSED && detail &&
                 strncmp(detail, MEDIC_FENCED_PREFIX, strlen(MEDIC_FENCED_PREFIX)) == 0;
    int still_drained = kind == MEDIC_ACTION_RESUME && outcome != MEDIC_OUTCOME_SUCCEEDED &&
                        (outcome != MEDIC_OUTCOME_REFUSED || fenced);
    if (outcome == MEDIC_OUTCOME_SUCCEEDED) {
        succeeded(st, in, kind, 0, 1, detail, now);
    } else if (still_drained) {
        in->drained = 1;
    } else {
        if (kind == MEDIC_ACTION_RESUME)
            let_go_of_drain(st, in);
        char message[2048];
        snprintf(message, sizeof(message),
                 "medic could not undo what it did on node '%s' for incident %lld (policy %s): "
                 "%s %s%s%s. The node stays as it is; check it",
                 in->node, (long long)in->id, in->policy, medic_action_name(kind),
                 medic_outcome_name(outcome), detail && *detail ? ": " : "", detail ? detail : "");
        policy__tell_oncall(ctx, in, now, out, message);
    }
    if (in->undo_count == 0) {
        char cause[1400];
        snprintf(cause, sizeof(cause), "%s; %s %s%s%s", in->closing_cause, medic_action_name(kind),
                 medic_outcome_name(outcome), detail && *detail ? ": " : "", detail ? detail : "");
        if (in->drained) {
            char why[400];
            snprintf(why, sizeof(why),
                     "medic's resume %.16s (%.200s): the node may still carry medic's drain; "
                     "held for a person, who releases it once checked (medic resumes it then)",
                     medic_outcome_name(outcome), detail ? detail : "");
            policy__quarantine(ctx, st, in, now, out, why);
            return;
        }
        if (!in->closing) { /* undone at a person's word (deny --undo): open until its alerts go */
            policy__incident_change(in, INCIDENT_OPEN, -1, now, out, "undone as asked: %s %s",
                                    medic_action_name(kind), medic_outcome_name(outcome));
            return;
        }
        policy__incident_final(st, in, in->closing_as, now, out, cause);
    }
}

/* A disruptive step refused before its first command because a pause or
 * a storm came on after it was decided (MEDIC_HELD_PREFIX): held, not
 * dropped (invariant 11). The step is decided again once the guard clears,
 * while its alert is fresh; one a person approved runs then without asking
 * again. Returns 1 when it took the outcome. */
static int held_before_start(const struct policy_context *ctx, struct policy_state *st,
                             const struct policy *pol, struct incident *in,
                             enum medic_action_kind kind, enum medic_outcome outcome,
                             const char *detail, int64_t now, struct policy_decisions *out)
{
    if (outcome != MEDIC_OUTCOME_REFUSED || !detail ||
        strncmp(detail, MEDIC_HELD_PREFIX, strlen(MEDIC_HELD_PREFIX)) != 0 || !pol || in->closing ||
        in->quarantining || kind == MEDIC_ACTION_VERIFY || in->next_step == 0 ||
        in->next_step > pol->step_count)
        return 0;
    size_t index = in->next_step - 1; /* the step awaited: none was decided since */
    const struct policy_step *step = &pol->steps[index];
    if (step->action.kind != kind)
        return 0;
    if (policy__needs_approval(ctx, pol, step)) {
        /* the person approved this very action: it runs once the guard
         * clears, as an approval a guard held at the answer */
        struct policy_decision d;
        memset(&d, 0, sizeof(d));
        char *offer = policy__offered_action(step, in, &d) ? NULL : policy__offer_text(&d.action);
        medic_action_release(&d.action);
        if (offer) {
            free(in->approved_offer);
            in->approved_offer = offer;
            snprintf(in->approved_by, sizeof(in->approved_by), "the person who approved it");
            snprintf(in->approved_reason, sizeof(in->approved_reason),
                     "approved before it was held");
            in->approved_until = now + pol->approval_timeout;
        }
    }
    in->held = 1;
    in->next_step = index;
    snprintf(in->held_by, sizeof(in->held_by), "%.*s", (int)sizeof(in->held_by) - 1,
             detail + strlen(MEDIC_HELD_PREFIX));
    /* the action that did not start holds nothing it did not hold before */
    policy__forget_action(st, in);
    enum policy_incident_state back = in->drained       ? INCIDENT_DRAINED
                                      : in->limit_watts ? INCIDENT_LIMITED
                                                        : INCIDENT_OPEN;
    policy__incident_change(in, back, -1, now, out,
                            "step %zu (%s) %.300s: decided again when that clears", index + 1,
                            medic_action_name(kind), detail);
    return 1;
}

void policy__apply_outcome(const struct policy_context *ctx, struct policy_state *st,
                           struct incident *in, int64_t decision_id, enum medic_outcome outcome,
                           const char *detail, int64_t now, struct policy_decisions *out)
{
    if (!in->awaiting || (decision_id && in->awaiting_decision != decision_id)) {
        for (int i = 0; i < in->undo_count; i++)
            if (!decision_id || in->undo[i].decision == decision_id) {
                undo_outcome(ctx, st, in, i, outcome, detail, now, out);
                return;
            }
        return; /* not awaited (any more) */
    }
    enum medic_action_kind kind = in->awaiting_kind;
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 1) : NULL;
    policy__touch_incident(in);
    in->awaiting = 0;
    in->awaiting_decision = 0;
    in->step_ended_at = now; /* after_from: previous counts from here */
    if (n && n->acting > 0) {
        int was = policy__node_disrupted(n);
        n->acting--;
        policy__node_recount(st, n, was);
    }
    char cause[1400];
    snprintf(cause, sizeof(cause), "%s %s%s%s", medic_action_name(kind),
             medic_outcome_name(outcome), detail && *detail ? ": " : "", detail ? detail : "");
    policy__remember_step(in, kind, medic_outcome_name(outcome), detail);
    const struct policy *pol = policy__incident_policy(ctx, in);
    if (held_before_start(ctx, st, pol, in, kind, outcome, detail, now, out))
        return;
    if (outcome == MEDIC_OUTCOME_SUCCEEDED) {
        succeeded(st, in, kind, in->awaiting_watts, 0, detail, now);
        in->last_failed = 0;
        if (kind == MEDIC_ACTION_IPMI_POWER_CYCLE || kind == MEDIC_ACTION_SLURM_REBOOT)
            /* a boot must come after it was sent */
            in->cycled_at = in->awaiting_since ? in->awaiting_since : now;
        if (kind == MEDIC_ACTION_GPU_RESET) /* and the GPU enumerated after its reset */
            in->reset_at = in->awaiting_since ? in->awaiting_since : now;
        policy__incident_change(in, done_state(kind), -1, now, out, "%s", cause);
    }
    if (policy__repair_outcome(ctx, st, pol, in, kind, outcome, cause, now, out)) {
        if (in->state != INCIDENT_QUARANTINED && pol && !in->closing)
            policy__run_due_steps(ctx, st, pol, in, now, out);
        return;
    }
    if (outcome != MEDIC_OUTCOME_SUCCEEDED) {
        in->halted = 1;
        snprintf(in->halted_by, sizeof(in->halted_by), "step %zu (%s) %s", in->next_step,
                 medic_action_name(kind), medic_outcome_name(outcome));
        policy__incident_change(in, INCIDENT_FAILED, -1, now, out, "%s", cause);
        char message[2048];
        snprintf(message, sizeof(message),
                 "medic stopped incident %lld (policy %s) on node '%s': %s. Later steps are not "
                 "taken; check the node",
                 (long long)in->id, in->policy, in->node, cause);
        policy__tell_oncall(ctx, in, now, out, message);
    }
    if (in->closing) /* its alerts went, or its policy, while the action ran */
        policy__undo(ctx, st, in, in->closing_as, now, out, in->closing_cause);
    else if (pol && outcome == MEDIC_OUTCOME_SUCCEEDED)
        policy__run_due_steps(ctx, st, pol, in, now, out);
}

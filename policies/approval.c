/* SPDX-License-Identifier: Apache-2.0 */
/* A person's approval of a disruptive step (approve mode, policy
 * approval: required): the step waits in state pending until it is
 * approved (every guard checked again), denied, withdrawn or expired. */
#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

int policy__needs_approval(const struct policy_context *ctx, const struct policy *pol,
                           const struct policy_step *step)
{
    int approval = step && step->approval != POLICY_APPROVAL_MODE ? step->approval : pol->approval;
    if (!ctx->live || pol->dry_run || approval == POLICY_APPROVAL_NONE)
        return 0;
    return approval == POLICY_APPROVAL_REQUIRED || ctx->approve;
}

char *policy__offer_text(const struct medic_action *a)
{
    struct medic_buf b;
    medic_buf_init(&b, 0);
    if (medic_buf_printf(&b, "%s ", medic_action_name(a->kind)) ||
        medic_action_params_json(a, &b)) {
        medic_buf_release(&b);
        return NULL;
    }
    return b.data; /* the caller owns it */
}

int policy__offered_action(const struct policy_step *step, const struct incident *in,
                           struct policy_decision *d)
{
    int rc = policy__build_action(step, in, d);
    if (rc == 0 && in->quarantining)
        rc = policy__quarantine_drain(in, &d->action);
    return rc;
}

static void forget_approved(struct incident *in)
{
    free(in->approved_offer);
    in->approved_offer = NULL;
    in->approved_by[0] = in->approved_reason[0] = '\0';
    in->approved_until = 0;
    policy__touch_incident(in);
}

int policy__take_approved(const struct policy_context *ctx, struct policy_state *st,
                          const struct policy *pol, struct incident *in, struct policy_decision *d,
                          const struct policy_step *step, int index, int64_t now,
                          struct policy_decisions *out)
{
    if (!in->approved_offer)
        return 0;
    char *offer = policy__offer_text(&d->action);
    int same = offer && strcmp(offer, in->approved_offer) == 0 && now < in->approved_until;
    free(offer);
    if (!same) { /* expired, or no longer the step approved: a person is asked again */
        forget_approved(in);
        return 0;
    }
    char prefix[400];
    snprintf(prefix, sizeof(prefix),
             "approved by %.100s (%.150s), held until the guard cleared: ", in->approved_by,
             in->approved_reason);
    forget_approved(in);
    policy__take_step(ctx, st, pol, in, d, step, index, 0, prefix, now, out);
    return 1;
}

/* The step, every guard passed, waits for a person: decided pending, the
 * incident in state pending until it is approved, denied, withdrawn or
 * expires. */
void policy__await_approval(const struct policy_context *ctx, const struct policy *pol,
                            struct incident *in, struct policy_decision *d, int index, int64_t now,
                            struct policy_decisions *out)
{
    char timeout[32], until[40];
    medic_duration_format(pol->approval_timeout, timeout, sizeof(timeout));
    in->pending = 1;
    in->pending_step = (size_t)index;
    in->pending_until = now + pol->approval_timeout;
    in->pending_since = now;
    in->pending_decision = 0;
    in->pending_from = in->state;
    free(in->pending_offer);
    if (!(in->pending_offer = policy__offer_text(&d->action)))
        out->failed = MEDIC_E_NOMEM;
    medic_time_format(in->pending_until, until, sizeof(until));
    d->verdict = VERDICT_PENDING;
    snprintf(d->reason, sizeof(d->reason),
             "policy %.64s step %d waits for a person's approval until %s (approval_timeout %s): "
             "approved with every guard still holding, medic runs exactly %.90s on node "
             "'%.64s'; denied, expired or withdrawn, it never runs",
             pol->name, index + 1, until, timeout,
             in->pending_offer ? in->pending_offer : medic_action_name(d->action.kind), in->node);
    policy__incident_change(in, INCIDENT_PENDING, policy__decision_index(out, d), now, out,
                            "step %d (%s) waits for approval until %s", index + 1,
                            medic_action_name(d->action.kind), until);
    /* on-call hears of it, with where to answer: once the decision has
     * its id when the caller gives ids (the next tick), else now */
    in->pending_told = 0;
    if (!ctx->decision_ids)
        policy__tell_pending(ctx, pol, in, now, out);
}

void policy__tell_pending(const struct policy_context *ctx, const struct policy *pol,
                          struct incident *in, int64_t now, struct policy_decisions *out)
{
    char until[40], id[32] = "ID", why[240] = "", next[160] = "the ladder ends there";
    medic_time_format(in->pending_until, until, sizeof(until));
    if (in->pending_decision > 0)
        snprintf(id, sizeof(id), "%lld", (long long)in->pending_decision);
    /* why: the alert and its labels (GPU, Xid), the node's name aside */
    for (size_t i = 0; i < in->labels.count; i++) {
        const struct medic_label *l = &in->labels.items[i];
        if (strcmp(l->name, "alertname") == 0 || strcmp(l->name, "instance") == 0)
            continue;
        size_t at = strlen(why);
        snprintf(why + at, sizeof(why) - at, "%s%s=%s", at ? ", " : "", l->name, l->value);
    }
    if (pol && in->pending_step + 1 < pol->step_count) {
        char after[32];
        medic_duration_format(pol->steps[in->pending_step + 1].after, after, sizeof(after));
        snprintf(next, sizeof(next), "then step %zu: %s, %s after %s", in->pending_step + 2,
                 medic_action_name(pol->steps[in->pending_step + 1].action.kind), after,
                 pol->steps[in->pending_step + 1].after_previous ? "this step ends"
                                                                 : "the alert started");
    }
    const char *url = ctx->external_url;
    char message[2600];
    snprintf(message, sizeof(message),
             "waits for your approval until %s: %.500s on node '%.128s' (policy %.64s step %zu, "
             "incident %lld), for %.128s (%.240s). Approved, medic runs exactly that; %.160s. "
             "Answer with `medic approve %s --reason TEXT` or `medic deny %s --reason TEXT "
             "[--undo]`%s%.300s%s%.128s",
             until, in->pending_offer ? in->pending_offer : "the step", in->node, in->policy,
             in->pending_step + 1, (long long)in->id, in->alertname, why[0] ? why : "no labels",
             next, id, id, url ? ", or on " : "", url ? url : "",
             !url                       ? ""
             : in->pending_decision > 0 ? "/approvals/"
                                        : "/nodes/",
             !url                       ? ""
             : in->pending_decision > 0 ? id
                                        : in->node);
    in->pending_told = 1;
    policy__touch_incident(in);
    policy__tell_oncall(ctx, in, now, out, message);
}

/* The pending step of in ends without running: its decision says why
 * (verdict suppressed), the ladder stops there, and the incident goes back
 * to the state it waited in. */
static void end_pending(const struct policy *pol, struct incident *in, int64_t now,
                        struct policy_decisions *out, const char *why)
{
    struct policy_decision *d = policy__incident_decision(out, in, now);
    in->pending = 0;
    free(in->pending_offer);
    in->pending_offer = NULL;
    policy__touch_incident(in);
    if (!d)
        return;
    d->step = (int)in->pending_step;
    d->disruptive = 1;
    d->verdict = VERDICT_SUPPRESSED;
    if (pol && in->pending_step < pol->step_count &&
        policy__offered_action(&pol->steps[in->pending_step], in, d))
        out->failed = MEDIC_E_NOMEM;
    snprintf(d->reason, sizeof(d->reason), "%s", why);
    policy__remember_step(in, d->action.kind, "not run", why);
    if (!in->halted) {
        in->halted = 1;
        snprintf(in->halted_by, sizeof(in->halted_by), "step %zu was not approved",
                 in->pending_step + 1);
    }
    policy__incident_change(in, in->pending_from, policy__decision_index(out, d), now, out, "%s",
                            why);
}

void policy__withdraw_pending(const struct policy_context *ctx, struct incident *in, int64_t now,
                              struct policy_decisions *out, const char *because)
{
    if (!in->pending)
        return;
    char why[300];
    snprintf(why, sizeof(why), "step %zu withdrawn before anyone approved it: %s",
             in->pending_step + 1, because);
    end_pending(policy__incident_policy(ctx, in), in, now, out, why);
}

void policy__expire_pending(const struct policy_context *ctx, struct incident *in, int64_t now,
                            struct policy_decisions *out)
{
    if (!in->pending || now < in->pending_until)
        return;
    const struct policy *pol = policy__incident_policy(ctx, in);
    char why[300], timeout[32];
    medic_duration_format(pol ? pol->approval_timeout : 0, timeout, sizeof(timeout));
    snprintf(why, sizeof(why),
             "step %zu expired: nobody approved it within approval_timeout %s, and it never "
             "runs late",
             in->pending_step + 1, timeout);
    end_pending(pol, in, now, out, why);
}

/* After a denial: the node medic holds drained or limited stays so for a
 * person (quarantined: the person repairs it and releases it), unless the
 * person asked medic to undo what the incident holds; then that is undone
 * now and the incident stays open (its ladder stopped) until its alerts go. */
static void deny_holds(const struct policy_context *ctx, struct policy_state *st,
                       struct incident *in, const struct policy_approval *a, int64_t now,
                       struct policy_decisions *out, const char *why)
{
    const struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 0) : NULL;
    if (a->undo) {
        size_t before = out->count;
        policy__undo_holds(ctx, st, in, now, out);
        for (size_t k = before; k < out->count; k++)
            if (out->items[k].incident == in->id)
                snprintf(out->items[k].reason, sizeof(out->items[k].reason),
                         "%.400s: medic gives the node back", why);
        return;
    }
    if (!(in->drained || in->limit_watts || (n && (n->drained_by_medic || n->limited_by_medic))))
        return; /* medic holds nothing there: the node is in service */
    char held[400];
    snprintf(held, sizeof(held),
             "%.250s; held for a person: the node stays as medic holds it until released "
             "(medic node release), or deny with --undo for medic to give it back",
             why);
    policy__quarantine(ctx, st, in, now, out, held);
}

int policy__answer_pending(const struct policy_context *ctx, struct policy_state *st,
                           struct incident *in, const struct policy_approval *a, int64_t now,
                           struct policy_decisions *out)
{
    const struct policy *pol = policy__incident_policy(ctx, in);
    char why[480];
    const char *reason = a->reason && a->reason[0] ? a->reason : "no reason given";
    if (!a->approve) {
        snprintf(why, sizeof(why), "step %zu denied by %.100s: %.300s%s", in->pending_step + 1,
                 a->by, reason, a->undo ? "; medic undoes what the incident holds, as asked" : "");
        end_pending(pol, in, now, out, why);
        deny_holds(ctx, st, in, a, now, out, why);
        return 0;
    }
    if (!pol || in->pending_step >= pol->step_count) {
        snprintf(why, sizeof(why),
                 "step %zu approved by %s, but its policy %s is no longer configured: not run",
                 in->pending_step + 1, a->by, in->policy);
        end_pending(NULL, in, now, out, why);
        return 0;
    }
    const struct policy_step *step = &pol->steps[in->pending_step];
    struct policy_decision *d = policy__incident_decision(out, in, now);
    if (!d)
        return out->failed;
    d->step = (int)in->pending_step;
    d->disruptive = 1;
    char *offer = NULL;
    if (policy__offered_action(step, in, d) || !(offer = policy__offer_text(&d->action)))
        return out->failed = MEDIC_E_NOMEM;
    in->pending = 0;
    policy__touch_incident(in);
    enum policy_incident_state from = in->pending_from;
    if (!in->pending_offer || strcmp(offer, in->pending_offer) != 0) {
        /* what the person saw is not what would run (a reload changed the
         * step): nothing runs; the step as it is now is offered again */
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason),
                 "step %zu approved by %.64s, but not run: it changed since it was offered "
                 "(offered: %.120s; now: %.120s); the step as configured now is offered again",
                 in->pending_step + 1, a->by,
                 in->pending_offer ? in->pending_offer : "not recorded", offer);
        free(offer);
        free(in->pending_offer);
        in->pending_offer = NULL;
        in->next_step = in->pending_step;
        policy__incident_change(in, from, policy__decision_index(out, d), now, out,
                                "step %zu changed since it was offered: offered again",
                                in->pending_step + 1);
        return 0;
    }
    free(offer);
    char guard[sizeof(d->reason)] = "";
    int transient = 0;
    /* every guard again, as at any step: the caps, a storm, a window, the
     * cooldown and budget, a stricter power limit in force */
    in->state = from; /* the guards see the incident as it was */
    if (!in->halted && !policy__incident_fresh(in, ctx->policies->safety.restart_grace, now)) {
        /* right after a restart, as any disruptive step: the alert is seen
         * again first (a resolve sent while medic was down may be on its
         * way), or safety.restart_grace passes */
        char grace[32];
        medic_duration_format(ctx->policies->safety.restart_grace, grace, sizeof(grace));
        snprintf(guard, sizeof(guard),
                 "medic restarted and no alert of the incident was seen again yet (it waits for "
                 "one, or for safety.restart_grace %s)",
                 grace);
        transient = 1;
    } else {
        policy__check_disruptive(ctx, st, pol, in, d, now, guard, sizeof(guard), &transient);
    }
    if (guard[0] && transient) {
        /* held, not dropped (invariant 11): the approved action runs once
         * the guard clears, while the approval holds */
        char until[40];
        free(in->approved_offer);
        in->approved_offer = in->pending_offer;
        in->pending_offer = NULL;
        snprintf(in->approved_by, sizeof(in->approved_by), "%s", a->by);
        snprintf(in->approved_reason, sizeof(in->approved_reason), "%s", reason);
        in->approved_until = now + pol->approval_timeout;
        medic_time_format(in->approved_until, until, sizeof(until));
        in->held = 1;
        in->next_step = in->pending_step;
        snprintf(in->held_by, sizeof(in->held_by), "%.*s", (int)sizeof(in->held_by) - 1, guard);
        in->state = INCIDENT_PENDING;
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason),
                 "held: step %zu approved by %.64s (%.80s), but %.200s; it runs when that "
                 "clears, while the approval holds (until %s), without asking again",
                 in->pending_step + 1, a->by, reason, guard, until);
        policy__incident_change(in, from, policy__decision_index(out, d), now, out,
                                "step %zu approved, held: %.300s", in->pending_step + 1, guard);
        return 0;
    }
    free(in->pending_offer);
    in->pending_offer = NULL;
    if (guard[0]) {
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason),
                 "step %zu approved by %.64s (%.150s), but refused now: %.250s",
                 in->pending_step + 1, a->by, reason, guard);
        in->halted = 1;
        snprintf(in->halted_by, sizeof(in->halted_by), "step %zu was refused when approved",
                 in->pending_step + 1);
        in->state = INCIDENT_PENDING;
        policy__incident_change(in, from, policy__decision_index(out, d), now, out,
                                "step %zu approved, but refused: %.300s", in->pending_step + 1,
                                guard);
        return 0;
    }
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "approved by %s (%.200s): ", a->by, reason);
    in->state = INCIDENT_PENDING;
    policy__take_step(ctx, st, pol, in, d, step, (int)in->pending_step, 0, prefix, now, out);
    if (!in->awaiting) /* a dry run, or a step with no outcome to wait for */
        policy__incident_change(in, from == INCIDENT_PENDING ? INCIDENT_OPEN : from, -1, now, out,
                                "step %zu approved", in->pending_step + 1);
    return 0;
}

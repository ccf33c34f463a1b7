/* SPDX-License-Identifier: Apache-2.0 */
/* A person's approval of a disruptive step (approve mode, policy
 * approval: required): the step waits in state pending until it is
 * approved (every guard checked again), denied, withdrawn or expired. */
#include "engine_internal.h"
#include "timeutil.h"

#include <stdio.h>
#include <string.h>

int policy__needs_approval(const struct policy_context *ctx, const struct policy *pol)
{
    if (!ctx->live || pol->dry_run || pol->approval == POLICY_APPROVAL_NONE)
        return 0;
    return pol->approval == POLICY_APPROVAL_REQUIRED || ctx->approve;
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
    in->pending_decision = 0;
    in->pending_from = in->state;
    medic_time_format(in->pending_until, until, sizeof(until));
    d->verdict = VERDICT_PENDING;
    snprintf(d->reason, sizeof(d->reason),
             "policy %s step %d waits for a person's approval until %s (approval_timeout %s): "
             "approved, and with every guard still holding then, medic runs %s on node '%s'; "
             "denied, expired or withdrawn (the alerts resolve), it never runs",
             pol->name, index + 1, until, timeout, medic_action_name(d->action.kind), in->node);
    policy__incident_change(in, INCIDENT_PENDING, policy__decision_index(out, d), now, out,
                            "step %d (%s) waits for approval until %s", index + 1,
                            medic_action_name(d->action.kind), until);
    /* on-call hears of it, with where to answer */
    char message[600];
    snprintf(message, sizeof(message),
             "%s on node '%s' (policy %s step %d, incident %lld) waits for your approval until "
             "%s: approve or deny it on %s%s%s, or with `medic approve ID` / `medic deny ID "
             "--reason ...` (ID: the pending decision, `medic audit decisions --verdict "
             "pending`)",
             medic_action_name(d->action.kind), in->node, pol->name, index + 1, (long long)in->id,
             until, ctx->external_url ? ctx->external_url : "the on-call page",
             ctx->external_url ? "/nodes/" : "", ctx->external_url ? in->node : "");
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
    policy__touch_incident(in);
    if (!d)
        return;
    d->step = (int)in->pending_step;
    d->disruptive = 1;
    d->verdict = VERDICT_SUPPRESSED;
    if (pol && in->pending_step < pol->step_count &&
        policy__build_action(&pol->steps[in->pending_step], in, d))
        out->failed = MEDIC_E_NOMEM;
    snprintf(d->reason, sizeof(d->reason), "%s", why);
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

int policy__answer_pending(const struct policy_context *ctx, struct policy_state *st,
                           struct incident *in, const struct policy_approval *a, int64_t now,
                           struct policy_decisions *out)
{
    const struct policy *pol = policy__incident_policy(ctx, in);
    char why[480];
    const char *reason = a->reason && a->reason[0] ? a->reason : "no reason given";
    if (!a->approve) {
        snprintf(why, sizeof(why), "step %zu denied by %s: %s", in->pending_step + 1, a->by,
                 reason);
        end_pending(pol, in, now, out, why);
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
    in->pending = 0;
    policy__touch_incident(in);
    if (!d)
        return out->failed;
    d->step = (int)in->pending_step;
    d->disruptive = 1;
    if (policy__build_action(step, in, d))
        return out->failed = MEDIC_E_NOMEM;
    char guard[sizeof(d->reason)] = "";
    int transient = 0;
    /* every guard again, as at any step: the caps, a storm, a window, the
     * cooldown and budget, a stricter power limit in force */
    enum policy_incident_state from = in->pending_from;
    in->state = from; /* the guards see the incident as it was */
    policy__check_disruptive(ctx, st, pol, in, d, now, guard, sizeof(guard), &transient);
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

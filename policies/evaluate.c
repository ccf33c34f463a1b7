/* SPDX-License-Identifier: Apache-2.0 */
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
static void late_firing_copy(struct policy_state *st, struct resolved_alert *r,
                             const struct policy_alert *a, const char *node, int in_inventory,
                             int64_t now, struct policy_decisions *out)
{
    if (r->noted)
        return;
    struct policy_decision *d = no_match(a, node, in_inventory, now, out);
    if (!d)
        return;
    r->noted = 1;
    policy__touch_resolved(st, r);
    char when[40];
    medic_time_format(r->at, when, sizeof(when));
    snprintf(d->reason, sizeof(d->reason),
             "this alert resolved at %s; a firing copy that arrives later (another "
             "Alertmanager's older view) does not reopen it",
             when);
}

/* Adds the alert to the incident (or refreshes it); returns 0 or
 * MEDIC_E_NOMEM. */
static int join(struct incident *in, const struct policy_alert *a, const char *identity,
                int64_t starts_at, int64_t now)
{
    struct member *m = policy__member_find(in, identity);
    if (!m) {
        int rc = policy__member_add(in, identity, a->fingerprint, starts_at, now);
        if (rc)
            return rc;
        m = &in->members[in->member_count - 1];
    }
    m->last_seen = now;
    if (a->starts_at != MEDIC_TIME_UNSET && a->starts_at - now > POLICY_CLOCK_SKEW &&
        a->starts_at > m->claimed_start)
        m->claimed_start = a->starts_at;
    if (starts_at > m->starts_at) /* re-fired without a resolve between */
        m->starts_at = starts_at;
    policy__touch_incident(in);
    return 0;
}

/* when: recovery_action: whether the driver's recommended recovery for the
 * alert's GPU is one the policy takes (why not, into skipped). */
static int recovery_ok(const struct policy *pol, const struct policy_alert *a, char *skipped,
                       size_t size)
{
    int code = a->recovery ? medic_recovery_parse(a->recovery) : -1;
    if (code >= 0 ? (int)((pol->recovery_mask >> code) & 1u) : pol->act_on_unknown_recovery)
        return 1;
    size_t used = strlen(skipped);
    snprintf(skipped + used, size - used, "%spolicy %s: the driver recommends %s%s",
             used ? "; " : "", pol->name, a->recovery ? a->recovery : "nothing medic could read",
             a->recovery ? ", not one it takes" : " (recovery_unknown: skip)");
    return 0;
}

/* A new alert on a quarantined incident's node: recorded, nothing done. */
static void quarantined_alert(const struct incident *in, const struct policy_alert *a, int64_t now,
                              struct policy_decisions *out)
{
    struct policy_decision *d = policy__incident_decision(out, in, now);
    if (!d)
        return;
    snprintf(d->alertname, sizeof(d->alertname), "%s",
             medic_labels_get(a->labels, "alertname") ? medic_labels_get(a->labels, "alertname")
                                                      : "");
    snprintf(d->fingerprint, sizeof(d->fingerprint), "%s", a->fingerprint);
    d->step = -1;
    d->risk = a->risk;
    d->verdict = VERDICT_SUPPRESSED;
    snprintf(d->reason, sizeof(d->reason),
             "node '%s' is quarantined (incident %lld): the alert joins it, and nothing is done "
             "until a person releases the node (medic node release %s)",
             in->node, (long long)in->id, in->node);
}

static void evaluate_firing(const struct policy_context *ctx, struct policy_state *st,
                            const struct policy_alert *a, const char *identity, int64_t starts_at,
                            int64_t now, struct policy_decisions *out)
{
    const struct policy_set *ps = ctx->policies;
    char raw[128];
    const struct inventory_node *inv = resolve_node(ctx, a->labels, raw, sizeof(raw));
    const char *node = inv ? inv->name : raw;
    struct resolved_alert *resolved = policy__resolved(st, identity);
    if (resolved && starts_at <= resolved->starts_at) {
        late_firing_copy(st, resolved, a, node, inv != NULL, now, out);
        return;
    }

    /* the storm window counts every alerting node, known or not */
    struct node_state *ns = policy__node_get(st, node[0] ? node : "(no node)", 1);
    if (ns)
        policy__node_alerting(st, ns, now, medic_labels_get(a->labels, "alertname"));
    policy__update_storm(ctx, st, now, out);

    char skipped[384] = "";
    int taken = 0;
    for (size_t p = 0; p < ps->count; p++) {
        const struct policy *pol = &ps->items[p];
        char key[INCIDENT_KEY_SIZE];
        policy__incident_key(node, pol->name, identity, key, sizeof(key));
        struct incident *in = policy__incident_find(st, key);
        if (in && in->closing && in->awaiting) {
            in->closing = 0; /* an alert came back before the undo began */
            policy__touch_incident(in);
        } else if (in && in->closing) {
            medic_map_remove(&st->incidents_by_key, key); /* undoing: it ends alone */
            in = NULL;
        }
        /* an incident takes its node's alerts that the policy matches; an
         * alert already in it stays whatever its risk does later */
        if (!in || !policy__member_find(in, identity)) {
            if (!policy_matchers_match(&pol->match, a->labels))
                continue;
            int risk_ok = isnan(a->risk) ? pol->act_on_unknown_risk : a->risk >= pol->risk_at_least;
            if (!risk_ok) {
                size_t used = strlen(skipped);
                if (isnan(a->risk))
                    snprintf(skipped + used, sizeof(skipped) - used,
                             "%spolicy %s skips alerts of unknown risk", used ? "; " : "",
                             pol->name);
                else {
                    char risk[24], least[24];
                    medic_risk_format(a->risk, risk, sizeof(risk));
                    medic_risk_format(pol->risk_at_least, least, sizeof(least));
                    snprintf(skipped + used, sizeof(skipped) - used,
                             "%spolicy %s: risk %s below %s", used ? "; " : "", pol->name, risk,
                             least);
                }
                continue;
            }
            if (pol->recovery_mask && !recovery_ok(pol, a, skipped, sizeof(skipped)))
                continue;
        }
        if (!in && !(in = policy__incident_open(st, key, a, pol, node, inv != NULL, starts_at, now,
                                                out))) {
            out->failed = MEDIC_E_NOMEM;
            return;
        }
        int joining = in->state == INCIDENT_QUARANTINED && !policy__member_find(in, identity);
        if (join(in, a, identity, starts_at, now)) {
            out->failed = MEDIC_E_NOMEM;
            return;
        }
        if (joining) /* said, so that no alert goes unrecorded on a node left to a person */
            quarantined_alert(in, a, now, out);
        taken = 1;
        if (!in->closing)
            policy__run_due_steps(ctx, st, pol, in, now, out);
        if (!pol->continue_matching)
            break;
    }
    if (taken || policy__remember_unmatched(st, identity, starts_at, now))
        return;
    struct policy_decision *d = no_match(a, node, inv != NULL, now, out);
    if (!d)
        return;
    if (skipped[0]) {
        snprintf(d->reason, sizeof(d->reason), "%s", skipped);
        return;
    }
    /* the policy that came closest, and the first of its matchers that
     * failed: a typo, or a label the exporter does not send */
    const struct policy *closest = NULL;
    const struct policy_matcher *miss = NULL;
    size_t best = 0;
    for (size_t p = 0; p < ps->count; p++) {
        size_t hits;
        const struct policy_matcher *m =
            policy_matchers_first_miss(&ps->items[p].match, a->labels, &hits);
        if (m && hits > best) {
            best = hits;
            closest = &ps->items[p];
            miss = m;
        }
    }
    char why[300] = "";
    if (closest)
        policy_matcher_explain(miss, a->labels, why, sizeof(why));
    snprintf(d->reason, sizeof(d->reason), "no policy matches the alert's labels%s%.64s%s%.300s",
             closest ? "; the closest is policy " : "", closest ? closest->name : "",
             closest ? ", whose " : "", why);
}

/* The alert (identity) in node's incident under the p-th policy, with that
 * incident in *in; NULL when there is none or it does not hold the alert. */
static struct member *holding(const struct policy_context *ctx, struct policy_state *st,
                              const char *node, size_t p, const char *identity,
                              struct incident **in)
{
    char key[INCIDENT_KEY_SIZE];
    policy__incident_key(node, ctx->policies->items[p].name, identity, key, sizeof(key));
    *in = policy__incident_find(st, key);
    return *in ? policy__member_find(*in, identity) : NULL;
}

/* Takes the alert out of every incident holding it; an incident left with
 * no alert closes through its undo steps as final. */
static void leave(const struct policy_context *ctx, struct policy_state *st, struct incident *in,
                  struct member *m, enum policy_incident_state final, int64_t now,
                  struct policy_decisions *out, const char *why)
{
    policy__member_remove(in, m);
    if (in->member_count == 0 && !in->closing)
        policy__undo(ctx, st, in, final, now, out, why);
}

static void evaluate_resolved(const struct policy_context *ctx, struct policy_state *st,
                              const struct policy_alert *a, const char *identity, int64_t starts_at,
                              int64_t now, struct policy_decisions *out)
{
    /* remembered first: even a resolve that overtakes its firing copy
     * keeps that copy from opening anything */
    if (policy__remember_resolved(st, identity, starts_at, now))
        out->failed = MEDIC_E_NOMEM;
    policy__forget_unmatched(st, identity, starts_at);
    char raw[128];
    const struct inventory_node *inv = resolve_node(ctx, a->labels, raw, sizeof(raw));
    const char *node = inv ? inv->name : raw;
    /* the node's incidents that hold the alert (one whose policy a reload
     * removed is closed by the next tick) */
    for (size_t p = 0; p < ctx->policies->count; p++) {
        struct incident *in;
        struct member *m = holding(ctx, st, node, p, identity, &in);
        /* a resolve older than the alert's last firing is a stale view */
        if (!m || m->starts_at > starts_at)
            continue;
        leave(ctx, st, in, m, INCIDENT_RECOVERED, now, out, "every alert of the incident resolved");
    }
}

int policy_evaluate(const struct policy_context *ctx, struct policy_state *st,
                    const struct policy_alert *alert, int64_t now, struct policy_decisions *out)
{
    int64_t starts_at = alert->starts_at == MEDIC_TIME_UNSET ? now : alert->starts_at;
    if (starts_at > now && alert->status == MEDIC_STATUS_FIRING)
        starts_at = now; /* a clock ahead of medic's: the ladder starts now, and says so */
    char identity[ALERT_IDENTITY_SIZE];
    policy__alert_identity(alert->fingerprint, alert->labels, identity, sizeof(identity));
    policy__follow_reload(ctx, st, now, out);
    if (alert->status == MEDIC_STATUS_FIRING)
        evaluate_firing(ctx, st, alert, identity, starts_at, now, out);
    else
        evaluate_resolved(ctx, st, alert, identity, starts_at, now, out);
    return out->failed;
}

void policy_seen_again(const struct policy_context *ctx, struct policy_state *st,
                       const struct policy_alert *alert, int64_t now)
{
    if (alert->status != MEDIC_STATUS_FIRING)
        return;
    int64_t starts_at = alert->starts_at == MEDIC_TIME_UNSET ? now : alert->starts_at;
    char identity[ALERT_IDENTITY_SIZE], raw[128];
    policy__alert_identity(alert->fingerprint, alert->labels, identity, sizeof(identity));
    const struct inventory_node *inv = resolve_node(ctx, alert->labels, raw, sizeof(raw));
    const char *node = inv ? inv->name : raw;
    for (size_t p = 0; p < ctx->policies->count; p++) {
        struct incident *in;
        struct member *m = holding(ctx, st, node, p, identity, &in);
        if (m && m->starts_at <= starts_at && m->last_seen < now) {
            m->last_seen = now;
            policy__touch_incident(in);
        }
    }
    policy__unmatched_seen(st, identity, starts_at, now);
}

/* Alerts not re-sent for safety.alert_expiry have gone: Alertmanager
 * re-sends what still fires every repeat_interval, so a resolve was lost. */
static void expire_alerts(const struct policy_context *ctx, struct policy_state *st,
                          struct incident *in, int64_t now, struct policy_decisions *out)
{
    int64_t expiry = ctx->policies->safety.alert_expiry;
    for (size_t k = in->member_count; k-- > 0 && !in->closing;) {
        if (now - in->members[k].last_seen < expiry)
            continue;
        char why[200], d[32];
        medic_duration_format(expiry, d, sizeof(d));
        snprintf(why, sizeof(why),
                 "no alert of the incident was re-sent for %s (safety.alert_expiry): their "
                 "resolves were lost",
                 d);
        if (policy__remember_resolved(st, in->members[k].identity, in->members[k].starts_at, now))
            out->failed = MEDIC_E_NOMEM;
        leave(ctx, st, in, &in->members[k], INCIDENT_EXPIRED, now, out, why);
    }
}

static int64_t later(int64_t t, int64_t by)
{
    int64_t sum;
    return __builtin_add_overflow(t, by, &sum) ? (by > 0 ? INT64_MAX : INT64_MIN) : sum;
}

/* The earliest time a tick has anything to do for in, after it was
 * visited: its next ladder step due, or an alert of it to expire. A
 * change to the incident (policy__touch_incident) or to the policies
 * brings the visit forward; nothing else makes it earlier (a re-sent
 * alert only puts its expiry later). */
static int64_t tick_due(const struct policy_context *ctx, const struct policy *pol,
                        const struct incident *in)
{
    if (in->final || in->closing || in->state == INCIDENT_QUARANTINED)
        return INT64_MAX; /* a tick skips them (a quarantined one waits for a person) */
    if (!pol)
        return INT64_MIN;
    /* while a person is asked, no later step comes due: only the expiry,
     * and on-call's notice once the decision has its id */
    if (in->pending && !in->pending_told && in->pending_decision > 0)
        return INT64_MIN;
    int64_t due = in->pending ? in->pending_until : INT64_MAX;
    if (!in->awaiting && !in->pending && in->state != INCIDENT_FAILED &&
        in->state != INCIDENT_UNDOING && in->member_count > 0 && in->next_step < pol->step_count) {
        due = policy__step_due(in, &pol->steps[in->next_step]);
        /* after a restart, a disruptive step waits for its alert, or for
         * the grace to pass */
        int64_t grace = ctx->policies->safety.restart_grace;
        if (in->fresh_after != MEDIC_TIME_UNSET && !in->halted &&
            medic_action_disruptive(pol->steps[in->next_step].action.kind) &&
            !policy__incident_fresh(in, grace, in->fresh_after) &&
            later(in->fresh_after, grace) > due)
            due = later(in->fresh_after, grace);
    }
    int64_t expiry = ctx->policies->safety.alert_expiry;
    for (size_t k = 0; k < in->member_count; k++) {
        int64_t t = later(in->members[k].last_seen, expiry);
        if (t < due)
            due = t;
    }
    return due;
}

/* An incident whose policy a reload removed (no policy of the new set is
 * what it was) is closed and what it holds undone; while its alerts still
 * fire, on-call is told first, and the undo's reason says so. */
static void close_orphan(const struct policy_context *ctx, struct policy_state *st,
                         struct incident *in, int64_t now, struct policy_decisions *out)
{
    if (in->member_count == 0 || (!in->drained && !in->limit_watts)) {
        policy__undo(ctx, st, in, INCIDENT_CLOSED, now, out,
                     "its policy is no longer configured (a reload removed it)");
        return;
    }
    char message[1024];
    snprintf(message, sizeof(message),
             "a reload removed policy %s while %zu alert(s) of incident %lld still fire on node "
             "'%s': medic undoes what it did there (%s%s%s) although the node may still be "
             "failing; check it, or restore the policy",
             in->policy, in->member_count, (long long)in->id, in->node, in->drained ? "resume" : "",
             in->drained && in->limit_watts ? ", " : "",
             in->limit_watts ? "restore_power_limit" : "");
    policy__tell_oncall(ctx, in, now, out, message);
    policy__undo(ctx, st, in, INCIDENT_CLOSED, now, out,
                 "its policy is no longer configured (a reload removed it) while its alerts "
                 "still fire");
}

int policy_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out)
{
    st->ticked_at = now;
    policy__follow_reload(ctx, st, now, out);
    policy__update_storm(ctx, st, now, out);
    policy__pause_tick(ctx, st, now, out);
    policy__held_notice(ctx, st, now, out);
    policy__expire_unmatched(st, now);
    policy__expire_resolved(st, now);
    policy__compact(st);
    /* every incident after a reload (or where the set cannot say which it
     * is); otherwise those with something due */
    const struct policy_set *ps = ctx->policies;
    int all = ps->generation == 0 || ps != st->tick_set || ps->generation != st->tick_generation;
    st->tick_set = ps;
    st->tick_generation = ps->generation;
    for (size_t i = 0; i < st->incident_count; i++) {
        if (!all && st->tick_due[i] > now)
            continue;
        struct incident *in = st->incidents[i];
        const struct policy *pol = NULL;
        if (!in->final && !in->closing && in->state != INCIDENT_QUARANTINED) {
            pol = policy__incident_policy(ctx, in);
            if (!pol)
                close_orphan(ctx, st, in, now, out);
            else
                expire_alerts(ctx, st, in, now, out);
            if (pol && !in->closing)
                policy__expire_pending(ctx, in, now, out);
            /* a pending step's notice, once its decision has an id */
            if (pol && !in->closing && in->pending && !in->pending_told && in->pending_decision > 0)
                policy__tell_pending(ctx, pol, in, now, out);
            if (pol && !in->closing)
                policy__run_due_steps(ctx, st, pol, in, now, out);
        }
        st->tick_due[i] = tick_due(ctx, pol, in);
    }
    return out->failed;
}

int64_t policy_last_tick(const struct policy_state *st)
{
    return st->ticked_at;
}

int policy_outcome(const struct policy_context *ctx, struct policy_state *st,
                   const struct policy_outcome *o, int64_t now, struct policy_decisions *out)
{
    struct incident *in = policy__incident_by_id(st, o->incident);
    if (in)
        policy__apply_outcome(ctx, st, in, o->decision_id, o->outcome, o->detail, now, out);
    return out->failed;
}

void policy_awaiting(const struct policy_state *st, policy_awaiting_fn fn, void *arg)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (in->final)
            continue;
        /* a decision not committed yet is not known by id */
        if (in->awaiting)
            fn(arg, in->id, in->awaiting_decision > 0 ? in->awaiting_decision : 0);
        for (int k = 0; k < in->undo_count; k++)
            fn(arg, in->id, in->undo[k].decision > 0 ? in->undo[k].decision : 0);
    }
}

/* A decision of the round not yet committed: -(its index + 1). */
static int64_t unresolved(size_t index)
{
    return -(int64_t)index - 1;
}

int policy_pending_steps(const struct policy_state *st, policy_pending_fn fn, void *arg)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (in->final || !in->pending)
            continue;
        struct policy_pending_step p = {in->id,           in->pending_decision, in->pending_until,
                                        in->node,         in->policy,           in->pending_step,
                                        in->pending_offer};
        int rc = fn(arg, &p);
        if (rc)
            return rc;
    }
    return 0;
}

size_t policy_pending_approvals(const struct policy_state *st, int64_t *oldest)
{
    size_t n = 0;
    *oldest = MEDIC_TIME_UNSET;
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (in->final || !in->pending)
            continue;
        n++;
        if (*oldest == MEDIC_TIME_UNSET || in->pending_since < *oldest)
            *oldest = in->pending_since;
    }
    return n;
}

int64_t policy_pending_incident(const struct policy_state *st, int64_t decision_id, int64_t *until)
{
    for (size_t i = 0; decision_id > 0 && i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (!in->final && in->pending && in->pending_decision == decision_id) {
            if (until)
                *until = in->pending_until;
            return in->id;
        }
    }
    return 0;
}

int policy_approve(const struct policy_context *ctx, struct policy_state *st,
                   const struct policy_approval *a, int64_t now, struct policy_decisions *out,
                   char *why, size_t why_size)
{
    struct incident *in = NULL;
    for (size_t i = 0; i < st->incident_count && !in; i++) {
        struct incident *x = st->incidents[i];
        if (x->final || !x->pending)
            continue;
        if (a->decision_id > 0 ? x->pending_decision == a->decision_id
            : a->incident > 0  ? x->id == a->incident
                               : a->node && strcmp(x->node, a->node) == 0)
            in = x;
    }
    if (in && now >= in->pending_until) {
        policy__expire_pending(ctx, in, now, out);
        snprintf(why, why_size, "step %zu of incident %lld expired before the answer came",
                 in->pending_step + 1, (long long)in->id);
        return out->failed ? out->failed : MEDIC_E_NOTFOUND;
    }
    if (!in) {
        snprintf(why, why_size,
                 "no step waits for approval as %s %lld%s%s: it was never pending, was answered "
                 "already, withdrawn (its alerts resolved) or expired",
                 a->decision_id > 0 ? "decision"
                 : a->incident > 0  ? "incident"
                                    : "node",
                 (long long)(a->decision_id > 0 ? a->decision_id : a->incident),
                 a->decision_id > 0 || a->incident > 0 ? "" : " ",
                 a->decision_id > 0 || a->incident > 0 ? "" : (a->node ? a->node : ""));
        return MEDIC_E_NOTFOUND;
    }
    int rc = policy__answer_pending(ctx, st, in, a, now, out);
    return rc ? rc : out->failed;
}

void policy_bind_decisions(struct policy_state *st, const struct policy_decisions *out)
{
    for (size_t i = 0; i < out->count; i++) {
        const struct policy_decision *d = &out->items[i];
        int pending = d->verdict == VERDICT_PENDING;
        struct incident *in =
            d->awaited || pending ? policy__incident_by_id(st, d->incident) : NULL;
        if (!in)
            continue;
        policy__touch_incident(in);
        if (pending) {
            if (in->pending && !in->pending_decision)
                in->pending_decision = unresolved(i);
            continue;
        }
        /* the ladder's action (a verify, also one before a resume), else an undo */
        int ladder = (!d->on_resolved && d->disruptive) ||
                     (d->has_action && d->action.kind == MEDIC_ACTION_VERIFY);
        if (ladder && in->awaiting && !in->awaiting_decision) {
            in->awaiting_decision = unresolved(i);
            continue;
        }
        for (int k = 0; k < in->undo_count; k++)
            if (!in->undo[k].decision) {
                in->undo[k].decision = unresolved(i);
                break;
            }
    }
}

void policy_resolve_decisions(struct policy_state *st, const struct policy_decisions *out,
                              const int64_t *ids)
{
    for (size_t i = 0; i < out->count; i++) {
        const struct policy_decision *d = &out->items[i];
        struct incident *in = d->awaited || d->verdict == VERDICT_PENDING
                                  ? policy__incident_by_id(st, d->incident)
                                  : NULL;
        if (!in)
            continue;
        /* the row already holds the id: the incident is not changed again */
        if (in->awaiting_decision == unresolved(i))
            in->awaiting_decision = ids[i];
        if (in->pending_decision == unresolved(i))
            in->pending_decision = ids[i];
        for (int k = 0; k < in->undo_count; k++)
            if (in->undo[k].decision == unresolved(i))
                in->undo[k].decision = ids[i];
    }
}

int policy_assume_success(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                          struct policy_decisions *out)
{
    /* an outcome may decide further awaited steps: go on until none is */
    for (int round = 0; round < 4 * POLICY_MAX_STEPS; round++) {
        int any = 0;
        for (size_t i = 0; i < st->incident_count; i++) {
            struct incident *in = st->incidents[i];
            if (in->final || (!in->awaiting && in->undo_count == 0))
                continue;
            any = 1;
            policy__apply_outcome(ctx, st, in, 0, MEDIC_OUTCOME_SUCCEEDED, "", now, out);
        }
        if (!any)
            break;
    }
    return out->failed;
}

void policy_state_restarted(struct policy_state *st, int64_t now)
{
    for (size_t i = 0; i < st->incident_count; i++)
        if (!st->incidents[i]->final) {
            st->incidents[i]->fresh_after = now;
            policy__touch_incident(st->incidents[i]);
        }
}

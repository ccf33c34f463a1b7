#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decided action: the step's literal parameters, its text rendered
 * from the template and cut to MEDIC_ACTION_TEXT_MAX at a UTF-8 boundary
 * with a visible marker. Returns 0 or MEDIC_E_NOMEM. */
static int build_action(const struct policy_step *step, const struct incident *in,
                        struct policy_decision *d)
{
    int rc = medic_action_copy(&d->action, &step->action);
    if (rc)
        return rc;
    d->has_action = 1;
    const char *text_key = medic_action_text_key(step->action.kind);
    int drain = step->action.kind == MEDIC_ACTION_DRAIN; /* a drain always has a reason */
    if (!text_key || (!step->has_text && !drain))
        return 0;
    struct medic_labels labels = {in->labels.items, in->labels.count};
    struct medic_labels annotations = {in->annotations.items, in->annotations.count};
    struct template_vars vars = {&labels, &annotations, in->risk, in->node};
    struct medic_buf text;
    medic_buf_init(&text, POLICY_TEMPLATE_MAX_OUTPUT + 1);
    if (step->has_text)
        rc = policy_template_render(&step->text, &vars, &text);
    else
        rc = medic_buf_printf(&text, "%s on %s", in->alertname, in->node);
    char suffix[96] = "";
    if (drain) /* Slurm shows who drained: say it was medic */
        snprintf(suffix, sizeof(suffix), " (medic policy %s)", in->policy);
    size_t room = MEDIC_ACTION_TEXT_MAX - strlen(suffix);
    size_t size = (text.len < room ? text.len : room) + 1;
    char *fitted = rc == 0 ? malloc(size + strlen(suffix)) : NULL;
    if (fitted) {
        size_t len = medic_text_fit(fitted, size, text.data ? text.data : "", text.len);
        memcpy(fitted + len, suffix, strlen(suffix) + 1);
        char **field = medic_action_text_field(&d->action, text_key);
        free(*field);
        *field = fitted; /* the action owns it now */
    } else if (rc == 0) {
        rc = MEDIC_E_NOMEM;
    }
    medic_buf_release(&text);
    return rc;
}

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
                                              : INCIDENT_CYCLING;
}

static enum policy_incident_state done_state(enum medic_action_kind kind)
{
    return kind == MEDIC_ACTION_DRAIN         ? INCIDENT_DRAINED
           : kind == MEDIC_ACTION_POWER_LIMIT ? INCIDENT_LIMITED
                                              : INCIDENT_CYCLED;
}

static long index_of(const struct policy_decisions *out, const struct policy_decision *d)
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
                      int watts, int undo, const char *detail)
{
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 1) : NULL;
    policy__touch_incident(in);
    if (!n)
        return;
    int was = policy__node_disrupted(n);
    switch (kind) {
    case MEDIC_ACTION_DRAIN: {
        char reason[sizeof(in->drained_as)];
        n->drained_by_medic = 1;
        in->drained = 1;
        drained_as(detail, reason, sizeof(reason));
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
static int check_disruptive(const struct policy_context *ctx, struct policy_state *st,
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

int policy__needs_approval(const struct policy_context *ctx, const struct policy *pol)
{
    if (!ctx->live || pol->dry_run || pol->approval == POLICY_APPROVAL_NONE)
        return 0;
    return pol->approval == POLICY_APPROVAL_REQUIRED || ctx->approve;
}

static void take_step(const struct policy_context *ctx, struct policy_state *st,
                      const struct policy *pol, struct incident *in, struct policy_decision *d,
                      const struct policy_step *step, int index, int on_resolved,
                      const char *prefix, int64_t now, struct policy_decisions *out);

/* The step, every guard passed, waits for a person: decided pending, the
 * incident in state pending until it is approved, denied, withdrawn or
 * expires. */
static void await_approval(const struct policy_context *ctx, const struct policy *pol,
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
    policy__incident_change(in, INCIDENT_PENDING, index_of(out, d), now, out,
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
        build_action(&pol->steps[in->pending_step], in, d))
        out->failed = MEDIC_E_NOMEM;
    snprintf(d->reason, sizeof(d->reason), "%s", why);
    if (!in->halted) {
        in->halted = 1;
        snprintf(in->halted_by, sizeof(in->halted_by), "step %zu was not approved",
                 in->pending_step + 1);
    }
    policy__incident_change(in, in->pending_from, index_of(out, d), now, out, "%s", why);
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
    if (build_action(step, in, d))
        return out->failed = MEDIC_E_NOMEM;
    char guard[sizeof(d->reason)] = "";
    int transient = 0;
    /* every guard again, as at any step: the caps, a storm, a window, the
     * cooldown and budget, a stricter power limit in force */
    enum policy_incident_state from = in->pending_from;
    in->state = from; /* the guards see the incident as it was */
    check_disruptive(ctx, st, pol, in, d, now, guard, sizeof(guard), &transient);
    if (guard[0]) {
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason),
                 "step %zu approved by %.64s (%.150s), but refused now: %.250s",
                 in->pending_step + 1, a->by, reason, guard);
        in->halted = 1;
        snprintf(in->halted_by, sizeof(in->halted_by), "step %zu was refused when approved",
                 in->pending_step + 1);
        in->state = INCIDENT_PENDING;
        policy__incident_change(in, from, index_of(out, d), now, out,
                                "step %zu approved, but refused: %.300s", in->pending_step + 1,
                                guard);
        return 0;
    }
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "approved by %s (%.200s): ", a->by, reason);
    in->state = INCIDENT_PENDING;
    take_step(ctx, st, pol, in, d, step, (int)in->pending_step, 0, prefix, now, out);
    if (!in->awaiting) /* a dry run, or a step with no outcome to wait for */
        policy__incident_change(in, from == INCIDENT_PENDING ? INCIDENT_OPEN : from, -1, now, out,
                                "step %zu approved", in->pending_step + 1);
    return 0;
}

void policy__decide_step(const struct policy_context *ctx, struct policy_state *st,
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
    if (build_action(step, in, d)) {
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
    else if (d->disruptive)
        weaker = check_disruptive(ctx, st, pol, in, d, now, reason, sizeof(reason), &transient);
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
            policy__incident_change(in, INCIDENT_LIMITED, index_of(out, d), now, out,
                                    "step %d (power_limit %d W) held: a stricter limit is in "
                                    "force",
                                    index + 1, in->limit_watts);
        } else if (d->disruptive && !in->halted) {
            in->halted = 1;
            snprintf(in->halted_by, sizeof(in->halted_by), "step %d (%s) was suppressed", index + 1,
                     medic_action_name(kind));
        }
        return;
    }
    if (pol && !on_resolved && d->disruptive && policy__needs_approval(ctx, pol)) {
        await_approval(ctx, pol, in, d, index, now, out);
        return;
    }
    take_step(ctx, st, pol, in, d, step, index, on_resolved, "", now, out);
}

/* The step, every guard passed, executed (or decided in a dry run): the
 * reason says why, after prefix (who approved it). */
static void take_step(const struct policy_context *ctx, struct policy_state *st,
                      const struct policy *pol, struct incident *in, struct policy_decision *d,
                      const struct policy_step *step, int index, int on_resolved,
                      const char *prefix, int64_t now, struct policy_decisions *out)
{
    enum medic_action_kind kind = step->action.kind;
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
    else
        snprintf(d->reason, sizeof(d->reason), "%spolicy %s step %d: firing for %s or more%s",
                 prefix, pol->name, index + 1, after, mode);
    in->acted = 1;
    if (!in->in_inventory || kind == MEDIC_ACTION_NOTIFY)
        return;
    if (!live) { /* a dry run: as if it succeeded at once */
        succeeded(st, in, kind, d->action.u.power_limit.watts, on_resolved, NULL);
        if (d->disruptive) {
            policy__record_action(st, pol, in, now);
            policy__incident_change(in, done_state(kind), index_of(out, d), now, out,
                                    "step %d (%s) decided in dry-run", index + 1,
                                    medic_action_name(kind));
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
    struct node_state *n = policy__node_get(st, in->node, 1);
    if (n) {
        int was = policy__node_disrupted(n);
        n->acting++;
        policy__node_recount(st, n, was);
    }
    policy__record_action(st, pol, in, now);
    d->require_drained = kind == MEDIC_ACTION_IPMI_POWER_CYCLE && in->drained;
    in->awaiting = 1;
    in->awaiting_decision = 0;
    in->awaiting_kind = kind;
    in->awaiting_watts = kind == MEDIC_ACTION_POWER_LIMIT ? d->action.u.power_limit.watts : 0;
    policy__incident_change(in, acting_state(kind), index_of(out, d), now, out,
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
           in->state != INCIDENT_UNDOING && in->member_count > 0 &&
           in->next_step < pol->step_count &&
           now - in->opened_at >= pol->steps[in->next_step].after) {
        const struct policy_step *step = &pol->steps[in->next_step];
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

/* Undo steps for an incident whose policy is gone: resume its drain,
 * restore its power limit. */
static void undo_orphan(const struct policy_context *ctx, struct policy_state *st,
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
    policy__withdraw_pending(ctx, in, now, out, why);
    if (!in->closing) {
        in->closing = 1;
        in->closing_as = final;
        snprintf(in->closing_cause, sizeof(in->closing_cause), "%s", why);
    }
    if (in->awaiting) /* undone once the action in flight has its outcome */
        return;
    const struct policy *pol = policy__incident_policy(ctx, in);
    if (!pol)
        undo_orphan(ctx, st, in, now, out);
    else if (in->acted)
        for (size_t k = 0; k < pol->on_resolved_count; k++)
            policy__decide_step(ctx, st, pol, in, &pol->on_resolved[k], (int)k, 1, now, out);
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

/* The outcome of undo action i. */
static void undo_outcome(const struct policy_context *ctx, struct policy_state *st,
                         struct incident *in, int i, enum medic_outcome outcome, const char *detail,
                         int64_t now, struct policy_decisions *out)
{
    policy__touch_incident(in);
    enum medic_action_kind kind = in->undo[i].kind;
    memmove(&in->undo[i], &in->undo[i + 1], (size_t)(in->undo_count - i - 1) * sizeof(in->undo[0]));
    in->undo_count--;
    if (outcome == MEDIC_OUTCOME_SUCCEEDED) {
        succeeded(st, in, kind, 0, 1, detail);
    } else {
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
        policy__incident_final(st, in, in->closing_as, now, out, cause);
    }
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
    if (n && n->acting > 0) {
        int was = policy__node_disrupted(n);
        n->acting--;
        policy__node_recount(st, n, was);
    }
    char cause[1400];
    snprintf(cause, sizeof(cause), "%s %s%s%s", medic_action_name(kind),
             medic_outcome_name(outcome), detail && *detail ? ": " : "", detail ? detail : "");
    if (outcome == MEDIC_OUTCOME_SUCCEEDED) {
        succeeded(st, in, kind, in->awaiting_watts, 0, detail);
        policy__incident_change(in, done_state(kind), -1, now, out, "%s", cause);
    } else {
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
    const struct policy *pol = policy__incident_policy(ctx, in);
    if (in->closing) /* its alerts went, or its policy, while the action ran */
        policy__undo(ctx, st, in, in->closing_as, now, out, in->closing_cause);
    else if (pol && outcome == MEDIC_OUTCOME_SUCCEEDED)
        policy__run_due_steps(ctx, st, pol, in, now, out);
}

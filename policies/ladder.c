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
static int build_action(const struct policy_step *step, const struct instance *in,
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

static struct policy_decision *decision_for(struct policy_decisions *out, const struct instance *in,
                                            int64_t now)
{
    struct policy_decision *d = policy__new_decision(out);
    if (!d)
        return NULL;
    snprintf(d->node, sizeof(d->node), "%s", in->node);
    d->in_inventory = in->in_inventory;
    snprintf(d->alertname, sizeof(d->alertname), "%s", in->alertname);
    snprintf(d->fingerprint, sizeof(d->fingerprint), "%s", in->fingerprint);
    snprintf(d->policy, sizeof(d->policy), "%s", in->policy);
    d->risk = in->risk;
    d->time = now;
    return d;
}

/* Decides one step of instance in; returns the verdict. */
void policy__decide_step(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, struct instance *in,
                         const struct policy_step *step, int index, int on_resolved, int64_t now,
                         struct policy_decisions *out)
{
    struct policy_decision *d = decision_for(out, in, now);
    if (!d)
        return;
    d->step = index;
    d->on_resolved = on_resolved;
    d->disruptive = medic_action_disruptive(step->action.kind);
    if (build_action(step, in, d)) {
        out->failed = MEDIC_E_NOMEM;
        return;
    }
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 1) : NULL;
    char reason[sizeof(d->reason)] = "";
    switch (step->action.kind) {
    case MEDIC_ACTION_RESUME:
        if (!in->in_inventory)
            snprintf(reason, sizeof(reason), "node '%s' is not in the inventory", in->node);
        else if (!n || !n->drained_by_medic)
            snprintf(reason, sizeof(reason),
                     "medic did not drain node '%s': an operator's drain is never undone",
                     in->node);
        else if (n->drain_holders > 0)
            snprintf(reason, sizeof(reason),
                     "%d other open alert(s) on node '%s' still hold its drain; the last to "
                     "resolve resumes it",
                     n->drain_holders, in->node);
        break;
    case MEDIC_ACTION_RESTORE_POWER_LIMIT:
        if (!in->in_inventory)
            snprintf(reason, sizeof(reason), "node '%s' is not in the inventory", in->node);
        else if (!n || !n->limited_by_medic)
            snprintf(reason, sizeof(reason), "medic did not limit the power of node '%s'",
                     in->node);
        else if (n->limit_holders > 0)
            snprintf(reason, sizeof(reason),
                     "%d other open alert(s) on node '%s' still hold its power limit",
                     n->limit_holders, in->node);
        break;
    case MEDIC_ACTION_NOTIFY:
        break;
    default:
        if (in->halted)
            snprintf(reason, sizeof(reason),
                     "the ladder stopped: %s was suppressed, so later disruptive steps are too",
                     in->halted_by);
        else
            policy__check_guards(ctx, st, pol, in, now, reason, sizeof(reason));
    }
    if (reason[0]) {
        d->verdict = VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason), "%s", reason);
        if (d->disruptive && !in->halted) {
            in->halted = 1;
            snprintf(in->halted_by, sizeof(in->halted_by), "step %d (%s)", index + 1,
                     medic_action_name(step->action.kind));
        }
        return;
    }
    int live = ctx->live && !pol->dry_run;
    d->verdict = live ? VERDICT_EXECUTE : VERDICT_DRY_RUN;
    char after[32];
    medic_duration_format(step->after, after, sizeof(after));
    if (on_resolved)
        snprintf(d->reason, sizeof(d->reason), "policy %s: the alert resolved%s", pol->name,
                 live ? ""
                      : (ctx->live ? "; the policy is dry_run" : "; medic is in dry-run mode"));
    else
        snprintf(d->reason, sizeof(d->reason), "policy %s step %d: firing for %s or more%s",
                 pol->name, index + 1, after,
                 live ? ""
                      : (ctx->live ? "; the policy is dry_run" : "; medic is in dry-run mode"));
    in->acted = 1;
    if (!in->in_inventory)
        return;
    n = policy__node_get(st, in->node, 1);
    if (!n)
        return;
    switch (step->action.kind) {
    case MEDIC_ACTION_DRAIN:
        n->drained_by_medic = 1;
        if (!in->drained) {
            in->drained = 1;
            n->drain_holders++;
        }
        break;
    case MEDIC_ACTION_POWER_LIMIT:
        n->limited_by_medic = 1;
        if (!in->limited) {
            in->limited = 1;
            n->limit_holders++;
        }
        break;
    case MEDIC_ACTION_RESUME:
        n->drained_by_medic = 0;
        break;
    case MEDIC_ACTION_RESTORE_POWER_LIMIT:
        n->limited_by_medic = 0;
        break;
    default:
        break;
    }
    if (d->disruptive) {
        policy__record_action(st, pol, in, now);
        if (!in->disrupting) {
            in->disrupting = 1;
            n->disrupting_instances++;
        }
    }
}

void policy__run_due_steps(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, struct instance *in, int64_t now,
                           struct policy_decisions *out)
{
    while (in->next_step < pol->step_count &&
           now - in->starts_at >= pol->steps[in->next_step].after) {
        size_t k = in->next_step++;
        policy__decide_step(ctx, st, pol, in, &pol->steps[k], (int)k, 0, now, out);
    }
}

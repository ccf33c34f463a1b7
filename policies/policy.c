/* SPDX-License-Identifier: Apache-2.0 */
#include "policy_parse.h"
#include "timeutil.h"
#include "yaml_fields.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void step_release(struct policy_step *s)
{
    policy_template_release(&s->text);
    medic_action_release(&s->action);
}

static void policy_release(struct policy *p)
{
    free(p->name);
    free(p->match_text);
    policy_matchers_release(&p->match);
    for (size_t i = 0; i < p->step_count; i++)
        step_release(&p->steps[i]);
    for (size_t i = 0; i < p->on_resolved_count; i++)
        step_release(&p->on_resolved[i]);
    free(p->steps);
    free(p->on_resolved);
}

void policy_set_release(struct policy_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        policy_release(&set->items[i]);
    free(set->items);
    policy__safety_release(&set->safety);
    memset(set, 0, sizeof(*set));
}

static int parse_template(struct parser *p, const struct yaml_tree_node *n, const char *key,
                          struct policy_template *out)
{
    int rc = yaml_fields_scalar(&p->f, n, key);
    if (rc)
        return rc;
    int col = 1;
    struct medic_error err = {0};
    if (policy_template_parse(n->value, out, &col, &err)) {
        /* point inside the value: past the opening quote when quoted */
        struct yaml_tree_node at = {.line = n->line, .col = n->col + col - 1 + (n->quoted ? 1 : 0)};
        return yaml_fields_fail(&p->f, &at, "%s: %s", key, err.msg);
    }
    return 0;
}

int policy__known_notifier(struct parser *p, const struct yaml_tree_node *n, const char *name)
{
    if (!p->notifiers)
        return 0;
    for (size_t i = 0; i < p->notifier_count; i++)
        if (strcmp(p->notifiers[i], name) == 0)
            return 0;
    return yaml_fields_fail(&p->f, n, "notifier '%s' is not defined under notifiers", name);
}

static int parse_gpus(struct parser *p, const struct yaml_tree_node *n,
                      const struct medic_action_param *param, struct medic_gpu_list *out)
{
    if (n->kind == YAML_TREE_SCALAR && strcmp(n->value, "alert") == 0) {
        out->from_alert = 1; /* the alert's GPU, when the step is decided */
        return 0;
    }
    if (n->kind == YAML_TREE_SCALAR)
        return yaml_fields_fail(&p->f, n,
                                "%s: a list of GPU indexes ([2, 5]), or alert for the alert's "
                                "GPU (its gpu label); '%s' is neither",
                                param->key, n->value);
    int rc = yaml_fields_sequence(&p->f, n, param->key);
    if (rc)
        return rc;
    if (n->count == 0 || n->count > MEDIC_ACTION_MAX_GPUS)
        return yaml_fields_fail(&p->f, n,
                                "%s: expected 1 to %d GPU indexes, or alert (the alert's GPU)",
                                param->key, MEDIC_ACTION_MAX_GPUS);
    for (size_t i = 0; i < n->count; i++) {
        double v;
        if ((rc = yaml_fields_number(&p->f, n->items[i], param->key, (double)param->min,
                                     (double)param->max, &v)))
            return rc;
        if (floor(v) != v)
            return yaml_fields_fail(&p->f, n->items[i], "%s: '%s' is not a GPU index", param->key,
                                    n->items[i]->value);
        out->items[out->count++] = (int)v;
    }
    return 0;
}

/* Reads one parameter of the step's action, as the table types it. */
static int parse_param(struct parser *p, const struct yaml_tree_node *v,
                       const struct medic_action_param *param, struct policy_step *s)
{
    void *field = (char *)&s->action + param->offset;
    double number;
    int rc;
    switch (param->type) {
    case MEDIC_PARAM_INT:
        rc = yaml_fields_number(&p->f, v, param->key, (double)param->min, (double)param->max,
                                &number);
        if (rc == 0 && floor(number) != number)
            rc = yaml_fields_fail(&p->f, v, "%s: expected a whole number", param->key);
        if (rc == 0)
            *(int *)field = (int)number;
        return rc;
    case MEDIC_PARAM_BOOL:
        return yaml_fields_bool(&p->f, v, param->key, (int *)field);
    case MEDIC_PARAM_SECONDS: {
        int64_t ns;
        rc = yaml_fields_duration(&p->f, v, param->key, &ns);
        if (rc == 0 && (ns < param->min * MEDIC_NS_PER_SEC || ns > param->max * MEDIC_NS_PER_SEC))
            rc = yaml_fields_fail(&p->f, v, "%s: expected %lds to %ldh", param->key, param->min,
                                  param->max / 3600);
        if (rc == 0)
            *(int *)field = (int)(ns / MEDIC_NS_PER_SEC);
        return rc;
    }
    case MEDIC_PARAM_GPUS:
        return parse_gpus(p, v, param, field);
    case MEDIC_PARAM_NAME:
        rc = yaml_fields_string(&p->f, v, param->key, (char **)field);
        if (rc == 0 && strcmp(param->key, "notifier") == 0)
            rc = policy__known_notifier(p, v, *(char **)field);
        return rc;
    case MEDIC_PARAM_TEXT:
        rc = parse_template(p, v, param->key, &s->text);
        s->has_text = rc == 0;
        return rc;
    case MEDIC_PARAM_RECORD:
        return yaml_fields_fail(&p->f, v, "%s: set by medic from what it recorded, not by a policy",
                                param->key);
    }
    return MEDIC_E_INVALID;
}

/* approval: required | none, of a policy or of one step (which
 * overrides its policy's) */
static int parse_approval(struct parser *p, const struct yaml_tree_node *v, int *out)
{
    int rc = yaml_fields_scalar(&p->f, v, "approval");
    if (rc)
        return rc;
    if (strcmp(v->value, "required") == 0)
        *out = POLICY_APPROVAL_REQUIRED;
    else if (strcmp(v->value, "none") == 0)
        *out = POLICY_APPROVAL_NONE;
    else
        return yaml_fields_fail(&p->f, v,
                                "approval: 'required' (a person approves each disruptive "
                                "step, whatever the mode) or 'none' (never asked, also in "
                                "approve mode)");
    return 0;
}

static int parse_step(struct parser *p, const struct yaml_tree_node *n, int on_resolved,
                      struct policy_step *s)
{
    s->line = n->line;
    s->col = n->col;
    int rc = yaml_fields_mapping(&p->f, n, "step");
    if (rc)
        return rc;
    const struct yaml_tree_node *v = yaml_tree_get(n, "action");
    if (!v)
        return yaml_fields_fail(&p->f, n, "step: needs an action");
    if ((rc = yaml_fields_scalar(&p->f, v, "action")))
        return rc;
    int kind = medic_action_parse_kind(v->value);
    if (kind < 0) {
        char names[256] = "";
        for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++) {
            size_t at = strlen(names);
            snprintf(names + at, sizeof(names) - at, "%s%s", k ? ", " : "",
                     medic_action_name((enum medic_action_kind)k));
        }
        return yaml_fields_fail(&p->f, v, "action: '%s' is not one of %s", v->value, names);
    }
    medic_action_init(&s->action, (enum medic_action_kind)kind);
    const char *name = v->value;
    if (on_resolved && medic_action_disruptive(s->action.kind))
        return yaml_fields_fail(&p->f, v,
                                "action: on_resolved takes resume, restore_power_limit or notify, "
                                "not %s",
                                name);
    /* every key is the action, after, or a parameter of this action */
    for (size_t i = 0; i < n->count; i++) {
        const char *key = n->keys[i];
        if (strcmp(key, "action") == 0)
            continue;
        struct yaml_tree_node at = {.line = n->key_lines[i], .col = n->key_cols[i]};
        if (strcmp(key, "if_failed") == 0) {
            if (on_resolved)
                return yaml_fields_fail(&p->f, n->items[i],
                                        "if_failed: not a parameter of %s in on_resolved", name);
            if ((rc = yaml_fields_bool(&p->f, n->items[i], "if_failed", &s->if_failed)))
                return rc;
            continue;
        }
        if (strcmp(key, "approval") == 0) {
            if (on_resolved || !medic_action_disruptive(s->action.kind))
                return yaml_fields_fail(&p->f, n->items[i],
                                        "approval: only a disruptive step (drain, power_limit, "
                                        "ipmi_power_cycle, gpu_reset) waits for a person, not %s%s",
                                        name, on_resolved ? " in on_resolved" : "");
            if ((rc = parse_approval(p, n->items[i], &s->approval)))
                return rc;
            continue;
        }
        if (strcmp(key, "after_from") == 0) {
            const struct yaml_tree_node *from = n->items[i];
            if (on_resolved)
                return yaml_fields_fail(&p->f, from,
                                        "after_from: not a parameter of %s in on_resolved", name);
            if ((rc = yaml_fields_scalar(&p->f, from, "after_from")))
                return rc;
            if (strcmp(from->value, "previous") == 0)
                s->after_previous = 1;
            else if (strcmp(from->value, "alert") != 0)
                return yaml_fields_fail(&p->f, from,
                                        "after_from: 'alert' (after counts from the alert's "
                                        "start, the default) or 'previous' (from when the step "
                                        "before it ended)");
            continue;
        }
        if (strcmp(key, "after") == 0) {
            if (on_resolved)
                return yaml_fields_fail(&p->f, n->items[i],
                                        "after: not a parameter of %s in on_resolved", name);
            if ((rc = yaml_fields_duration(&p->f, n->items[i], "after", &s->after)))
                return rc;
            continue;
        }
        const struct medic_action_param *param = NULL;
        int known = 0;
        for (size_t k = 0; k < medic_action_param_count; k++) {
            if (strcmp(medic_action_params[k].key, key) != 0)
                continue;
            known = 1;
            if (medic_action_params[k].kind == s->action.kind)
                param = &medic_action_params[k];
        }
        if (!param && known)
            return yaml_fields_fail(&p->f, n->items[i], "%s: not a parameter of %s%s", key, name,
                                    on_resolved ? " in on_resolved" : "");
        if (!param)
            return yaml_fields_fail(&p->f, &at, "unknown key '%s' in a step", key);
        if ((rc = parse_param(p, n->items[i], param, s)))
            return rc;
    }
    for (size_t k = 0; k < medic_action_param_count; k++) {
        const struct medic_action_param *param = &medic_action_params[k];
        if (param->kind == s->action.kind && param->required && !yaml_tree_get(n, param->key))
            return yaml_fields_fail(&p->f, n, "%s: needs %s", name, param->key);
    }
    return 0;
}

static int parse_steps(struct parser *p, const struct yaml_tree_node *n, const char *key,
                       int on_resolved, struct policy_step **out, size_t *count)
{
    int rc = yaml_fields_sequence(&p->f, n, key);
    if (rc)
        return rc;
    if (n->count == 0 || n->count > POLICY_MAX_STEPS)
        return yaml_fields_fail(&p->f, n, "%s: expected 1 to %d steps", key, POLICY_MAX_STEPS);
    *out = calloc(n->count, sizeof(**out));
    if (!*out)
        return medic_error_set(p->f.err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n->count; i++) {
        (*count)++;
        if ((rc = parse_step(p, n->items[i], on_resolved, &(*out)[i])))
            return rc;
        /* a fallback follows a step whose outcome the ladder waits for */
        if (!on_resolved && (*out)[i].if_failed &&
            (i == 0 || (!medic_action_disruptive((*out)[i - 1].action.kind) &&
                        (*out)[i - 1].action.kind != MEDIC_ACTION_VERIFY)))
            return yaml_fields_fail(&p->f, yaml_tree_get(n->items[i], "if_failed"),
                                    "if_failed: the step before must be drain, power_limit, "
                                    "ipmi_power_cycle, gpu_reset or verify (their outcome is "
                                    "awaited)");
        if (!on_resolved && i == 0 && (*out)[i].after_previous)
            return yaml_fields_fail(&p->f, yaml_tree_get(n->items[i], "after_from"),
                                    "after_from: previous needs a step before it; the first "
                                    "step counts from the alert's start");
        /* on_resolved steps have no after: all of them are decided at the
         * resolve; a step counted from the one before comes after it anyway */
        if (!on_resolved && i > 0 && !(*out)[i].after_previous && !(*out)[i - 1].after_previous &&
            (*out)[i].after <= (*out)[i - 1].after) {
            /* the step that comes too early, and the time that would do */
            const struct yaml_tree_node *after = yaml_tree_get(n->items[i], "after");
            char at[32], before[32], suggest[32];
            medic_duration_format((*out)[i].after, at, sizeof(at));
            medic_duration_format((*out)[i - 1].after, before, sizeof(before));
            int64_t prev = (*out)[i - 1].after, minute = 60 * MEDIC_NS_PER_SEC;
            medic_duration_format(prev + (prev && prev % minute == 0 ? minute : MEDIC_NS_PER_SEC),
                                  suggest, sizeof(suggest));
            return yaml_fields_fail(
                &p->f, after ? after : n->items[i],
                "after: step %zu (%s) comes at %s%s, no later than step %zu (%s) at %s; each step "
                "must come later than the one before: give it `after: %s` or more",
                i + 1, medic_action_name((*out)[i].action.kind), at,
                after ? "" : " (it has no after:)", i, medic_action_name((*out)[i - 1].action.kind),
                before, suggest);
        }
    }
    return 0;
}

/* KEY: [gpu_reset, drain_and_reset]: names of NVML's recovery actions,
 * as bits by their code into *mask. */
int policy__parse_recovery(struct parser *p, const struct yaml_tree_node *v, const char *key,
                           unsigned *mask)
{
    int rc = yaml_fields_sequence(&p->f, v, key);
    if (rc == 0 && v->count == 0)
        rc = yaml_fields_fail(&p->f, v, "%s: name at least one", key);
    for (size_t i = 0; rc == 0 && i < v->count; i++) {
        const struct yaml_tree_node *x = v->items[i];
        int code = yaml_fields_scalar(&p->f, x, key) ? -2 : medic_recovery_parse(x->value);
        if (code == -2)
            return MEDIC_E_INVALID;
        if (code < 0)
            return yaml_fields_fail(&p->f, x,
                                    "%s: '%s' is not one of none, gpu_reset, node_reboot, "
                                    "drain_p2p, drain_and_reset, bus_reset",
                                    key, x->value);
        *mask |= 1u << code;
    }
    return rc;
}

static int parse_when(struct parser *p, const struct yaml_tree_node *n, struct policy *pol)
{
    static const char *const keys[] = {"risk_at_least", "risk_unknown", "recovery_action",
                                       "recovery_unknown", NULL};
    int rc = yaml_fields_mapping(&p->f, n, "when");
    if (rc == 0)
        rc = yaml_fields_known_keys(&p->f, n, "when", keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(n, "risk_at_least")))
        rc = yaml_fields_number(&p->f, v, "risk_at_least", 0, 1, &pol->risk_at_least);
    if (rc == 0 && (v = yaml_tree_get(n, "risk_unknown"))) {
        rc = yaml_fields_scalar(&p->f, v, "risk_unknown");
        if (rc == 0 && strcmp(v->value, "act") == 0)
            pol->act_on_unknown_risk = 1;
        else if (rc == 0 && strcmp(v->value, "skip") == 0)
            pol->act_on_unknown_risk = 0;
        else if (rc == 0)
            rc = yaml_fields_fail(&p->f, v, "risk_unknown: expected act or skip, got '%s'",
                                  v->value);
    }
    if (rc == 0 && (v = yaml_tree_get(n, "recovery_action")))
        rc = policy__parse_recovery(p, v, "recovery_action", &pol->recovery_mask);
    if (rc == 0 && (v = yaml_tree_get(n, "recovery_unknown"))) {
        rc = yaml_fields_scalar(&p->f, v, "recovery_unknown");
        if (rc == 0 && (strcmp(v->value, "act") == 0 || strcmp(v->value, "skip") == 0))
            pol->act_on_unknown_recovery = strcmp(v->value, "act") == 0;
        else if (rc == 0)
            rc = yaml_fields_fail(&p->f, v, "recovery_unknown: expected act or skip, got '%s'",
                                  v->value);
    }
    return rc;
}

static int parse_budget(struct parser *p, const struct yaml_tree_node *n, struct policy *pol)
{
    static const char *const keys[] = {"count", "window", NULL};
    int rc = yaml_fields_mapping(&p->f, n, "max_actions_per_node");
    if (rc == 0)
        rc = yaml_fields_known_keys(&p->f, n, "max_actions_per_node", keys);
    const struct yaml_tree_node *count = yaml_tree_get(n, "count");
    const struct yaml_tree_node *window = yaml_tree_get(n, "window");
    if (rc == 0 && (!count || !window))
        rc = yaml_fields_fail(&p->f, n, "max_actions_per_node: needs count and window");
    if (rc == 0)
        rc = yaml_fields_size(&p->f, count, "count", 1, 1000, &pol->budget_count);
    if (rc == 0)
        rc = yaml_fields_duration(&p->f, window, "window", &pol->budget_window);
    if (rc == 0 && pol->budget_window == 0)
        rc = yaml_fields_fail(&p->f, window, "window: must be longer than 0");
    return rc;
}

static int parse_policy(struct parser *p, const struct yaml_tree_node *n, struct policy *pol)
{
    static const char *const keys[] = {"name",
                                       "match",
                                       "when",
                                       "cooldown",
                                       "max_actions_per_node",
                                       "steps",
                                       "on_resolved",
                                       "continue",
                                       "dry_run",
                                       "approval",
                                       "approval_timeout",
                                       "verify_before_resume",
                                       NULL};
    pol->act_on_unknown_risk = 1;
    pol->verify_before_resume = 1;
    pol->approval_timeout = POLICY_DEFAULT_APPROVAL_TIMEOUT;
    pol->line = n->line;
    pol->col = n->col;
    int rc = yaml_fields_mapping(&p->f, n, "policy");
    if (rc == 0)
        rc = yaml_fields_known_keys(&p->f, n, "a policy", keys);
    if (rc)
        return rc;
    const struct yaml_tree_node *v = yaml_tree_get(n, "name");
    if (!v)
        return yaml_fields_fail(&p->f, n, "policy: needs a name");
    if ((rc = yaml_fields_string(&p->f, v, "name", &pol->name)))
        return rc;
    if (strspn(pol->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
            strlen(pol->name) ||
        strlen(pol->name) > 64)
        return yaml_fields_fail(&p->f, v, "name: use up to 64 letters, digits, '-', '_' or '.'");
    v = yaml_tree_get(n, "match");
    if (!v)
        return yaml_fields_fail(&p->f, n, "policy '%s': needs match", pol->name);
    if ((rc = yaml_fields_string(&p->f, v, "match", &pol->match_text)))
        return rc;
    int col = 1;
    struct medic_error err = {0};
    if (policy_matchers_parse(pol->match_text, strlen(pol->match_text), &pol->match, &col, &err)) {
        struct yaml_tree_node at = {.line = v->line, .col = v->col + col - 1 + (v->quoted ? 1 : 0)};
        return yaml_fields_fail(&p->f, &at, "%s", err.msg);
    }
    if ((v = yaml_tree_get(n, "when")) && (rc = parse_when(p, v, pol)))
        return rc;
    if ((v = yaml_tree_get(n, "cooldown")) &&
        (rc = yaml_fields_duration(&p->f, v, "cooldown", &pol->cooldown)))
        return rc;
    if ((v = yaml_tree_get(n, "max_actions_per_node")) && (rc = parse_budget(p, v, pol)))
        return rc;
    v = yaml_tree_get(n, "steps");
    if (!v)
        return yaml_fields_fail(&p->f, n, "policy '%s': needs steps", pol->name);
    if ((rc = parse_steps(p, v, "steps", 0, &pol->steps, &pol->step_count)))
        return rc;
    if ((v = yaml_tree_get(n, "on_resolved")) &&
        (rc = parse_steps(p, v, "on_resolved", 1, &pol->on_resolved, &pol->on_resolved_count)))
        return rc;
    if ((v = yaml_tree_get(n, "continue")) &&
        (rc = yaml_fields_bool(&p->f, v, "continue", &pol->continue_matching)))
        return rc;
    if ((v = yaml_tree_get(n, "dry_run")) &&
        (rc = yaml_fields_bool(&p->f, v, "dry_run", &pol->dry_run)))
        return rc;
    if ((v = yaml_tree_get(n, "verify_before_resume")) &&
        (rc = yaml_fields_bool(&p->f, v, "verify_before_resume", &pol->verify_before_resume)))
        return rc;
    if ((v = yaml_tree_get(n, "approval")) && (rc = parse_approval(p, v, &pol->approval)))
        return rc;
    if ((v = yaml_tree_get(n, "approval_timeout"))) {
        if ((rc = yaml_fields_duration(&p->f, v, "approval_timeout", &pol->approval_timeout)))
            return rc;
        if (pol->approval_timeout < MEDIC_NS_PER_SEC)
            return yaml_fields_fail(&p->f, v, "approval_timeout: at least 1s");
    }
    return 0;
}

int policy_set_parse(const char *file, const struct yaml_tree_node *policies,
                     const struct yaml_tree_node *safety, const char *const *notifiers,
                     size_t notifier_count, struct policy_set *out, struct medic_error *err)
{
    struct parser p = {{file, err}, notifiers, notifier_count};
    memset(out, 0, sizeof(*out));
    policy_safety_default(&out->safety);
    int rc = 0;
    if (safety)
        rc = policy__parse_safety(&p, safety, &out->safety);
    if (rc == 0 && policies) {
        rc = yaml_fields_sequence(&p.f, policies, "policies");
        if (rc == 0 && policies->count > POLICY_MAX_POLICIES)
            rc = yaml_fields_fail(&p.f, policies, "policies: more than %d", POLICY_MAX_POLICIES);
        if (rc == 0 && policies->count &&
            !(out->items = calloc(policies->count, sizeof(*out->items))))
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        for (size_t i = 0; rc == 0 && i < policies->count; i++) {
            out->count++;
            rc = parse_policy(&p, policies->items[i], &out->items[i]);
            for (size_t k = 0; rc == 0 && k < i; k++)
                if (strcmp(out->items[k].name, out->items[i].name) == 0)
                    rc = yaml_fields_fail(&p.f, yaml_tree_get(policies->items[i], "name"),
                                          "name: policy '%s' is defined twice (first at line %d)",
                                          out->items[i].name, out->items[k].line);
        }
    }
    static _Atomic uint64_t generations;
    if (rc)
        policy_set_release(out);
    else
        out->generation = ++generations;
    return rc;
}

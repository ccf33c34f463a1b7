/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "config.h"
#include "timeutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fail_serving(const struct medic_config *config, int line, int col,
                        struct medic_error *err, const char *msg)
{
    if (line > 0)
        return medic_error_set(err, MEDIC_E_INVALID, "%s:%d:%d: %s", config->source, line, col,
                               msg);
    return medic_error_set(err, MEDIC_E_INVALID, "%s: %s", config->source, msg);
}

static int has_disruptive_steps(const struct policy_set *ps)
{
    for (size_t i = 0; i < ps->count; i++)
        for (size_t k = 0; k < ps->items[i].step_count; k++)
            if (medic_action_disruptive(ps->items[i].steps[k].action.kind))
                return 1;
    return 0;
}

int medic_config_check_serving(const struct medic_config *config, struct medic_error *err)
{
    if (!medic_mode_acts(config->mode))
        return 0;
    const char *mode = medic_mode_name(config->mode);
    char msg[300];
    if (!config->webhook_auth.bearer_token && !config->webhook_auth.basic_username) {
        snprintf(msg, sizeof(msg),
                 "mode: %s needs authentication on the webhook (auth: webhook_bearer_token_file "
                 "or webhook_basic_auth): anyone who reaches the port could trigger power cycles",
                 mode);
        return fail_serving(config, config->mode_line, config->mode_col, err, msg);
    }
    if (has_disruptive_steps(&config->policies) && !config->policies.safety.storm_notifier) {
        snprintf(msg, sizeof(msg),
                 "mode: %s with disruptive policies needs safety.storm.notifier: a storm would "
                 "hold actions back and tell nobody",
                 mode);
        return fail_serving(config, config->storm_line ? config->storm_line : config->mode_line,
                            config->storm_line ? config->storm_col : config->mode_col, err, msg);
    }
    return 0;
}

/* Appends one warning (printf-style) when there is room. */
static void warn(struct medic_config_warnings *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn(struct medic_config_warnings *w, const char *fmt, ...)
{
    if (w->count == MEDIC_CONFIG_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->items[w->count++], sizeof(w->items[0]), fmt, ap);
    va_end(ap);
}

void medic_config_warn(const struct medic_config *config, struct medic_config_warnings *out)
{
    const struct policy_safety *s = &config->policies.safety;
    int disruptive = has_disruptive_steps(&config->policies);
    out->count = 0;
    if (config->policies.count == 0)
        warn(out, "no policy: every alert gets a no_match decision and nothing is done. A "
                  "configuration file replaces the built-in policies (an empty file keeps "
                  "them): add `policies:` or `policy_files:`");
    if (!medic_mode_acts(config->mode) && disruptive && !s->storm_notifier)
        warn(out, "disruptive policies and no safety.storm.notifier: a storm would hold actions "
                  "back and tell nobody; medic serve refuses this in mode: live");
    /* a window that covers no node protects nothing, silently */
    for (size_t i = 0; i < s->maintenance_count; i++) {
        const struct maintenance_window *m = &s->maintenance[i];
        int covers = 0;
        for (size_t k = 0; k < config->inventory.count && !covers; k++)
            covers = policy_maintenance_covers(m, config->inventory.nodes[k].name);
        if (!covers)
            warn(out,
                 "safety.maintenance window %zu (nodes: %.200s) covers no inventory node: "
                 "nothing is held during it; nodes is a Slurm hostlist (gpu-[0001-0100,0200]), "
                 "~REGEX a regular expression",
                 i + 1, m->nodes_text);
    }
    if (config->mode == MEDIC_MODE_APPROVE && disruptive && config->approver_count == 0)
        warn(out, "mode: approve and no auth.approvers: only an admin credential of its own can "
                  "answer pending steps (the webhook's never does), and the audit log cannot "
                  "tell people apart; give each person a token in auth.approvers");
    /* one secret in two classes: whoever holds it does both */
    struct named_token {
        const char *what, *token;
    } tokens[3 + MEDIC_MAX_APPROVERS] = {{"the webhook's", config->webhook_auth.bearer_token},
                                         {"the read API's", config->read_auth.bearer_token},
                                         {"the admin's", config->admin_auth.bearer_token}};
    size_t ntokens = 3;
    for (size_t i = 0; i < config->approver_count && i < MEDIC_MAX_APPROVERS; i++)
        tokens[ntokens++] = (struct named_token){"an approver's", config->approvers[i].token};
    int said = 0;
    for (size_t i = 0; i < ntokens && !said; i++)
        for (size_t k = i + 1; k < ntokens && !said; k++)
            if (tokens[i].token && tokens[k].token &&
                strcmp(tokens[i].token, tokens[k].token) == 0 && (i < 3 || k < 3)) {
                warn(out,
                     "auth: %s bearer token is also %s: whoever holds it does both (the "
                     "credential that fires alerts must not approve or pause); give each its own "
                     "token file",
                     tokens[i].what, tokens[k].what);
                said = 1;
            }
    if (config->audit_writers > 1 && !audit_location_is_shared(config->audit_path))
        warn(out,
             "audit.writers is %zu but the audit log is SQLite (audit.path), which one "
             "writer writes: it applies to audit.url (PostgreSQL)",
             config->audit_writers);
    if (config->ha_replica && !audit_location_is_shared(config->audit_path))
        warn(out, "ha.replica is set but the audit log is SQLite (audit.path): one process owns "
                  "an SQLite file, so replicas need audit.url (PostgreSQL) to share one log");
    /* secrets named and nowhere to read them: every action on them fails
     * (the file may rightly be absent where only replay or dry-run runs) */
    if (!config->credentials_file) {
        const char *bmc = NULL, *agent = NULL;
        for (size_t k = 0; k < config->inventory.count; k++) {
            const struct inventory_node *n = &config->inventory.nodes[k];
            if (n->has_bmc && !bmc)
                bmc = n->name;
            if (n->agent_url && n->agent_credentials && !agent)
                agent = n->name;
        }
        if (bmc)
            warn(out,
                 "inventory nodes have a bmc (node '%s' among them) and no credentials_file is "
                 "set: every power cycle and power check fails for want of a username and "
                 "password",
                 bmc);
        if (agent)
            warn(out,
                 "inventory nodes name agent credentials (node '%s' among them) and no "
                 "credentials_file is set: every call to their agents fails",
                 agent);
    }
    /* paths on this host: a typo here fails every drain and resume later */
    if (config->slurm_conf && access(config->slurm_conf, R_OK) != 0)
        warn(out,
             "slurm.conf '%s' cannot be read on this host (%s): where medic serve runs "
             "without it, every drain and resume fails",
             config->slurm_conf, strerror(errno));
    if (config->scontrol && strchr(config->scontrol, '/') && access(config->scontrol, X_OK) != 0)
        warn(out,
             "slurm.scontrol '%s' cannot be run on this host (%s): where medic serve runs "
             "without it, every drain and resume fails",
             config->scontrol, strerror(errno));
    size_t inventory = config->inventory.count;
    if (disruptive && inventory && s->max_disrupted_fraction * (double)inventory < 1.0 - 1e-9)
        warn(out,
             "safety.max_disrupted_fraction %g of %zu inventory nodes allows no node at all: "
             "every disruptive action will be suppressed (raise it to at least %.3g)",
             s->max_disrupted_fraction, inventory, 1.0 / (double)inventory);
    if (disruptive && s->alert_expiry <= 4 * 3600 * MEDIC_NS_PER_SEC) {
        char expiry[32];
        medic_duration_format(s->alert_expiry, expiry, sizeof(expiry));
        warn(out,
             "safety.alert_expiry %s is not above Alertmanager's default repeat_interval (4h): "
             "an alert that still fires may expire between two re-sends and its incident be "
             "undone; set it well above your routes' repeat_interval",
             expiry);
    }
    /* a group cap that caps nothing (a typo in its label or hostlist), or
     * one whose fraction of a small group allows no node at all */
    for (size_t i = 0; i < s->group_cap_count && inventory; i++) {
        const struct group_cap *g = &s->group_caps[i];
        size_t covered = 0, starved = 0;
        const char *example = NULL;
        for (size_t k = 0; k < inventory; k++) {
            const char *group = policy_group_of(g, &config->inventory.nodes[k]);
            if (!group)
                continue;
            covered++;
            if (g->max_fraction >= 0 &&
                policy_group_limit(g, policy_group_size(g, group, &config->inventory)) == 0 &&
                g->max_disrupted != 0) {
                starved++;
                example = group;
            }
        }
        if (!covered)
            warn(out, "%s:%d:%d: safety.group_caps entry %zu (%s%s) covers no inventory node: %s",
                 config->source, g->line, g->col, i + 1,
                 g->label ? "label: " : "nodes: ", g->label ? g->label : g->nodes_text,
                 g->label ? "no node has that label (labels: { ... } in the inventory)"
                          : "check the hostlist against the inventory's names");
        else if (starved)
            warn(out,
                 "%s:%d:%d: safety.group_caps entry %zu: max_disrupted_fraction %g allows no "
                 "node at all in the groups of %zu node(s) (%s=%s among them): every disruptive "
                 "action there will be held; set max_disrupted instead for small groups",
                 config->source, g->line, g->col, i + 1, g->max_fraction, starved,
                 g->label ? g->label : "nodes", example);
    }
    /* a health check made lenient lets a node back that is not repaired */
    const struct medic_health_criteria *h = &s->health;
    if (h->missing_gpus)
        warn(out,
             "safety.health.missing_gpus %d: a node with %d GPU(s) fewer than the inventory says "
             "passes its check and returns to Slurm; jobs that ask for every GPU of a node will "
             "not fit on it",
             h->missing_gpus, h->missing_gpus);
    for (int code = 1; code < MEDIC_RECOVERY_COUNT; code++)
        if (h->recovery_ok & (1u << code))
            warn(out,
                 "safety.health.recovery_actions accepts %s: a node whose driver still asks for "
                 "it passes its check and returns to Slurm unrepaired",
                 medic_recovery_names[code]);
    if (!h->slurm || !h->bmc)
        warn(out, "safety.health.%s: false: a node passes its check without %s",
             !h->slurm ? "slurm" : "bmc",
             !h->slurm ? "Slurm saying it responds" : "its BMC saying its power is on");
    for (size_t i = 0; i < config->policies.count; i++) {
        const struct policy *p = &config->policies.items[i];
        int policy_disrupts = 0;
        /* the built-in model has not met its ship condition on the
         * simulator held out for it (docs/model-final.md): a policy that
         * waits for its risk acts on a ranking no better than a rule */
        if (!config->model_path && p->risk_at_least > 0)
            warn(out,
                 "%s:%d:%d: policy '%s' acts only at when.risk_at_least %g of the built-in "
                 "model, which has not been shown to rank failing GPUs better than a rule "
                 "written from the raw DCGM counters on fleets it was not chosen on "
                 "(docs/model-final.md): act on the "
                 "alert and let the decisions show the risk, or set model.path to a model "
                 "trained and checked on your own fleet (docs/model.md)",
                 config->source, p->line, p->col, p->name, p->risk_at_least);
        for (size_t k = 0; k < p->step_count; k++) {
            const struct policy_step *st = &p->steps[k];
            if (!medic_action_disruptive(st->action.kind))
                continue;
            policy_disrupts = 1;
            if (st->after >= s->max_alert_age) {
                char after[32], age[32];
                medic_duration_format(st->after, after, sizeof(after));
                medic_duration_format(s->max_alert_age, age, sizeof(age));
                warn(out,
                     "%s:%d:%d: policy '%s' step %zu (%s) comes after %s, when the alert is "
                     "older than safety.max_alert_age %s: it can never run",
                     config->source, st->line, st->col, p->name, k + 1,
                     medic_action_name(st->action.kind), after, age);
            }
        }
        /* a Slurm reboot of a node no step drained: refused when it comes */
        for (size_t k = 0, drained = 0; k < p->step_count; k++) {
            drained |= p->steps[k].action.kind == MEDIC_ACTION_DRAIN && !p->steps[k].if_failed;
            if (p->steps[k].action.kind == MEDIC_ACTION_SLURM_REBOOT && !drained)
                warn(out,
                     "%s:%d:%d: policy '%s' step %zu (slurm_reboot) has no drain before it: "
                     "medic reboots only a drained node (Slurm returns one it reboots undrained "
                     "to service), so it is refused unless someone drained the node; add "
                     "`- action: drain` before it",
                     config->source, p->steps[k].line, p->steps[k].col, p->name, k + 1);
        }
        /* a power cycle, a reboot or a reset and nothing that looks at the node after it */
        for (size_t k = 0; k < p->step_count; k++) {
            enum medic_action_kind kind = p->steps[k].action.kind;
            if (kind != MEDIC_ACTION_IPMI_POWER_CYCLE && kind != MEDIC_ACTION_GPU_RESET &&
                kind != MEDIC_ACTION_SLURM_REBOOT)
                continue;
            int verified = 0, resumes = 0, disrupts_after = 0;
            for (size_t j = k + 1; j < p->step_count; j++) {
                verified |= p->steps[j].action.kind == MEDIC_ACTION_VERIFY;
                disrupts_after |= !verified && !p->steps[j].if_failed &&
                                  medic_action_disruptive(p->steps[j].action.kind);
            }
            for (size_t j = 0; j < p->on_resolved_count; j++)
                resumes |= p->on_resolved[j].action.kind == MEDIC_ACTION_RESUME;
            if (!verified && resumes && !p->verify_before_resume)
                warn(out,
                     "%s:%d:%d: policy '%s' step %zu (%s) and a resume with "
                     "verify_before_resume: false and no verify step after it: the node returns "
                     "to Slurm on the alert's resolve alone, whether or not it came back healthy",
                     config->source, p->steps[k].line, p->steps[k].col, p->name, k + 1,
                     medic_action_name(kind));
            else if (disrupts_after)
                warn(out,
                     "%s:%d:%d: policy '%s' step %zu (%s) is followed by another disruptive step "
                     "with no verify between: it may run while the node is still coming back; "
                     "add `- action: verify` after it",
                     config->source, p->steps[k].line, p->steps[k].col, p->name, k + 1,
                     medic_action_name(kind));
            break;
        }
        if (policy_disrupts && !p->cooldown && !p->budget_count)
            warn(out,
                 "%s:%d:%d: policy '%s' disrupts nodes with neither a cooldown nor "
                 "max_actions_per_node: a flapping alert can drain or power-cycle the same node "
                 "again and again",
                 config->source, p->line, p->col, p->name);
    }
}

static int credentials_set(const struct medic_credentials *c)
{
    return c->bearer_token || c->basic_username;
}

const struct medic_credentials *medic_config_read_auth(const struct medic_config *config)
{
    if (credentials_set(&config->read_auth) || !medic_mode_acts(config->mode))
        return &config->read_auth;
    return &config->webhook_auth;
}

const struct medic_credentials *medic_config_admin_auth(const struct medic_config *config)
{
    if (credentials_set(&config->admin_auth) || !medic_mode_acts(config->mode))
        return &config->admin_auth;
    return &config->webhook_auth;
}

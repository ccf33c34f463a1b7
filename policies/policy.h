/* Policies: which alerts a policy takes (matchers and a risk condition),
 * the ladder of steps it climbs while the alert keeps firing, what it does
 * when the alert resolves, and the fleet-wide safety settings. Parsed from
 * YAML into a fresh structure and validated all-or-nothing. */
#ifndef MEDIC_POLICIES_POLICY_H
#define MEDIC_POLICIES_POLICY_H

#include "error.h"
#include "matcher.h"
#include "template.h"
#include "yaml_tree.h"

#include <stddef.h>
#include <stdint.h>

enum policy_action {
    POLICY_ACTION_POWER_LIMIT,
    POLICY_ACTION_RESTORE_POWER_LIMIT,
    POLICY_ACTION_IPMI_POWER_CYCLE,
    POLICY_ACTION_DRAIN,
    POLICY_ACTION_RESUME,
    POLICY_ACTION_NOTIFY,
};

/* "power_limit", "drain", ... */
const char *policy_action_name(enum policy_action action);
/* 1 for the actions that take capacity away from a node: power_limit,
 * ipmi_power_cycle, drain. Only these pass the safety guards. */
int policy_action_disruptive(enum policy_action action);

#define POLICY_MAX_GPUS 64

struct policy_step {
    int64_t after; /* ns after the alert started; 0 for the first step */
    enum policy_action action;
    int watts;                 /* power_limit */
    int gpus[POLICY_MAX_GPUS]; /* power_limit: which GPUs; none = all */
    size_t gpu_count;
    int power_on;                /* ipmi_power_cycle: power on if it stays off (default 1) */
    struct policy_template text; /* drain: reason; notify: message */
    int has_text;
    char *notifier; /* notify */
    int line, col;
};

struct policy {
    char *name;
    char *match_text;
    struct policy_matchers match;
    double risk_at_least;    /* 0: any risk */
    int act_on_unknown_risk; /* when: risk_unknown: act (1, default) | skip (0) */
    int64_t cooldown;        /* 0: none */
    size_t budget_count;     /* max_actions_per_node; 0: none */
    int64_t budget_window;
    struct policy_step *steps;
    size_t step_count;
    struct policy_step *on_resolved;
    size_t on_resolved_count;
    int continue_matching;
    int dry_run;
    int line, col;
};

struct maintenance_window {
    regex_t nodes; /* anchored POSIX extended regex over inventory node names */
    char *nodes_text;
    int64_t start, end;
    char *reason;
};

struct policy_safety {
    size_t max_disruptive_in_flight; /* default 2 */
    double max_disrupted_fraction;   /* default 0.05 */
    size_t storm_max_alerting_nodes; /* default 20 */
    int64_t storm_window;            /* default 5m */
    char *storm_notifier;            /* told once when a storm starts; NULL: none */
    int64_t max_alert_age;           /* default 1h */
    struct maintenance_window *maintenance;
    size_t maintenance_count;
};

struct policy_set {
    struct policy *items;
    size_t count;
    struct policy_safety safety;
};

#define POLICY_MAX_POLICIES 1000
#define POLICY_MAX_STEPS 16

void policy_safety_default(struct policy_safety *safety);

/* Parses the `policies` sequence and the `safety` mapping (either may be
 * NULL) of a YAML document from file into out. notifiers (count names)
 * are the notifier names a notify step may use; NULL to skip that check.
 * Errors are "FILE:LINE:COL: message". */
int policy_set_parse(const char *file, const struct yaml_tree_node *policies,
                     const struct yaml_tree_node *safety, const char *const *notifiers,
                     size_t notifier_count, struct policy_set *out, struct medic_error *err);
void policy_set_release(struct policy_set *set);

#endif

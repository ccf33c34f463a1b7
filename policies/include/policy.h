/* SPDX-License-Identifier: Apache-2.0 */
/* Policies: which alerts a policy takes (matchers and a risk condition),
 * the ladder of steps it climbs while the alert keeps firing, what it does
 * when the alert resolves, and the fleet-wide safety settings. Parsed from
 * YAML into a fresh structure and validated all-or-nothing. */
#ifndef MEDIC_POLICIES_POLICY_H
#define MEDIC_POLICIES_POLICY_H

#include "action.h"
#include "error.h"
#include "matcher.h"
#include "template.h"
#include "yaml_tree.h"

#include <stddef.h>
#include <stdint.h>

/* One rung of a ladder: an action with its literal parameters (watts,
 * GPUs, power_on, notifier) and, for a drain's reason or a notification's
 * message, a template rendered when the step is decided. */
struct policy_step {
    int64_t after; /* ns after the alert started; 0 for the first step */
    /* after_from: previous: `after` counts from when the step before it
     * ended (its outcome, or its decision when it has none to wait for),
     * not from the alert's start; a late approval then never puts this
     * step straight after the one before */
    int after_previous;
    struct medic_action action;
    struct policy_template text; /* the action's MEDIC_PARAM_TEXT parameter */
    int has_text;
    int if_failed; /* runs only when the step before it did not succeed; skipped otherwise */
    /* POLICY_APPROVAL_MODE: as its policy says; required or none override it */
    int approval;
    int line, col;
};

struct policy {
    char *name;
    char *match_text;
    struct policy_matchers match;
    double risk_at_least;    /* 0: any risk */
    int act_on_unknown_risk; /* when: risk_unknown: act (1, default) | skip (0) */
    /* when: recovery_action: the driver's recommended recovery actions
     * (bits by their code, common/action.h) this policy takes; 0: any */
    unsigned recovery_mask;
    int act_on_unknown_recovery; /* when: recovery_unknown: act (1) | skip (0, default) */
    int64_t cooldown;            /* 0: none */
    size_t budget_count;         /* max_actions_per_node; 0: none */
    int64_t budget_window;
    struct policy_step *steps;
    size_t step_count;
    struct policy_step *on_resolved;
    size_t on_resolved_count;
    int continue_matching;
    int dry_run;
    /* whether a person approves its disruptive steps first:
     * POLICY_APPROVAL_MODE as medic's mode says (approve: yes), or
     * required or none whatever the mode (dry-run never asks) */
    int approval;
    int64_t approval_timeout; /* a pending step expires this long after it was decided; 30m */
    /* a resume waits for a health check (verify) of a node the incident
     * disrupted; default 1 */
    int verify_before_resume;
    int line, col;
};

enum { POLICY_APPROVAL_MODE, POLICY_APPROVAL_REQUIRED, POLICY_APPROVAL_NONE };
#define POLICY_DEFAULT_APPROVAL_TIMEOUT (30 * 60 * MEDIC_NS_PER_SEC)

struct medic_hostlist;

struct maintenance_window {
    /* a Slurm hostlist (gpu-[0001-0100]), or, written ~REGEX, an anchored
     * POSIX extended regex over inventory node names */
    struct medic_hostlist *hosts; /* NULL: the regex */
    regex_t nodes;
    char *nodes_text;
    int64_t start, end; /* a dated window; unset for a recurring one */
    /* a recurring one (every: 'sunday 02:00-06:00'): the weekdays it
     * starts on (bit 0 Sunday), from and to as minutes of the local day
     * (to <= from: it ends the next day), on the clock of tz */
    unsigned days;
    int from_min, to_min;
    struct medic_tz *tz;
    char *every, *zone;
    char *reason;
};

/* A cap on a topology group: one group per value of an inventory label
 * (every rack its own), or the nodes of a Slurm hostlist. */
struct group_cap {
    char *label;                  /* NULL: the hostlist's nodes are the group */
    struct medic_hostlist *hosts; /* when label is NULL */
    char *nodes_text;
    size_t max_disrupted; /* SIZE_MAX: not set */
    double max_fraction;  /* of the group's inventory nodes; < 0: not set */
    int line, col;
};

struct policy_safety {
    size_t max_disruptive_in_flight; /* default 2 */
    double max_disrupted_fraction;   /* default 0.05 */
    size_t storm_max_alerting_nodes; /* default 20 */
    int64_t storm_window;            /* default 5m */
    char *storm_notifier;            /* told once when a storm starts; NULL: none */
    int64_t max_alert_age;           /* default 1h */
    int64_t alert_expiry;            /* an alert not re-sent this long has gone; default 12h */
    int64_t restart_grace; /* after a start or takeover, disruptive steps wait this long for
                            * their alert to be seen again, then go by the stored state;
                            * default 5m */
    struct maintenance_window *maintenance;
    size_t maintenance_count;
    /* a node whose incidents reach this many within quarantine_window is
     * quarantined (kept drained for a person); 0: off. Default 3 in 7d */
    size_t quarantine_incidents;
    int64_t quarantine_window;
    struct medic_health_criteria health; /* what a verify accepts */
    struct group_cap *group_caps;        /* held to like the fleet caps */
    size_t group_cap_count;
    /* on-call hears of held or suppressed disruptive steps at most this
     * often (one message listing them); 0: never. Default 15m */
    int64_t held_notice;
    /* nodes in a Slurm maintenance reservation are in maintenance too */
    int maintenance_from_slurm;
};

struct policy_set {
    struct policy *items;
    size_t count;
    struct policy_safety safety;
    /* a number no other set parsed in this process has; 0 for a set built
     * by other means (the engine then assumes it may differ every time) */
    uint64_t generation;
};

#define POLICY_MAX_POLICIES 1000
#define POLICY_MAX_STEPS 16

void policy_safety_default(struct policy_safety *safety);
/* Whether window m is open at now (ns); *until (ns) when it is. */
int policy_maintenance_active(const struct maintenance_window *m, int64_t now, int64_t *until);
/* Whether window m covers node (its inventory name). */
int policy_maintenance_covers(const struct maintenance_window *m, const char *node);

/* The nodes max_disrupted_fraction lets medic hold disrupted at once in a
 * fleet of inventory nodes (0 for an empty inventory). */
size_t policy_max_disrupted_nodes(const struct policy_safety *safety, size_t inventory);

struct inventory;
struct inventory_node;
/* The group of cap that node belongs to: its label's value, or the
 * hostlist's text; NULL when the cap does not cover it. */
const char *policy_group_of(const struct group_cap *cap, const struct inventory_node *node);
/* The nodes cap lets medic hold disrupted in group, of its size nodes. */
size_t policy_group_limit(const struct group_cap *cap, size_t size);
/* The inventory nodes in group of cap. */
size_t policy_group_size(const struct group_cap *cap, const char *group,
                         const struct inventory *inventory);

/* Parses the `policies` sequence and the `safety` mapping (either may be
 * NULL) of a YAML document from file into out. notifiers (count names)
 * are the notifier names a notify step may use; NULL to skip that check.
 * Errors are "FILE:LINE:COL: message". */
int policy_set_parse(const char *file, const struct yaml_tree_node *policies,
                     const struct yaml_tree_node *safety, const char *const *notifiers,
                     size_t notifier_count, struct policy_set *out, struct medic_error *err);
void policy_set_release(struct policy_set *set);

#endif

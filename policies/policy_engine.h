/* The policy engine: for each alert, which step of which policy applies
 * now, and whether every safety guard lets it run. Evaluation is a pure
 * function of the policies, the inventory, the engine state, the alert and
 * the time passed in: no clock, no I/O. The caller records the decisions
 * and hands the executable ones to the actions.
 *
 * Semantics (docs/policies.md has the full story):
 * - An alert instance is (fingerprint, label set, startsAt); a resolved one
 *   is remembered for a day, so a late firing copy never reopens it. The
 *   first policy whose
 *   matchers and risk condition hold takes it (more with `continue`), and
 *   keeps it until it resolves, whatever the risk does later.
 * - Step k is due once the alert has fired `after` since it started. Each
 *   step is decided exactly once per instance, whatever the verdict, so
 *   repeats, retries and HA copies never run a step twice.
 * - Disruptive steps (drain, ipmi_power_cycle, power_limit) pass the
 *   guards: inventory, maintenance, max_alert_age, storm, cooldown, budget,
 *   fleet caps. The first that fails names the suppression's reason, and
 *   the ladder stops: the instance's later disruptive steps are suppressed
 *   too (a power cycle never follows a drain that did not happen), while
 *   notify steps still run.
 * - dry_run decisions change the state as execute decisions would, so that
 *   a dry run shows what live mode would have done, caps included. */
#ifndef MEDIC_POLICIES_ENGINE_H
#define MEDIC_POLICIES_ENGINE_H

#include "alert.h"
#include "buf.h"
#include "inventory.h"
#include "table.h"
#include "policy.h"

#include <stddef.h>
#include <stdint.h>

struct policy_alert {
    const char *fingerprint;
    enum medic_alert_status status;
    const struct medic_labels *labels;
    const struct medic_labels *annotations;
    int64_t starts_at; /* ns; MEDIC_TIME_UNSET is treated as now */
    double risk;       /* 0..1, NAN when unknown */
};

struct policy_context {
    const struct policy_set *policies;
    const struct inventory *inventory;
    const char *const *node_labels;
    size_t node_label_count;
    int live; /* global mode: 1 live, 0 dry-run */
};

/* error: the engine could not decide (out of memory, or over the
 * decisions' cap); recorded so that no alert goes undecided silently. */
enum policy_verdict {
    VERDICT_EXECUTE,
    VERDICT_DRY_RUN,
    VERDICT_SUPPRESSED,
    VERDICT_NO_MATCH,
    VERDICT_ERROR,
    VERDICT_COUNT
};

const char *policy_verdict_name(enum policy_verdict v);

struct policy_decision {
    char node[128]; /* the inventory name, else the label's value ("" when none) */
    int in_inventory;
    char alertname[128];
    char fingerprint[130];
    char policy[65]; /* "" for no_match and storm notices */
    int step;        /* index in steps or on_resolved; -1 when none */
    int on_resolved;
    int has_action;
    struct medic_action action; /* owned; set when has_action */
    int disruptive;
    enum policy_verdict verdict;
    char reason[512];
    double risk;
    int64_t time;
};

struct policy_decisions {
    struct policy_decision *items;
    size_t count;
    size_t cap;
    size_t limit; /* the most decisions it may hold; 0: no cap */
    int failed;   /* MEDIC_E_NOMEM or MEDIC_E_LIMIT once a decision could not be made */
};

void policy_decisions_init(struct policy_decisions *d);
void policy_decisions_release(struct policy_decisions *d);
/* Empties d for reuse (its actions freed, its memory kept). */
void policy_decisions_clear(struct policy_decisions *d);

/* Appends a decision with verdict error for an alert the engine could not
 * decide (it ignores the cap: the error must be recorded). Returns 0 or
 * MEDIC_E_NOMEM. */
int policy_decisions_add_error(struct policy_decisions *d, const char *node, const char *alertname,
                               const char *fingerprint, double risk, int64_t now,
                               const char *reason);

/* The decisions as a table (time, node, alertname, policy, step, action,
 * verdict, reason, risk, params), for printing. */
int policy_decisions_table(const struct policy_decisions *d, struct medic_table *out);

struct policy_state;

struct policy_state *policy_state_new(void);
void policy_state_free(struct policy_state *st);

/* Evaluates one alert at time now; appends its decisions to out. Returns
 * MEDIC_E_NOMEM when memory ran out and a decision may be missing (the
 * caller records that in the audit log); 0 otherwise. */
int policy_evaluate(const struct policy_context *ctx, struct policy_state *st,
                    const struct policy_alert *alert, int64_t now, struct policy_decisions *out);

/* Escalates: decides the steps that have become due for the alerts still
 * firing, and ends a storm that has passed. Call it periodically. */
int policy_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out);

/* The state as JSON, for keeping it across restarts: alert instances with
 * their progress and labels, nodes with what medic did to them and their
 * recent actions, unmatched alerts, the storm flag. Times are strings of
 * nanoseconds (JSON numbers would round them). */
int policy_state_save(const struct policy_state *st, struct medic_buf *out);
/* Rebuilds a state saved by policy_state_save. MEDIC_E_INVALID with a
 * message when the text is not such a state. */
int policy_state_load(const char *json, size_t len, struct policy_state **out,
                      struct medic_error *err);

/* Nodes disrupted now (drained or power-limited by medic, or with a
 * disruptive step of a firing alert), for tests and /metrics. */
size_t policy_disrupted_nodes(const struct policy_state *st);
/* 1 while a storm holds disruptive actions back. */
int policy_storm_active(const struct policy_state *st);

#endif

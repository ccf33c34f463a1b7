/* The policy engine: for each alert, which step of which policy applies
 * now, and whether every safety guard lets it run. Evaluation is a pure
 * function of the policies, the inventory, the engine state, the alert and
 * the time passed in: no clock, no I/O. The caller records the decisions
 * and hands the executable ones to the actions.
 *
 * Semantics (docs/policies.md has the full story):
 * - An alert instance is (fingerprint, startsAt). The first policy whose
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

struct engine_alert {
    const char *fingerprint;
    enum medic_alert_status status;
    const struct medic_labels *labels;
    const struct medic_labels *annotations;
    int64_t starts_at; /* ns; MEDIC_TIME_UNSET is treated as now */
    double risk;       /* 0..1, NAN when unknown */
};

struct engine_context {
    const struct policy_set *policies;
    const struct inventory *inventory;
    const char *const *node_labels;
    size_t node_label_count;
    int live; /* global mode: 1 live, 0 dry-run */
};

enum engine_verdict { VERDICT_EXECUTE, VERDICT_DRY_RUN, VERDICT_SUPPRESSED, VERDICT_NO_MATCH };

const char *engine_verdict_name(enum engine_verdict v);

struct engine_decision {
    char node[128]; /* the inventory name, else the label's value ("" when none) */
    int in_inventory;
    char alertname[128];
    char fingerprint[130];
    char policy[65]; /* "" for no_match and storm notices */
    int step;        /* index in steps or on_resolved; -1 when none */
    int on_resolved;
    int has_action;
    enum policy_action action;
    int disruptive;
    char params[1024]; /* JSON object */
    enum engine_verdict verdict;
    char reason[512];
    double risk;
    int64_t time;
};

struct engine_decisions {
    struct engine_decision *items;
    size_t count;
    size_t cap;
};

void engine_decisions_init(struct engine_decisions *d);
void engine_decisions_release(struct engine_decisions *d);

/* The decisions as a table (time, node, alertname, policy, step, action,
 * verdict, reason, risk, params), for printing. */
int engine_decisions_table(const struct engine_decisions *d, struct medic_table *out);

struct engine_state;

struct engine_state *engine_state_new(void);
void engine_state_free(struct engine_state *st);

/* Evaluates one alert at time now; appends its decisions to out. */
int engine_evaluate(const struct engine_context *ctx, struct engine_state *st,
                    const struct engine_alert *alert, int64_t now, struct engine_decisions *out);

/* Escalates: decides the steps that have become due for the alerts still
 * firing, and ends a storm that has passed. Call it periodically. */
int engine_tick(const struct engine_context *ctx, struct engine_state *st, int64_t now,
                struct engine_decisions *out);

/* The state as JSON, for keeping it across restarts: alert instances with
 * their progress and labels, nodes with what medic did to them and their
 * recent actions, unmatched alerts, the storm flag. Times are strings of
 * nanoseconds (JSON numbers would round them). */
int engine_state_save(const struct engine_state *st, struct medic_buf *out);
/* Rebuilds a state saved by engine_state_save. MEDIC_E_INVALID with a
 * message when the text is not such a state. */
int engine_state_load(const char *json, size_t len, struct engine_state **out,
                      struct medic_error *err);

/* Nodes disrupted now (drained or power-limited by medic, or with a
 * disruptive step of a firing alert), for tests and /metrics. */
size_t engine_disrupted_nodes(const struct engine_state *st);
/* 1 while a storm holds disruptive actions back. */
int engine_storm_active(const struct engine_state *st);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine: for each alert, which incident it belongs to, which
 * step of that incident's ladder applies now, and whether every safety
 * guard lets it run. Evaluation is a pure function of the policies, the
 * inventory, the engine state, the alert (or the action outcome) and the
 * time passed in: no clock, no I/O. The caller records the decisions and
 * the incidents' state changes, and hands the executable ones to the
 * actions; it feeds each awaited action's outcome back.
 *
 * Semantics (docs/policies.md has the full story and the state diagram):
 * - An incident is one (node, policy): opened by the first alert of the node
 *   that the policy takes, it holds every alert of that node under that
 *   policy. Its ladder's clock starts at that first alert's startsAt.
 * - An alert is its fingerprint and label set; a resolve is remembered for
 *   a day, so an older firing copy never reopens it. An alert not re-sent
 *   for safety.alert_expiry has gone (a lost resolve).
 * - Step k is due once the ladder's clock passed its `after` and the step
 *   before it finished: a disruptive step (drain, ipmi_power_cycle,
 *   power_limit) is awaited, and the next step waits for its outcome. A
 *   step that fails, times out, is refused or is interrupted stops the
 *   ladder (state failed) and tells on-call. A power cycle after a drain
 *   runs only while the node is still drained (checked when it runs).
 * - Each step is decided once per incident, whatever the verdict.
 * - Disruptive steps pass the guards: inventory, maintenance,
 *   max_alert_age, storm, cooldown, budget, fleet caps. The first that
 *   fails names the suppression's reason. Maintenance, storm and the caps
 *   clear by themselves: the step is held (one decision says so) and
 *   decided again once they let it, while its alert is fresh; the others
 *   stop the ladder there.
 * - When every alert of an incident has resolved (or expired), its
 *   on_resolved steps run; a resume or restore waits until no other
 *   incident on the node holds the drain or the limit. A power limit never
 *   raises the node's strictest limit held by another incident.
 * - An incident whose policy a reload removed is closed, and what medic
 *   holds on the node for it is undone, with a decision saying so.
 * - After a restart, no disruptive step runs before an alert of its
 *   incident has been seen again.
 * - dry_run decisions change the state as executed ones that succeeded
 *   would, so that a dry run shows what live mode would have done. */
#ifndef MEDIC_POLICIES_ENGINE_H
#define MEDIC_POLICIES_ENGINE_H

#include "alert.h"
#include "buf.h"
#include "inventory.h"
#include "lock.h"
#include "table.h"
#include "policy.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct policy_alert {
    const char *fingerprint;
    enum medic_alert_status status;
    const struct medic_labels *labels;
    const struct medic_labels *annotations;
    int64_t starts_at; /* ns; MEDIC_TIME_UNSET is treated as now */
    double risk;       /* 0..1, NAN when unknown */
    /* the driver's recommended recovery action for the alert's GPU (its
     * `gpu` label; without one, the node's first GPU that has one other
     * than none), as the node's agent reported it: a name of
     * medic_recovery_names; NULL when not known (no agent, not asked) */
    const char *recovery;
};

struct policy_context {
    const struct policy_set *policies;
    const struct inventory *inventory;
    const char *const *node_labels;
    size_t node_label_count;
    int live;                 /* global mode: 1 live (or approve), 0 dry-run */
    const char *external_url; /* medic as on-call reaches it, for links; NULL: none */
    int approve; /* approve mode: disruptive steps wait for a person (policy approval) */
    /* whether Slurm has slurm_node in a maintenance reservation now
     * (safety.maintenance_from_slurm): 1 yes, 0 no, -1 not known (never
     * read, or the last read too old; *read_at: when it was, wall clock,
     * MEDIC_TIME_UNSET never); NULL: not asked */
    int (*slurm_maint)(void *arg, const char *slurm_node, int64_t *read_at);
    /* how Slurm showed slurm_node at its last read: 1 with its state
     * ("IDLE+DRAIN") and reason, 0 Slurm does not have it, -1 not known
     * (never read, or too old); NULL: not asked */
    int (*slurm_node)(void *arg, const char *slurm_node, char *state, size_t state_size,
                      char *reason, size_t reason_size);
    void *slurm_arg; /* for slurm_maint and slurm_node */
    /* the caller gives decisions their audit ids (policy_bind_decisions,
     * policy_resolve_decisions), as medic serve does: on-call's notice of
     * a step waiting for approval waits for its id (the next tick), so
     * that it can name `medic approve ID` and the step's page. 0 (dry
     * runs, replays, policy tests): the notice goes at once, without. */
    int decision_ids;
};

/* error: the engine could not decide (out of memory, or over the
 * decisions' cap); recorded so that no alert goes undecided silently. */
enum policy_verdict {
    VERDICT_EXECUTE,
    VERDICT_DRY_RUN,
    VERDICT_SUPPRESSED,
    VERDICT_NO_MATCH,
    VERDICT_ERROR,
    VERDICT_PENDING, /* a disruptive step waits for a person's approval */
    VERDICT_COUNT
};

const char *policy_verdict_name(enum policy_verdict v);
/* The verdict of a name policy_verdict_name gives: 0, or -1 when name is
 * none of them. */
int policy_verdict_parse(const char *name, enum policy_verdict *out);

/* The states of an incident (docs/img/incident-states.svg). The -ing
 * states await an action's outcome; quarantined waits for a person
 * (policy_release); recovered, expired, closed and released are final. */
#define POLICY_INCIDENT_STATES(X)                                                                  \
    X(OPEN, "open")                                                                                \
    X(PENDING, "pending")                                                                          \
    X(DRAINING, "draining")                                                                        \
    X(DRAINED, "drained")                                                                          \
    X(LIMITING, "limiting")                                                                        \
    X(LIMITED, "limited")                                                                          \
    X(CYCLING, "cycling")                                                                          \
    X(CYCLED, "cycled")                                                                            \
    X(RESETTING, "resetting")                                                                      \
    X(RESET, "reset")                                                                              \
    X(VERIFYING, "verifying")                                                                      \
    X(VERIFIED, "verified")                                                                        \
    X(FAILED, "failed")                                                                            \
    X(QUARANTINED, "quarantined")                                                                  \
    X(UNDOING, "undoing")                                                                          \
    X(RECOVERED, "recovered")                                                                      \
    X(EXPIRED, "expired")                                                                          \
    X(CLOSED, "closed")                                                                            \
    X(RELEASED, "released")

enum policy_incident_state {
#define POLICY_STATE_ENUM(name, text) INCIDENT_##name,
    POLICY_INCIDENT_STATES(POLICY_STATE_ENUM)
#undef POLICY_STATE_ENUM
        INCIDENT_STATE_COUNT
};

const char *policy_incident_state_name(enum policy_incident_state s);
/* Parses a state's name; -1 when it names none. */
int policy_incident_state_parse(const char *name);

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
    int64_t incident;    /* the incident it belongs to; 0 when none */
    int awaited;         /* its incident waits for the action's outcome */
    int require_drained; /* run only while the node is drained in Slurm */
};

/* An incident's change of state, with what caused it. */
struct policy_change {
    int64_t incident;
    char node[128];
    char policy[65];
    enum policy_incident_state from, to; /* from == to: opened */
    char cause[512];
    long decision; /* index in the decisions that caused it; -1 when none */
    int64_t time;
};

struct policy_decisions {
    struct policy_decision *items;
    size_t count;
    size_t cap;
    size_t limit; /* the most decisions it may hold; 0: no cap */
    int failed;   /* MEDIC_E_NOMEM or MEDIC_E_LIMIT once a decision could not be made */
    struct policy_change *changes;
    size_t change_count, change_cap;
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

/* The alert was seen again at now, as the copy of a notification already
 * evaluated (Alertmanager's retries and its re-sends every
 * repeat_interval): a firing alert that an incident holds, or that no
 * policy took, is kept from expiring; nothing is decided. */
void policy_seen_again(const struct policy_context *ctx, struct policy_state *st,
                       const struct policy_alert *alert, int64_t now);

/* Escalates: decides the steps that have become due, expires alerts no
 * longer re-sent, closes incidents whose policy is gone, and ends a storm
 * that has passed. Call it periodically. */
int policy_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out);

/* medic's clock was set right (a step of the wall clock the engine
 * followed, by `step`): the ladders a stale alert stopped, stale only on
 * the wrong clock perhaps, are decided again from the step it suppressed
 * (by every guard: one still stale is suppressed again). */
void policy_clock_set_right(struct policy_state *st, int64_t step, int64_t now,
                            struct policy_decisions *out);

/* Reconciles medic's record of the drains it holds with how Slurm showed
 * the nodes (ctx->slurm_node) in a read that began at seen_at (the
 * engine's clock): a drain medic confirmed before then that Slurm shows
 * gone (the node in service: someone resumed it) or replaced (drained
 * again with someone else's reason) is let go. The node no longer counts
 * as disrupted by medic (the caps free its slot), its incidents' ladders
 * stop (an operator took the node over; a quarantine stays until a
 * person releases it), the change is recorded and on-call told. Nodes
 * with an action of medic's in flight, and drains confirmed after seen_at,
 * wait for the next read. Nothing in dry-run. */
int policy_reconcile_drains(const struct policy_context *ctx, struct policy_state *st,
                            int64_t seen_at, int64_t now, struct policy_decisions *out);

/* The first limit open incidents (of node only, when not NULL), in the
 * order the scheduler visits them: incident,
 * node, policy, state, alerts (firing), risk (NULL: unknown), next_step
 * (what the ladder does next, or what it waits for), due (when that step
 * is due; NULL when none is), opened_at. */
int policy_open_incidents_table(const struct policy_context *ctx, struct policy_state *st,
                                const char *node, size_t limit, struct medic_table *out);

/* The time of the last policy_tick (MEDIC_TIME_UNSET before the first). */
int64_t policy_last_tick(const struct policy_state *st);

/* A person's answer to a step waiting for approval (verdict pending),
 * named by the pending decision's id, else by its incident, else by node
 * (the step pending there). by: who (the credential's name). */
struct policy_approval {
    int64_t decision_id;
    int64_t incident;
    const char *node;
    int approve; /* 1 approve, 0 deny */
    const char *by;
    const char *reason; /* free text; may be NULL */
    /* a denial: 1 undoes what the incident holds (resume, restore) now; 0
     * holds the node for a person (quarantined until released) when medic
     * holds it drained or limited */
    int undo;
};

/* A person's pause of every disruptive step, fleet-wide (pause 1), or its
 * end (pause 0); until: MEDIC_TIME_UNSET until unpaused. While paused,
 * every disruptive step is held ("paused by WHO: REASON") and decided
 * again once the pause ends; undo steps still run. On-call is told when it
 * starts and ends. MEDIC_E_NOTFOUND when unpausing what is not paused,
 * MEDIC_E_INVALID for an until in the past (why says it). */
struct policy_pause {
    int pause;
    const char *by, *reason;
    int64_t until;
};
int policy_pause(const struct policy_context *ctx, struct policy_state *st,
                 const struct policy_pause *p, int64_t now, struct policy_decisions *out, char *why,
                 size_t why_size);
/* 1 and the pause into out while paused; 0 when not. */
struct policy_pause_state {
    char by[128], reason[400];
    int64_t since, until;
};
int policy_paused(const struct policy_state *st, struct policy_pause_state *out);

/* Calls fn for every step waiting for a person, in the incidents' order
 * (a non-zero return stops the walk and is returned). */
struct policy_pending_step {
    int64_t incident, decision_id, until; /* decision_id 0 until committed */
    const char *node, *policy;
    size_t step; /* from 0 */
    /* the exact action an approval runs: its name, a space and its
     * parameters as JSON ("drain {\"reason\":...}"); NULL when a medic
     * that did not record it offered the step (an approval offers it again) */
    const char *offer;
};
typedef int (*policy_pending_fn)(void *arg, const struct policy_pending_step *p);
int policy_pending_steps(const struct policy_state *st, policy_pending_fn fn, void *arg);
/* How many steps wait for a person, and when the one waiting longest was
 * offered (*oldest; MEDIC_TIME_UNSET when none waits), for /metrics. */
size_t policy_pending_approvals(const struct policy_state *st, int64_t *oldest);

/* The incident whose step decision_id left pending and that still waits
 * (until *until, ns); 0 when none does. */
int64_t policy_pending_incident(const struct policy_state *st, int64_t decision_id, int64_t *until);

/* Approved: the step runs if every guard still holds now (else it is
 * refused with the guard's reason); denied: it never runs. Either way a
 * decision records who, when and why. MEDIC_E_NOTFOUND (why says it) when
 * no step waits as named: never pending, answered already, withdrawn or
 * expired (an expiry due now is recorded first). */
int policy_approve(const struct policy_context *ctx, struct policy_state *st,
                   const struct policy_approval *a, int64_t now, struct policy_decisions *out,
                   char *why, size_t why_size);

/* A person's release of a quarantined node (after the repair): what its
 * quarantined incidents hold is undone (resume, restore) and they end
 * released; the node takes disruptive steps again. MEDIC_E_NOTFOUND (why
 * says it) when the node is not quarantined. by: who (the credential's
 * name). */
struct policy_release {
    const char *node;
    const char *by;
    const char *reason;
};
int policy_release(const struct policy_context *ctx, struct policy_state *st,
                   const struct policy_release *r, int64_t now, struct policy_decisions *out,
                   char *why, size_t why_size);

/* Calls fn for each quarantined incident (a node waiting for a person). */
struct policy_quarantined_node {
    const char *node, *policy, *why;
    int64_t incident, since;
    int drained; /* the incident holds the node's drain */
};
typedef int (*policy_quarantined_fn)(void *arg, const struct policy_quarantined_node *q);
int policy_quarantined(const struct policy_state *st, policy_quarantined_fn fn, void *arg);

/* The outcome of an awaited action. */
struct policy_outcome {
    int64_t incident;
    int64_t decision_id; /* the decision whose action it is; 0: the one awaited */
    enum medic_outcome outcome;
    const char *detail;
};

/* Advances the incident by an awaited action's outcome (an outcome for an
 * action it no longer awaits is ignored); may decide further steps. */
int policy_outcome(const struct policy_context *ctx, struct policy_state *st,
                   const struct policy_outcome *outcome, int64_t now, struct policy_decisions *out);

/* Calls fn for each incident awaiting an outcome: its id and the awaited
 * decision's id (0 while not known, see policy_bind_decisions). */
typedef void (*policy_awaiting_fn)(void *arg, int64_t incident, int64_t decision_id);
void policy_awaiting(const struct policy_state *st, policy_awaiting_fn fn, void *arg);

/* Ties the incidents to the decisions of out that they await, before the
 * audit log has given those decisions ids: until policy_resolve_decisions,
 * an incident names such a decision by its index in out (and its row, by
 * a reference the audit writer fills in). */
void policy_bind_decisions(struct policy_state *st, const struct policy_decisions *out);
/* The ids the audit log gave the decisions of out (ids[i] for
 * out->items[i]), once committed: outcomes are found by decision id. */
void policy_resolve_decisions(struct policy_state *st, const struct policy_decisions *out,
                              const int64_t *ids);

/* Every awaited action succeeds now: for replays and tests, where nothing
 * runs. */
int policy_assume_success(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                          struct policy_decisions *out);

/* After a restart: no disruptive step runs before an alert of its
 * incident is seen again at or after now. */
void policy_state_restarted(struct policy_state *st, int64_t now);

/* The state is kept as rows, each a small JSON document with a kind
 * ("engine", "incident", "node", "unmatched", "resolved") and a key unique
 * within its kind: incidents with their alerts and progress, nodes with
 * what medic holds on them and their recent actions, unmatched and
 * resolved alerts, the engine's storm flag and next incident id. Times are
 * strings of nanoseconds (JSON numbers would round them). fn gets one row
 * (value NULL: the row is gone; kind NULL: every row is gone, the rows
 * that follow are the whole state); non-zero stops the walk. A row that
 * names a decision bound but not resolved yet (policy_bind_decisions)
 * holds a placeholder for its id: refs say where (bytes [offset, offset +
 * len) of value) and which decision (its index in the round's decisions);
 * the id goes there as a JSON string ("123"). */
struct policy_decision_ref {
    size_t offset, len, index;
};
typedef int (*policy_row_fn)(void *arg, const char *kind, const char *key, const char *value,
                             size_t len, const struct policy_decision_ref *refs, size_t ref_count);

/* Starts recording which rows change, for policy_state_changes (the
 * daemon). Off by default: dry runs and tests keep no record. */
void policy_state_track_changes(struct policy_state *st);
/* Every row counts as changed: the next policy_state_changes writes the
 * whole state (after an upgrade from the single document). */
void policy_state_changed_all(struct policy_state *st);
/* 1 when the state was read from rows an earlier medic wrote in an older
 * format (kinds and states by position): write every row again. */
int policy_state_rows_outdated(const struct policy_state *st);
/* 1 when a row changed since the last policy_state_changes. */
int policy_state_changed(const struct policy_state *st);
/* Calls fn for each row changed since the last call, then forgets the
 * changes (only when every call returned 0). */
int policy_state_changes(struct policy_state *st, policy_row_fn fn, void *arg);
/* Calls fn for every row of the state. */
int policy_state_rows(const struct policy_state *st, policy_row_fn fn, void *arg);
/* Adds a row to a state being rebuilt (from policy_state_new);
 * MEDIC_E_INVALID with a message when it is not such a row (or one of an
 * older medic). policy_state_loaded finishes the state once every row is
 * in. */
int policy_state_load_row(struct policy_state *st, const char *kind, const char *value, size_t len,
                          struct medic_error *err);
void policy_state_loaded(struct policy_state *st);
/* A copy of st, through its rows (change tracking off). With lock (not
 * NULL), st is read under it: held while the rows are written out, not
 * while the copy is built from them. */
int policy_state_copy(const struct policy_state *st, struct medic_mutex *lock,
                      struct policy_state **out, struct medic_error *err);
/* Those two halves: every row of st appended to out, and a state rebuilt
 * from such rows (MEDIC_E_INVALID when they are cut short). */
int policy_state_snapshot(const struct policy_state *st, struct medic_buf *out);
int policy_state_from_snapshot(const char *rows, size_t len, struct policy_state **out,
                               struct medic_error *err);
/* Rebuilds a state from the single document earlier medics saved
 * (version 2), for an upgrade. */
int policy_state_import(const char *json, size_t len, struct policy_state **out,
                        struct medic_error *err);

/* Nodes disrupted now (drained or power-limited by medic, or with a
 * disruptive action in flight), for the caps and /metrics. */
size_t policy_disrupted_nodes(const struct policy_state *st);
/* Of those, the quarantined ones (they wait for a person). */
size_t policy_quarantined_nodes(const struct policy_state *st);
/* A topology group with disrupted nodes: safety.group_caps entry cap,
 * its label ("nodes" for a hostlist) and group, and its limit. */
struct policy_group_use {
    size_t cap;
    char label[32], group[128];
    size_t disrupted, limit;
};
/* The groups of s's caps that have disrupted nodes now (at most max into
 * out), for /metrics and the page. */
size_t policy_group_usage(const struct policy_state *st, const struct policy_safety *s,
                          const struct inventory *inv, struct policy_group_use *out, size_t max);
/* Whether medic holds node disrupted now (drained or power-limited by
 * it, or with a disruptive action of its in flight). */
int policy_node_disrupted(const struct policy_state *st, const char *node);

/* The guards that may keep a disruptive step from running, as a
 * suppressed or held decision's reason names them (a stopped ladder's
 * reason names the guard that stopped it). */
#define POLICY_GUARDS(X)                                                                           \
    X(INVENTORY, "inventory")                                                                      \
    X(QUARANTINE, "quarantine")                                                                    \
    X(MAINTENANCE, "maintenance")                                                                  \
    X(SLURM_MAINTENANCE, "slurm_maintenance")                                                      \
    X(PAUSE, "pause")                                                                              \
    X(CLOCK, "clock")                                                                              \
    X(STALE, "max_alert_age")                                                                      \
    X(STORM, "storm")                                                                              \
    X(COOLDOWN, "cooldown")                                                                        \
    X(BUDGET, "budget")                                                                            \
    X(FLEET_CAP, "fleet_cap")                                                                      \
    X(GROUP_CAP, "group_cap")                                                                      \
    X(STRICTER_LIMIT, "stricter_limit")                                                            \
    X(DENIED, "denied")                                                                            \
    X(OTHER, "other")

enum policy_guard {
#define POLICY_GUARD_ENUM(name, text) POLICY_GUARD_##name,
    POLICY_GUARDS(POLICY_GUARD_ENUM)
#undef POLICY_GUARD_ENUM
        POLICY_GUARD_COUNT
};

/* The guard a suppressed or held decision's reason names (OTHER when it
 * names none of them), and its name. */
enum policy_guard policy_guard_of(const char *reason);
const char *policy_guard_name(enum policy_guard g);

/* Incidents not yet final. */
size_t policy_open_incidents(const struct policy_state *st);
/* 1 while a storm holds disruptive actions back. */
int policy_storm_active(const struct policy_state *st);

#endif

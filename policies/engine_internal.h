/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine's insides, shared by its files (state.c: the state and
 * its indexes; incident.c: incidents and their alerts; guards.c: the
 * safety guards and the storm breaker; ladder.c: deciding a step;
 * approval.c: a step waiting for a person; repair.c: verify, fallbacks,
 * quarantine and release; evaluate.c: alerts, outcomes and the scheduler;
 * persist.c: the state as rows of JSON; changes.c: which rows changed).
 * Private to policies/. */
#ifndef MEDIC_POLICIES_ENGINE_INTERNAL_H
#define MEDIC_POLICIES_ENGINE_INTERNAL_H

#include "map.h"
#include "policy_engine.h"

#include <stddef.h>
#include <stdint.h>

/* A copy of a label set that outlives the notification it came from. */
struct label_copy {
    struct medic_label *items;
    size_t count;
};

/* An alert's identity: its fingerprint and a digest of its labels, since
 * two alerts may share a fingerprint (never trust it alone). */
#define ALERT_IDENTITY_SIZE 160

struct policy_state;

/* One firing alert of an incident. */
struct member {
    char *identity; /* fingerprint and label digest */
    char *fingerprint;
    int64_t starts_at;
    int64_t last_seen;
    /* the alert's own startsAt when it was further ahead of medic's clock
     * than POLICY_CLOCK_SKEW (0: never): one of the clocks is wrong, and
     * disruptive steps wait until the two agree */
    int64_t claimed_start;
};

/* How far an alert's startsAt may be ahead of medic's clock (a skew
 * between hosts): the ladder starts at once. Further ahead, one of the
 * clocks is wrong. */
#define POLICY_CLOCK_SKEW (5 * 60 * MEDIC_NS_PER_SEC)
/* In the reason of a step a stale alert suppressed. */
#define POLICY_STALE_REASON "older than max_alert_age"

/* One (node, policy): the unit medic acts on. */
/* An incident's key: node and policy, or without a node, the alert and
 * policy (policy__incident_key). */
#define INCIDENT_KEY_SIZE (ALERT_IDENTITY_SIZE + 200)
/* Undo actions one incident may await at once (its on_resolved steps). */
#define INCIDENT_MAX_UNDO POLICY_MAX_STEPS

struct incident {
    struct policy_state *owner; /* for policy__touch_incident */
    int dirty;                  /* its row changed since the last policy_state_changes */
    size_t slot;                /* its index in the state's incidents and tick_due */
    int64_t id;
    char key[INCIDENT_KEY_SIZE]; /* see policy__incident_key */
    char node[128];
    int in_inventory;
    char policy[65];
    enum policy_incident_state state;
    int64_t opened_at; /* the ladder's clock: its first alert's startsAt */
    /* when its last ladder step ended (its outcome, or its decision when
     * it awaited none); 0: none yet. Steps with after_from: previous count
     * from it */
    int64_t step_ended_at;
    size_t next_step; /* steps [0, next_step) are decided */
    /* the action whose outcome it waits for (state draining, limiting,
     * cycling, or undoing) */
    int awaiting;
    int64_t awaiting_decision; /* its id in the audit log; 0 until bound */
    enum medic_action_kind awaiting_kind;
    int awaiting_watts; /* a power limit's */
    /* undo actions (resume, restore) running */
    struct {
        int64_t decision; /* 0 until bound */
        enum medic_action_kind kind;
    } undo[INCIDENT_MAX_UNDO];
    int undo_count;
    int closing; /* its alerts are gone: it closes as closing_as */
    enum policy_incident_state closing_as;
    char closing_cause[200];
    int acted;  /* some step was executed or dry-run */
    int halted; /* a disruptive step was suppressed or failed: later ones are not taken */
    /* what came of its latest step other than a notification, for a
     * notify step's {{ $previous }} */
    char previous[240];
    /* halted only because its alert looked stale on medic's clock: that
     * step (from 1; 0: not so), decided again if the clock is set right */
    int stale_step;
    char halted_by[320];
    int held; /* step next_step was held by a guard that clears by itself: decided again then */
    /* a disruptive step was held or suppressed and on-call not yet told
     * (the held steps' notice, safety.held_notice); not persisted */
    int unreported;
    char held_by[200];
    /* a disruptive step waits for a person (state pending): which, until
     * when, and the decision that asked (0 until bound); the state it left */
    int pending;
    size_t pending_step;
    int64_t pending_until;
    int64_t pending_decision;
    enum policy_incident_state pending_from;
    /* the exact action offered to the person ("KIND PARAMS_JSON", owned;
     * NULL in rows of an earlier medic): an approval runs that action or
     * nothing */
    char *pending_offer;
    int pending_told;      /* on-call was told, with the pending decision's id when known */
    int64_t pending_since; /* when it was offered */
    /* an approval that met a guard that clears by itself: the action it
     * approved (owned; NULL: none) runs once the guard clears, while
     * approved_until has not passed, without asking again */
    char *approved_offer;
    char approved_by[128];
    char approved_reason[200];
    int64_t approved_until;
    int drained;          /* holds its node's drain (medic's drain succeeded) */
    char drained_as[300]; /* Slurm's reason as medic's last drain of the node left it ("": unknown)
                           */
    int limit_watts;      /* holds a power limit of this many watts; 0: none */
    int64_t fresh_after;  /* disruptive steps wait for an alert seen at or after this */
    int last_failed;      /* the last awaited step did not succeed (if_failed steps run) */
    /* when its last power cycle that succeeded was decided (0: none): a
     * verify after it needs evidence that the node booted since */
    int64_t cycled_at;
    /* when its last GPU reset that succeeded was decided (0: none): a
     * verify after it needs evidence that the alert's GPU was enumerated
     * again since */
    int64_t reset_at;
    int64_t awaiting_since; /* when the awaited action was decided (0: unknown) */
    int quarantining;       /* its node is quarantined once the drain in flight ends */
    char quarantine_why[400];
    char alertname[128]; /* of the alert that opened it */
    struct label_copy labels, annotations;
    double risk;
    struct member *members;
    size_t member_count, member_cap;
    const struct policy *cached_policy; /* policy_by_name's last answer */
    int final;                          /* in a final state: dropped at the next compaction */
};

/* An alert no policy took: remembered so that its repeats do not record
 * another no_match. */
struct unmatched {
    int dirty;
    char *fingerprint; /* the alert's identity (see policy__alert_identity) */
    int64_t starts_at;
    int64_t last_seen;
};

struct action_record {
    char policy[65];
    int64_t time;
    int64_t incident; /* the incident that acted */
    /* the failure it was for: its incident's opened_at (the first alert's
     * startsAt), the same for every policy that took that alert; 0 in rows
     * of an earlier medic (then the incident tells episodes apart) */
    int64_t episode;
    int repair; /* it took the node out of service (drain, power cycle, GPU reset) */
};

struct node_state {
    int dirty;
    size_t slot; /* its index in the state's nodes and node_alerting */
    char name[128];
    int drained_by_medic;  /* a drain by medic succeeded and was not undone */
    int64_t drained_since; /* when medic's latest drain succeeded (0: before this start) */
    int limited_by_medic;  /* a power limit by medic succeeded and was not undone */
    int acting;            /* disruptive actions in flight */
    int quarantined;       /* waits for a person (policy_release); no disruptive step runs */
    int64_t quarantined_at;
    int64_t last_alerting; /* for the storm window; MEDIC_TIME_UNSET never */
    char alertname[64];    /* of its latest firing alert, for the storm notice */
    struct action_record *history;
    size_t history_count, history_cap;
};

/* An alert that resolved: remembered for RESOLVED_TTL so that a firing
 * copy arriving later with the same or an older startsAt (another
 * Alertmanager replica's older view, or a resolve overtaking its firing)
 * never reopens it. */
struct resolved_alert {
    int dirty;
    char *identity;
    int64_t starts_at; /* the newest startsAt that resolved */
    int64_t at;
    int noted; /* a late firing copy was already recorded */
};

/* The kinds of rows the state is kept as (persist.c). */
enum row_kind { ROW_ENGINE, ROW_INCIDENT, ROW_NODE, ROW_UNMATCHED, ROW_RESOLVED, ROW_KIND_COUNT };

/* What changed since the rows were last written, when tracking is on:
 * items whose row changed (each once: their dirty flag), keys of rows
 * removed, and whether the engine's own row changed. A failed allocation
 * sets failed: then every row is written again. */
struct dirty_ref {
    enum row_kind kind;
    void *item; /* NULL once the item was freed */
};

struct gone_row {
    enum row_kind kind;
    char *key;
};

struct policy_changes {
    int on;
    struct dirty_ref *dirty;
    size_t dirty_count, dirty_cap;
    struct gone_row *gone;
    size_t gone_count, gone_cap;
    int engine;
    int failed;
};

/* Incidents and nodes are allocated one by one (their addresses stay put)
 * and kept in arrays in creation order, which is the order the scheduler
 * visits them: first come, first served at the fleet caps. Hash maps find
 * an open incident by (node, policy) and by id, and a node by name. */
struct policy_state {
    int64_t next_incident_id;
    int64_t ticked_at; /* policy_tick's last time; not persisted */
    struct incident **incidents;
    size_t incident_count, incident_cap;
    size_t final_count;
    /* beside each incident, the earliest time a tick has anything to do
     * for it (a ladder step due, an alert to expire); never later than
     * that, and INT64_MIN once it changed: a tick visits only those due
     * and costs O(1) per incident that is not (see policy_tick) */
    int64_t *tick_due;
    size_t tick_due_cap;
    const struct policy_set *tick_set; /* the set tick_due was computed for */
    uint64_t tick_generation;
    const struct policy_set *followed_set; /* the set policy__follow_reload last saw */
    uint64_t followed_generation;
    struct medic_map incidents_by_key; /* "node\tpolicy" -> open incident */
    struct medic_map incidents_by_id;  /* decimal id -> open incident */
    struct unmatched **unmatched;      /* creation order, for expiry */
    size_t unmatched_count, unmatched_cap;
    struct medic_map unmatched_by_alert;
    struct node_state **nodes;
    size_t node_count, node_cap;
    int64_t *node_alerting; /* beside each node, its last_alerting */
    size_t node_alerting_cap;
    size_t disrupted_count;   /* nodes for which policy__node_disrupted holds */
    size_t quarantined_count; /* of those, the quarantined (outside max_disruptive_in_flight) */
    struct medic_map nodes_by_name;
    int storm_active;
    /* incidents with a held or suppressed step on-call was not yet told of,
     * and when it last was; not persisted */
    size_t unreported;
    int64_t held_told_at;
    /* the fleet-wide pause (pause.c): a person holds every disruptive step */
    struct {
        int on;
        char by[128];
        char reason[400];
        int64_t since, until; /* until: MEDIC_TIME_UNSET until unpaused */
    } pause;
    int rows_outdated; /* read from rows of an earlier format: write them all again */
    struct resolved_alert **resolved; /* creation order, for expiry */
    size_t resolved_count, resolved_cap;
    struct medic_map resolved_by_alert;
    struct policy_changes changes;
    /* nodes alerting within the storm window, counted once for a time
     * (a round evaluates every alert at one time) and kept up to date as
     * nodes alert: the storm check costs O(1) per alert, not O(nodes) */
    struct {
        int valid;
        int64_t now, window;
        size_t count;
    } alerting;
};

/* Unmatched alerts are forgotten after this long without a repeat. */
#define UNMATCHED_TTL (24 * 3600 * MEDIC_NS_PER_SEC)
/* Resolved alerts are remembered this long, at most this many. */
#define RESOLVED_TTL (24 * 3600 * MEDIC_NS_PER_SEC)
#define RESOLVED_MAX 100000

/* changes.c: mark an item's row changed (a no-op unless tracking); an
 * incident touched is visited by the next tick, tracking or not */
void policy__touch_incident(struct incident *in);
void policy__touch_node(struct policy_state *st, struct node_state *n);
void policy__touch_unmatched(struct policy_state *st, struct unmatched *u);
void policy__touch_resolved(struct policy_state *st, struct resolved_alert *r);
void policy__touch_engine(struct policy_state *st);
/* A pause whose time ran out ends (pause.c). */
void policy__pause_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                        struct policy_decisions *out);
/* The row of item (about to be freed; dirty: its flag) is gone. */
void policy__row_gone(struct policy_state *st, enum row_kind kind, const char *key, void *item,
                      int dirty);
/* Every changed row was written: forget the changes. */
void policy__changes_written(struct policy_state *st);
void policy__changes_release(struct policy_changes *c);

/* state.c */
struct policy_decision *policy__new_decision(struct policy_decisions *d);
int policy__grow(void **items, size_t count, size_t *cap, size_t elem);
void policy__labels_free(struct label_copy *l);
int policy__labels_copy(struct label_copy *to, const struct medic_labels *from);
struct node_state *policy__node_get(struct policy_state *st, const char *name, int create);
/* 0: not disrupted; 1: disrupted; 2: disrupted and quarantined. */
/* 1 when a cap of safety.group_caps holds a disruptive step on node
 * (reason says which), else 0. */
int policy__group_caps_hold(const struct policy_context *ctx, const struct policy_state *st,
                            const char *node, char *reason, size_t size);
int policy__node_disrupted(const struct node_state *n);
/* Keeps the count of disrupted nodes after a change to n's drained_by_medic,
 * limited_by_medic or acting; was: policy__node_disrupted(n) before it. */
void policy__node_recount(struct policy_state *st, const struct node_state *n, int was);
/* Counts the disrupted nodes and copies every node's last_alerting beside it
 * afresh (after a load). */
void policy__nodes_recount(struct policy_state *st);
size_t policy__alerting_nodes(struct policy_state *st, int64_t now, int64_t window);
void policy__node_alerting(struct policy_state *st, struct node_state *n, int64_t now,
                           const char *alertname);
/* "GPUXidError on 1950 nodes, GPUHot on 30 nodes": the alertnames of the
 * nodes alerting within window, most common first (five at most, the rest
 * summed). */
void policy__alerting_alertnames(const struct policy_state *st, int64_t now, int64_t window,
                                 char *out, size_t size);
const struct policy *policy__policy_by_name(const struct policy_set *ps, const char *name);
void policy__alert_key(const char *fingerprint, int64_t starts_at, char *out, size_t size);
int policy__remember_unmatched(struct policy_state *st, const char *identity, int64_t starts_at,
                               int64_t now);
void policy__forget_unmatched(struct policy_state *st, const char *identity, int64_t starts_at);
/* A remembered unmatched alert seen again at now (none: nothing). */
void policy__unmatched_seen(struct policy_state *st, const char *identity, int64_t starts_at,
                            int64_t now);
void policy__alert_identity(const char *fingerprint, const struct medic_labels *labels, char *out,
                            size_t size);
struct resolved_alert *policy__resolved(struct policy_state *st, const char *identity);
int policy__remember_resolved(struct policy_state *st, const char *identity, int64_t starts_at,
                              int64_t now);
void policy__expire_resolved(struct policy_state *st, int64_t now);
void policy__expire_unmatched(struct policy_state *st, int64_t now);

/* incident.c */
void policy__incident_key(const char *node, const char *policy, const char *identity, char *out,
                          size_t size);
struct incident *policy__incident_find(struct policy_state *st, const char *key);
struct incident *policy__incident_by_id(struct policy_state *st, int64_t id);
struct incident *policy__incident_open(struct policy_state *st, const char *key,
                                       const struct policy_alert *a, const struct policy *pol,
                                       const char *node, int in_inventory, int64_t starts_at,
                                       int64_t now, struct policy_decisions *out);
struct incident *policy__incident_restore(struct policy_state *st, int64_t id, const char *key);
void policy__incident_free(struct incident *in);
struct member *policy__member_find(struct incident *in, const char *identity);
int policy__member_add(struct incident *in, const char *identity, const char *fingerprint,
                       int64_t starts_at, int64_t now);
void policy__member_remove(struct incident *in, struct member *m);
const struct policy *policy__incident_policy(const struct policy_context *ctx, struct incident *in);
void policy__incident_change(struct incident *in, enum policy_incident_state to, long decision,
                             int64_t now, struct policy_decisions *out, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void policy__incident_final(struct policy_state *st, struct incident *in,
                            enum policy_incident_state to, int64_t now,
                            struct policy_decisions *out, const char *cause);
void policy__compact(struct policy_state *st);
/* Numbers the incidents in their array's order afresh, each to be visited
 * by the next tick (after a load sorted them). */
void policy__incidents_reslot(struct policy_state *st);
int policy__incident_fresh(const struct incident *in, int64_t grace, int64_t now);
/* Approval (ladder.c): whether pol's disruptive steps wait for a person;
 * a pending step withdrawn (the incident closes), expired (now past its
 * time), or answered. */
int policy__needs_approval(const struct policy_context *ctx, const struct policy *pol,
                           const struct policy_step *step);
void policy__withdraw_pending(const struct policy_context *ctx, struct incident *in, int64_t now,
                              struct policy_decisions *out, const char *because);
void policy__expire_pending(const struct policy_context *ctx, struct incident *in, int64_t now,
                            struct policy_decisions *out);
int policy__answer_pending(const struct policy_context *ctx, struct policy_state *st,
                           struct incident *in, const struct policy_approval *a, int64_t now,
                           struct policy_decisions *out);
/* The action of step for in as it would be offered now (into d): the
 * step's, or the drain that quarantines the node when in is quarantining. */
int policy__offered_action(const struct policy_step *step, const struct incident *in,
                           struct policy_decision *d);
/* The action as text that names it exactly ("KIND PARAMS_JSON"); NULL
 * when memory ran out. The caller frees it. */
char *policy__offer_text(const struct medic_action *a);
/* An approval held by a guard (approved_offer) that matches d's action:
 * the step runs now without asking again (returns 1, d taken); an expired
 * one is forgotten (returns 0). */
int policy__take_approved(const struct policy_context *ctx, struct policy_state *st,
                          const struct policy *pol, struct incident *in, struct policy_decision *d,
                          const struct policy_step *step, int index, int64_t now,
                          struct policy_decisions *out);
/* Turns d's action into the drain that quarantines in's node (Slurm's
 * reason says so). Returns 0 or MEDIC_E_NOMEM. */
int policy__quarantine_drain(const struct incident *in, struct medic_action *a);
int policy__strictest_limit(const struct policy_state *st, const char *node,
                            const struct incident *except);
/* Incidents other than except that hold node's drain (or a power limit). */
enum policy_hold { HOLD_DRAIN, HOLD_LIMIT };
int policy__holders(const struct policy_state *st, const char *node, const struct incident *except,
                    enum policy_hold hold);

/* When step of in comes due: its `after` from the alert's start, or from
 * when the step before it ended (after_from: previous). */
int64_t policy__step_due(const struct incident *in, const struct policy_step *step);

/* follow.c: after a reload, incidents follow their node through the
 * inventory's renames and their policy through a rename (once per set) */
void policy__follow_reload(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                           struct policy_decisions *out);

/* guards.c */
/* The reason a disruptive step may not run ("" when it may); returns 1
 * when the reason clears by itself (maintenance, storm, fleet caps): the
 * step is held and decided again, not dropped. */
/* Whether on-call hears of a disruptive step a guard kept back (reason). */
int policy__guard_worth_telling(const char *reason);
int policy__check_guards(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, const struct incident *in, int64_t now,
                         char *reason, size_t size);
void policy__record_action(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, const struct incident *in,
                           enum medic_action_kind kind, int64_t now);
/* The action in recorded last never started: forgotten by the cooldown,
 * the budget and the repeat-offender count. */
void policy__forget_action(struct policy_state *st, const struct incident *in);
/* The held steps' notice (held.c), when one is due. */
void policy__held_notice(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                         struct policy_decisions *out);
void policy__update_storm(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                          struct policy_decisions *out);
/* Fills d as a notification to on-call through safety.storm.notifier (the
 * notifier that hears about medic itself) with message, or, when none is
 * configured, as a suppressed decision that says so. */
void policy__notify_oncall(const struct policy_context *ctx, struct policy_decision *d,
                           const char *message, struct policy_decisions *out);
struct policy_decision *policy__tell_oncall(const struct policy_context *ctx,
                                            const struct incident *in, int64_t now,
                                            struct policy_decisions *out, const char *message);

/* repair.c: verify, fallbacks, quarantine */
/* Step index of pol is if_failed and the step before it succeeded: it is
 * recorded as not needed (returns 1), the ladder goes on. */
int policy__skip_fallback(const struct policy *pol, struct incident *in, size_t index, int64_t now,
                          struct policy_decisions *out);
/* The node of in waits for a person: the incident holds what it holds, no
 * disruptive step runs there, on-call is told once with the node's
 * history. */
void policy__quarantine(const struct policy_context *ctx, struct policy_state *st,
                        struct incident *in, int64_t now, struct policy_decisions *out,
                        const char *why);
/* Before in's on_resolved steps resume a node it disrupted: a verify,
 * awaited (returns 1 when one was decided). */
int policy__verify_first(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, struct incident *in, int64_t now,
                         struct policy_decisions *out);
/* A disruptive step on a node whose incidents reached safety.quarantine:
 * turned into the drain that quarantines it ("" and 0 when not such a
 * node); returns 1 when the node is quarantined at once (already drained):
 * the step is not taken. */
int policy__repeat_offender(const struct policy_context *ctx, struct policy_state *st,
                            struct incident *in, struct policy_decision *d, int64_t now,
                            struct policy_decisions *out);
/* The awaited step of in ended (kind, outcome): what the repair loop does
 * about it; 1 when it took over (quarantine, a fallback next). */
int policy__repair_outcome(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, struct incident *in,
                           enum medic_action_kind kind, enum medic_outcome outcome,
                           const char *cause, int64_t now, struct policy_decisions *out);

/* ladder.c */
/* The decided action of step for in into d (its text rendered). */
int policy__build_action(const struct policy_step *step, const struct incident *in,
                         struct policy_decision *d);
long policy__decision_index(const struct policy_decisions *out, const struct policy_decision *d);
/* Why a disruptive step may not run ("" when it may); see ladder.c. */
int policy__check_disruptive(const struct policy_context *ctx, struct policy_state *st,
                             const struct policy *pol, struct incident *in,
                             struct policy_decision *d, int64_t now, char *reason, size_t size,
                             int *transient);
/* The step, every guard passed, executed (or decided in a dry run). */
void policy__take_step(const struct policy_context *ctx, struct policy_state *st,
                       const struct policy *pol, struct incident *in, struct policy_decision *d,
                       const struct policy_step *step, int index, int on_resolved,
                       const char *prefix, int64_t now, struct policy_decisions *out);
/* approval.c: the step waits for a person (state pending). */
/* On-call hears of in's pending step: the exact action, why, what comes
 * next, the decision's id and where to answer. */
void policy__tell_pending(const struct policy_context *ctx, const struct policy *pol,
                          struct incident *in, int64_t now, struct policy_decisions *out);
void policy__await_approval(const struct policy_context *ctx, const struct policy *pol,
                            struct incident *in, struct policy_decision *d, int index, int64_t now,
                            struct policy_decisions *out);
/* Undo steps for what in holds, whatever its policy says: resume its
 * drain, restore its power limit (a policy gone, a person's release). */
void policy__undo_holds(const struct policy_context *ctx, struct policy_state *st,
                        struct incident *in, int64_t now, struct policy_decisions *out);
int policy__verify_evidence(const struct incident *in, struct medic_action *verify);
void policy__remember_step(struct incident *in, enum medic_action_kind kind, const char *what,
                           const char *reason);
void policy__take_verify(struct incident *in, struct policy_decision *d, int live, int64_t now,
                         struct policy_decisions *out);
struct policy_decision *policy__incident_decision(struct policy_decisions *out,
                                                  const struct incident *in, int64_t now);
void policy__decide_step(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, struct incident *in,
                         const struct policy_step *step, int index, int on_resolved, int64_t now,
                         struct policy_decisions *out);
void policy__run_due_steps(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, struct incident *in, int64_t now,
                           struct policy_decisions *out);
void policy__undo(const struct policy_context *ctx, struct policy_state *st, struct incident *in,
                  enum policy_incident_state final, int64_t now, struct policy_decisions *out,
                  const char *why);
void policy__apply_outcome(const struct policy_context *ctx, struct policy_state *st,
                           struct incident *in, int64_t decision_id, enum medic_outcome outcome,
                           const char *detail, int64_t now, struct policy_decisions *out);

#endif

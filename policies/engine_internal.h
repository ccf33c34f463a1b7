/* The policy engine's insides, shared by its files (state.c: the state and
 * its indexes; guards.c: the safety guards and the storm breaker;
 * ladder.c: deciding a step; evaluate.c: alerts and the scheduler;
 * persist.c: the state as JSON). Private to policies/. */
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

/* One alert instance taken by one policy. */
struct instance {
    char *fingerprint;
    char *identity; /* fingerprint and label digest: what the state is keyed by */
    int64_t starts_at;
    char policy[65];
    size_t next_step; /* steps [0, next_step) are decided */
    int acted;        /* some step was executed or dry-run */
    int disrupting;   /* some disruptive step was executed or dry-run */
    int halted;       /* a disruptive step was suppressed: later ones are too */
    int drained;      /* this instance drained its node (and holds the drain) */
    int limited;      /* this instance power-limited its node */
    char halted_by[96];
    char node[128];
    int in_inventory;
    char alertname[128];
    struct label_copy labels, annotations;
    double risk;
    const struct policy *cached_policy; /* policy_by_name's last answer */
    struct instance *next_same_alert;   /* other policies' instances (continue) */
    int removed;                        /* resolved: dropped at the next compaction */
};

/* An alert instance no policy took: remembered so that its repeats do not
 * record another no_match. */
struct unmatched {
    char *fingerprint; /* the alert's identity (see policy__alert_identity) */
    int64_t starts_at;
    int64_t last_seen;
};

struct action_record {
    char policy[65];
    int64_t time;
    char *fingerprint; /* the instance that acted */
    int64_t starts_at;
};

struct node_state {
    char name[128];
    int drained_by_medic;
    int limited_by_medic;
    int drain_holders; /* open instances that drained the node */
    int limit_holders; /* open instances that limited it */
    int disrupting_instances;
    int64_t last_alerting; /* for the storm window; MEDIC_TIME_UNSET never */
    struct action_record *history;
    size_t history_count, history_cap;
};

/* Instances and nodes are allocated one by one (their addresses stay put)
 * and kept in arrays in creation order, which is the order the scheduler
 * visits them: first come, first served at the fleet caps. Hash maps find
 * an alert's instances and a node by name. */
/* An alert instance that resolved: remembered for RESOLVED_TTL so that a
 * firing copy arriving later (another Alertmanager replica's older view,
 * or a resolve overtaking its firing) never reopens it. */
struct resolved_alert {
    char *key; /* "identity starts_at" */
    int64_t at;
    int noted; /* a late firing copy was already recorded */
};

struct policy_state {
    struct instance **instances;
    size_t instance_count, instance_cap;
    size_t removed_count;
    struct medic_map instances_by_alert; /* "fingerprint starts_at" -> first instance */
    struct unmatched **unmatched;        /* creation order, for expiry */
    size_t unmatched_count, unmatched_cap;
    struct medic_map unmatched_by_alert;
    struct node_state **nodes;
    size_t node_count, node_cap;
    struct medic_map nodes_by_name;
    int storm_active;
    struct resolved_alert **resolved; /* creation order, for expiry */
    size_t resolved_count, resolved_cap;
    struct medic_map resolved_by_alert;
};

/* Unmatched instances are forgotten after this long without a repeat. */
#define UNMATCHED_TTL (24 * 3600 * MEDIC_NS_PER_SEC)
/* Resolved alert instances are remembered this long, at most this many. */
#define RESOLVED_TTL (24 * 3600 * MEDIC_NS_PER_SEC)
#define RESOLVED_MAX 100000
/* An alert's identity: its fingerprint and a digest of its labels, since
 * two alerts may share a fingerprint (never trust it alone). */
#define ALERT_IDENTITY_SIZE 160

struct policy_decision *policy__new_decision(struct policy_decisions *d);
int policy__grow(void **items, size_t count, size_t *cap, size_t elem);
void policy__labels_free(struct label_copy *l);
int policy__labels_copy(struct label_copy *to, const struct medic_labels *from);
void policy__instance_free(struct instance *in);
struct node_state *policy__node_get(struct policy_state *st, const char *name, int create);
int policy__node_disrupted(const struct node_state *n);
size_t policy__alerting_nodes(const struct policy_state *st, int64_t now, int64_t window);
const struct policy *policy__policy_by_name(const struct policy_set *ps, const char *name);
const struct policy *policy__instance_policy(const struct policy_context *ctx, struct instance *in);
void policy__alert_key(const char *fingerprint, int64_t starts_at, char *out, size_t size);
struct instance *policy__alert_instances(struct policy_state *st, const char *identity,
                                         int64_t starts_at);
struct instance *policy__new_instance(struct policy_state *st, const struct policy_alert *a,
                                      const char *identity, int64_t starts_at,
                                      const struct policy *pol, const char *node, int in_inventory);
void policy__remove_alert_instances(struct policy_state *st, struct instance *first);
int policy__remember_unmatched(struct policy_state *st, const char *identity, int64_t starts_at,
                               int64_t now);
void policy__forget_unmatched(struct policy_state *st, const char *identity, int64_t starts_at);
void policy__alert_identity(const char *fingerprint, const struct medic_labels *labels, char *out,
                            size_t size);
struct resolved_alert *policy__resolved(struct policy_state *st, const char *identity,
                                        int64_t starts_at);
int policy__remember_resolved(struct policy_state *st, const char *identity, int64_t starts_at,
                              int64_t now);
void policy__expire_resolved(struct policy_state *st, int64_t now);
void policy__expire_unmatched(struct policy_state *st, int64_t now);
void policy__check_guards(const struct policy_context *ctx, struct policy_state *st,
                          const struct policy *pol, const struct instance *in, int64_t now,
                          char *reason, size_t size);
void policy__record_action(struct policy_state *st, const struct policy *pol,
                           const struct instance *in, int64_t now);
void policy__update_storm(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                          struct policy_decisions *out);
void policy__decide_step(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, struct instance *in,
                         const struct policy_step *step, int index, int on_resolved, int64_t now,
                         struct policy_decisions *out);
void policy__run_due_steps(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, struct instance *in, int64_t now,
                           struct policy_decisions *out);

#endif

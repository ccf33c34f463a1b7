#include "policy_engine.h"
#include "buf.h"

#include <cjson/cJSON.h>
#include "map.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A copy of a label set that outlives the notification it came from. */
struct label_copy {
    struct medic_label *items;
    size_t count;
};

/* One alert instance taken by one policy. */
struct instance {
    char *fingerprint;
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
    char *fingerprint;
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
};

/* Unmatched instances are forgotten after this long without a repeat. */
#define UNMATCHED_TTL (24 * 3600 * MEDIC_NS_PER_SEC)

static const char *const verdict_names[] = {"execute", "dry_run", "suppressed", "no_match"};

const char *policy_verdict_name(enum policy_verdict v)
{
    return verdict_names[v];
}

void policy_decisions_init(struct policy_decisions *d)
{
    memset(d, 0, sizeof(*d));
}

void policy_decisions_release(struct policy_decisions *d)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].has_action)
            medic_action_release(&d->items[i].action);
    free(d->items);
    memset(d, 0, sizeof(*d));
}

static struct policy_decision *new_decision(struct policy_decisions *d)
{
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct policy_decision *items = realloc(d->items, cap * sizeof(*items));
        if (!items) {
            d->failed = MEDIC_E_NOMEM; /* the caller records that a decision is missing */
            return NULL;
        }
        d->items = items;
        d->cap = cap;
    }
    struct policy_decision *x = &d->items[d->count++];
    memset(x, 0, sizeof(*x));
    x->step = -1;
    return x;
}

/* Grows an array of elements of size elem to hold one more. */
static int grow(void **items, size_t count, size_t *cap, size_t elem)
{
    if (count < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, c * elem);
    if (!p)
        return MEDIC_E_NOMEM;
    *items = p;
    *cap = c;
    return 0;
}

struct policy_state *policy_state_new(void)
{
    struct policy_state *st = calloc(1, sizeof(struct policy_state));
    if (st) {
        medic_map_init(&st->instances_by_alert);
        medic_map_init(&st->nodes_by_name);
        medic_map_init(&st->unmatched_by_alert);
    }
    return st;
}

static void labels_free(struct label_copy *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free((char *)l->items[i].name);
        free((char *)l->items[i].value);
    }
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static int labels_copy(struct label_copy *to, const struct medic_labels *from)
{
    memset(to, 0, sizeof(*to));
    if (!from || from->count == 0)
        return 0;
    to->items = calloc(from->count, sizeof(*to->items));
    if (!to->items)
        return MEDIC_E_NOMEM;
    for (size_t i = 0; i < from->count; i++) {
        to->items[i].name = strdup(from->items[i].name);
        to->items[i].value = strdup(from->items[i].value);
        to->count++;
        if (!to->items[i].name || !to->items[i].value)
            return MEDIC_E_NOMEM;
    }
    return 0;
}

static void instance_free(struct instance *in)
{
    free(in->fingerprint);
    labels_free(&in->labels);
    labels_free(&in->annotations);
    free(in);
}

void policy_state_free(struct policy_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->instance_count; i++)
        instance_free(st->instances[i]);
    for (size_t i = 0; i < st->unmatched_count; i++) {
        free(st->unmatched[i]->fingerprint);
        free(st->unmatched[i]);
    }
    medic_map_release(&st->unmatched_by_alert);
    for (size_t i = 0; i < st->node_count; i++) {
        for (size_t k = 0; k < st->nodes[i]->history_count; k++)
            free(st->nodes[i]->history[k].fingerprint);
        free(st->nodes[i]->history);
        free(st->nodes[i]);
    }
    free(st->instances);
    free(st->unmatched);
    free(st->nodes);
    medic_map_release(&st->instances_by_alert);
    medic_map_release(&st->nodes_by_name);
    free(st);
}

static struct node_state *node_get(struct policy_state *st, const char *name, int create)
{
    struct node_state *n = medic_map_get(&st->nodes_by_name, name);
    if (n || !create)
        return n;
    if (grow((void **)&st->nodes, st->node_count, &st->node_cap, sizeof(*st->nodes)) ||
        !(n = calloc(1, sizeof(*n))))
        return NULL;
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->last_alerting = MEDIC_TIME_UNSET;
    if (medic_map_put(&st->nodes_by_name, n->name, n)) {
        free(n);
        return NULL;
    }
    st->nodes[st->node_count++] = n;
    return n;
}

static int node_disrupted(const struct node_state *n)
{
    return n->drained_by_medic || n->limited_by_medic || n->disrupting_instances > 0;
}

size_t policy_disrupted_nodes(const struct policy_state *st)
{
    size_t count = 0;
    for (size_t i = 0; i < st->node_count; i++)
        count += node_disrupted(st->nodes[i]) ? 1 : 0;
    return count;
}

int policy_storm_active(const struct policy_state *st)
{
    return st->storm_active;
}

static size_t alerting_nodes(const struct policy_state *st, int64_t now, int64_t window)
{
    size_t count = 0;
    for (size_t i = 0; i < st->node_count; i++)
        if (st->nodes[i]->last_alerting != MEDIC_TIME_UNSET &&
            st->nodes[i]->last_alerting > now - window)
            count++;
    return count;
}

static const struct policy *policy_by_name(const struct policy_set *ps, const char *name)
{
    /* linear: called when an instance's cached policy is not in this set */
    for (size_t i = 0; i < ps->count; i++)
        if (strcmp(ps->items[i].name, name) == 0)
            return &ps->items[i];
    return NULL;
}

static void format_duration(int64_t ns, char *out, size_t size)
{
    int64_t s = ns / MEDIC_NS_PER_SEC;
    if (s % 86400 == 0 && s >= 86400)
        snprintf(out, size, "%lldd", (long long)(s / 86400));
    else if (s % 3600 == 0 && s >= 3600)
        snprintf(out, size, "%lldh", (long long)(s / 3600));
    else if (s % 60 == 0 && s >= 60)
        snprintf(out, size, "%lldm", (long long)(s / 60));
    else
        snprintf(out, size, "%llds", (long long)s);
}

/* The instance's policy in the current set (a reload may have replaced
 * it), or NULL when the set no longer has it. */
static const struct policy *instance_policy(const struct policy_context *ctx, struct instance *in)
{
    const struct policy_set *ps = ctx->policies;
    if (in->cached_policy >= ps->items && in->cached_policy < ps->items + ps->count &&
        strcmp(in->cached_policy->name, in->policy) == 0)
        return in->cached_policy;
    in->cached_policy = policy_by_name(ps, in->policy);
    return in->cached_policy;
}

/* ---- parameters and reasons ---- */

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
    const char *text_key = step->action.kind == MEDIC_ACTION_DRAIN    ? "reason"
                           : step->action.kind == MEDIC_ACTION_NOTIFY ? "message"
                                                                      : NULL;
    if (!text_key || (!step->has_text && step->action.kind != MEDIC_ACTION_DRAIN))
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
    if (step->action.kind == MEDIC_ACTION_DRAIN) /* Slurm shows who drained: say it was medic */
        snprintf(suffix, sizeof(suffix), " (medic policy %s)", in->policy);
    size_t size = MEDIC_ACTION_TEXT_MAX + 1 - strlen(suffix);
    char *fitted = rc == 0 ? malloc(MEDIC_ACTION_TEXT_MAX + 1) : NULL;
    if (fitted) {
        size_t len = medic_text_fit(fitted, size, text.data ? text.data : "", text.len);
        memcpy(fitted + len, suffix, strlen(suffix) + 1);
        rc = medic_action_set_text(&d->action, text_key, fitted, strlen(fitted));
    } else if (rc == 0) {
        rc = MEDIC_E_NOMEM;
    }
    free(fitted);
    medic_buf_release(&text);
    return rc;
}

static struct policy_decision *decision_for(struct policy_decisions *out, const struct instance *in,
                                            int64_t now)
{
    struct policy_decision *d = new_decision(out);
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

/* ---- the guards ---- */

static int in_maintenance(const struct policy_safety *s, const char *node, int64_t now,
                          char *reason, size_t size)
{
    for (size_t i = 0; i < s->maintenance_count; i++) {
        const struct maintenance_window *m = &s->maintenance[i];
        if (now >= m->start && now < m->end && regexec(&m->nodes, node, 0, NULL, 0) == 0) {
            char until[40];
            medic_time_format(m->end, until, sizeof(until));
            snprintf(reason, size, "node '%s' is in a maintenance window until %s%s%s", node, until,
                     m->reason ? ": " : "", m->reason ? m->reason : "");
            return 1;
        }
    }
    return 0;
}

/* The reason a disruptive step may not run, or "" when it may. */
static void check_guards(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, const struct instance *in, int64_t now,
                         char *reason, size_t size)
{
    const struct policy_safety *s = &ctx->policies->safety;
    char a[32], b[32];
    reason[0] = '\0';
    if (!in->in_inventory) {
        if (in->node[0])
            snprintf(reason, size, "node '%s' is not in the inventory", in->node);
        else
            snprintf(reason, size, "the alert names no node (none of the node labels is set)");
        return;
    }
    if (in_maintenance(s, in->node, now, reason, size))
        return;
    if (now - in->starts_at > s->max_alert_age) {
        format_duration(now - in->starts_at, a, sizeof(a));
        format_duration(s->max_alert_age, b, sizeof(b));
        snprintf(reason, size,
                 "the alert started %s ago, older than max_alert_age %s: stale alerts never "
                 "disrupt",
                 a, b);
        return;
    }
    if (st->storm_active) {
        format_duration(s->storm_window, a, sizeof(a));
        snprintf(reason, size,
                 "storm: %zu nodes alerting within %s (max %zu); disruptive actions are held",
                 alerting_nodes(st, now, s->storm_window), a, s->storm_max_alerting_nodes);
        return;
    }
    struct node_state *n = node_get(st, in->node, 1);
    if (!n) {
        snprintf(reason, size, "out of memory");
        return;
    }
    size_t recent = 0;
    for (size_t i = 0; i < n->history_count; i++) {
        const struct action_record *r = &n->history[i];
        if (strcmp(r->policy, pol->name) != 0)
            continue;
        int same_instance =
            strcmp(r->fingerprint, in->fingerprint) == 0 && r->starts_at == in->starts_at;
        if (pol->cooldown && !same_instance && now - r->time < pol->cooldown) {
            format_duration(pol->cooldown, a, sizeof(a));
            format_duration(now - r->time, b, sizeof(b));
            snprintf(reason, size, "cooldown: policy %s acted on node '%s' %s ago (cooldown %s)",
                     pol->name, in->node, b, a);
            return;
        }
        if (pol->budget_count && now - r->time < pol->budget_window)
            recent++;
    }
    if (pol->budget_count && recent >= pol->budget_count) {
        format_duration(pol->budget_window, a, sizeof(a));
        snprintf(reason, size, "budget: %zu actions on node '%s' within %s (max %zu)", recent,
                 in->node, a, pol->budget_count);
        return;
    }
    if (!node_disrupted(n)) {
        size_t disrupted = policy_disrupted_nodes(st);
        size_t inventory = ctx->inventory ? ctx->inventory->count : 0;
        if (disrupted + 1 > s->max_disruptive_in_flight) {
            snprintf(reason, size,
                     "fleet cap: %zu nodes already disrupted (max_disruptive_in_flight %zu)",
                     disrupted, s->max_disruptive_in_flight);
            return;
        }
        if (inventory == 0 ||
            (double)(disrupted + 1) > s->max_disrupted_fraction * (double)inventory + 1e-9) {
            snprintf(reason, size,
                     "fleet cap: %zu of %zu nodes would be disrupted (max_disrupted_fraction "
                     "%g)",
                     disrupted + 1, inventory, s->max_disrupted_fraction);
            return;
        }
    }
}

static void record_action(struct policy_state *st, const struct policy *pol,
                          const struct instance *in, int64_t now)
{
    struct node_state *n = node_get(st, in->node, 1);
    if (!n || grow((void **)&n->history, n->history_count, &n->history_cap, sizeof(*n->history)))
        return;
    /* forget what no cooldown or budget can still see */
    int64_t keep = pol->cooldown > pol->budget_window ? pol->cooldown : pol->budget_window;
    if (keep < 7 * 86400 * MEDIC_NS_PER_SEC)
        keep = 7 * 86400 * MEDIC_NS_PER_SEC;
    size_t w = 0;
    for (size_t i = 0; i < n->history_count; i++) {
        if (now - n->history[i].time < keep)
            n->history[w++] = n->history[i];
        else
            free(n->history[i].fingerprint);
    }
    n->history_count = w;
    struct action_record *r = &n->history[n->history_count];
    snprintf(r->policy, sizeof(r->policy), "%s", pol->name);
    r->time = now;
    r->starts_at = in->starts_at;
    r->fingerprint = strdup(in->fingerprint);
    if (r->fingerprint)
        n->history_count++;
}

/* Decides one step of instance in; returns the verdict. */
static void decide_step(const struct policy_context *ctx, struct policy_state *st,
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
    struct node_state *n = in->in_inventory ? node_get(st, in->node, 1) : NULL;
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
            check_guards(ctx, st, pol, in, now, reason, sizeof(reason));
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
    format_duration(step->after, after, sizeof(after));
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
    n = node_get(st, in->node, 1);
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
        record_action(st, pol, in, now);
        if (!in->disrupting) {
            in->disrupting = 1;
            n->disrupting_instances++;
        }
    }
}

static void run_due_steps(const struct policy_context *ctx, struct policy_state *st,
                          const struct policy *pol, struct instance *in, int64_t now,
                          struct policy_decisions *out)
{
    while (in->next_step < pol->step_count &&
           now - in->starts_at >= pol->steps[in->next_step].after) {
        size_t k = in->next_step++;
        decide_step(ctx, st, pol, in, &pol->steps[k], (int)k, 0, now, out);
    }
}

/* ---- the storm breaker ---- */

static void storm_notice(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                         int starting, struct policy_decisions *out)
{
    const struct policy_safety *s = &ctx->policies->safety;
    struct policy_decision *d = new_decision(out);
    if (!d)
        return;
    char window[32];
    format_duration(s->storm_window, window, sizeof(window));
    size_t nodes = alerting_nodes(st, now, s->storm_window);
    d->time = now;
    d->risk = NAN;
    if (s->storm_notifier) {
        char message[256];
        snprintf(message, sizeof(message),
                 starting ? "medic storm breaker: %zu nodes alerting within %s (max %zu); "
                            "disruptive actions are held until it passes"
                          : "medic storm breaker: the storm passed (%zu nodes alerting within %s, "
                            "max %zu); disruptive actions resume",
                 nodes, window, s->storm_max_alerting_nodes);
        medic_action_init(&d->action, MEDIC_ACTION_NOTIFY);
        d->has_action = 1;
        if (medic_action_set_text(&d->action, "notifier", s->storm_notifier,
                                  strlen(s->storm_notifier)) ||
            medic_action_set_text(&d->action, "message", message, strlen(message)))
            out->failed = MEDIC_E_NOMEM;
        d->verdict = ctx->live ? VERDICT_EXECUTE : VERDICT_DRY_RUN;
    } else {
        d->verdict = VERDICT_SUPPRESSED;
    }
    snprintf(d->reason, sizeof(d->reason), "storm %s: %zu nodes alerting within %s (max %zu)%s",
             starting ? "started" : "ended", nodes, window, s->storm_max_alerting_nodes,
             s->storm_notifier ? "" : "; no safety.storm.notifier to tell");
}

static void update_storm(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                         struct policy_decisions *out)
{
    const struct policy_safety *s = &ctx->policies->safety;
    size_t nodes = alerting_nodes(st, now, s->storm_window);
    if (!st->storm_active && nodes > s->storm_max_alerting_nodes) {
        st->storm_active = 1;
        storm_notice(ctx, st, now, 1, out);
    } else if (st->storm_active && nodes <= s->storm_max_alerting_nodes) {
        st->storm_active = 0;
        storm_notice(ctx, st, now, 0, out);
    }
}

/* ---- evaluation ---- */

static void alert_key(const char *fingerprint, int64_t starts_at, char *out, size_t size)
{
    snprintf(out, size, "%s %lld", fingerprint, (long long)starts_at);
}

/* The first of an alert instance's per-policy instances, or NULL. */
static struct instance *alert_instances(struct policy_state *st, const char *fingerprint,
                                        int64_t starts_at)
{
    char key[200];
    alert_key(fingerprint, starts_at, key, sizeof(key));
    return medic_map_get(&st->instances_by_alert, key);
}

static struct instance *new_instance(struct policy_state *st, const struct policy_alert *a,
                                     int64_t starts_at, const struct policy *pol, const char *node,
                                     int in_inventory)
{
    if (grow((void **)&st->instances, st->instance_count, &st->instance_cap,
             sizeof(*st->instances)))
        return NULL;
    struct instance *in = calloc(1, sizeof(*in));
    if (!in)
        return NULL;
    in->fingerprint = strdup(a->fingerprint);
    in->starts_at = starts_at;
    snprintf(in->policy, sizeof(in->policy), "%s", pol->name);
    in->cached_policy = pol;
    snprintf(in->node, sizeof(in->node), "%s", node);
    in->in_inventory = in_inventory;
    const char *alertname = medic_labels_get(a->labels, "alertname");
    snprintf(in->alertname, sizeof(in->alertname), "%s", alertname ? alertname : "");
    in->risk = a->risk;
    char key[200];
    alert_key(a->fingerprint, starts_at, key, sizeof(key));
    struct instance *first = medic_map_get(&st->instances_by_alert, key);
    if (!in->fingerprint || labels_copy(&in->labels, a->labels) ||
        labels_copy(&in->annotations, a->annotations) ||
        (!first && medic_map_put(&st->instances_by_alert, key, in))) {
        instance_free(in);
        return NULL;
    }
    if (first) {
        while (first->next_same_alert)
            first = first->next_same_alert;
        first->next_same_alert = in;
    }
    st->instances[st->instance_count++] = in;
    return in;
}

/* Drops an alert's instances once its on_resolved steps ran; the array is
 * compacted when half of it is dropped. */
static void remove_alert_instances(struct policy_state *st, struct instance *first)
{
    char key[200];
    alert_key(first->fingerprint, first->starts_at, key, sizeof(key));
    medic_map_remove(&st->instances_by_alert, key);
    for (struct instance *in = first; in; in = in->next_same_alert) {
        in->removed = 1;
        st->removed_count++;
    }
    if (st->removed_count * 2 < st->instance_count)
        return;
    size_t w = 0;
    for (size_t i = 0; i < st->instance_count; i++) {
        if (st->instances[i]->removed)
            instance_free(st->instances[i]);
        else
            st->instances[w++] = st->instances[i];
    }
    st->instance_count = w;
    st->removed_count = 0;
}

/* The alert's node: the first node label present, port stripped, then
 * looked up by name or alias. */
static const struct inventory_node *resolve_node(const struct policy_context *ctx,
                                                 const struct medic_labels *labels, char *raw,
                                                 size_t size)
{
    if (medic_alert_node(labels, ctx->node_labels, ctx->node_label_count, raw, size))
        return NULL;
    return inventory_find(ctx->inventory, raw);
}

/* Returns 1 when the alert instance was seen unmatched before. */
static int remember_unmatched(struct policy_state *st, const struct policy_alert *a,
                              int64_t starts_at, int64_t now)
{
    char key[200];
    alert_key(a->fingerprint, starts_at, key, sizeof(key));
    struct unmatched *u = medic_map_get(&st->unmatched_by_alert, key);
    if (u) {
        u->last_seen = now;
        return 1;
    }
    if (grow((void **)&st->unmatched, st->unmatched_count, &st->unmatched_cap,
             sizeof(*st->unmatched)) ||
        !(u = calloc(1, sizeof(*u))))
        return 0;
    *u = (struct unmatched){strdup(a->fingerprint), starts_at, now};
    if (!u->fingerprint || medic_map_put(&st->unmatched_by_alert, key, u)) {
        free(u->fingerprint);
        free(u);
        return 0;
    }
    st->unmatched[st->unmatched_count++] = u;
    return 0;
}

static void forget_unmatched(struct policy_state *st, const char *fingerprint, int64_t starts_at)
{
    char key[200];
    alert_key(fingerprint, starts_at, key, sizeof(key));
    struct unmatched *u = medic_map_get(&st->unmatched_by_alert, key);
    if (u) {
        medic_map_remove(&st->unmatched_by_alert, key);
        u->last_seen = INT64_MIN; /* freed by the next expiry */
    }
}

/* Forgets unmatched alerts not seen for UNMATCHED_TTL (and resolved ones). */
static void expire_unmatched(struct policy_state *st, int64_t now)
{
    size_t w = 0;
    for (size_t i = 0; i < st->unmatched_count; i++) {
        struct unmatched *u = st->unmatched[i];
        if (u->last_seen != INT64_MIN && now - u->last_seen < UNMATCHED_TTL) {
            st->unmatched[w++] = u;
            continue;
        }
        if (u->last_seen != INT64_MIN) {
            char key[200];
            alert_key(u->fingerprint, u->starts_at, key, sizeof(key));
            medic_map_remove(&st->unmatched_by_alert, key);
        }
        free(u->fingerprint);
        free(u);
    }
    st->unmatched_count = w;
}

static void evaluate_firing(const struct policy_context *ctx, struct policy_state *st,
                            const struct policy_alert *a, int64_t starts_at, int64_t now,
                            struct policy_decisions *out)
{
    const struct policy_set *ps = ctx->policies;
    char raw[128];
    const struct inventory_node *inv = resolve_node(ctx, a->labels, raw, sizeof(raw));
    const char *node = inv ? inv->name : raw;

    /* the storm window counts every alerting node, known or not */
    struct node_state *ns = node_get(st, node[0] ? node : "(no node)", 1);
    if (ns)
        ns->last_alerting = now;
    update_storm(ctx, st, now, out);

    char skipped[384] = "";
    int taken = 0;
    struct instance *existing = alert_instances(st, a->fingerprint, starts_at);
    for (size_t p = 0; p < ps->count; p++) {
        const struct policy *pol = &ps->items[p];
        struct instance *in = existing;
        while (in && strcmp(in->policy, pol->name) != 0)
            in = in->next_same_alert;
        if (!in) {
            if (!policy_matchers_match(&pol->match, a->labels))
                continue;
            int risk_ok = isnan(a->risk) ? pol->act_on_unknown_risk : a->risk >= pol->risk_at_least;
            if (!risk_ok) {
                size_t used = strlen(skipped);
                if (isnan(a->risk))
                    snprintf(skipped + used, sizeof(skipped) - used,
                             "%spolicy %s skips alerts of unknown risk", used ? "; " : "",
                             pol->name);
                else
                    snprintf(skipped + used, sizeof(skipped) - used,
                             "%spolicy %s: risk %.2f below %.2f", used ? "; " : "", pol->name,
                             a->risk, pol->risk_at_least);
                continue;
            }
            in = new_instance(st, a, starts_at, pol, node, inv != NULL);
            if (!in)
                return;
        }
        taken = 1;
        run_due_steps(ctx, st, pol, in, now, out);
        if (!pol->continue_matching)
            break;
    }
    if (taken || remember_unmatched(st, a, starts_at, now))
        return;
    struct policy_decision *d = new_decision(out);
    if (!d)
        return;
    snprintf(d->node, sizeof(d->node), "%s", node);
    d->in_inventory = inv != NULL;
    const char *alertname = medic_labels_get(a->labels, "alertname");
    snprintf(d->alertname, sizeof(d->alertname), "%s", alertname ? alertname : "");
    snprintf(d->fingerprint, sizeof(d->fingerprint), "%s", a->fingerprint);
    d->verdict = VERDICT_NO_MATCH;
    d->risk = a->risk;
    d->time = now;
    snprintf(d->reason, sizeof(d->reason), "%s",
             skipped[0] ? skipped : "no policy matches the alert's labels");
}

static void evaluate_resolved(const struct policy_context *ctx, struct policy_state *st,
                              const struct policy_alert *a, int64_t starts_at, int64_t now,
                              struct policy_decisions *out)
{
    forget_unmatched(st, a->fingerprint, starts_at);
    struct instance *first = alert_instances(st, a->fingerprint, starts_at);
    /* this alert lets go of what it holds first, so that its own resume
     * sees whether other open alerts still need the node out */
    for (struct instance *in = first; in; in = in->next_same_alert) {
        struct node_state *n = in->in_inventory ? node_get(st, in->node, 0) : NULL;
        if (n && in->drained && n->drain_holders > 0)
            n->drain_holders--;
        if (n && in->limited && n->limit_holders > 0)
            n->limit_holders--;
        in->drained = in->limited = 0;
    }
    for (struct instance *in = first; in; in = in->next_same_alert) {
        const struct policy *pol = instance_policy(ctx, in);
        if (pol && in->acted)
            for (size_t k = 0; k < pol->on_resolved_count; k++)
                decide_step(ctx, st, pol, in, &pol->on_resolved[k], (int)k, 1, now, out);
        if (in->disrupting && in->in_inventory) {
            struct node_state *n = node_get(st, in->node, 0);
            if (n && n->disrupting_instances > 0)
                n->disrupting_instances--;
        }
    }
    if (first)
        remove_alert_instances(st, first);
}

int policy_evaluate(const struct policy_context *ctx, struct policy_state *st,
                    const struct policy_alert *alert, int64_t now, struct policy_decisions *out)
{
    int64_t starts_at = alert->starts_at == MEDIC_TIME_UNSET ? now : alert->starts_at;
    if (alert->status == MEDIC_STATUS_FIRING)
        evaluate_firing(ctx, st, alert, starts_at, now, out);
    else
        evaluate_resolved(ctx, st, alert, starts_at, now, out);
    return out->failed;
}

int policy_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out)
{
    update_storm(ctx, st, now, out);
    expire_unmatched(st, now);
    for (size_t i = 0; i < st->instance_count; i++) {
        struct instance *in = st->instances[i];
        const struct policy *pol = in->removed ? NULL : instance_policy(ctx, in);
        if (pol && in->next_step < pol->step_count)
            run_due_steps(ctx, st, pol, in, now, out);
    }
    return out->failed;
}

int policy_decisions_table(const struct policy_decisions *d, struct medic_table *out)
{
    static const char *const names[] = {"time",   "node",    "alertname", "policy", "step",
                                        "action", "verdict", "reason",    "risk",   "params"};
    static const enum medic_column_type types[] = {
        MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_INT,
        MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_REAL, MEDIC_COL_JSON};
    int rc = medic_table_init(out, 10, names, types);
    struct medic_buf params;
    medic_buf_init(&params, 0);
    for (size_t i = 0; i < d->count && rc == 0; i++) {
        const struct policy_decision *x = &d->items[i];
        char time[40], step[16], risk[32];
        medic_buf_reset(&params);
        if (x->has_action && (rc = medic_action_params_json(&x->action, &params)))
            break;
        medic_time_format(x->time, time, sizeof(time));
        snprintf(step, sizeof(step), "%d", x->step + 1);
        snprintf(risk, sizeof(risk), "%.4g", x->risk);
        const char *values[] = {time,
                                x->node[0] ? x->node : NULL,
                                x->alertname[0] ? x->alertname : NULL,
                                x->policy[0] ? x->policy : NULL,
                                x->step >= 0 ? step : NULL,
                                x->has_action ? medic_action_name(x->action.kind) : NULL,
                                policy_verdict_name(x->verdict),
                                x->reason,
                                isnan(x->risk) ? NULL : risk,
                                x->has_action ? params.data : NULL};
        rc = medic_table_add_row(out, values);
    }
    medic_buf_release(&params);
    return rc;
}

/* ---- persistence ---- */

#define ENGINE_STATE_VERSION 1

static void json_time(struct medic_buf *b, const char *key, int64_t t)
{
    medic_buf_printf(b, "\"%s\":\"%lld\"", key, (long long)t);
}

static void json_labels(struct medic_buf *b, const char *key, const struct label_copy *l)
{
    medic_buf_printf(b, "\"%s\":{", key);
    for (size_t i = 0; i < l->count; i++) {
        if (i)
            medic_buf_puts(b, ",");
        medic_buf_json_string(b, l->items[i].name);
        medic_buf_puts(b, ":");
        medic_buf_json_string(b, l->items[i].value);
    }
    medic_buf_puts(b, "}");
}

int policy_state_save(const struct policy_state *st, struct medic_buf *b)
{
    medic_buf_printf(b, "{\"version\":%d,\"storm_active\":%s,\"instances\":[", ENGINE_STATE_VERSION,
                     st->storm_active ? "true" : "false");
    int first = 1;
    for (size_t i = 0; i < st->instance_count; i++) {
        const struct instance *in = st->instances[i];
        if (in->removed)
            continue;
        medic_buf_puts(b, first ? "{" : ",{");
        first = 0;
        medic_buf_puts(b, "\"fingerprint\":");
        medic_buf_json_string(b, in->fingerprint);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", in->starts_at);
        medic_buf_puts(b, ",\"policy\":");
        medic_buf_json_string(b, in->policy);
        medic_buf_printf(b,
                         ",\"next_step\":%zu,\"acted\":%d,\"disrupting\":%d,\"halted\":%d,"
                         "\"drained\":%d,\"limited\":%d,",
                         in->next_step, in->acted, in->disrupting, in->halted, in->drained,
                         in->limited);
        medic_buf_puts(b, "\"halted_by\":");
        medic_buf_json_string(b, in->halted_by);
        medic_buf_puts(b, ",\"node\":");
        medic_buf_json_string(b, in->node);
        medic_buf_printf(b, ",\"in_inventory\":%d,\"alertname\":", in->in_inventory);
        medic_buf_json_string(b, in->alertname);
        if (isnan(in->risk))
            medic_buf_puts(b, ",\"risk\":null,");
        else
            medic_buf_printf(b, ",\"risk\":%.17g,", in->risk);
        json_labels(b, "labels", &in->labels);
        medic_buf_puts(b, ",");
        json_labels(b, "annotations", &in->annotations);
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "],\"unmatched\":[");
    first = 1;
    for (size_t i = 0; i < st->unmatched_count; i++) {
        const struct unmatched *u = st->unmatched[i];
        if (u->last_seen == INT64_MIN)
            continue;
        medic_buf_puts(b, first ? "{\"fingerprint\":" : ",{\"fingerprint\":");
        first = 0;
        medic_buf_json_string(b, u->fingerprint);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", u->starts_at);
        medic_buf_puts(b, ",");
        json_time(b, "last_seen", u->last_seen);
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "],\"nodes\":[");
    for (size_t i = 0; i < st->node_count; i++) {
        const struct node_state *n = st->nodes[i];
        medic_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        medic_buf_json_string(b, n->name);
        medic_buf_printf(b,
                         ",\"drained_by_medic\":%d,\"limited_by_medic\":%d,"
                         "\"disrupting_instances\":%d,",
                         n->drained_by_medic, n->limited_by_medic, n->disrupting_instances);
        medic_buf_printf(b, "\"drain_holders\":%d,\"limit_holders\":%d,", n->drain_holders,
                         n->limit_holders);
        json_time(b, "last_alerting", n->last_alerting);
        medic_buf_puts(b, ",\"history\":[");
        for (size_t k = 0; k < n->history_count; k++) {
            const struct action_record *r = &n->history[k];
            medic_buf_puts(b, k ? ",{\"policy\":" : "{\"policy\":");
            medic_buf_json_string(b, r->policy);
            medic_buf_puts(b, ",");
            json_time(b, "time", r->time);
            medic_buf_puts(b, ",\"fingerprint\":");
            medic_buf_json_string(b, r->fingerprint);
            medic_buf_puts(b, ",");
            json_time(b, "starts_at", r->starts_at);
            medic_buf_puts(b, "}");
        }
        medic_buf_puts(b, "]}");
    }
    return medic_buf_puts(b, "]}");
}

struct loader {
    struct medic_error *err;
    int failed;
};

static const cJSON *field(struct loader *l, const cJSON *obj, const char *key, int type)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || !(v->type & type)) {
        if (!l->failed)
            medic_error_set(l->err, MEDIC_E_INVALID, "engine state: '%s' is missing or mistyped",
                            key);
        l->failed = 1;
        return NULL;
    }
    return v;
}

static const char *text_field(struct loader *l, const cJSON *obj, const char *key)
{
    const cJSON *v = field(l, obj, key, cJSON_String);
    return v ? v->valuestring : "";
}

static int64_t time_field(struct loader *l, const cJSON *obj, const char *key)
{
    const char *s = text_field(l, obj, key);
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!l->failed && (*end || end == s)) {
        medic_error_set(l->err, MEDIC_E_INVALID, "engine state: '%s' is not a time", key);
        l->failed = 1;
    }
    return (int64_t)v;
}

static int int_field(struct loader *l, const cJSON *obj, const char *key)
{
    const cJSON *v = field(l, obj, key, cJSON_Number);
    return v ? v->valueint : 0;
}

static int load_labels(struct loader *l, const cJSON *obj, const char *key, struct label_copy *out)
{
    const cJSON *m = field(l, obj, key, cJSON_Object);
    memset(out, 0, sizeof(*out));
    if (!m)
        return -1;
    size_t n = (size_t)cJSON_GetArraySize(m);
    if (n == 0)
        return 0;
    if (!(out->items = calloc(n, sizeof(*out->items))))
        return -1;
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return -1;
        out->items[out->count].name = strdup(e->string);
        out->items[out->count].value = strdup(e->valuestring);
        out->count++;
        if (!out->items[out->count - 1].name || !out->items[out->count - 1].value)
            return -1;
    }
    return 0;
}

int policy_state_load(const char *json, size_t len, struct policy_state **out,
                      struct medic_error *err)
{
    struct loader l = {err, 0};
    cJSON *root = cJSON_ParseWithLength(json, len);
    struct policy_state *st = policy_state_new();
    if (!root || !st) {
        cJSON_Delete(root);
        policy_state_free(st);
        return medic_error_set(err, MEDIC_E_INVALID, "engine state: not JSON");
    }
    if (int_field(&l, root, "version") != ENGINE_STATE_VERSION && !l.failed) {
        medic_error_set(err, MEDIC_E_INVALID, "engine state: unknown version");
        l.failed = 1;
    }
    const cJSON *storm = cJSON_GetObjectItemCaseSensitive(root, "storm_active");
    st->storm_active = cJSON_IsTrue(storm);
    const cJSON *list = field(&l, root, "instances", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        struct medic_label none_items[1];
        struct medic_labels none = {none_items, 0};
        struct policy_alert a = {
            text_field(&l, e, "fingerprint"), MEDIC_STATUS_FIRING, &none, &none, 0, NAN};
        const cJSON *risk = cJSON_GetObjectItemCaseSensitive(e, "risk");
        a.risk = cJSON_IsNumber(risk) ? risk->valuedouble : NAN;
        struct policy stub = {0};
        stub.name = (char *)text_field(&l, e, "policy");
        int64_t starts_at = time_field(&l, e, "starts_at");
        if (l.failed)
            break;
        struct instance *in = new_instance(st, &a, starts_at, &stub, text_field(&l, e, "node"),
                                           int_field(&l, e, "in_inventory"));
        if (!in) {
            l.failed = 1;
            medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        in->cached_policy = NULL;
        in->next_step = (size_t)int_field(&l, e, "next_step");
        in->acted = int_field(&l, e, "acted");
        in->disrupting = int_field(&l, e, "disrupting");
        in->halted = int_field(&l, e, "halted");
        in->drained = int_field(&l, e, "drained");
        in->limited = int_field(&l, e, "limited");
        snprintf(in->halted_by, sizeof(in->halted_by), "%s", text_field(&l, e, "halted_by"));
        snprintf(in->alertname, sizeof(in->alertname), "%s", text_field(&l, e, "alertname"));
        if (load_labels(&l, e, "labels", &in->labels) ||
            load_labels(&l, e, "annotations", &in->annotations)) {
            if (!l.failed)
                medic_error_set(err, MEDIC_E_INVALID, "engine state: bad labels");
            l.failed = 1;
        }
    }
    list = l.failed ? NULL : field(&l, root, "unmatched", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        struct policy_alert a = {
            text_field(&l, e, "fingerprint"), MEDIC_STATUS_FIRING, NULL, NULL, 0, NAN};
        int64_t starts_at = time_field(&l, e, "starts_at");
        int64_t last_seen = time_field(&l, e, "last_seen");
        if (!l.failed)
            remember_unmatched(st, &a, starts_at, last_seen);
    }
    list = l.failed ? NULL : field(&l, root, "nodes", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        struct node_state *n = node_get(st, text_field(&l, e, "name"), 1);
        if (!n || l.failed) {
            l.failed = 1;
            break;
        }
        n->drained_by_medic = int_field(&l, e, "drained_by_medic");
        n->limited_by_medic = int_field(&l, e, "limited_by_medic");
        n->disrupting_instances = int_field(&l, e, "disrupting_instances");
        n->drain_holders = int_field(&l, e, "drain_holders");
        n->limit_holders = int_field(&l, e, "limit_holders");
        n->last_alerting = time_field(&l, e, "last_alerting");
        const cJSON *history = field(&l, e, "history", cJSON_Array);
        for (const cJSON *h = history ? history->child : NULL; h && !l.failed; h = h->next) {
            if (grow((void **)&n->history, n->history_count, &n->history_cap,
                     sizeof(*n->history))) {
                l.failed = 1;
                break;
            }
            struct action_record *r = &n->history[n->history_count];
            snprintf(r->policy, sizeof(r->policy), "%s", text_field(&l, h, "policy"));
            r->time = time_field(&l, h, "time");
            r->starts_at = time_field(&l, h, "starts_at");
            r->fingerprint = strdup(text_field(&l, h, "fingerprint"));
            if (r->fingerprint)
                n->history_count++;
        }
    }
    cJSON_Delete(root);
    if (l.failed) {
        policy_state_free(st);
        return err && err->code ? err->code : MEDIC_E_INVALID;
    }
    *out = st;
    return 0;
}

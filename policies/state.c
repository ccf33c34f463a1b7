/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_internal.h"
#include "sha256.h"
#include "buf.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const verdict_names[] = {"execute",  "dry_run", "suppressed",
                                            "no_match", "error",   "pending"};

_Static_assert(sizeof(verdict_names) / sizeof(verdict_names[0]) == VERDICT_COUNT,
               "a name for every verdict");

const char *policy_verdict_name(enum policy_verdict v)
{
    return verdict_names[v];
}

int policy_verdict_parse(const char *name, enum policy_verdict *out)
{
    for (int v = 0; name && v < VERDICT_COUNT; v++)
        if (strcmp(name, verdict_names[v]) == 0) {
            *out = (enum policy_verdict)v;
            return 0;
        }
    return -1;
}

static const char *const state_names[] = {
#define POLICY_STATE_NAME(name, text) text,
    POLICY_INCIDENT_STATES(POLICY_STATE_NAME)
#undef POLICY_STATE_NAME
};

const char *policy_incident_state_name(enum policy_incident_state s)
{
    return state_names[s];
}

int policy_incident_state_parse(const char *name)
{
    for (int i = 0; i < INCIDENT_STATE_COUNT; i++)
        if (strcmp(state_names[i], name) == 0)
            return i;
    return -1;
}

void policy_decisions_init(struct policy_decisions *d)
{
    memset(d, 0, sizeof(*d));
}

void policy_decisions_clear(struct policy_decisions *d)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].has_action)
            medic_action_release(&d->items[i].action);
    d->count = 0;
    d->failed = 0;
    d->change_count = 0;
}

void policy_decisions_release(struct policy_decisions *d)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].has_action)
            medic_action_release(&d->items[i].action);
    free(d->items);
    free(d->changes);
    memset(d, 0, sizeof(*d));
}

static struct policy_decision *append(struct policy_decisions *d)
{
    if (policy__grow((void **)&d->items, d->count, &d->cap, sizeof(*d->items)))
        return NULL;
    struct policy_decision *x = &d->items[d->count++];
    memset(x, 0, sizeof(*x));
    x->step = -1;
    return x;
}

struct policy_decision *policy__new_decision(struct policy_decisions *d)
{
    if (d->limit && d->count >= d->limit) {
        d->failed = MEDIC_E_LIMIT; /* the caller records that a decision is missing */
        return NULL;
    }
    struct policy_decision *x = append(d);
    if (!x)
        d->failed = MEDIC_E_NOMEM;
    return x;
}

int policy_decisions_add_error(struct policy_decisions *d, const char *node, const char *alertname,
                               const char *fingerprint, double risk, int64_t now,
                               const char *reason)
{
    struct policy_decision *x = append(d);
    if (!x)
        return MEDIC_E_NOMEM;
    snprintf(x->node, sizeof(x->node), "%s", node ? node : "");
    snprintf(x->alertname, sizeof(x->alertname), "%s", alertname ? alertname : "");
    snprintf(x->fingerprint, sizeof(x->fingerprint), "%s", fingerprint ? fingerprint : "");
    snprintf(x->reason, sizeof(x->reason), "%s", reason);
    x->verdict = VERDICT_ERROR;
    x->risk = risk;
    x->time = now;
    return 0;
}

/* Grows an array of elements of size elem to hold one more. */
int policy__grow(void **items, size_t count, size_t *cap, size_t elem)
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
        medic_map_init(&st->incidents_by_key);
        medic_map_init(&st->incidents_by_id);
        st->next_incident_id = 1;
        st->ticked_at = MEDIC_TIME_UNSET;
        medic_map_init(&st->nodes_by_name);
        medic_map_init(&st->unmatched_by_alert);
        medic_map_init(&st->resolved_by_alert);
    }
    return st;
}

void policy__labels_free(struct label_copy *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free((char *)l->items[i].name);
        free((char *)l->items[i].value);
    }
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int policy__labels_copy(struct label_copy *to, const struct medic_labels *from)
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

void policy_state_free(struct policy_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->incident_count; i++)
        policy__incident_free(st->incidents[i]);
    for (size_t i = 0; i < st->unmatched_count; i++) {
        free(st->unmatched[i]->fingerprint);
        free(st->unmatched[i]);
    }
    medic_map_release(&st->unmatched_by_alert);
    for (size_t i = 0; i < st->resolved_count; i++) {
        free(st->resolved[i]->identity);
        free(st->resolved[i]);
    }
    free(st->resolved);
    medic_map_release(&st->resolved_by_alert);
    for (size_t i = 0; i < st->node_count; i++) {
        free(st->nodes[i]->history);
        free(st->nodes[i]);
    }
    free(st->incidents);
    free(st->tick_due);
    free(st->unmatched);
    free(st->nodes);
    free(st->node_alerting);
    medic_map_release(&st->incidents_by_key);
    medic_map_release(&st->incidents_by_id);
    medic_map_release(&st->nodes_by_name);
    policy__changes_release(&st->changes);
    free(st);
}

struct node_state *policy__node_get(struct policy_state *st, const char *name, int create)
{
    struct node_state *n = medic_map_get(&st->nodes_by_name, name);
    if (n && create)
        policy__touch_node(st, n); /* asked for to be changed */
    if (n || !create)
        return n;
    if (policy__grow((void **)&st->nodes, st->node_count, &st->node_cap, sizeof(*st->nodes)) ||
        policy__grow((void **)&st->node_alerting, st->node_count, &st->node_alerting_cap,
                     sizeof(*st->node_alerting)) ||
        !(n = calloc(1, sizeof(*n))))
        return NULL;
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->last_alerting = MEDIC_TIME_UNSET;
    if (medic_map_put(&st->nodes_by_name, n->name, n)) {
        free(n);
        return NULL;
    }
    n->slot = st->node_count;
    st->node_alerting[n->slot] = n->last_alerting;
    st->nodes[st->node_count++] = n;
    policy__touch_node(st, n);
    return n;
}

int policy__node_disrupted(const struct node_state *n)
{
    int disrupted = n->drained_by_medic || n->limited_by_medic || n->acting > 0;
    return disrupted ? 1 + (n->quarantined != 0) : 0;
}

void policy__node_recount(struct policy_state *st, const struct node_state *n, int was)
{
    int is = policy__node_disrupted(n);
    if (is && !was)
        st->disrupted_count++;
    else if (was && !is)
        st->disrupted_count--;
    if (is == 2 && was != 2)
        st->quarantined_count++;
    else if (was == 2 && is != 2)
        st->quarantined_count--;
}

void policy__nodes_recount(struct policy_state *st)
{
    st->disrupted_count = 0;
    st->quarantined_count = 0;
    for (size_t i = 0; i < st->node_count; i++) {
        int d = policy__node_disrupted(st->nodes[i]);
        st->disrupted_count += d ? 1 : 0;
        st->quarantined_count += d == 2;
        st->node_alerting[i] = st->nodes[i]->last_alerting;
    }
    st->alerting.valid = 0;
}

size_t policy_disrupted_nodes(const struct policy_state *st)
{
    return st->disrupted_count;
}

int policy_node_disrupted(const struct policy_state *st, const char *node)
{
    /* a lookup only: nothing is created */
    const struct node_state *n = policy__node_get((struct policy_state *)st, node, 0);
    return n && policy__node_disrupted(n);
}

size_t policy_quarantined_nodes(const struct policy_state *st)
{
    return st->quarantined_count;
}

size_t policy_open_incidents(const struct policy_state *st)
{
    return st->incident_count - st->final_count;
}

int policy_storm_active(const struct policy_state *st)
{
    return st->storm_active;
}

static int alerting_at(int64_t last_alerting, int64_t now, int64_t window)
{
    return last_alerting != MEDIC_TIME_UNSET && last_alerting > now - window;
}

static int alerting_within(const struct node_state *n, int64_t now, int64_t window)
{
    return alerting_at(n->last_alerting, now, window);
}

size_t policy__alerting_nodes(struct policy_state *st, int64_t now, int64_t window)
{
    if (st->alerting.valid && st->alerting.now == now && st->alerting.window == window)
        return st->alerting.count;
    size_t count = 0; /* over the times beside the nodes: no node is read */
    for (size_t i = 0; i < st->node_count; i++)
        count += alerting_at(st->node_alerting[i], now, window) ? 1 : 0;
    st->alerting.valid = 1;
    st->alerting.now = now;
    st->alerting.window = window;
    st->alerting.count = count;
    return count;
}

void policy__alerting_alertnames(const struct policy_state *st, int64_t now, int64_t window,
                                 char *out, size_t size)
{
    struct {
        const char *name;
        size_t nodes;
    } seen[32];
    size_t distinct = 0, others = 0;
    for (size_t i = 0; i < st->node_count; i++) {
        const struct node_state *n = st->nodes[i];
        if (!alerting_within(n, now, window))
            continue;
        const char *name = n->alertname[0] ? n->alertname : "(no alertname)";
        size_t k = 0;
        while (k < distinct && strcmp(seen[k].name, name) != 0)
            k++;
        if (k == distinct && distinct == sizeof(seen) / sizeof(seen[0])) {
            others++;
            continue;
        }
        if (k == distinct)
            seen[distinct++].name = name, seen[k].nodes = 0;
        seen[k].nodes++;
    }
    size_t at = 0, shown = 0;
    out[0] = '\0';
    while (shown < 5 && shown < distinct && at < size) {
        size_t best = shown; /* selection: the most common next */
        for (size_t k = shown + 1; k < distinct; k++)
            if (seen[k].nodes > seen[best].nodes)
                best = k;
        __typeof__(seen[0]) t = seen[shown];
        seen[shown] = seen[best];
        seen[best] = t;
        at += (size_t)snprintf(out + at, size - at, "%s%s on %zu node%s", shown ? ", " : "",
                               seen[shown].name, seen[shown].nodes,
                               seen[shown].nodes == 1 ? "" : "s");
        shown++;
    }
    for (size_t k = shown; k < distinct; k++)
        others += seen[k].nodes;
    if (others && at < size)
        snprintf(out + at, size - at, ", other alerts on %zu node%s", others,
                 others == 1 ? "" : "s");
}

void policy__node_alerting(struct policy_state *st, struct node_state *n, int64_t now,
                           const char *alertname)
{
    snprintf(n->alertname, sizeof(n->alertname), "%s", alertname ? alertname : "");
    if (st->alerting.valid &&
        (st->alerting.now != now || !alerting_within(n, now, st->alerting.window)))
        st->alerting.count++; /* at another time the count is made afresh */
    n->last_alerting = now;
    st->node_alerting[n->slot] = now;
    policy__touch_node(st, n);
}

const struct policy *policy__policy_by_name(const struct policy_set *ps, const char *name)
{
    /* linear: called when an instance's cached policy is not in this set */
    for (size_t i = 0; i < ps->count; i++)
        if (strcmp(ps->items[i].name, name) == 0)
            return &ps->items[i];
    return NULL;
}

void policy__alert_key(const char *fingerprint, int64_t starts_at, char *out, size_t size)
{
    snprintf(out, size, "%s %lld", fingerprint, (long long)starts_at);
}

/* Returns 1 when the alert instance was seen unmatched before. */
void policy__unmatched_seen(struct policy_state *st, const char *identity, int64_t starts_at,
                            int64_t now)
{
    char key[ALERT_IDENTITY_SIZE + 32];
    policy__alert_key(identity, starts_at, key, sizeof(key));
    struct unmatched *u = medic_map_get(&st->unmatched_by_alert, key);
    if (u && u->last_seen < now) {
        u->last_seen = now;
        policy__touch_unmatched(st, u);
    }
}

int policy__remember_unmatched(struct policy_state *st, const char *identity, int64_t starts_at,
                               int64_t now)
{
    char key[ALERT_IDENTITY_SIZE + 32];
    policy__alert_key(identity, starts_at, key, sizeof(key));
    struct unmatched *u = medic_map_get(&st->unmatched_by_alert, key);
    if (u) {
        u->last_seen = now;
        policy__touch_unmatched(st, u);
        return 1;
    }
    if (policy__grow((void **)&st->unmatched, st->unmatched_count, &st->unmatched_cap,
                     sizeof(*st->unmatched)) ||
        !(u = calloc(1, sizeof(*u))))
        return 0;
    *u = (struct unmatched){
        .fingerprint = strdup(identity), .starts_at = starts_at, .last_seen = now};
    if (!u->fingerprint || medic_map_put(&st->unmatched_by_alert, key, u)) {
        free(u->fingerprint);
        free(u);
        return 0;
    }
    st->unmatched[st->unmatched_count++] = u;
    policy__touch_unmatched(st, u);
    return 0;
}

void policy__forget_unmatched(struct policy_state *st, const char *identity, int64_t starts_at)
{
    char key[ALERT_IDENTITY_SIZE + 32];
    policy__alert_key(identity, starts_at, key, sizeof(key));
    struct unmatched *u = medic_map_get(&st->unmatched_by_alert, key);
    if (u) {
        medic_map_remove(&st->unmatched_by_alert, key);
        u->last_seen = INT64_MIN; /* freed by the next expiry; its row goes now */
        policy__touch_unmatched(st, u);
    }
}

/* Forgets unmatched alerts not seen for UNMATCHED_TTL (and resolved ones). */
void policy__expire_unmatched(struct policy_state *st, int64_t now)
{
    size_t w = 0;
    for (size_t i = 0; i < st->unmatched_count; i++) {
        struct unmatched *u = st->unmatched[i];
        if (u->last_seen != INT64_MIN && now - u->last_seen < UNMATCHED_TTL) {
            st->unmatched[w++] = u;
            continue;
        }
        char key[ALERT_IDENTITY_SIZE + 32];
        policy__alert_key(u->fingerprint, u->starts_at, key, sizeof(key));
        if (u->last_seen != INT64_MIN)
            medic_map_remove(&st->unmatched_by_alert, key);
        if (u->last_seen != INT64_MIN || u->dirty) /* a forgotten one's row went already */
            policy__row_gone(st, ROW_UNMATCHED, key, u, u->dirty);
        free(u->fingerprint);
        free(u);
    }
    st->unmatched_count = w;
}

static int label_order(const void *a, const void *b)
{
    const struct medic_label *x = *(const struct medic_label *const *)a;
    const struct medic_label *y = *(const struct medic_label *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

void policy__alert_identity(const char *fingerprint, const struct medic_labels *labels, char *out,
                            size_t size)
{
    /* SHA-256 over the labels sorted by name, NUL-separated: the same set
     * in any order gives the same identity */
    size_t n = labels ? labels->count : 0;
    const struct medic_label *sorted[256];
    if (n > sizeof(sorted) / sizeof(sorted[0]))
        n = sizeof(sorted) / sizeof(sorted[0]);
    for (size_t i = 0; i < n; i++)
        sorted[i] = &labels->items[i];
    qsort(sorted, n, sizeof(sorted[0]), label_order);
    struct medic_buf b;
    medic_buf_init(&b, 0);
    for (size_t i = 0; i < n; i++) {
        medic_buf_append(&b, sorted[i]->name, strlen(sorted[i]->name) + 1);
        medic_buf_append(&b, sorted[i]->value, strlen(sorted[i]->value) + 1);
    }
    char digest[65];
    medic_sha256_hex(b.data ? b.data : "", b.len, digest);
    medic_buf_release(&b);
    snprintf(out, size, "%.128s/%.16s", fingerprint ? fingerprint : "", digest);
}

struct resolved_alert *policy__resolved(struct policy_state *st, const char *identity)
{
    return medic_map_get(&st->resolved_by_alert, identity);
}

int policy__remember_resolved(struct policy_state *st, const char *identity, int64_t starts_at,
                              int64_t now)
{
    struct resolved_alert *r = policy__resolved(st, identity);
    if (r) {
        if (starts_at > r->starts_at) {
            r->starts_at = starts_at;
            r->noted = 0;
            policy__touch_resolved(st, r);
        }
        return 0; /* it keeps its place in the expiry order */
    }
    if (st->resolved_count >= RESOLVED_MAX)
        policy__expire_resolved(st, INT64_MAX); /* full: forget everything older first */
    if (policy__grow((void **)&st->resolved, st->resolved_count, &st->resolved_cap,
                     sizeof(*st->resolved)) ||
        !(r = calloc(1, sizeof(*r))) || !(r->identity = strdup(identity)) ||
        medic_map_put(&st->resolved_by_alert, r->identity, r)) {
        if (r)
            free(r->identity);
        free(r);
        return MEDIC_E_NOMEM;
    }
    r->starts_at = starts_at;
    r->at = now;
    st->resolved[st->resolved_count++] = r;
    policy__touch_resolved(st, r);
    return 0;
}

/* Forgets resolved alerts older than RESOLVED_TTL; with now INT64_MAX (a
 * full table), the older half. */
void policy__expire_resolved(struct policy_state *st, int64_t now)
{
    size_t drop = 0;
    if (now == INT64_MAX)
        drop = st->resolved_count / 2;
    else
        while (drop < st->resolved_count && now - st->resolved[drop]->at >= RESOLVED_TTL)
            drop++;
    if (drop == 0)
        return; /* also: no array yet */
    for (size_t i = 0; i < drop; i++) {
        policy__row_gone(st, ROW_RESOLVED, st->resolved[i]->identity, st->resolved[i],
                         st->resolved[i]->dirty);
        medic_map_remove(&st->resolved_by_alert, st->resolved[i]->identity);
        free(st->resolved[i]->identity);
        free(st->resolved[i]);
    }
    memmove(st->resolved, st->resolved + drop, (st->resolved_count - drop) * sizeof(*st->resolved));
    st->resolved_count -= drop;
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

static int by_id(const void *a, const void *b)
{
    int64_t x = (*(struct incident *const *)a)->id, y = (*(struct incident *const *)b)->id;
    return x < y ? -1 : x > y;
}

static int by_time(const void *a, const void *b)
{
    int64_t x = (*(struct resolved_alert *const *)a)->at;
    int64_t y = (*(struct resolved_alert *const *)b)->at;
    return x < y ? -1 : x > y;
}

void policy_state_loaded(struct policy_state *st)
{
    policy__nodes_recount(st);
    /* creation order: first come, first served at the caps; expiry order */
    if (st->incident_count > 1)
        qsort(st->incidents, st->incident_count, sizeof(*st->incidents), by_id);
    policy__incidents_reslot(st);
    if (st->resolved_count > 1)
        qsort(st->resolved, st->resolved_count, sizeof(*st->resolved), by_time);
}

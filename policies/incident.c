/* SPDX-License-Identifier: Apache-2.0 */
/* Incidents: one per (node, policy), holding the node's alerts under that
 * policy, with a state changed only here so that every change is recorded
 * with its cause. */
#include "engine_internal.h"
#include "timeutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void policy__incident_key(const char *node, const char *policy, const char *identity, char *out,
                          size_t size)
{
    /* an alert that names no node is an incident of its own */
    if (node[0])
        snprintf(out, size, "%s\t%s", node, policy);
    else
        snprintf(out, size, "\talert %s\t%s", identity, policy);
}

static void id_key(int64_t id, char *out, size_t size)
{
    snprintf(out, size, "%lld", (long long)id);
}

struct incident *policy__incident_find(struct policy_state *st, const char *key)
{
    return medic_map_get(&st->incidents_by_key, key);
}

struct incident *policy__incident_by_id(struct policy_state *st, int64_t id)
{
    char key[32];
    id_key(id, key, sizeof(key));
    return medic_map_get(&st->incidents_by_id, key);
}

void policy__incident_free(struct incident *in)
{
    for (size_t i = 0; i < in->member_count; i++) {
        free(in->members[i].identity);
        free(in->members[i].fingerprint);
    }
    free(in->members);
    policy__labels_free(&in->labels);
    policy__labels_free(&in->annotations);
    free(in->pending_offer);
    free(in->approved_offer);
    free(in);
}

/* A new incident under id, indexed by key and id; NULL when out of memory. */
struct incident *policy__incident_restore(struct policy_state *st, int64_t id, const char *key)
{
    char idk[32];
    id_key(id, idk, sizeof(idk));
    struct incident *in = NULL;
    if (policy__grow((void **)&st->incidents, st->incident_count, &st->incident_cap,
                     sizeof(*st->incidents)) ||
        policy__grow((void **)&st->tick_due, st->incident_count, &st->tick_due_cap,
                     sizeof(*st->tick_due)) ||
        !(in = calloc(1, sizeof(*in))))
        return NULL;
    in->owner = st;
    in->id = id;
    snprintf(in->key, sizeof(in->key), "%s", key);
    in->fresh_after = MEDIC_TIME_UNSET;
    if (medic_map_put(&st->incidents_by_key, key, in)) {
        free(in);
        return NULL;
    }
    if (medic_map_put(&st->incidents_by_id, idk, in)) {
        medic_map_remove(&st->incidents_by_key, key);
        free(in);
        return NULL;
    }
    if (id >= st->next_incident_id)
        st->next_incident_id = id + 1;
    in->slot = st->incident_count;
    st->incidents[st->incident_count++] = in;
    policy__touch_incident(in);
    return in;
}

struct incident *policy__incident_open(struct policy_state *st, const char *key,
                                       const struct policy_alert *a, const struct policy *pol,
                                       const char *node, int in_inventory, int64_t starts_at,
                                       int64_t now, struct policy_decisions *out)
{
    struct incident *in = policy__incident_restore(st, st->next_incident_id, key);
    if (!in)
        return NULL;
    policy__touch_engine(st); /* its next incident id */
    snprintf(in->node, sizeof(in->node), "%s", node);
    in->in_inventory = in_inventory;
    snprintf(in->policy, sizeof(in->policy), "%s", pol->name);
    in->cached_policy = pol;
    in->state = INCIDENT_OPEN;
    in->opened_at = starts_at;
    const char *alertname = medic_labels_get(a->labels, "alertname");
    snprintf(in->alertname, sizeof(in->alertname), "%s", alertname ? alertname : "");
    in->risk = a->risk;
    if (policy__labels_copy(&in->labels, a->labels) ||
        policy__labels_copy(&in->annotations, a->annotations))
        out->failed = MEDIC_E_NOMEM; /* the incident still works: its templates lack labels */
    char when[40] = "";
    if (a->starts_at != MEDIC_TIME_UNSET && a->starts_at > starts_at)
        medic_time_format(a->starts_at, when, sizeof(when));
    policy__incident_change(
        in, INCIDENT_OPEN, -1, now, out, "%s on node '%s' fired%s%s%s",
        in->alertname[0] ? in->alertname : "an alert", node, when[0] ? " (its startsAt " : "", when,
        when[0] ? " is in the future, a skewed clock: the ladder starts now)" : "");
    return in;
}

struct member *policy__member_find(struct incident *in, const char *identity)
{
    for (size_t i = 0; i < in->member_count; i++)
        if (strcmp(in->members[i].identity, identity) == 0)
            return &in->members[i];
    return NULL;
}

int policy__member_add(struct incident *in, const char *identity, const char *fingerprint,
                       int64_t starts_at, int64_t now)
{
    if (policy__grow((void **)&in->members, in->member_count, &in->member_cap,
                     sizeof(*in->members)))
        return MEDIC_E_NOMEM;
    struct member *m = &in->members[in->member_count];
    m->identity = strdup(identity);
    m->fingerprint = strdup(fingerprint);
    if (!m->identity || !m->fingerprint) {
        free(m->identity);
        free(m->fingerprint);
        return MEDIC_E_NOMEM;
    }
    m->starts_at = starts_at;
    m->last_seen = now;
    m->claimed_start = 0;
    in->member_count++;
    policy__touch_incident(in);
    return 0;
}

void policy__member_remove(struct incident *in, struct member *m)
{
    free(m->identity);
    free(m->fingerprint);
    size_t i = (size_t)(m - in->members);
    memmove(m, m + 1, (in->member_count - i - 1) * sizeof(*m));
    in->member_count--;
    policy__touch_incident(in);
}

/* The incident's policy in the current set (a reload may have replaced
 * it), or NULL when the set no longer has it. */
const struct policy *policy__incident_policy(const struct policy_context *ctx, struct incident *in)
{
    const struct policy_set *ps = ctx->policies;
    if (in->cached_policy >= ps->items && in->cached_policy < ps->items + ps->count &&
        strcmp(in->cached_policy->name, in->policy) == 0)
        return in->cached_policy;
    in->cached_policy = policy__policy_by_name(ps, in->policy);
    return in->cached_policy;
}

void policy__incident_change(struct incident *in, enum policy_incident_state to, long decision,
                             int64_t now, struct policy_decisions *out, const char *fmt, ...)
{
    enum policy_incident_state from = in->state;
    in->state = to;
    policy__touch_incident(in); /* a final one's row goes */
    if (policy__grow((void **)&out->changes, out->change_count, &out->change_cap,
                     sizeof(*out->changes))) {
        out->failed = MEDIC_E_NOMEM;
        return;
    }
    struct policy_change *c = &out->changes[out->change_count++];
    memset(c, 0, sizeof(*c));
    c->incident = in->id;
    snprintf(c->node, sizeof(c->node), "%s", in->node);
    snprintf(c->policy, sizeof(c->policy), "%s", in->policy);
    c->from = from;
    c->to = to;
    c->decision = decision;
    c->time = now;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->cause, sizeof(c->cause), fmt, ap);
    va_end(ap);
}

/* Moves the incident to a final state and out of the indexes; it is freed
 * by the next policy__compact. */
void policy__incident_final(struct policy_state *st, struct incident *in,
                            enum policy_incident_state to, int64_t now,
                            struct policy_decisions *out, const char *cause)
{
    policy__incident_change(in, to, -1, now, out, "%s", cause);
    char idk[32];
    if (medic_map_get(&st->incidents_by_key, in->key) == in)
        medic_map_remove(&st->incidents_by_key, in->key);
    id_key(in->id, idk, sizeof(idk));
    medic_map_remove(&st->incidents_by_id, idk);
    in->final = 1;
    st->final_count++;
}

/* Frees final incidents once they are half of the array. Only where no
 * incident pointer is held. */
void policy__compact(struct policy_state *st)
{
    if (st->final_count * 2 < st->incident_count || st->final_count == 0)
        return;
    size_t w = 0;
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *in = st->incidents[i];
        if (in->final && in->dirty) { /* its row's removal is still to be written */
            char idk[32];
            id_key(in->id, idk, sizeof(idk));
            policy__row_gone(st, ROW_INCIDENT, idk, in, 1);
        }
        if (in->final) {
            policy__incident_free(in);
        } else {
            st->tick_due[w] = st->tick_due[i];
            in->slot = w;
            st->incidents[w++] = in;
        }
    }
    st->incident_count = w;
    st->final_count = 0;
}

void policy__incidents_reslot(struct policy_state *st)
{
    for (size_t i = 0; i < st->incident_count; i++) {
        st->incidents[i]->slot = i;
        st->tick_due[i] = INT64_MIN;
    }
}

int64_t policy__step_due(const struct incident *in, const struct policy_step *step)
{
    int64_t base = step->after_previous && in->step_ended_at ? in->step_ended_at : in->opened_at;
    int64_t due;
    return __builtin_add_overflow(base, step->after, &due) ? INT64_MAX : due;
}

int policy__incident_fresh(const struct incident *in, int64_t grace, int64_t now)
{
    if (in->fresh_after == MEDIC_TIME_UNSET)
        return 1;
    for (size_t i = 0; i < in->member_count; i++)
        if (in->members[i].last_seen >= in->fresh_after)
            return 1;
    return now - in->fresh_after >= grace ? 2 : 0;
}

/* The node's strictest power limit held by an incident other than except;
 * 0 when none. */
int policy__strictest_limit(const struct policy_state *st, const char *node,
                            const struct incident *except)
{
    int w = 0;
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        if (in != except && !in->final && in->limit_watts > 0 && strcmp(in->node, node) == 0 &&
            (w == 0 || in->limit_watts < w))
            w = in->limit_watts;
    }
    return w;
}

int policy__holders(const struct policy_state *st, const char *node, const struct incident *except,
                    enum policy_hold hold)
{
    int count = 0;
    for (size_t i = 0; i < st->incident_count; i++) {
        const struct incident *in = st->incidents[i];
        int holds = hold == HOLD_DRAIN ? in->drained : in->limit_watts > 0;
        count += in != except && !in->final && holds && strcmp(in->node, node) == 0;
    }
    return count;
}

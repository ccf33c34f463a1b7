/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_internal.h"
#include "inventory.h"
#include "buf.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int in_maintenance(const struct policy_safety *s, const char *node, int64_t now,
                          char *reason, size_t size)
{
    for (size_t i = 0; i < s->maintenance_count; i++) {
        const struct maintenance_window *m = &s->maintenance[i];
        int64_t end;
        if (policy_maintenance_active(m, now, &end) && policy_maintenance_covers(m, node)) {
            char until[40];
            medic_time_format(end, until, sizeof(until));
            snprintf(reason, size, "node '%s' is in a maintenance window until %s%s%s", node, until,
                     m->reason ? ": " : "", m->reason ? m->reason : "");
            return 1;
        }
    }
    return 0;
}

/* The reason a disruptive step may not run, or "" when it may; 1 when
 * that reason clears by itself (a maintenance window, a storm, the fleet
 * caps): the step is held, not dropped. */
int policy__check_guards(const struct policy_context *ctx, struct policy_state *st,
                         const struct policy *pol, const struct incident *in, int64_t now,
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
        return 0;
    }
    struct node_state *q = policy__node_get(st, in->node, 0);
    if (q && q->quarantined) {
        char since[40];
        medic_time_format(q->quarantined_at, since, sizeof(since));
        snprintf(reason, size,
                 "node '%s' is quarantined since %s: medic takes no disruptive action on it until "
                 "a person releases it (medic node release %s)",
                 in->node, since, in->node);
        return 0;
    }
    if (in_maintenance(s, in->node, now, reason, size))
        return 1;
    const struct inventory_node *inode =
        ctx->slurm_maint && s->maintenance_from_slurm && ctx->inventory
            ? inventory_find(ctx->inventory, in->node)
            : NULL;
    int64_t read_at = MEDIC_TIME_UNSET;
    int maint = inode && inode->slurm_node
                    ? ctx->slurm_maint(ctx->slurm_arg, inode->slurm_node, &read_at)
                    : 0;
    if (maint > 0) {
        snprintf(reason, size,
                 "node '%s' is in a Slurm maintenance reservation (its state says MAINT: "
                 "safety.maintenance_from_slurm)",
                 in->node);
        return 1;
    }
    if (maint < 0) { /* fail closed: not knowing is not "not in maintenance" */
        char when[40] = "never";
        if (read_at != MEDIC_TIME_UNSET)
            medic_time_format(read_at, when, sizeof(when));
        snprintf(reason, size,
                 "Slurm's maintenance reservations are not known (last read: %s; is slurmctld "
                 "reachable?): disruptive steps on Slurm nodes wait until medic reads them "
                 "(safety.maintenance_from_slurm)",
                 when);
        return 1;
    }
    if (st->pause.on) {
        snprintf(reason, size, "paused by %s: %s", st->pause.by, st->pause.reason);
        return 1;
    }
    /* the incident's newest alert: a re-fired alert is fresh again; one
     * that said it started well ahead of medic's clock counts from what it
     * said, once the clocks agree */
    int64_t newest = in->opened_at, ahead = 0;
    for (size_t i = 0; i < in->member_count; i++) {
        const struct member *m = &in->members[i];
        int64_t start = m->claimed_start ? m->claimed_start : m->starts_at;
        if (start > newest)
            newest = start;
        if (m->claimed_start - now > POLICY_CLOCK_SKEW && m->claimed_start > ahead)
            ahead = m->claimed_start;
    }
    if (ahead) {
        char said[40];
        medic_time_format(ahead, said, sizeof(said));
        medic_duration_format(ahead - now, a, sizeof(a));
        snprintf(reason, size,
                 "the alert says it started at %s, %s ahead of medic's clock: one of the two "
                 "clocks is wrong (medic's host's, or the alert source's); disruptive steps wait "
                 "until they agree",
                 said, a);
        return 1;
    }
    if (now - newest > s->max_alert_age) {
        medic_duration_format(now - newest, a, sizeof(a));
        medic_duration_format(s->max_alert_age, b, sizeof(b));
        snprintf(reason, size,
                 "the alert started %s ago, " POLICY_STALE_REASON " %s: stale alerts never "
                 "disrupt",
                 a, b);
        return 0;
    }
    if (st->storm_active) {
        medic_duration_format(s->storm_window, a, sizeof(a));
        snprintf(reason, size,
                 "storm: %zu nodes alerting within %s (max %zu); disruptive actions are held",
                 policy__alerting_nodes(st, now, s->storm_window), a, s->storm_max_alerting_nodes);
        return 1;
    }
    struct node_state *n = policy__node_get(st, in->node, 1);
    if (!n) {
        snprintf(reason, size, "out of memory");
        return 0;
    }
    size_t recent = 0;
    for (size_t i = 0; i < n->history_count; i++) {
        const struct action_record *r = &n->history[i];
        if (strcmp(r->policy, pol->name) != 0)
            continue;
        if (pol->cooldown && r->incident != in->id && now - r->time < pol->cooldown) {
            medic_duration_format(pol->cooldown, a, sizeof(a));
            medic_duration_format(now - r->time, b, sizeof(b));
            snprintf(reason, size, "cooldown: policy %s acted on node '%s' %s ago (cooldown %s)",
                     pol->name, in->node, b, a);
            return 0;
        }
        if (pol->budget_count && now - r->time < pol->budget_window)
            recent++;
    }
    if (pol->budget_count && recent >= pol->budget_count) {
        medic_duration_format(pol->budget_window, a, sizeof(a));
        snprintf(reason, size, "budget: %zu actions on node '%s' within %s (max %zu)", recent,
                 in->node, a, pol->budget_count);
        return 0;
    }
    if (!policy__node_disrupted(n)) {
        /* quarantined nodes wait for a person, not for a repair in flight:
         * they count against the fleet's fraction, never against the
         * repairs medic runs at once */
        size_t disrupted = policy_disrupted_nodes(st);
        size_t quarantined = st->quarantined_count;
        size_t inventory = ctx->inventory ? ctx->inventory->count : 0;
        if (disrupted - quarantined + 1 > s->max_disruptive_in_flight) {
            snprintf(reason, size,
                     "fleet cap: %zu nodes already disrupted by repairs in flight "
                     "(max_disruptive_in_flight %zu)",
                     disrupted - quarantined, s->max_disruptive_in_flight);
            return 1;
        }
        if (disrupted + 1 > policy_max_disrupted_nodes(s, inventory)) {
            snprintf(reason, size,
                     "fleet cap: %zu of %zu nodes would be disrupted (max_disrupted_fraction "
                     "%g)%s",
                     disrupted + 1, inventory, s->max_disrupted_fraction,
                     quarantined ? "; quarantined nodes count here until a person releases them"
                                 : "");
            return 1;
        }
        if (policy__group_caps_hold(ctx, st, in->node, reason, size))
            return 1;
    }
    return 0;
}

void policy__record_action(const struct policy_context *ctx, struct policy_state *st,
                           const struct policy *pol, const struct incident *in,
                           enum medic_action_kind kind, int64_t now)
{
    int64_t ctx_quarantine_window = ctx->policies->safety.quarantine_window;
    struct node_state *n = policy__node_get(st, in->node, 1);
    if (!n ||
        policy__grow((void **)&n->history, n->history_count, &n->history_cap, sizeof(*n->history)))
        return;
    /* forget what no cooldown, budget or quarantine count can still see */
    int64_t keep = pol->cooldown > pol->budget_window ? pol->cooldown : pol->budget_window;
    if (keep < ctx_quarantine_window)
        keep = ctx_quarantine_window;
    if (keep < 7 * 86400 * MEDIC_NS_PER_SEC)
        keep = 7 * 86400 * MEDIC_NS_PER_SEC;
    size_t w = 0;
    for (size_t i = 0; i < n->history_count; i++) {
        if (now - n->history[i].time < keep)
            n->history[w++] = n->history[i];
    }
    n->history_count = w;
    struct action_record *r = &n->history[n->history_count];
    snprintf(r->policy, sizeof(r->policy), "%s", pol->name);
    r->time = now;
    r->incident = in->id;
    r->episode = in->opened_at;
    r->repair = kind != MEDIC_ACTION_POWER_LIMIT;
    n->history_count++;
}

void policy__forget_action(struct policy_state *st, const struct incident *in)
{
    struct node_state *n = in->in_inventory ? policy__node_get(st, in->node, 0) : NULL;
    for (size_t i = n ? n->history_count : 0; i-- > 0;)
        if (n->history[i].incident == in->id) {
            memmove(&n->history[i], &n->history[i + 1],
                    (n->history_count - i - 1) * sizeof(n->history[0]));
            n->history_count--;
            policy__touch_node(st, n);
            return;
        }
}

static void storm_notice(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                         int starting, struct policy_decisions *out)
{
    const struct policy_safety *s = &ctx->policies->safety;
    struct policy_decision *d = policy__new_decision(out);
    if (!d)
        return;
    char window[32];
    medic_duration_format(s->storm_window, window, sizeof(window));
    size_t nodes = policy__alerting_nodes(st, now, s->storm_window);
    d->time = now;
    d->risk = NAN;
    if (s->storm_notifier) {
        char message[1024], names[400] = "", link[300] = "";
        if (starting)
            policy__alerting_alertnames(st, now, s->storm_window, names, sizeof(names));
        if (ctx->external_url)
            snprintf(link, sizeof(link), "; on-call page: %.200s/", ctx->external_url);
        snprintf(message, sizeof(message),
                 starting ? "medic storm breaker: %zu nodes alerting within %s (max %zu): %s; "
                            "disruptive actions are held until it passes%s"
                          : "medic storm breaker: the storm passed (%zu nodes alerting within %s, "
                            "max %zu)%s; disruptive actions resume%s",
                 nodes, window, s->storm_max_alerting_nodes, names, link);
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

void policy__update_storm(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                          struct policy_decisions *out)
{
    const struct policy_safety *s = &ctx->policies->safety;
    size_t nodes = policy__alerting_nodes(st, now, s->storm_window);
    if (!st->storm_active && nodes > s->storm_max_alerting_nodes) {
        st->storm_active = 1;
        policy__touch_engine(st);
        storm_notice(ctx, st, now, 1, out);
    } else if (st->storm_active && nodes <= s->storm_max_alerting_nodes) {
        st->storm_active = 0;
        policy__touch_engine(st);
        storm_notice(ctx, st, now, 0, out);
    }
}

/* A notification to on-call (safety.storm.notifier, the notifier that
 * hears about medic itself) about incident in; a suppressed decision that
 * says so when none is configured. */
void policy__notify_oncall(const struct policy_context *ctx, struct policy_decision *d,
                           const char *message, struct policy_decisions *out)
{
    const char *notifier = ctx->policies->safety.storm_notifier;
    snprintf(d->reason, sizeof(d->reason), "%s", message);
    if (!notifier) {
        d->verdict = VERDICT_SUPPRESSED;
        size_t at = strlen(d->reason);
        snprintf(d->reason + at, sizeof(d->reason) - at, "; no safety.storm.notifier to tell");
        return;
    }
    medic_action_init(&d->action, MEDIC_ACTION_NOTIFY);
    d->has_action = 1;
    if (medic_action_set_text(&d->action, "notifier", notifier, strlen(notifier)) ||
        medic_action_set_text(&d->action, "message", message, strlen(message)))
        out->failed = MEDIC_E_NOMEM;
    d->verdict = ctx->live ? VERDICT_EXECUTE : VERDICT_DRY_RUN;
}

struct policy_decision *policy__tell_oncall(const struct policy_context *ctx,
                                            const struct incident *in, int64_t now,
                                            struct policy_decisions *out, const char *message)
{
    struct policy_decision *d = policy__incident_decision(out, in, now);
    if (d)
        policy__notify_oncall(ctx, d, message, out);
    return d;
}

/* What each guard's reason says (above, in groups.c and in approval.c),
 * in the order they are looked for: a stopped ladder's reason quotes the
 * guard that stopped it, so the first phrase found names it. */
static const struct {
    enum policy_guard guard;
    const char *phrase;
} guard_phrases[] = {
    {POLICY_GUARD_INVENTORY, "is not in the inventory"},
    {POLICY_GUARD_INVENTORY, "the alert names no node"},
    {POLICY_GUARD_QUARANTINE, "is quarantined since"},
    {POLICY_GUARD_QUARANTINE, "medic quarantine: repeat offender"},
    {POLICY_GUARD_MAINTENANCE, "maintenance window"},
    {POLICY_GUARD_SLURM_MAINTENANCE, "maintenance reservation"},
    {POLICY_GUARD_PAUSE, "paused by "},
    {POLICY_GUARD_CLOCK, "ahead of medic's clock"},
    {POLICY_GUARD_STALE, POLICY_STALE_REASON},
    {POLICY_GUARD_STORM, "storm: "},
    {POLICY_GUARD_COOLDOWN, "cooldown: policy "},
    {POLICY_GUARD_BUDGET, "budget: "},
    {POLICY_GUARD_FLEET_CAP, "fleet cap: "},
    {POLICY_GUARD_GROUP_CAP, "group cap: "},
    {POLICY_GUARD_STRICTER_LIMIT, "a weaker limit never raises it"},
    {POLICY_GUARD_DENIED, " denied by "},
};

enum policy_guard policy_guard_of(const char *reason)
{
    const char *first = NULL;
    enum policy_guard guard = POLICY_GUARD_OTHER;
    for (size_t i = 0; reason && i < sizeof(guard_phrases) / sizeof(guard_phrases[0]); i++) {
        const char *at = strstr(reason, guard_phrases[i].phrase);
        if (at && (!first || at < first)) {
            first = at;
            guard = guard_phrases[i].guard;
        }
    }
    return guard;
}

const char *policy_guard_name(enum policy_guard g)
{
    static const char *const names[] = {
#define POLICY_GUARD_NAME(name, text) text,
        POLICY_GUARDS(POLICY_GUARD_NAME)
#undef POLICY_GUARD_NAME
    };
    return (unsigned)g < POLICY_GUARD_COUNT ? names[g] : "other";
}

/* Whether a suppressed disruptive step leaves a node in service for a
 * reason on-call would want to hear of: a fleet or group cap, a
 * maintenance window, a cooldown or a budget. Not a storm or a person's
 * pause (on-call was told of those), a person's denial, a stale alert or
 * a node outside the inventory. */
int policy__guard_worth_telling(const char *reason)
{
    switch (policy_guard_of(reason)) {
    case POLICY_GUARD_FLEET_CAP:
    case POLICY_GUARD_GROUP_CAP:
    case POLICY_GUARD_MAINTENANCE:
    case POLICY_GUARD_COOLDOWN:
    case POLICY_GUARD_BUDGET:
        return 1;
    case POLICY_GUARD_INVENTORY:
    case POLICY_GUARD_QUARANTINE:
    case POLICY_GUARD_SLURM_MAINTENANCE:
    case POLICY_GUARD_PAUSE:
    case POLICY_GUARD_CLOCK:
    case POLICY_GUARD_STALE:
    case POLICY_GUARD_STORM:
    case POLICY_GUARD_STRICTER_LIMIT:
    case POLICY_GUARD_DENIED:
    case POLICY_GUARD_OTHER:
    case POLICY_GUARD_COUNT:
        break;
    }
    return 0;
}

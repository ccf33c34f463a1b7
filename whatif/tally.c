/* SPDX-License-Identifier: Apache-2.0 */
/* The report's counts, filled in as the play goes. */
#include "whatif_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUP_USES 128

int whatif__label_order(const void *a, const void *b)
{
    return strcmp(((const struct medic_label *)a)->name, ((const struct medic_label *)b)->name);
}

int whatif__report_init(struct whatif_report *r, const struct policy_safety *s,
                        const struct inventory *inv)
{
    snprintf(r->all.name, sizeof(r->all.name), "all");
    r->cap_count = 2 + s->group_cap_count;
    r->caps = calloc(r->cap_count, sizeof(*r->caps));
    if (!r->caps)
        return MEDIC_E_NOMEM;
    snprintf(r->caps[0].name, sizeof(r->caps[0].name), "max_disruptive_in_flight");
    r->caps[0].limit = s->max_disruptive_in_flight;
    snprintf(r->caps[1].name, sizeof(r->caps[1].name), "max_disrupted_fraction %g of %zu",
             s->max_disrupted_fraction, inv->count);
    r->caps[1].limit = policy_max_disrupted_nodes(s, inv->count);
    for (size_t i = 0; i < s->group_cap_count; i++) {
        const struct group_cap *g = &s->group_caps[i];
        struct whatif_cap *c = &r->caps[2 + i];
        snprintf(c->name, sizeof(c->name), "group_caps entry %zu (%s%.100s)", i + 1,
                 g->label ? "by " : "nodes ", g->label ? g->label : g->nodes_text);
        /* the limit of the group its peak was in; until then, the first group's */
        for (size_t k = 0; k < inv->count; k++) {
            const char *group = policy_group_of(g, &inv->nodes[k]);
            if (group) {
                c->limit = policy_group_limit(g, policy_group_size(g, group, inv));
                break;
            }
        }
    }
    return 0;
}

int whatif__class_of(struct whatif_report *r, const char *level, const char *class_name,
                     size_t *index)
{
    char name[sizeof(r->all.name)];
    snprintf(name, sizeof(name), "%.70s / %.70s", level, class_name);
    for (size_t i = 0; i < r->class_count; i++)
        if (strcmp(r->classes[i].name, name) == 0) {
            *index = i;
            return 0;
        }
    struct whatif_counts *c = realloc(r->classes, (r->class_count + 1) * sizeof(*c));
    if (!c)
        return MEDIC_E_NOMEM;
    r->classes = c;
    memset(&c[r->class_count], 0, sizeof(*c));
    snprintf(c[r->class_count].name, sizeof(c->name), "%s", name);
    *index = r->class_count++;
    return 0;
}

static enum whatif_fate fate_of(const struct whatif_fault *f)
{
    if (f->acted)
        return WHATIF_ACTED;
    if (f->covered)
        return WHATIF_COVERED;
    /* a step that waited for a person and expired stops its ladder: what
     * is suppressed after it says so, the person is the reason */
    if (f->pending)
        return WHATIF_PENDING;
    if (f->guarded)
        return WHATIF_HELD;
    if (f->notified)
        return WHATIF_NOTIFY_ONLY;
    if (f->no_policy)
        return WHATIF_NO_POLICY;
    if (f->unsent)
        return WHATIF_UNSENT;
    return WHATIF_NOTHING;
}

static void add(struct whatif_counts *c, const struct whatif_fault *f, enum whatif_fate fate)
{
    c->faults++;
    c->fate[fate]++;
    if (fate == WHATIF_HELD)
        c->held[f->guard]++;
    if (fate != WHATIF_ACTED)
        return;
    int64_t *l = realloc(c->latency, (c->latency_count + 1) * sizeof(*l));
    if (!l)
        return; /* a latency fewer: the counts still hold */
    c->latency = l;
    c->latency[c->latency_count++] = f->acted_at - f->start;
}

void whatif__count(struct whatif_report *r, const struct whatif_fault *f)
{
    enum whatif_fate fate = fate_of(f);
    r->faults++;
    add(&r->all, f, fate);
    if (f->cls < r->class_count)
        add(&r->classes[f->cls], f, fate);
}

void whatif__quarantined(struct whatif_report *r, const char *node)
{
    for (size_t i = 0; i < r->quarantined_count; i++)
        if (strcmp(r->quarantined[i], node) == 0)
            return;
    char **q = realloc(r->quarantined, (r->quarantined_count + 1) * sizeof(*q));
    if (!q)
        return;
    r->quarantined = q;
    if ((q[r->quarantined_count] = strdup(node)))
        r->quarantined_count++;
}

static void peak(struct whatif_cap *c, size_t value, size_t limit, int64_t at)
{
    if (value <= c->peak)
        return;
    c->peak = value;
    c->peak_at = at;
    c->limit = limit;
}

int whatif__sample(struct whatif_report *r, const struct policy_state *st,
                   const struct policy_context *ctx, int64_t at, int ran)
{
    size_t disrupted = policy_disrupted_nodes(st), quarantined = policy_quarantined_nodes(st);
    peak(&r->caps[0], disrupted - quarantined, r->caps[0].limit, at);
    peak(&r->caps[1], disrupted, r->caps[1].limit, at);
    const struct policy_safety *s = &ctx->policies->safety;
    if (s->group_cap_count && disrupted && ran) {
        struct policy_group_use uses[MAX_GROUP_USES];
        size_t n = policy_group_usage(st, s, ctx->inventory, uses, MAX_GROUP_USES);
        for (size_t i = 0; i < n; i++)
            if (uses[i].cap < s->group_cap_count)
                peak(&r->caps[2 + uses[i].cap], uses[i].disrupted, uses[i].limit, at);
    }
    struct whatif_point *last = r->point_count ? &r->timeline[r->point_count - 1] : NULL;
    if (last && last->disrupted == disrupted && last->quarantined == quarantined)
        return 0;
    if (last && last->at == at) { /* one point per moment: the last word */
        last->disrupted = disrupted;
        last->quarantined = quarantined;
        return 0;
    }
    if (!last && disrupted == 0)
        return 0;
    struct whatif_point *t = realloc(r->timeline, (r->point_count + 1) * sizeof(*t));
    if (!t)
        return MEDIC_E_NOMEM;
    r->timeline = t;
    t[r->point_count++] = (struct whatif_point){at, disrupted, quarantined};
    return 0;
}

void whatif_report_release(struct whatif_report *r)
{
    for (size_t i = 0; i < r->class_count; i++)
        free(r->classes[i].latency);
    free(r->classes);
    free(r->all.latency);
    free(r->caps);
    for (size_t i = 0; i < r->quarantined_count; i++)
        free(r->quarantined[i]);
    free(r->quarantined);
    free(r->timeline);
    memset(r, 0, sizeof(*r));
}

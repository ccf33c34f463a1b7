/* SPDX-License-Identifier: Apache-2.0 */
/* The trace played through the policy engine: Alertmanager's side (each
 * open fault an alert, sent after group_wait, again every
 * repeat_interval, resolved at the fault's end), the engine's scheduler
 * between them, and what the decisions did to each fault. */
#include "whatif_internal.h"
#include "engine_evaluate.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An alert Alertmanager holds for an open fault. */
struct open_alert {
    size_t fault;      /* index in play.faults */
    int64_t next_send; /* engine clock */
    int sent;          /* its first notification went */
    struct medic_labels labels;
    char fingerprint[17];
};

struct play {
    const struct whatif_trace *trace;
    const struct whatif_mapping *map;
    const struct whatif_options *opt;
    struct policy_context ctx;
    struct policy_state *st;
    struct policy_decisions out;
    struct medic_arena arena; /* labels */
    const char *node_label;
    struct whatif_fault *faults;
    size_t fault_count;
    struct open_alert *open;
    size_t open_count;
    struct node_faults *nodes;   /* per trace node: faults waiting for an outcome */
    const char **names;          /* per trace node: its inventory name */
    struct medic_map inventory;  /* inventory name -> trace node + 1 */
    struct medic_map alert_keys; /* node, class, desc -> the open fault + 1 */
    struct whatif_report *r;
    int storm;
};

static int64_t clock_of(const struct play *p, int64_t at)
{
    return p->opt->start + at;
}

static int node_wait(struct node_faults *n, size_t fault)
{
    if (n->count == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 4;
        size_t *items = realloc(n->items, cap * sizeof(*items));
        if (!items)
            return MEDIC_E_NOMEM;
        n->items = items;
        n->cap = cap;
    }
    n->items[n->count++] = fault;
    return 0;
}

static void node_done(struct node_faults *n, size_t fault)
{
    for (size_t i = 0; i < n->count; i++)
        if (n->items[i] == fault) {
            n->items[i] = n->items[--n->count];
            return;
        }
}

/* What the round's decisions did to the faults open on their nodes; 1
 * when a step ran (the nodes held may have changed). */
static int digest(struct play *p)
{
    int ran = 0;
    for (size_t i = 0; i < p->out.count; i++) {
        const struct policy_decision *d = &p->out.items[i];
        size_t node = (size_t)(uintptr_t)medic_map_get(&p->inventory, d->node);
        int runs = d->verdict == VERDICT_EXECUTE || d->verdict == VERDICT_DRY_RUN;
        if (runs && d->has_action) {
            ran = 1;
            p->r->actions[d->action.kind]++;
            p->r->disruptions += d->disruptive != 0;
        }
        if (!node)
            continue;
        struct node_faults *n = &p->nodes[node - 1];
        for (size_t k = 0; k < n->count; k++) {
            struct whatif_fault *f = &p->faults[n->items[k]];
            if (d->verdict == VERDICT_NO_MATCH && strcmp(d->fingerprint, f->fingerprint) == 0)
                f->no_policy = 1;
            if (!d->has_action || d->on_resolved)
                continue;
            if (runs && d->disruptive && !f->acted) {
                f->acted = 1;
                f->acted_at = d->time - p->opt->start;
            } else if (runs && d->action.kind == MEDIC_ACTION_NOTIFY) {
                f->notified = 1;
            } else if (d->verdict == VERDICT_SUPPRESSED && d->disruptive && !f->guarded) {
                f->guarded = 1;
                f->guard = policy_guard_of(d->reason);
            } else if (d->verdict == VERDICT_PENDING) {
                f->pending = 1;
            }
        }
    }
    for (size_t i = 0; i < p->out.change_count; i++)
        if (p->out.changes[i].to == INCIDENT_QUARANTINED)
            whatif__quarantined(p->r, p->out.changes[i].node);
    policy_decisions_clear(&p->out);
    return ran;
}

static int approve_one(void *arg, const struct policy_pending_step *s)
{
    int64_t *incident = arg;
    *incident = s->incident;
    return 1;
}

/* After each call into the engine: every awaited action succeeds, every
 * waiting step is approved when asked, and the result is counted. */
static int settle(struct play *p, int64_t now)
{
    int rc = policy_assume_success(&p->ctx, p->st, now, &p->out);
    for (int round = 0; rc == 0 && p->opt->approve_all && round < 1000; round++) {
        int64_t incident = 0;
        policy_pending_steps(p->st, approve_one, &incident);
        if (!incident)
            break;
        struct policy_approval a = {
            .incident = incident, .approve = 1, .by = "what-if", .reason = "--approve"};
        char why[256];
        if (policy_approve(&p->ctx, p->st, &a, now, &p->out, why, sizeof(why)))
            break;
        rc = policy_assume_success(&p->ctx, p->st, now, &p->out);
    }
    int ran = digest(p);
    int storm = policy_storm_active(p->st);
    p->r->storms += storm && !p->storm;
    p->storm = storm;
    return rc ? rc : whatif__sample(p->r, p->st, &p->ctx, now - p->opt->start, ran);
}

/* The alert's labels: alertname, fault, the node's label and the rule's,
 * sorted by name. */
static int make_labels(struct play *p, const struct whatif_rule *rule, const struct whatif_event *e,
                       const char *node, struct open_alert *a)
{
    size_t n = 3 + rule->label_count;
    struct medic_label *l = medic_arena_alloc(&p->arena, n * sizeof(*l));
    size_t fault_len = strlen(e->class_name) + strlen(e->desc) + 3;
    char *fault = medic_arena_alloc(&p->arena, fault_len);
    if (!l || !fault)
        return MEDIC_E_NOMEM;
    snprintf(fault, fault_len, "%s: %s", e->class_name, e->desc);
    l[0] = (struct medic_label){"alertname", rule->alertname};
    l[1] = (struct medic_label){"fault", fault};
    l[2] = (struct medic_label){p->node_label, node};
    for (size_t i = 0; i < rule->label_count; i++)
        l[3 + i] = (struct medic_label){rule->label_names[i], rule->label_values[i]};
    qsort(l, n, sizeof(*l), whatif__label_order);
    a->labels = (struct medic_labels){l, n};
    medic_labels_fingerprint(&a->labels, a->fingerprint);
    return 0;
}

/* One notification of alert a, as Alertmanager sends it. */
static int send(struct play *p, struct open_alert *a, enum medic_alert_status status, int64_t now)
{
    struct whatif_fault *f = &p->faults[a->fault];
    struct medic_alert alert = {.status = status,
                                .labels = a->labels,
                                .starts_at = clock_of(p, f->start),
                                .ends_at = status == MEDIC_STATUS_RESOLVED ? now : MEDIC_TIME_UNSET,
                                .generator_url = "",
                                .fingerprint = a->fingerprint};
    struct medic_notification n;
    medic_notification_init(&n);
    n.version = "4";
    n.status = status;
    n.alerts = &alert;
    n.alert_count = 1;
    int duplicate = status == MEDIC_STATUS_FIRING && a->sent;
    if (!a->sent) {
        a->sent = 1;
        f->covered = policy_node_disrupted(p->st, f->node_name);
        if (node_wait(&p->nodes[f->node], a->fault))
            return MEDIC_E_NOMEM;
    }
    int rc =
        engine_evaluate_notification(&p->ctx, p->st, &n, duplicate, NULL, NULL, NAN, now, &p->out);
    n.alerts = NULL;
    n.alert_count = 0;
    medic_notification_release(&n);
    a->next_send = now + p->map->repeat_interval;
    return rc ? rc : settle(p, now);
}

/* The fault has ended (or the trace has): what became of it is known. */
static void fault_over(struct play *p, size_t fault)
{
    struct whatif_fault *f = &p->faults[fault];
    node_done(&p->nodes[f->node], fault);
    whatif__count(p->r, f);
}

/* What Alertmanager tells one open fault's alert by: its node, class and
 * description. */
static void alert_key(const struct whatif_event *e, char *out, size_t size)
{
    snprintf(out, size, "%zu\x1f%s\x1f%s", e->node, e->class_name, e->desc);
}

static int fault_start(struct play *p, const struct whatif_event *e)
{
    char key[1200];
    alert_key(e, key, sizeof(key));
    if (medic_map_get(&p->alert_keys, key)) {
        p->r->repeats++; /* the same fault again while open: Alertmanager holds one alert */
        return 0;
    }
    const struct whatif_rule *rule = whatif_mapping_find(p->map, e->level, e->class_name, e->desc);
    if (!rule) {
        p->r->unmapped++;
        return 0;
    }
    struct whatif_fault *f = &p->faults[p->fault_count];
    memset(f, 0, sizeof(*f));
    f->start = e->at;
    f->node = e->node;
    f->node_name = p->names[e->node];
    int rc = whatif__class_of(p->r, e->level, e->class_name, &f->cls);
    struct open_alert *a = &p->open[p->open_count];
    memset(a, 0, sizeof(*a));
    a->fault = p->fault_count;
    a->next_send = clock_of(p, e->at) + p->map->group_wait;
    if (rc || (rc = make_labels(p, rule, e, f->node_name, a)))
        return rc;
    snprintf(f->fingerprint, sizeof(f->fingerprint), "%s", a->fingerprint);
    p->fault_count++;
    p->open_count++;
    return medic_map_put(&p->alert_keys, key, (void *)(uintptr_t)p->fault_count);
}

/* The open alert of fault (few are open at once). */
static size_t open_alert_of(const struct play *p, size_t fault)
{
    size_t i = 0;
    while (p->open[i].fault != fault)
        i++;
    return i;
}

static int fault_end(struct play *p, const struct whatif_event *e, int64_t now)
{
    char key[1200];
    alert_key(e, key, sizeof(key));
    size_t fault = (size_t)(uintptr_t)medic_map_get(&p->alert_keys, key);
    if (!fault--)
        return 0; /* never started, or not mapped */
    medic_map_remove(&p->alert_keys, key);
    size_t i = open_alert_of(p, fault);
    int rc = 0;
    if (p->open[i].sent) {
        rc = send(p, &p->open[i], MEDIC_STATUS_RESOLVED, now);
        fault_over(p, fault);
    } else { /* over before Alertmanager sent it */
        p->faults[fault].unsent = 1;
        whatif__count(p->r, &p->faults[fault]);
    }
    p->open[i] = p->open[--p->open_count];
    return rc;
}

static void play_release(struct play *p)
{
    for (size_t i = 0; p->nodes && i < p->trace->node_count; i++)
        free(p->nodes[i].items);
    free(p->nodes);
    free(p->names);
    free(p->faults);
    free(p->open);
    medic_map_release(&p->inventory);
    medic_map_release(&p->alert_keys);
    medic_arena_release(&p->arena);
    policy_decisions_release(&p->out);
    policy_state_free(p->st);
}

size_t whatif__covered(const struct whatif_trace *trace, const struct whatif_mapping *map)
{
    return map->trace_nodes > trace->node_count ? map->trace_nodes : trace->node_count;
}

/* What the play needs of the configuration and the mapping. */
static int check_inputs(const struct medic_config *config, const struct whatif_trace *trace,
                        const struct whatif_mapping *map, const char *node_label,
                        struct medic_error *err)
{
    if (!config->inventory.count)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "the configuration has no inventory: the what-if gives the "
                               "trace's nodes the inventory's names (inventory.file)");
    if (whatif__covered(trace, map) > config->inventory.count)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "the trace covers %zu nodes and the inventory has %zu: the "
                               "inventory needs a node for each of the trace's",
                               whatif__covered(trace, map), config->inventory.count);
    if (!node_label)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "no label names the node: set node_label in the mapping, or "
                               "inventory.node_labels in the configuration");
    for (size_t i = 0; i < map->count; i++)
        for (size_t k = 0; k < map->rules[i].label_count; k++)
            if (strcmp(map->rules[i].label_names[k], node_label) == 0)
                return medic_error_set(err, MEDIC_E_INVALID,
                                       "the mapping's rule at line %d sets the label '%s', "
                                       "which names the node: medic sets it",
                                       map->rules[i].line, node_label);
    return 0;
}

/* One step of the play at now: the next of the trace's events, of
 * Alertmanager's sends, or of the scheduler's ticks, whichever comes first. */
static int step(struct play *p, size_t *next_event, int64_t now, int64_t event_at, size_t due,
                int64_t send_at)
{
    if (now == event_at) {
        const struct whatif_event *e = &p->trace->events[(*next_event)++];
        return e->start ? fault_start(p, e) : fault_end(p, e, now);
    }
    if (now == send_at)
        return send(p, &p->open[due], MEDIC_STATUS_FIRING, now);
    int rc = engine_tick(&p->ctx, p->st, now, &p->out);
    return rc ? rc : settle(p, now);
}

int whatif_play(const struct medic_config *config, const struct whatif_trace *trace,
                const struct whatif_mapping *mapping, const struct whatif_options *opt,
                void (*progress)(void *arg, double done), void *arg, struct whatif_report *out,
                struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    struct play p = {.trace = trace, .map = mapping, .opt = opt, .r = out};
    engine_context_from_config(config, &p.ctx);
    p.node_label = mapping->node_label      ? mapping->node_label
                   : p.ctx.node_label_count ? p.ctx.node_labels[0]
                                            : NULL;
    int rc = check_inputs(config, trace, mapping, p.node_label, err);
    if (rc)
        return rc;
    medic_arena_init(&p.arena);
    medic_map_init(&p.inventory);
    medic_map_init(&p.alert_keys);
    policy_decisions_init(&p.out);
    p.st = policy_state_new();
    p.faults = calloc(trace->count + 1, sizeof(*p.faults));
    p.open = calloc(trace->count + 1, sizeof(*p.open));
    p.nodes = calloc(trace->node_count + 1, sizeof(*p.nodes));
    rc = !p.st || !p.faults || !p.open || !p.nodes ? MEDIC_E_NOMEM : 0;
    size_t covered = whatif__covered(trace, mapping), size = config->inventory.count;
    p.names = calloc(trace->node_count + 1, sizeof(*p.names));
    rc = rc ? rc : p.names ? 0 : MEDIC_E_NOMEM;
    for (size_t i = 0; i < trace->node_count && !rc; i++) {
        p.names[i] = config->inventory.nodes[i * size / covered].name;
        rc = medic_map_put(&p.inventory, p.names[i], (void *)(uintptr_t)(i + 1));
    }
    out->events = trace->count;
    out->nodes = covered;
    out->named = trace->node_count;
    out->fleet = config->inventory.count;
    out->span = trace->span;
    if (!rc)
        rc = whatif__report_init(out, &config->policies.safety, &config->inventory);
    int64_t end = clock_of(&p, trace->span), next_tick = INT64_MAX;
    size_t next_event = 0, told = 0;
    while (rc == 0) {
        int64_t event_at =
            next_event < trace->count ? clock_of(&p, trace->events[next_event].at) : INT64_MAX;
        int64_t send_at = INT64_MAX;
        size_t due = 0;
        for (size_t k = 0; k < p.open_count; k++)
            if (p.open[k].next_send < send_at) {
                send_at = p.open[k].next_send;
                due = k;
            }
        int64_t now = event_at < send_at ? event_at : send_at;
        now = next_tick < now ? next_tick : now;
        if (now > end)
            break;
        rc = step(&p, &next_event, now, event_at, due, send_at);
        if (policy_open_incidents(p.st) || policy_storm_active(p.st))
            next_tick = next_tick > now && next_tick != INT64_MAX ? next_tick : now + opt->tick;
        else
            next_tick = INT64_MAX;
        if (progress && next_event * 100 / (trace->count + 1) > told)
            progress(arg, (double)(told = next_event * 100 / (trace->count + 1)) / 100.0);
    }
    /* the trace's end: what became of the faults still open is known */
    for (size_t k = 0; k < p.open_count && rc == 0; k++) {
        if (p.open[k].sent)
            fault_over(&p, p.open[k].fault);
        else
            whatif__count(out, &p.faults[p.open[k].fault]);
    }
    if (rc == MEDIC_E_NOMEM || (rc == 0 && p.out.failed))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    else if (rc && !err->msg[0])
        medic_error_set(err, rc, "the policy engine failed");
    play_release(&p);
    if (rc)
        whatif_report_release(out);
    return rc;
}

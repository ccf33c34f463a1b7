/* SPDX-License-Identifier: Apache-2.0 */
/* The gather phase of a round (round.h): everything a round reads from
 * other threads, the audit log, Prometheus and the agents, before the
 * engine's lock is taken. */
#include "round.h"
#include "engine_evaluate.h"
#include "engine_slurm_view.h"
#include "log.h"
#include "payload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct round_item *add_item(struct round *r, int64_t id, int64_t first_alert,
                                   int64_t received_at)
{
    if (r->item_count == ROUND_LIMIT)
        return NULL; /* never: the handover and the log's reads give at most this many */
    struct round_item *it = &r->items[r->item_count++];
    memset(it, 0, sizeof(*it));
    *it = (struct round_item){.id = id, .first_alert = first_alert, .received_at = received_at};
    medic_notification_init(&it->stored);
    return it;
}

/* A notification read back from the audit log (the backlog). */
static int gather_stored(void *arg, int64_t id, int64_t first_alert, int64_t received_at,
                         const char *body, size_t len)
{
    struct round *r = arg;
    struct round_item *it = add_item(r, id, first_alert, received_at);
    if (!it)
        return 0;
    struct medic_error err = {0};
    struct receiver_limits limits;
    receiver_limits_widest(&limits); /* it was accepted under the limits of its day */
    if (receiver_payload_parse(body, len, &limits, &it->stored, &err)) {
        medic_log_error("cannot evaluate a stored notification", "error", err.msg, NULL);
        medic_notification_release(&it->stored);
        medic_notification_init(&it->stored);
        return 0; /* marked evaluated, deciding nothing */
    }
    it->n = &it->stored;
    return 0;
}

struct awaited_list {
    struct round_outcome *items;
    size_t count, cap;
};

static void collect_awaited(void *arg, int64_t incident, int64_t decision)
{
    struct awaited_list *l = arg;
    if (!decision) /* bound when its round commits */
        return;
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct round_outcome *p = realloc(l->items, cap * sizeof(*p));
        if (!p)
            return; /* looked up again next round */
        l->items = p;
        l->cap = cap;
    }
    l->items[l->count++] = (struct round_outcome){.incident = incident, .decision = decision};
}

/* Awaited decision o's outcome as the audit log has it; 0: none yet. */
static int logged_outcome(struct round *r, struct round_outcome *o)
{
    char result[32];
    struct medic_error err = {0};
    int rc = audit_decision_outcome(r->e->reader, o->decision, result, sizeof(result), o->detail,
                                    sizeof(o->detail), &err);
    if (rc && rc != MEDIC_E_NOTFOUND)
        medic_log_error("cannot read an action's outcome", "error", err.msg, NULL);
    if (rc)
        return 0;
    int outcome = medic_outcome_parse(result);
    o->outcome = outcome < 0 ? MEDIC_OUTCOME_FAILED : (enum medic_outcome)outcome;
    return 1;
}

/* Awaited decision o's outcome as dispatch handed it over; 0: none. */
static int handed_outcome(const struct handed *h, struct round_outcome *o)
{
    for (size_t k = 0; k < h->outcome_count; k++)
        if (h->outcomes[k].decision == o->decision) {
            o->outcome = h->outcomes[k].outcome;
            snprintf(o->detail, sizeof(o->detail), "%s", h->outcomes[k].detail);
            return 1;
        }
    return 0;
}

/* The outcomes the incidents wait for and that came: handed over in
 * memory, or each looked up in the audit log (at start, after a failed
 * round, or when outcomes came faster than memory kept them). */
static void gather_outcomes(struct round *r, const struct handed *h)
{
    if (!h->outcomes_from_log && h->outcome_count == 0)
        return; /* most rounds: no walk over the incidents */
    struct awaited_list l = {0};
    policy_awaiting(r->e->state, collect_awaited, &l);
    size_t found = 0;
    for (size_t i = 0; i < l.count; i++)
        if (h->outcomes_from_log ? logged_outcome(r, &l.items[i]) : handed_outcome(h, &l.items[i]))
            l.items[found++] = l.items[i];
    r->outcomes = l.items;
    r->outcome_count = found;
}

/* Every alert of the round's notifications scored, and its recovery
 * action read: the nodes are announced first, so that the first score
 * fetches them all together. */
static int gather_alerts(struct round *r)
{
    for (size_t i = 0; i < r->item_count && r->risk.enabled; i++) {
        const struct round_item *it = &r->items[i];
        for (size_t k = 0; it->n && it->first_alert != AUDIT_DUPLICATE && k < it->n->alert_count;
             k++)
            engine_risk_want(&r->risk, &it->n->alerts[k]);
    }
    for (size_t i = 0; i < r->item_count; i++) {
        struct round_item *it = &r->items[i];
        if (!it->n || it->first_alert == AUDIT_DUPLICATE) /* a repeat asks nothing */
            continue;
        size_t count = it->n->alert_count + 1;
        it->risks = malloc(count * sizeof(*it->risks));
        it->scored = calloc(count, sizeof(*it->scored));
        it->recoveries = calloc(count, sizeof(*it->recoveries));
        if (!it->risks || !it->scored || !it->recoveries)
            return MEDIC_E_NOMEM;
        engine_risk_notification(&r->risk, it->n, it->risks, it->scored);
        engine_health_alerts(&r->health, it->n, it->recoveries);
    }
    return 0;
}

int round_gather(struct round *r, const struct handed *h, const struct medic_config *config,
                 struct medic_error *err)
{
    struct engine_pipeline *e = r->e;
    engine_context_from_config(config, &r->ctx);
    engine_slurm_view_context(e->slurm, &r->ctx); /* Slurm's nodes as last read */
    r->ctx.decision_ids = 1;                      /* the round binds and resolves decision ids */
    engine_risk_begin(&r->risk, config, e->fleet, r->wall); /* Prometheus's time */
    engine_health_begin(&r->health, config);
    gather_outcomes(r, h);
    for (struct committed *c = h->notifications; c; c = c->next) {
        struct round_item *it = add_item(r, c->id, c->first_alert, c->received_at);
        if (it)
            it->n = &c->n;
    }
    int rc = 0;
    if (h->from_log)
        rc = audit_pending_notifications(e->reader, ROUND_LIMIT, gather_stored, r, err);
    return rc ? rc : gather_alerts(r);
}

void round_release(struct round *r)
{
    for (size_t i = 0; i < r->item_count; i++) {
        struct round_item *it = &r->items[i];
        medic_notification_release(&it->stored);
        free(it->risks);
        free(it->scored);
        free(it->recoveries);
    }
    r->item_count = 0;
    free(r->outcomes);
    r->outcomes = NULL;
    engine_risk_end(&r->risk);
    engine_health_end(&r->health);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_pipeline.h"
#include "pipeline_internal.h"
#include "engine_people.h"
#include "lock.h"
#include "engine_evaluate.h"
#include "log.h"
#include "handover.h"
#include "round.h"
#include "table.h"
#include "timeutil.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Decisions one round may make (256 notifications of up to 1000 alerts
 * with a few steps each fit); past it, alerts get an error decision. */
#define ROUND_DECISIONS_LIMIT 1000000

static int remember_origin(struct round *r, size_t from, int64_t notification,
                           const struct medic_notification *n, int64_t first_alert)
{
    if (r->out.count > r->origin_cap) {
        size_t cap = r->out.count * 2;
        int64_t *a = realloc(r->notification_of, cap * sizeof(*a));
        if (a)
            r->notification_of = a;
        int64_t *b = realloc(r->alert_of, cap * sizeof(*b));
        if (b)
            r->alert_of = b;
        if (!a || !b)
            return MEDIC_E_NOMEM;
        r->origin_cap = cap;
    }
    for (size_t i = from; i < r->out.count; i++) {
        r->notification_of[i] = notification;
        r->alert_of[i] = 0;
        for (size_t k = 0; n && first_alert > 0 && k < n->alert_count; k++)
            if (strcmp(n->alerts[k].fingerprint, r->out.items[i].fingerprint) == 0)
                r->alert_of[i] = first_alert + (int64_t)k;
    }
    return 0;
}

static int people_origin(void *arg, size_t from);

/* The people's requests of the round accepted before `before` (wall
 * clock; INT64_MAX: all left), in the order they were accepted. */
static int apply_people(struct round *r, int64_t before)
{
    return people_apply(&r->people, before, &r->ctx, r->e->state, r->now, r->wall, &r->out,
                        people_origin, r);
}

/* Decides notification it, after the people's requests accepted before
 * it, on what gather found for it; a repeat (first_alert AUDIT_DUPLICATE)
 * only has its alerts seen again. */
static int evaluate_one(struct round *r, const struct round_item *it)
{
    int rc = apply_people(r, it->received_at);
    if (rc)
        return rc;
    size_t from = r->out.count;
    r->evaluated[r->evaluated_count++] = it->id;
    if (!it->n) /* stored, and no longer readable: nothing to decide */
        return 0;
    int repeat = it->first_alert == AUDIT_DUPLICATE;
    rc = engine_evaluate_notification(&r->ctx, r->e->state, it->n, repeat, it->risks,
                                      it->recoveries, NAN, r->now, &r->out);
    for (size_t i = from; rc == 0 && !repeat && i < r->out.count; i++) {
        struct policy_decision *x = &r->out.items[i];
        for (size_t k = 0; k < it->n->alert_count; k++) {
            if (!it->scored[k] || strcmp(it->n->alerts[k].fingerprint, x->fingerprint) != 0)
                continue;
            size_t at = strlen(x->reason);
            snprintf(x->reason + at, sizeof(x->reason) - at, "%s%s", at ? "; " : "",
                     it->scored[k]->note);
            break;
        }
    }
    return rc ? rc : remember_origin(r, from, it->id, it->n, repeat ? 0 : it->first_alert);
}

/* The awaited outcomes gather found. */
static int apply_outcomes(struct round *r)
{
    int rc = 0;
    for (size_t i = 0; i < r->outcome_count && rc == 0; i++) {
        const struct round_outcome *x = &r->outcomes[i];
        struct policy_outcome o = {x->incident, x->decision, x->outcome, x->detail};
        rc = policy_outcome(&r->ctx, r->e->state, &o, r->now, &r->out);
    }
    return rc;
}

static int people_origin(void *arg, size_t from)
{
    return remember_origin(arg, from, 0, NULL, 0);
}

/* The decisions as audit rows; params[i] receives decision i's parameters
 * as JSON (freed by the caller). */
static int to_audit(const struct round *r, const char *config_hash, const char *model_hash,
                    struct audit_decision_in *d, char **params)
{
    for (size_t i = 0; i < r->out.count; i++) {
        const struct policy_decision *x = &r->out.items[i];
        if (x->has_action) {
            struct medic_buf b;
            medic_buf_init(&b, 0);
            int rc = medic_action_params_json(&x->action, &b);
            if (rc) {
                medic_buf_release(&b);
                return rc;
            }
            params[i] = medic_buf_detach(&b);
        }
        d[i] = (struct audit_decision_in){
            .created_at = x->time + (r->wall - r->now),
            .notification_id = r->notification_of[i],
            .alert_id = r->alert_of[i],
            .fingerprint = x->fingerprint[0] ? x->fingerprint : NULL,
            .node = x->node[0] ? x->node : NULL,
            .alertname = x->alertname[0] ? x->alertname : NULL,
            .policy = x->policy[0] ? x->policy : NULL,
            .step = x->step,
            .action = x->has_action ? medic_action_name(x->action.kind) : NULL,
            .params_json = params[i],
            .risk = x->risk,
            .model_hash = model_hash[0] ? model_hash : NULL,
            .verdict = policy_verdict_name(x->verdict),
            .reason = x->reason,
            .config_hash = config_hash[0] ? config_hash : "builtin",
        };
    }
    return 0;
}

/* Collects a changed row of the state as bytes for the audit writer. */
static int collect_row(void *arg, const char *kind, const char *key, const char *value, size_t len,
                       const struct policy_decision_ref *refs, size_t ref_count)
{
    struct audit_row_ref own[8] = {{0}};
    struct audit_row_ref *r = ref_count <= 8 ? own : calloc(ref_count, sizeof(*r));
    if (!r)
        return MEDIC_E_NOMEM;
    for (size_t i = 0; i < ref_count; i++)
        r[i] = (struct audit_row_ref){refs[i].offset, refs[i].len, refs[i].index};
    int rc = audit_rows_add(arg, kind, key, value, len, r, ref_count);
    if (r != own)
        free(r);
    return rc;
}

/* On a tick after a new read of Slurm's nodes: the drains medic records
 * against what Slurm showed (policy_reconcile_drains). */
static int reconcile(struct engine_pipeline *e, struct round *r)
{
    int64_t began = 0;
    if (!engine_slurm_view_latest(e->slurm, &began) || began == e->reconciled_read ||
        began <= e->reconcile_after)
        return 0;
    e->reconciled_read = began;
    /* the read's start on the engine's clock: both are steady */
    int64_t seen_at = r->now - (medic_time_monotonic() - began);
    return policy_reconcile_drains(&r->ctx, e->state, seen_at, r->now, &r->out);
}

/* One round (round.h): gather, then decide under the lock taken once: the
 * outcomes, the people's requests and the notifications in the order they
 * were accepted, then the scheduler when due; then one commit of
 * decisions, evaluated ids and the state's changed rows, and the dispatch
 * of what it committed. Returns 1 when it did anything, 0 when there was
 * nothing to do, -1 when it failed. */
static int run_round(struct engine_pipeline *e, int64_t now, int64_t wall, int tick)
{
    if (e->state_stale && engine_pipeline__restore_state(e))
        return -1; /* retried in a second */
    /* gather, without the engine's lock (a round of ROUND_LIMIT items,
     * some 60 KB, on the engine thread's stack) */
    struct round r = {.e = e, .now = now, .wall = wall};
    struct handed h;
    handover_take(e->in, ROUND_LIMIT, &h);
    struct medic_error err = {0};
    char config_hash[65], model_hash[65] = "";
    policy_decisions_init(&r.out);
    r.out.limit = ROUND_DECISIONS_LIMIT;
    /* the round's snapshot: a reload meanwhile applies from the next round */
    const struct medic_config *config = config_slot_acquire(e->configs);
    snprintf(config_hash, sizeof(config_hash), "%s", config->hash);
    /* answers to pending steps: when one was recorded here, and on every
     * round of a log other replicas write too */
    if ((atomic_exchange(&e->approvals_waiting, 0) || e->poll_interval) &&
        people_read(&r.people, e->reader))
        atomic_store(&e->approvals_waiting, 1);
    int rc = round_gather(&r, &h, config, &err);
    if (r.risk.enabled) /* alerts are scored */
        snprintf(model_hash, sizeof(model_hash), "%s", config->model.hash);

    /* decide: the lock taken once, policy calls only */
    medic_mutex_lock(&e->lock);
    if (rc == 0)
        rc = apply_outcomes(&r);
    if (rc == 0) /* the outcomes' decisions come from no notification */
        rc = remember_origin(&r, 0, 0, NULL, 0);
    /* the people's requests and the notifications in the order they were
     * accepted; then the scheduler, at now, after all of them */
    for (size_t i = 0; i < r.item_count && rc == 0; i++)
        rc = evaluate_one(&r, &r.items[i]);
    if (rc == 0)
        rc = apply_people(&r, INT64_MAX);
    size_t scheduled = r.out.count;
    if (rc == 0 && e->rebased_by) {
        policy_clock_set_right(e->state, e->rebased_by, now, &r.out);
        e->rebased_by = 0;
        tick = 1; /* the ladders it reopened are decided at once */
    }
    if (rc == 0 && tick)
        rc = engine_tick(&r.ctx, e->state, now, &r.out);
    if (rc == 0 && tick)
        rc = reconcile(e, &r);
    if (rc == 0)
        rc = remember_origin(&r, scheduled, 0, NULL, 0);
    int changed = r.out.count || r.evaluated_count || r.out.change_count || r.people.count ||
                  policy_state_changed(e->state);
    e->disrupted_nodes = (int)policy_disrupted_nodes(e->state);
    e->quarantined_nodes = (int)policy_quarantined_nodes(e->state);
    e->open_incidents = (int)policy_open_incidents(e->state);
    e->storm = policy_storm_active(e->state);
    struct policy_pause_state pause;
    e->paused = policy_paused(e->state, &pause);
    handover_publish_holds(e->in, e->paused, e->storm); /* for the actions' workers */
    int64_t oldest;
    e->pending_approvals = (int)policy_pending_approvals(e->state, &oldest);
    e->pending_oldest = oldest;
    /* the changed rows are serialised here, on the engine's thread: the
     * audit writer only writes bytes, and never takes this lock */
    struct audit_rows rows;
    audit_rows_init(&rows);
    if (rc == 0 && changed) {
        policy_bind_decisions(e->state, &r.out);
        rc = policy_state_changes(e->state, collect_row, &rows);
    }
    medic_mutex_unlock(&e->lock);

    if (rc == 0 && changed) {
        struct audit_decision_in *d = calloc(r.out.count + 1, sizeof(*d));
        char **params = calloc(r.out.count + 1, sizeof(*params));
        int64_t *ids = calloc(r.out.count + 1, sizeof(*ids));
        struct audit_change_in *changes = calloc(r.out.change_count + 1, sizeof(*changes));
        if (!d || !params || !ids || !changes)
            rc = MEDIC_E_NOMEM;
        if (rc == 0)
            rc = to_audit(&r, config_hash, model_hash, d, params);
        for (size_t i = 0; rc == 0 && i < r.out.change_count; i++) {
            const struct policy_change *c = &r.out.changes[i];
            changes[i] = (struct audit_change_in){
                .created_at = c->time + (r.wall - r.now),
                .incident = c->incident,
                .node = c->node[0] ? c->node : NULL,
                .policy = c->policy,
                .from = policy_incident_state_name(c->from),
                .state = policy_incident_state_name(c->to),
                .cause = c->cause,
                .decision = c->decision,
            };
        }
        if (rc == 0) {
            struct audit_evaluation_in in = {.approvals = r.people.approvals,
                                             .approval_count = r.people.approval_count,
                                             .pauses = r.people.pauses,
                                             .pause_count = r.people.pause_count,
                                             .releases = r.people.releases,
                                             .release_count = r.people.release_count,
                                             .decisions = d,
                                             .decision_count = r.out.count,
                                             .changes = changes,
                                             .change_count = r.out.change_count,
                                             .evaluated = r.evaluated,
                                             .evaluated_count = r.evaluated_count,
                                             .evaluated_at = wall,
                                             .state = &rows,
                                             .drop_legacy_state = e->legacy_state};
            rc = audit_record_evaluation(e->store, &in, ids, &err);
            if (rc == 0 && e->answers &&
                r.people.approval_count + r.people.pause_count + r.people.release_count)
                engine_answers_taken(e->answers); /* their answers wait for this commit */
            if (rc == 0) {
                e->legacy_state = 0;
                medic_mutex_lock(&e->lock);
                policy_resolve_decisions(e->state, &r.out, ids);
                medic_mutex_unlock(&e->lock);
            }
            /* only what is committed may run: a decision is in the log first */
            for (size_t i = 0; rc == 0 && e->dispatch && i < r.out.count; i++)
                if (r.out.items[i].verdict == VERDICT_EXECUTE && r.out.items[i].has_action)
                    engine_dispatch_execute(e->dispatch, &r.out.items[i], ids[i]);
        }
        for (size_t i = 0; params && i < r.out.count; i++)
            free(params[i]);
        free(params);
        free(ids);
        free(d);
        free(changes);
        if (rc == 0) {
            for (size_t i = 0; i < r.out.count; i++)
                atomic_fetch_add(&e->decisions[r.out.items[i].verdict], 1);
            atomic_fetch_add(&e->evaluated, r.evaluated_count);
        }
    }
    audit_rows_release(&rows);
    round_release(&r);
    if (rc == 0 && h.from_log && r.evaluated_count < ROUND_LIMIT)
        handover_caught_up(e->in); /* the log is read to its end */
    int from_log = h.from_log;
    handed_release(&h);
    if (rc) {
        atomic_fetch_add(&e->rounds_failed, 1);
        medic_log_error("policy engine round failed; retrying from the last committed state",
                        "error", err.msg[0] ? err.msg : medic_strerror(rc), NULL);
        handover_fall_back(e->in);
        if (r.people.count) /* taken again by the next round */
            atomic_store(&e->approvals_waiting, 1);
        engine_pipeline__restore_state(e);
    } else {
        for (size_t i = 0; i < r.out.count; i++) {
            const struct policy_decision *x = &r.out.items[i];
            if (x->verdict == VERDICT_NO_MATCH)
                continue;
            if (x->verdict == VERDICT_ERROR) {
                medic_log_error("an alert could not be decided", "node", x->node, "alertname",
                                x->alertname, "reason", x->reason, NULL);
                continue;
            }
            medic_log_info("decision", "verdict", policy_verdict_name(x->verdict), "node", x->node,
                           "policy", x->policy, "action",
                           x->has_action ? medic_action_name(x->action.kind) : "", "reason",
                           x->reason, NULL);
        }
    }
    free(r.notification_of);
    free(r.alert_of);
    policy_decisions_release(&r.out);
    medic_config_unref(config);
    /* a full read of the log may leave more pending: go again */
    return rc ? -1 : changed || (from_log && r.evaluated_count == ROUND_LIMIT);
}

/* A jump of the wall clock against the engine's clock this large between two
 * looks is a step (NTP correcting a drifted host): it is logged and counted;
 * waits, ticks and the policy engine's intervals do not follow it, except
 * soon after the engine began (below). */
#define CLOCK_STEP MEDIC_NS_PER_SEC

/* Logs and counts a step of the wall clock since the last look. While
 * medic holds no node disrupted and runs no disruptive action (always so
 * at a first start), a lone medic's engine clock follows the step: time
 * sync set a clock that was wrong, and alerts' ages are judged against
 * the corrected one; nothing medic holds can expire or be undone by it.
 * Otherwise the engine's clock stays, and a held node is never resumed by
 * a step. Replicas compare their clocks through the database and never
 * lead with a wrong one. */
static void watch_clock(struct engine_pipeline *e, int64_t wall)
{
    int64_t lead = wall - engine_pipeline__now(e), step = lead - atomic_load(&e->wall_lead);
    atomic_store(&e->wall_lead, lead);
    if (step > -CLOCK_STEP && step < CLOCK_STEP)
        return;
    atomic_fetch_add(&e->clock_steps, 1);
    char by[32], total[32];
    snprintf(by, sizeof(by), "%+.3fs", (double)step / 1e9);
    snprintf(total, sizeof(total), "%+.3fs", (double)lead / 1e9);
    if (!e->poll_interval && atomic_load(&e->disrupted_nodes) == 0) {
        atomic_fetch_add(&e->clock_rebase, lead);
        atomic_store(&e->wall_lead, 0);
        e->rebased_by += lead; /* the next round decides stale-stopped ladders again */
        medic_log_warn("the wall clock stepped while medic holds no node disrupted (time sync "
                       "setting a clock that was wrong): the policy engine's clock follows it",
                       "step", by, NULL);
        return;
    }
    medic_log_warn("the wall clock stepped; the scheduler's waits and the policy engine's "
                   "intervals (after:, cooldowns, expiry) do not follow it until medic restarts",
                   "step", by, "wall_clock_lead", total, NULL);
}

static void *engine_main(void *arg)
{
    struct engine_pipeline *e = arg;
    pthread_setname_np(pthread_self(), "medic-engine");
    medic_mutex_lock(&e->in->lock);
    while (!e->in->stopping) {
        int64_t mono = medic_time_monotonic(), wall = medic_time_now();
        watch_clock(e, wall);
        int64_t now = engine_pipeline__now(e);
        int tick = mono - e->last_tick >= e->tick_interval;
        if (e->poll_interval && mono - e->last_poll >= e->poll_interval) {
            e->last_poll = mono; /* what other replicas committed */
            e->in->wake = 1;
        }
        if (!e->in->wake && !tick) {
            int64_t due = e->last_tick + e->tick_interval;
            if (e->poll_interval && e->last_poll + e->poll_interval < due)
                due = e->last_poll + e->poll_interval;
            struct timespec until = medic_time_deadline_in(due - mono);
            medic_cond_timedwait(&e->in->cond, &e->in->lock, &until);
            continue;
        }
        e->in->wake = 0;
        if (tick) {
            e->last_tick = mono;
            atomic_fetch_add(&e->ticks, 1);
        }
        medic_mutex_unlock(&e->in->lock);
        int did = run_round(e, now, wall, tick);
        medic_mutex_lock(&e->in->lock);
        if (did > 0) {
            e->in->wake = 1; /* a full round may leave more pending: go again at once */
        } else if (did < 0 && !e->in->stopping) {
            /* the store failed: wait a second before retrying */
            struct timespec until = medic_time_deadline_in(MEDIC_NS_PER_SEC);
            medic_cond_timedwait(&e->in->cond, &e->in->lock, &until);
            e->in->wake = 1;
        }
    }
    medic_mutex_unlock(&e->in->lock);
    return NULL;
}

int engine_pipeline_start(struct audit_store *store, const char *db_path,
                          struct config_slot *configs, int64_t tick_interval, int64_t poll_interval,
                          struct handover *in, struct engine_dispatch *dispatch,
                          struct engine_fleet *fleet, struct engine_slurm_view *slurm,
                          struct engine_answers *answers, struct engine_pipeline **out,
                          struct medic_error *err)
{
    struct engine_pipeline *e = calloc(1, sizeof(*e));
    if (!e)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    e->store = store;
    e->dispatch = dispatch;
    e->fleet = fleet;
    e->slurm = slurm;
    e->answers = answers;
    e->configs = configs;
    e->tick_interval = tick_interval;
    e->poll_interval = poll_interval;
    e->in = in; /* new: it evaluates what a previous run left pending */
    e->in->shared = poll_interval > 0;
    e->last_tick = medic_time_monotonic();
    /* the state read below is reconciled with a read of Slurm begun after
     * it: one is asked for now (a replica that just took the lease) */
    e->reconcile_after = e->last_tick;
    engine_slurm_view_refresh(slurm);
    medic_steady_clock_start(&e->clock);
    e->approvals_waiting = 1; /* answers a previous run left untaken */
    medic_mutex_init(&e->lock, MEDIC_LOCK_ENGINE_STATE);
    int rc = audit_reader_open(db_path, &e->reader, err);
    if (rc == 0)
        rc = engine_pipeline__read_state(e, &e->state, err);
    if (rc == 0) /* before the first round: what the restored state holds */
        e->disrupted_nodes = (int)policy_disrupted_nodes(e->state);
    if (rc == 0 && policy_open_incidents(e->state) > 0) {
        /* nothing disruptive before an alert is seen again */
        policy_state_restarted(e->state, engine_pipeline__now(e));
        medic_log_info("policy engine state restored", NULL);
    }
    if (rc == 0 && pthread_create(&e->thread, NULL, engine_main, e) != 0)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "cannot start the engine thread");
    if (rc) {
        audit_reader_free(e->reader);
        policy_state_free(e->state);
        medic_mutex_destroy(&e->lock);
        free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void engine_pipeline_committed(struct engine_pipeline *e, int64_t id, int64_t first_alert_id,
                               int64_t received_at, struct medic_notification *n)
{
    handover_committed(e->in, id, first_alert_id, received_at, n);
}

void engine_pipeline_approval_recorded(struct engine_pipeline *e)
{
    atomic_store(&e->approvals_waiting, 1);
    handover_wake(e->in);
}

void engine_pipeline_stop(struct engine_pipeline *e)
{
    if (!e)
        return;
    medic_mutex_lock(&e->in->lock);
    e->in->stopping = 1;
    pthread_cond_signal(&e->in->cond);
    medic_mutex_unlock(&e->in->lock);
    pthread_join(e->thread, NULL);
    audit_reader_free(e->reader);
    policy_state_free(e->state);
    medic_mutex_destroy(&e->lock);
    free(e);
}

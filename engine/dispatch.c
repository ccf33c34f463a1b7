/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_dispatch.h"
#include "lock.h"
#include "engine_runners.h"
#include "executor.h"
#include "log.h"
#include "notify.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTION_THREADS 4
/* notifications have workers of their own: a slow notifier never delays a
 * repair or a resume */
#define NOTIFY_THREADS 4
/* verifications wait between their checks for up to their `within`: a
 * pool of their own, so that they never hold back a drain or a power cycle */
#define VERIFY_THREADS 16
#define ACTION_QUEUE 1024

struct engine_dispatch {
    struct audit_store *store;
    struct config_slot *configs;
    struct executor *executor;
    struct executor *verifier;          /* verify steps: they wait between their checks */
    struct executor *notifier;          /* notifications */
    _Atomic long kept;                  /* outcomes waiting for the store to commit again */
    struct action_fence fence;          /* the lease, checked right before a disruptive command */
    struct engine_dispatch_hooks hooks; /* outcomes to the engine, and what holds a step */
    struct audit_recovery_bound bound;  /* the log at start: recovery stops there */
};

static void copy_text(char *to, size_t size, const char *from)
{
    snprintf(to, size, "%s", from ? from : "");
}

static int record_intent(struct engine_dispatch *d, const struct executor_job *job,
                         int64_t *intent_id, struct medic_error *err)
{
    struct medic_buf params;
    medic_buf_init(&params, 0);
    int rc = medic_action_params_json(&job->action, &params);
    struct audit_action_in in = {.created_at = medic_time_now(),
                                 .decision_id = job->decision_id,
                                 .action = medic_action_name(job->action.kind),
                                 .node = job->node[0] ? job->node : NULL,
                                 .target = job->node[0] ? job->node : NULL,
                                 .params_json = params.data,
                                 .result = "pending",
                                 .duration_ms = -1};
    if (rc == 0)
        rc = audit_record_action(d->store, &in, intent_id, err);
    else
        medic_error_set(err, rc, "the action's parameters do not fit the audit log");
    medic_buf_release(&params);
    return rc;
}

static int hook_intent(void *ctx, const struct executor_job *job, int64_t *intent_id,
                       struct medic_error *err)
{
    return record_intent(ctx, job, intent_id, err);
}

/* The incident waiting for the outcome of decision_id learns it (once the
 * outcome is in the audit log). */
static void hand_over(struct engine_dispatch *d, int64_t decision_id, enum medic_outcome outcome,
                      const char *detail)
{
    d->hooks.outcome(d->hooks.arg, decision_id, outcome, detail);
}

/* Records an outcome. When the store cannot commit (a full disk, a
 * database away) the outcome is kept and tried again until it is written,
 * so that its incident never waits for ever: an action that ran is never
 * left as an intent without an outcome (which the next start would call
 * interrupted) unless medic stops meanwhile. A refusal is final (the
 * intent has an outcome already: another leader recorded it
 * interrupted). */
static int record_outcome_row(struct engine_dispatch *d, const struct audit_action_in *in)
{
    struct medic_error err = {0};
    int pause = 100, told = 0;
    for (;;) {
        int rc = audit_record_action(d->store, in, NULL, &err);
        if (rc == 0) {
            if (told) {
                atomic_fetch_sub(&d->kept, 1);
                medic_log_info("a kept action outcome is recorded", "action", in->action, "node",
                               in->node, NULL);
            }
            return 0;
        }
        if (err.code != MEDIC_E_STORE && err.code != MEDIC_E_BUSY) {
            if (told)
                atomic_fetch_sub(&d->kept, 1);
            medic_log_error("cannot record an action outcome", "action", in->action, "node",
                            in->node, "error", err.msg, NULL);
            return rc;
        }
        if (!told++) {
            atomic_fetch_add(&d->kept, 1);
            medic_log_error("cannot record an action outcome yet; it is kept and written when "
                            "the audit store commits again",
                            "action", in->action, "node", in->node, "error", err.msg, NULL);
        }
        if (executor_wait(d->executor, pause)) {
            atomic_fetch_sub(&d->kept, 1);
            medic_log_error("medic stops with an action outcome it could not record; the next "
                            "start marks the action interrupted",
                            "action", in->action, "node", in->node, NULL);
            return rc;
        }
        pause = pause * 2 > 2000 ? 2000 : pause * 2;
    }
}

static void record_outcome(struct engine_dispatch *d, const struct executor_job *job,
                           int64_t intent_id, enum medic_outcome outcome, int64_t duration_ms,
                           const char *detail)
{
    struct audit_action_in in = {.created_at = medic_time_now(),
                                 .decision_id = job->decision_id,
                                 .intent_id = intent_id,
                                 .action = medic_action_name(job->action.kind),
                                 .node = job->node[0] ? job->node : NULL,
                                 .target = job->node[0] ? job->node : NULL,
                                 .result = medic_outcome_name(outcome),
                                 .duration_ms = duration_ms,
                                 .detail = detail && *detail ? detail : NULL};
    if (record_outcome_row(d, &in) == 0) { /* the incident waits for it */
        hand_over(d, job->decision_id, outcome, detail);
        medic_log_info("action finished", "action", medic_action_name(job->action.kind), "node",
                       job->node, "result", medic_outcome_name(outcome), "detail", detail, NULL);
        return;
    }
    /* the log says what the audit log will not: this outcome is not the
     * record (another leader recorded the action, or medic stops) */
    medic_log_error("action finished, but its outcome is not in the audit log (another replica "
                    "leads and recorded it, or medic stops): the audit log's word stands",
                    "action", medic_action_name(job->action.kind), "node", job->node,
                    "result_unrecorded", medic_outcome_name(outcome), "detail", detail, NULL);
}

static void hook_outcome(void *ctx, const struct executor_job *job, int64_t intent_id,
                         enum medic_outcome outcome, int64_t duration_ms, const char *detail)
{
    record_outcome(ctx, job, intent_id, outcome, duration_ms, detail);
}

/* ---- the runners: typed parameters in, one outcome out ---- */

/* The fence of every disruptive command: this replica still holds the
 * lease (PostgreSQL; always with SQLite). Unsure is no: a database that
 * cannot answer keeps the command unsent. */
static int lease_held(void *ctx, char *why, size_t size)
{
    struct engine_dispatch *d = ctx;
    struct medic_error err = {0};
    int rc = audit_store_check_lease(d->store, &err);
    if (rc)
        snprintf(why, size,
                 "this replica cannot show it still holds the lease (%s); the step is left to "
                 "the leader",
                 err.msg);
    return rc;
}

static enum medic_outcome hook_run(void *ctx, const struct executor_job *job, char *detail,
                                   size_t size)
{
    struct engine_dispatch *d = ctx;
    if (medic_action_disruptive(job->action.kind)) {
        /* a job queued before a pause (or a storm) began: nothing is sent,
         * and the engine holds the step until that clears */
        const char *held = d->hooks.held(d->hooks.arg);
        if (held) {
            snprintf(detail, size, MEDIC_HELD_PREFIX "%s after it was decided; nothing was sent",
                     held);
            return MEDIC_OUTCOME_REFUSED;
        }
    }
    /* a reference for the action's whole run: a reload meanwhile never
     * pulls the inventory or the credentials from under it */
    const struct medic_config *c = config_slot_acquire(d->configs);
    struct engine_run_context rc = {c, &d->fence, d->verifier};
    enum medic_outcome r = engine_run_action(&rc, job, detail, size);
    medic_config_unref(c);
    return r;
}

/* ---- submission and recovery ---- */

static void job_from(struct executor_job *job, int64_t decision_id, const char *node,
                     const char *policy, const char *alertname, const char *reason)
{
    job->decision_id = decision_id;
    copy_text(job->node, sizeof(job->node), node);
    copy_text(job->policy, sizeof(job->policy), policy);
    copy_text(job->alertname, sizeof(job->alertname), alertname);
    copy_text(job->reason, sizeof(job->reason), reason);
}

/* Queues job (taking its action); when it cannot be queued, records an
 * intent and a failed outcome so that the decision stays visible. */
static void submit(struct engine_dispatch *d, struct executor_job *job)
{
    struct executor *pool = job->action.kind == MEDIC_ACTION_VERIFY   ? d->verifier
                            : job->action.kind == MEDIC_ACTION_NOTIFY ? d->notifier
                                                                      : d->executor;
    int rc = executor_submit(pool, job);
    if (rc == 0)
        return;
    struct medic_error err = {0};
    int64_t intent = 0;
    if (record_intent(d, job, &intent, &err) == 0)
        record_outcome(d, job, intent, MEDIC_OUTCOME_FAILED, 0,
                       rc == MEDIC_E_BUSY ? "the action queue is full" : "medic is stopping");
    medic_action_release(&job->action);
}

void engine_dispatch_execute(struct engine_dispatch *d, const struct policy_decision *decision,
                             int64_t decision_id)
{
    struct executor_job job = {0};
    job_from(&job, decision_id, decision->node, decision->policy, decision->alertname,
             decision->reason);
    job.require_drained = decision->require_drained;
    if (medic_action_copy(&job.action, &decision->action) != 0) {
        struct medic_error err = {0};
        int64_t intent = 0;
        medic_action_init(&job.action, decision->action.kind);
        if (record_intent(d, &job, &intent, &err) == 0)
            record_outcome(d, &job, intent, MEDIC_OUTCOME_FAILED, 0, "out of memory");
        return;
    }
    submit(d, &job);
}

/* The typed action back from a decision row's action and params. */
static int action_from_row(const char *name, const char *params_json, struct medic_action *out)
{
    int kind = name ? medic_action_parse_kind(name) : -1;
    if (kind < 0)
        return MEDIC_E_INVALID;
    medic_action_init(out, (enum medic_action_kind)kind);
    cJSON *root = params_json ? cJSON_Parse(params_json) : NULL;
    int rc = params_json && !cJSON_IsObject(root) ? MEDIC_E_INVALID : 0;
    for (size_t i = 0; i < medic_action_param_count && rc == 0; i++) {
        const struct medic_action_param *p = &medic_action_params[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, p->key);
        if (p->kind != out->kind || !v)
            continue;
        void *field = (char *)out + p->offset;
        switch (p->type) {
        case MEDIC_PARAM_INT:
        case MEDIC_PARAM_SECONDS:
            if (cJSON_IsNumber(v))
                *(int *)field = v->valueint;
            break;
        case MEDIC_PARAM_BOOL:
            *(int *)field = cJSON_IsTrue(v);
            break;
        case MEDIC_PARAM_GPUS: {
            struct medic_gpu_list *g = field;
            g->from_alert = cJSON_IsString(v) && strcmp(v->valuestring, "alert") == 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, v)
            {
                if (cJSON_IsNumber(e) && g->count < MEDIC_ACTION_MAX_GPUS)
                    g->items[g->count++] = e->valueint;
            }
            break;
        }
        case MEDIC_PARAM_NAME:
        case MEDIC_PARAM_TEXT:
        case MEDIC_PARAM_RECORD:
            if (cJSON_IsString(v))
                rc = medic_action_set_text(out, p->key, v->valuestring, strlen(v->valuestring));
            break;
        }
    }
    cJSON_Delete(root);
    if (rc)
        medic_action_release(out);
    return rc;
}

struct recovery {
    struct engine_dispatch *d;
    const struct medic_config *config;
    int64_t now;
    int interrupted, resumed;
};

static int interrupt_one(void *arg, int64_t intent_id, int64_t decision_id, const char *action,
                         const char *node)
{
    struct recovery *r = arg;
    struct medic_error err = {0};
    struct audit_action_in in = {
        .created_at = medic_time_now(),
        .decision_id = decision_id,
        .intent_id = intent_id,
        .action = action,
        .node = node,
        .target = node,
        .result = medic_outcome_name(MEDIC_OUTCOME_INTERRUPTED),
        .duration_ms = -1,
        .detail = "medic stopped while the action ran; it is not run again: check the node"};
    r->interrupted++;
    int rc = audit_record_action(r->d->store, &in, NULL, &err);
    if (rc == 0)
        hand_over(r->d, decision_id, MEDIC_OUTCOME_INTERRUPTED, in.detail);
    return rc;
}

/* A decision that was queued in memory when medic stopped: run it while it
 * is still valid, else record it interrupted. */
static int recover_unstarted(void *arg, const struct audit_unstarted *u)
{
    struct recovery *r = arg;
    struct executor_job job = {0};
    job_from(&job, u->decision_id, u->node, u->policy, u->alertname, u->reason);
    char why[256] = "";
    if (action_from_row(u->action, u->params_json, &job.action) != 0) {
        int kind = u->action ? medic_action_parse_kind(u->action) : -1;
        medic_action_init(&job.action,
                          kind >= 0 ? (enum medic_action_kind)kind : MEDIC_ACTION_NOTIFY);
        snprintf(why, sizeof(why), "its action cannot be read back from the audit log");
    } else if (medic_action_disruptive(job.action.kind)) {
        snprintf(why, sizeof(why),
                 "a disruptive action is never started blindly after a restart (its incident "
                 "stops, and on-call is told)");
    } else if (job.action.kind == MEDIC_ACTION_RESUME ||
               job.action.kind == MEDIC_ACTION_RESTORE_POWER_LIMIT) {
        /* an undo returns the node whatever its alert did since (medic only
         * resumes what it drained, checked as it runs) */
    } else if (u->resolved) {
        snprintf(why, sizeof(why), "its alert resolved while medic was down");
    } else if (r->now - u->alert_started_at > r->config->policies.safety.max_alert_age) {
        snprintf(why, sizeof(why), "its alert is older than safety.max_alert_age");
    }
    if (!why[0]) {
        r->resumed++;
        submit(r->d, &job);
        return 0;
    }
    struct medic_error err = {0};
    int64_t intent = 0;
    char detail[400];
    snprintf(detail, sizeof(detail),
             "medic stopped before this decided action started; not run after the restart: %s",
             why);
    int rc = record_intent(r->d, &job, &intent, &err);
    if (rc == 0)
        record_outcome(r->d, &job, intent, MEDIC_OUTCOME_INTERRUPTED, -1, detail);
    medic_action_release(&job.action);
    r->interrupted++;
    return rc;
}

/* On-call hears about work a restart interrupted, through the storm
 * notifier (the one configured to hear about medic itself). */
static void tell_oncall(struct recovery *r)
{
    const char *notifier = r->config->policies.safety.storm_notifier;
    if (!r->interrupted || !notifier || !medic_mode_acts(r->config->mode))
        return;
    struct executor_job job = {0};
    char text[256];
    snprintf(text, sizeof(text),
             "medic restarted (or took over from another replica): %d action(s) were "
             "interrupted and are not run again; see "
             "`medic audit actions --status interrupted`",
             r->interrupted);
    job_from(&job, 0, "", "", "", text);
    medic_action_init(&job.action, MEDIC_ACTION_NOTIFY);
    if (medic_action_set_text(&job.action, "notifier", notifier, strlen(notifier)) ||
        medic_action_set_text(&job.action, "message", text, strlen(text))) {
        medic_action_release(&job.action);
        return;
    }
    /* not a decision's action: sent directly and logged, one short attempt
     * so that a notifier that hangs cannot hold up the start */
    struct notify_options once;
    notify_options_default(&once);
    once.attempts = 1;
    once.timeout_ms = 2000;
    char detail[512];
    enum medic_outcome o = engine_run_notify(r->config, &job, &once, detail, sizeof(detail));
    medic_log_warn("told on-call about interrupted actions", "result", medic_outcome_name(o),
                   "detail", detail, NULL);
    medic_action_release(&job.action);
}

int engine_dispatch_start(struct audit_store *store, const char *db_path,
                          struct config_slot *configs, const struct engine_dispatch_hooks *hooks,
                          struct engine_dispatch **out, struct medic_error *err)
{
    struct engine_dispatch *d = calloc(1, sizeof(*d));
    if (!d)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    d->store = store;
    d->configs = configs;
    d->hooks = *hooks;
    /* before this run decides anything: where recovery stops */
    struct audit_reader *reader = NULL;
    int read = audit_reader_open(db_path, &reader, err);
    if (read == 0)
        read = audit_recovery_bound(reader, &d->bound, err);
    audit_reader_free(reader);
    if (read) {
        medic_error_prefix(err, "reading what a previous medic left");
        free(d);
        return read;
    }
    d->fence = (struct action_fence){lease_held, d};
    notify_global_init();
    struct executor_hooks run = {d, hook_intent, hook_run, hook_outcome};
    int rc = executor_start(ACTION_THREADS, ACTION_QUEUE, &run, &d->executor, err);
    if (rc == 0 &&
        (rc = executor_start(VERIFY_THREADS, ACTION_QUEUE, &run, &d->verifier, err)) != 0)
        executor_stop(d->executor);
    if (rc == 0 &&
        (rc = executor_start(NOTIFY_THREADS, ACTION_QUEUE, &run, &d->notifier, err)) != 0) {
        executor_stop(d->verifier);
        executor_stop(d->executor);
    }
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int engine_dispatch_recover(struct engine_dispatch *d, const char *db_path, struct medic_error *err)
{
    struct audit_reader *reader = NULL;
    struct recovery r = {d, config_slot_acquire(d->configs), medic_time_now(), 0, 0};
    int rc = audit_reader_open(db_path, &reader, err);
    if (rc == 0)
        rc = audit_open_intents(reader, &d->bound, interrupt_one, &r, err);
    if (rc == 0)
        rc = audit_unstarted_decisions(reader, &d->bound, recover_unstarted, &r, err);
    audit_reader_free(reader);
    if (r.interrupted || r.resumed) {
        char n[16], m[16];
        snprintf(n, sizeof(n), "%d", r.interrupted);
        snprintf(m, sizeof(m), "%d", r.resumed);
        medic_log_warn("work left by a previous medic: interrupted actions are not run again",
                       "interrupted", n, "decided_and_run_now", m, NULL);
    }
    if (rc == 0)
        tell_oncall(&r);
    medic_config_unref(r.config);
    return rc;
}

void engine_dispatch_metrics(struct engine_dispatch *d, struct medic_buf *b)
{
    struct executor_stats s, v, n;
    executor_stats(d->executor, &s);
    executor_stats(d->verifier, &v);
    executor_stats(d->notifier, &n);
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++)
        for (int o = 0; o < MEDIC_OUTCOME_COUNT; o++)
            s.results[k][o] += v.results[k][o] + n.results[k][o];
    s.rejected += v.rejected + n.rejected;
    s.queued += n.queued;
    s.in_flight += n.in_flight;
    medic_buf_printf(b,
                     "# HELP medic_actions_queued Actions waiting for a worker.\n"
                     "# TYPE medic_actions_queued gauge\n"
                     "medic_actions_queued %zu\n"
                     "# HELP medic_actions_in_flight Actions running.\n"
                     "# TYPE medic_actions_in_flight gauge\n"
                     "medic_actions_in_flight %zu\n"
                     "# HELP medic_verifications_in_flight Verify steps checking their node.\n"
                     "# TYPE medic_verifications_in_flight gauge\n"
                     "medic_verifications_in_flight %zu\n"
                     "# HELP medic_actions_total Actions finished, by action and result.\n"
                     "# TYPE medic_actions_total counter\n",
                     s.queued, s.in_flight, v.in_flight + v.queued);
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++)
        for (int o = 0; o < MEDIC_OUTCOME_COUNT; o++)
            medic_buf_printf(b, "medic_actions_total{action=\"%s\",result=\"%s\"} %llu\n",
                             medic_action_name((enum medic_action_kind)k),
                             medic_outcome_name((enum medic_outcome)o),
                             (unsigned long long)s.results[k][o]);
    medic_buf_printf(b,
                     "# HELP medic_actions_rejected_total Actions not started (queue full or "
                     "intent refused).\n"
                     "# TYPE medic_actions_rejected_total counter\n"
                     "medic_actions_rejected_total %llu\n"
                     "# HELP medic_action_outcomes_unrecorded Action outcomes kept in memory "
                     "until the audit store commits again.\n"
                     "# TYPE medic_action_outcomes_unrecorded gauge\n"
                     "medic_action_outcomes_unrecorded %ld\n",
                     (unsigned long long)s.rejected, atomic_load(&d->kept));
}

void engine_dispatch_stop(struct engine_dispatch *d)
{
    if (!d)
        return;
    executor_stop(d->verifier);
    executor_stop(d->notifier);
    executor_stop(d->executor);
    free(d);
}

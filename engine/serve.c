/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "engine_serve.h"
#include "lock.h"
#include "engine_evaluate.h"
#include "log.h"
#include "timeutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One notification on its way to the audit log: the node names are kept
 * until the writer is done with them, and a copy of the notification for
 * the engine (made on the HTTP thread, so the writer only hands it on). */
struct pending_record {
    struct engine *engine;
    struct medic_notification copy;
    int copied;
    char (*nodes)[256];
    const char **node_ptrs;
    struct audit_notification_in in;
    struct audit_notification_result res;
    struct receiver_record_result *out;
    receiver_record_done done;
    void *request;
};

static void pending_free(struct pending_record *p)
{
    medic_notification_release(&p->copy);
    free(p->nodes);
    free(p->node_ptrs);
    free(p);
}

static void on_audit_done(void *arg, int rc, const struct medic_error *err)
{
    struct pending_record *p = arg;
    if (rc == 0) {
        p->out->id = p->res.id;
        p->out->duplicate = p->res.duplicate;
        p->out->duplicate_of = p->res.duplicate_of;
        /* duplicates are evaluated too: a repeat decides nothing again,
         * but its alerts are seen again (safety.alert_expiry); with a log
         * shared among replicas the engine reads every notification there */
        struct engine *e = p->engine;
        medic_rwlock_rdlock(&e->role);
        if (e->pipeline)
            engine_pipeline_committed(
                e->pipeline, p->res.id, p->res.duplicate ? AUDIT_DUPLICATE : p->res.first_alert_id,
                p->in.received_at, p->copied && !e->shared_log ? &p->copy : NULL);
        medic_rwlock_unlock(&e->role);
    }
    receiver_record_done done = p->done;
    void *request = p->request;
    pending_free(p);
    done(request, rc, err);
}

static int hook_record(void *ctx, const struct medic_notification *n, const char *raw,
                       size_t raw_len, const char *remote, struct receiver_record_result *out,
                       receiver_record_done done, void *request, struct medic_error *err)
{
    struct engine *e = ctx;
    struct pending_record *p = calloc(1, sizeof(*p));
    if (p) {
        p->nodes = calloc(n->alert_count, sizeof(*p->nodes));
        p->node_ptrs = calloc(n->alert_count, sizeof(*p->node_ptrs));
    }
    if (!p || !p->nodes || !p->node_ptrs) {
        if (p)
            pending_free(p);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    const struct medic_config *config = config_slot_acquire(e->configs);
    for (size_t i = 0; i < n->alert_count; i++)
        if (medic_alert_node(&n->alerts[i].labels, (const char *const *)config->node_labels,
                             config->node_label_count, p->nodes[i], sizeof(p->nodes[i])) == 0)
            p->node_ptrs[i] = p->nodes[i];
    medic_config_unref(config);
    p->in = (struct audit_notification_in){
        .notification = n,
        .raw = raw,
        .raw_len = raw_len,
        .received_at = medic_time_now(),
        .remote_addr = remote && *remote ? remote : NULL,
        .alert_nodes = p->node_ptrs,
    };
    /* without a copy the engine reads it back from the log */
    p->copied = medic_notification_copy(n, &p->copy) == 0;
    p->engine = e;
    p->out = out;
    p->done = done;
    p->request = request;
    int rc = audit_record_notification_async(e->store, &p->in, &p->res, on_audit_done, p, err);
    if (rc)
        pending_free(p);
    return rc;
}

/* Ready while the audit log commits: 503 from a failed commit until the
 * next one that writes (a webhook retried by Alertmanager, say). */
static int hook_ready(void *ctx)
{
    struct engine *e = ctx;
    struct audit_stats s;
    audit_store_stats(e->store, &s);
    return !s.unhealthy;
}

static void copy_auth(const struct medic_credentials *from, struct receiver_auth *to)
{
    to->bearer_token = from->bearer_token;
    to->basic_username = from->basic_username;
    to->basic_password = from->basic_password;
}

/* s refers to approvers (RECEIVER_MAX_APPROVERS) for the approvers' list. */
static void settings_from_config(const struct medic_config *c, struct receiver_settings *s,
                                 struct receiver_approver *approvers)
{
    memset(s, 0, sizeof(*s));
    s->limits = c->limits;
    copy_auth(&c->webhook_auth, &s->webhook_auth);
    copy_auth(medic_config_read_auth(c), &s->read_auth);
    copy_auth(medic_config_admin_auth(c), &s->admin_auth);
    s->admin_is_a_person = c->admin_auth.bearer_token || c->admin_auth.basic_username;
    for (size_t i = 0; i < c->approver_count && i < RECEIVER_MAX_APPROVERS; i++)
        approvers[i] = (struct receiver_approver){c->approvers[i].name, c->approvers[i].token};
    s->approvers = approvers;
    s->approver_count = c->approver_count;
}

/* Loads and checks a configuration as serve runs it (its overrides and the
 * serving rules); a snapshot with one reference, or NULL with err. */
static struct medic_config *load_config(const struct engine_serve_options *o,
                                        struct medic_error *err)
{
    struct medic_config fresh;
    int rc = o->config_path ? medic_config_load(o->config_path, &fresh, err)
                            : medic_config_defaults(&fresh);
    if (rc) {
        if (!err->msg[0])
            medic_error_set(err, rc, "cannot build the embedded defaults: %s", medic_strerror(rc));
        return NULL;
    }
    if (o->listen_override) {
        free(fresh.listen);
        fresh.listen = strdup(o->listen_override);
    }
    if (o->db_override) {
        free(fresh.audit_path);
        fresh.audit_path = strdup(o->db_override);
    }
    if (!fresh.listen || !fresh.audit_path) {
        medic_config_release(&fresh);
        medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        return NULL;
    }
    if (medic_config_check_serving(&fresh, err)) {
        medic_config_release(&fresh);
        return NULL;
    }
    /* what `medic check config` warns about, in the log of every start and
     * reload */
    struct medic_config_warnings *warnings = calloc(1, sizeof(*warnings));
    if (warnings) {
        medic_config_warn(&fresh, warnings);
        for (size_t i = 0; i < warnings->count; i++)
            medic_log_warn("configuration warning", "warning", warnings->items[i], NULL);
        free(warnings);
    }
    struct medic_config *snapshot = medic_config_snapshot(&fresh);
    if (!snapshot)
        medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return snapshot;
}

static void reload_failed(struct engine *e, const struct medic_error *err)
{
    atomic_fetch_add(&e->reloads_failed, 1);
    atomic_store(&e->last_reload_ok, 0);
    medic_log_error("reload refused; keeping the running configuration", "error", err->msg, NULL);
}

/* All or nothing: a configuration that does not load, or breaks the
 * serving rules, is refused (MEDIC_E_INVALID: the HTTP answer is 400) and
 * the running one stays. */
static int hook_reload(void *ctx, struct medic_error *err)
{
    struct engine *e = ctx;
    struct medic_config *fresh = load_config(e->options, err);
    if (!fresh) {
        if (err->code != MEDIC_E_NOMEM)
            err->code = MEDIC_E_INVALID;
        reload_failed(e, err);
        return err->code;
    }
    struct receiver_settings settings;
    struct receiver_approver approvers[RECEIVER_MAX_APPROVERS];
    settings_from_config(fresh, &settings, approvers);
    if (receiver_server_update(e->server, &settings)) {
        medic_config_unref(fresh);
        medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        reload_failed(e, err);
        return MEDIC_E_NOMEM;
    }
    struct medic_buf later;
    medic_buf_init(&later, 4096);
    if (medic_config_changes(e->started, fresh, 1, &later) && !later.error)
        medic_log_warn("these changes take effect at the next restart", "keys", later.data, NULL);
    medic_buf_release(&later);
    medic_log_set_level((enum medic_log_level)fresh->log_level);
    config_slot_publish(e->configs, fresh);
    atomic_fetch_add(&e->reloads_ok, 1);
    atomic_store(&e->last_reload_ok, 1);
    atomic_store(&e->last_reload_time, medic_time_now() / MEDIC_NS_PER_SEC);
    medic_log_info("configuration reloaded", "source",
                   e->options->config_path ? e->options->config_path : "(built-in defaults)", NULL);
    return 0;
}

static void log_started(const struct medic_config *c)
{
    char policies[24], model_hash[13], audit[512];
    snprintf(policies, sizeof(policies), "%zu", c->policies.count);
    audit_location_redacted(c->audit_path, audit, sizeof(audit));
    medic_log_info("medic serve started", "policies", policies, "listen", c->listen, "tls",
                   c->tls_cert_pem ? "on" : "off", "audit", audit, "mode", medic_mode_name(c->mode),
                   "config", c->source, "version", MEDIC_VERSION, NULL);
    snprintf(model_hash, sizeof(model_hash), "%.12s", c->model.hash);
    medic_log_info("risk model", "model", c->model_path ? c->model_path : "built-in", "sha256",
                   model_hash, "scoring",
                   c->prometheus_url ? c->prometheus_url : "off (no prometheus.url configured)",
                   NULL);
    if (!c->webhook_auth.bearer_token && !c->webhook_auth.basic_username)
        medic_log_warn("the webhook accepts unauthenticated requests; set "
                       "auth.webhook_bearer_token_file",
                       NULL);
}

/* How long a shutdown waits for the requests in flight; a webhook whose
 * commit has not come back by then is answered 503. audit.busy_timeout
 * stays below it, so that a commit waiting for a lock gives up first. */
#define SHUTDOWN_DRAIN_MS 10000

/* How often a leader reads what the other replicas committed. */
#define SHARED_LOG_POLL (200 * MEDIC_NS_PER_MS)

static void lose(void *arg);
static int recover(struct engine *e, struct medic_error *err);

/* dispatch's hooks, on the inbox that outlives the pipeline and dispatch */
static void hand_outcome(void *arg, int64_t decision, enum medic_outcome outcome,
                         const char *detail)
{
    handover_outcome(arg, decision, outcome, detail);
}

static const char *held_by(void *arg)
{
    return handover_held(arg);
}

/* Action dispatch, then the policy engine (which reads the committed
 * state and decides what is pending), both on one inbox. */
static int start_acting(struct engine *e)
{
    struct medic_error err = {0};
    struct engine_dispatch *dispatch = NULL;
    struct engine_pipeline *pipeline = NULL;
    const struct medic_config *c = config_slot_acquire(e->configs);
    handover_init(&e->inbox); /* the pipeline evaluates what a previous run left pending */
    const struct engine_dispatch_hooks hooks = {&e->inbox, hand_outcome, held_by};
    int rc = engine_dispatch_start(e->store, e->audit_path, e->configs, &hooks, &dispatch, &err);
    if (rc)
        medic_error_prefix(&err, "cannot start the action dispatch");
    if (rc == 0 &&
        (rc = engine_pipeline_start(e->store, e->audit_path, e->configs, c->engine_tick_interval,
                                    e->shared_log ? SHARED_LOG_POLL : 0, &e->inbox, dispatch,
                                    e->fleet, e->slurm, e->answers, &pipeline, &err)))
        medic_error_prefix(&err, "cannot start the policy engine");
    medic_config_unref(c);
    if (rc) {
        engine_dispatch_stop(dispatch);
        handover_release(&e->inbox);
        medic_log_error("cannot act", "error", err.msg, NULL);
        return rc;
    }
    medic_rwlock_wrlock(&e->role);
    e->dispatch = dispatch;
    e->pipeline = pipeline;
    medic_rwlock_unlock(&e->role);
    return 0;
}

static void *start_main(void *arg)
{
    struct engine *e = arg;
    pthread_setname_np(pthread_self(), "medic-start");
    e->start_rc = start_acting(e);
    return NULL;
}

/* This replica acts from now: it starts dispatch and the engine, and only
 * then dispatch recovers what a crash or the previous leader left
 * (interrupted intents, decisions never started), so that every outcome of
 * that recovery reaches the incident waiting for it. On a shared log the
 * start runs on a thread of its own while this one renews the lease
 * (reading the state may take longer than a lease), and recovery waits
 * for a renewal after the start (renewed): work recovered under a lease
 * that lapsed would be refused by the fence and never taken up again. */
static int gain(void *arg, int64_t epoch)
{
    struct engine *e = arg;
    struct medic_error err = {0};
    (void)epoch;
    atomic_store(&e->recovered, 0);
    if (e->shared_log && pthread_create(&e->starting, NULL, start_main, e) == 0) {
        e->start_live = 1;
        return 0;
    }
    int rc = start_acting(e); /* one replica, or no thread to be had: here */
    if (rc || e->shared_log)
        return rc;
    rc = recover(e, &err);
    if (rc) {
        medic_log_error("cannot recover the work a previous medic left; not acting", "error",
                        err.msg, NULL);
        lose(e);
        return rc;
    }
    return 0;
}

/* What a previous medic (or leader) left: intents interrupted, decisions
 * never started. On a shared log a read that fails (the database away
 * while this replica takes over) is tried again after each renewal of the
 * lease, while the engine and dispatch go on: what this replica started
 * meanwhile keeps its outcomes, and what the last one left is taken up
 * once the database answers (an intent is still committed once per
 * decision). */
static int recover(struct engine *e, struct medic_error *err)
{
    medic_rwlock_rdlock(&e->role);
    int rc = e->dispatch ? engine_dispatch_recover(e->dispatch, e->audit_path, err) : 0;
    medic_rwlock_unlock(&e->role);
    if (rc == 0)
        atomic_store(&e->recovered, 1);
    else if (e->shared_log)
        medic_log_warn("cannot recover the work the last leader left yet; trying again at the "
                       "next renewal of the lease",
                       "error", err->msg, NULL);
    return rc;
}

static void *recovery_main(void *arg)
{
    struct engine *e = arg;
    struct medic_error err = {0};
    pthread_setname_np(pthread_self(), "medic-recover");
    recover(e, &err);
    return NULL;
}

/* Joins a thread of the leader's (the start, the recovery) if it runs. */
static void join_live(pthread_t thread, int *live)
{
    if (!*live)
        return;
    pthread_join(thread, NULL);
    *live = 0;
}

/* After a renewal: once the start has ended (non-zero when it failed: the
 * replica gives the lease up), recovery not yet done (or failed: tried
 * again) runs on its own thread, so that this one renews the lease
 * meanwhile. */
static int renewed(void *arg)
{
    struct engine *e = arg;
    if (e->start_live) {
        if (pthread_tryjoin_np(e->starting, NULL) != 0)
            return 0; /* still starting */
        e->start_live = 0;
        if (e->start_rc)
            return e->start_rc;
    }
    if (e->recovery_live && pthread_tryjoin_np(e->recovery, NULL) == 0)
        e->recovery_live = 0; /* it ended: done, or to be tried again */
    if (atomic_load(&e->recovered) || e->recovery_live)
        return 0;
    if (pthread_create(&e->recovery, NULL, recovery_main, e) == 0) {
        e->recovery_live = 1;
        return 0;
    }
    struct medic_error err = {0};
    recover(e, &err); /* no thread to be had: here, as the lease allows */
    return 0;
}

/* This replica stops acting: the engine finishes its round (refused by the
 * fence when the lease is gone), dispatch finishes what runs. */
static void lose(void *arg)
{
    struct engine *e = arg;
    join_live(e->starting, &e->start_live);    /* what it started is stopped here */
    join_live(e->recovery, &e->recovery_live); /* it uses dispatch: done before it stops */
    medic_rwlock_wrlock(&e->role);
    struct engine_dispatch *dispatch = e->dispatch;
    struct engine_pipeline *pipeline = e->pipeline;
    e->dispatch = NULL;
    e->pipeline = NULL;
    medic_rwlock_unlock(&e->role);
    engine_pipeline_stop(pipeline);
    engine_dispatch_stop(dispatch);
    if (pipeline) /* both stopped: nothing hands anything over any more */
        handover_release(&e->inbox);
}

/* The state last committed to the audit log. */
static int committed_state(struct engine *e, struct policy_state **out, struct medic_error *err)
{
    struct audit_reader *reader = NULL;
    int legacy = 0;
    int rc = audit_reader_open(e->audit_path, &reader, err);
    if (rc == 0)
        rc = engine_state_read(reader, out, &legacy, err);
    audit_reader_free(reader);
    return rc;
}

int engine_copy_state(struct engine *e, struct policy_state **out, struct medic_error *err)
{
    medic_rwlock_rdlock(&e->role);
    int rc = MEDIC_E_NOTFOUND;
    if (e->pipeline)
        rc = engine_pipeline_copy_state(e->pipeline, out, err);
    medic_rwlock_unlock(&e->role);
    return rc != MEDIC_E_NOTFOUND ? rc : committed_state(e, out, err);
}

void engine_approval_recorded(struct engine *e)
{
    medic_rwlock_rdlock(&e->role);
    if (e->pipeline)
        engine_pipeline_approval_recorded(e->pipeline);
    medic_rwlock_unlock(&e->role);
}

int64_t engine_now(struct engine *e)
{
    medic_rwlock_rdlock(&e->role);
    int64_t now = e->pipeline ? engine_pipeline_now(e->pipeline) : medic_time_now();
    medic_rwlock_unlock(&e->role);
    return now;
}

int engine_with_state(struct engine *e, engine_state_fn fn, void *arg, struct medic_error *err)
{
    medic_rwlock_rdlock(&e->role);
    int led = e->pipeline != NULL;
    int rc = led ? engine_pipeline_with_state(e->pipeline, fn, arg) : 0;
    medic_rwlock_unlock(&e->role);
    if (led)
        return rc;
    struct policy_state *st = NULL;
    if ((rc = committed_state(e, &st, err)) == 0)
        rc = fn(arg, st);
    policy_state_free(st);
    return rc;
}

void engine_stats(struct engine *e, struct engine_pipeline_stats *out)
{
    memset(out, 0, sizeof(*out));
    medic_rwlock_rdlock(&e->role);
    if (e->pipeline)
        engine_pipeline_stats(e->pipeline, out);
    medic_rwlock_unlock(&e->role);
}

/* A replica's name in the lease: the configured one, or HOSTNAME-PID. */
static int replica_name(const struct medic_config *c, char *out, size_t size,
                        struct medic_error *err)
{
    if (c->ha_replica) {
        snprintf(out, size, "%s", c->ha_replica);
    } else {
        char host[64] = "medic";
        gethostname(host, sizeof(host) - 1);
        snprintf(out, size, "%s-%ld", host, (long)getpid());
    }
    size_t n = strlen(out);
    if (n == 0 || n >= 64 ||
        strspn(out, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "ha.replica '%s': up to 63 letters, digits, '.', '_' or '-'", out);
    return 0;
}

static int start(struct engine *e, const struct medic_config *c, struct medic_error *err)
{
    struct audit_options aopt;
    audit_options_default(&aopt);
    aopt.busy_timeout_ms = (int)(c->audit_busy_timeout / MEDIC_NS_PER_MS);
    aopt.max_pending = c->audit_max_pending;
    if (c->audit_writers) /* else the store's choice for this machine */
        aopt.notification_writers = c->audit_writers - 1;
    if (audit_store_open(e->audit_path, &aopt, &e->store, err)) {
        medic_error_prefix(err, "cannot open the audit log");
        return -1;
    }
    /* fleet scoring before the engine, whose alerts reuse its risks */
    if (engine_fleet_start(e->configs, &e->fleet) ||
        engine_slurm_view_start(e->configs, &e->slurm)) {
        medic_error_set(err, MEDIC_E_NOMEM, "cannot start fleet scoring or the Slurm reader");
        return -1;
    }
    /* before the engine, which tells it what its rounds took */
    if (engine_answers_start(e->audit_path, &e->answers, err))
        return -1;
    e->shared_log = audit_location_is_shared(e->audit_path);
    if (e->shared_log) {
        /* several replicas: the engine and dispatch run while this one leads */
        char replica[64];
        struct engine_leader_hooks hooks = {e, gain, lose, renewed};
        if (replica_name(c, replica, sizeof(replica), err) ||
            engine_leader_start(e->audit_path, replica, c->ha_lease, e->store, e->configs, &hooks,
                                &e->leader, err))
            return -1;
    } else if (gain(e, 0)) {
        medic_error_set(err, MEDIC_E_STORE, "cannot start the policy engine or action dispatch");
        return -1;
    }
    if (engine_readers_start(&e->readers, err))
        return -1;
    struct receiver_settings settings;
    struct receiver_approver approvers[RECEIVER_MAX_APPROVERS];
    settings_from_config(c, &settings, approvers);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct receiver_listen listen = {
        .address = e->listen,
        .max_connections = c->max_connections,
        .max_connections_per_address = c->max_connections_per_address,
        .request_timeout = c->request_timeout,
        .threads = (unsigned int)(cpus > 1 ? cpus : 1),
        .tls_cert_pem = c->tls_cert_pem,
        .tls_key_pem = c->tls_key_pem,
    };
    engine_page_source(e, &e->page);
    struct receiver_hooks hooks = {
        .ctx = e,
        .record = hook_record,
        .metrics = engine_metrics,
        .reload = hook_reload,
        .ready = hook_ready,
        .query = engine_api_query,
        .dry_run = engine_api_dry_run,
        .approve = engine_api_approve,
        .pause = engine_api_pause,
        .release = engine_api_release,
        .page = engine_page,
        .page_form = engine_page_form,
    };
    if (receiver_server_start(&listen, &settings, &hooks, &e->server, err)) {
        medic_error_prefix(err, "cannot start the http server");
        return -1;
    }
    return 0;
}

static void wait_for_signals(struct engine *e, const sigset_t *signals)
{
    for (;;) {
        int sig = 0;
        if (sigwait(signals, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            struct medic_error err = {0};
            medic_log_info("SIGHUP: reloading the configuration", NULL);
            hook_reload(e, &err);
            continue;
        }
        medic_log_info("shutting down: draining requests in flight", "signal",
                       sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
        return;
    }
}

int engine_serve(const struct engine_serve_options *options)
{
    struct engine e;
    memset(&e, 0, sizeof(e));
    e.options = options;
    medic_rwlock_init(&e.role, MEDIC_LOCK_ROLE);
    /* signals are taken by sigwait(), so block them in every thread; a full
     * disk must fail a write, never kill the daemon */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);

    struct medic_error err = {0};
    struct medic_config *first = load_config(options, &err);
    if (!first) {
        medic_log_error("cannot load configuration", "error", err.msg, NULL);
        return 1;
    }
    medic_log_set_level((enum medic_log_level)(
        options->log_level ? medic_log_parse_level(options->log_level) : first->log_level));
    e.started = medic_config_ref(first);
    e.listen = first->listen;
    e.audit_path = first->audit_path;
    e.configs = config_slot_new(first);
    if (!e.configs) {
        medic_config_unref(first);
        medic_config_unref(e.started);
        medic_log_error("out of memory", NULL);
        return 1;
    }
    atomic_store(&e.last_reload_ok, 1);
    atomic_store(&e.last_reload_time, medic_time_now() / MEDIC_NS_PER_SEC);

    int status = 1;
    const struct medic_config *c = config_slot_acquire(e.configs); /* a reload may come */
    if (start(&e, c, &err) == 0) {
        log_started(c);
        medic_config_unref(c);
        wait_for_signals(&e, &signals);
        status = 0;
    } else {
        medic_config_unref(c);
        medic_log_error("cannot start", "error", err.msg, NULL);
    }
    receiver_server_stop(e.server, SHUTDOWN_DRAIN_MS);
    if (e.leader)
        engine_leader_stop(e.leader); /* stops acting, then gives the lease up */
    else
        lose(&e);
    /* after the engine, which tells it what its rounds took; those still
     * waiting were answered 503 by the server's stop */
    engine_answers_stop(e.answers);
    engine_readers_stop(e.readers);
    engine_fleet_stop(e.fleet); /* after the engine, which reads its risks */
    engine_slurm_view_stop(e.slurm);
    audit_store_free(e.store);
    receiver_server_free(e.server); /* after the store: its last commits answer into it */
    if (status == 0)
        medic_log_info("stopped; audit log closed", NULL);
    config_slot_free(e.configs);
    medic_config_unref(e.started);
    medic_rwlock_destroy(&e.role);
    return status;
}

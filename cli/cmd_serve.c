#include "audit.h"
#include "commands.h"
#include "config.h"
#include "log.h"
#include "serve_engine.h"
#include "serve_fleet.h"
#include "server.h"
#include "table.h"
#include "timeutil.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: medic serve [--config FILE] [--listen ADDR:PORT] [--db PATH]\n"
    "                   [--log-level debug|info|warn|error]\n"
    "\n"
    "Runs the daemon: accepts Alertmanager webhook notifications on POST /webhook,\n"
    "commits each one to the audit log before answering, and serves /metrics,\n"
    "/-/healthy, /-/ready, POST /-/reload and GET /api/v1/decisions (also\n"
    "/api/v1/notifications, /api/v1/alerts, /api/v1/actions).\n"
    "\n"
    "With prometheus.url in the configuration, each firing alert gets a failure\n"
    "risk from its GPU's telemetry before the policies see it, from the model\n"
    "file in model.path or the model built into medic (docs/model.md).\n"
    "\n"
    "Without --config it runs on embedded defaults: listen 127.0.0.1:9799, audit\n"
    "database ./medic.db, mode dry-run, no authentication (loopback only), the\n"
    "built-in policies and model.\n"
    "--listen and --db override the configuration file.\n"
    "\n"
    "Signals: SIGTERM and SIGINT drain requests in flight and close the audit log;\n"
    "SIGHUP reloads the configuration (an invalid file keeps the running one).\n";

/* Everything the hooks need; the config may be swapped by a reload. */
struct serve_state {
    pthread_mutex_t lock; /* guards config */
    struct medic_config config;
    const char *config_path; /* NULL: embedded defaults */
    const char *listen_override;
    const char *db_override;
    struct audit_store *store;
    struct serve_engine *engine;
    struct serve_actions *actions;
    struct serve_fleet *fleet;
    struct receiver_server *server;
    atomic_ullong reloads_ok;
    atomic_ullong reloads_failed;
    atomic_int last_reload_ok;
    atomic_llong last_reload_time;
};

/* One notification on its way to the audit log: the node names are kept
 * until the writer is done with them. */
struct pending_record {
    struct serve_state *st;
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
        /* duplicates are never evaluated: their alerts were */
        if (!p->res.duplicate && p->st->engine)
            serve_engine_wake(p->st->engine);
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
    struct serve_state *st = ctx;
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
    pthread_mutex_lock(&st->lock);
    for (size_t i = 0; i < n->alert_count; i++)
        if (medic_alert_node(&n->alerts[i].labels, (const char *const *)st->config.node_labels,
                             st->config.node_label_count, p->nodes[i], sizeof(p->nodes[i])) == 0)
            p->node_ptrs[i] = p->nodes[i];
    pthread_mutex_unlock(&st->lock);
    p->in = (struct audit_notification_in){
        .notification = n,
        .raw = raw,
        .raw_len = raw_len,
        .received_at = medic_time_now(),
        .remote_addr = remote && *remote ? remote : NULL,
        .alert_nodes = p->node_ptrs,
    };
    p->st = st;
    p->out = out;
    p->done = done;
    p->request = request;
    int rc = audit_record_notification_async(st->store, &p->in, &p->res, on_audit_done, p, err);
    if (rc)
        pending_free(p);
    return rc;
}

static void hook_metrics(void *ctx, struct medic_buf *b)
{
    struct serve_state *st = ctx;
    struct audit_stats s;
    audit_store_stats(st->store, &s);
    medic_buf_puts(b, "# HELP medic_audit_commit_duration_seconds Time to commit one group of "
                      "audit writes (group commit).\n"
                      "# TYPE medic_audit_commit_duration_seconds histogram\n");
    for (int i = 0; i < AUDIT_COMMIT_BUCKETS; i++)
        medic_buf_printf(b, "medic_audit_commit_duration_seconds_bucket{le=\"%g\"} %llu\n",
                         audit_commit_buckets[i], (unsigned long long)s.commit_bucket_counts[i]);
    medic_buf_printf(b,
                     "medic_audit_commit_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                     "medic_audit_commit_duration_seconds_sum %.9f\n"
                     "medic_audit_commit_duration_seconds_count %llu\n"
                     "# HELP medic_audit_commit_failures_total Audit transactions that failed.\n"
                     "# TYPE medic_audit_commit_failures_total counter\n"
                     "medic_audit_commit_failures_total %llu\n"
                     "# HELP medic_audit_writes_total Write requests committed to the audit log.\n"
                     "# TYPE medic_audit_writes_total counter\n"
                     "medic_audit_writes_total %llu\n"
                     "# HELP medic_audit_queue_depth Write requests waiting for the audit writer.\n"
                     "# TYPE medic_audit_queue_depth gauge\n"
                     "medic_audit_queue_depth %zu\n"
                     "# HELP medic_audit_queue_capacity Write requests the queue holds before "
                     "answering 503.\n"
                     "# TYPE medic_audit_queue_capacity gauge\n"
                     "medic_audit_queue_capacity %zu\n",
                     (unsigned long long)s.commits, s.commit_seconds_sum,
                     (unsigned long long)s.commits, (unsigned long long)s.commit_failures,
                     (unsigned long long)s.requests_committed, s.queue_depth, s.max_pending);
    pthread_mutex_lock(&st->lock);
    int live = st->config.mode == MEDIC_MODE_LIVE;
    char hash[13];
    snprintf(hash, sizeof(hash), "%.12s", st->config.hash[0] ? st->config.hash : "builtin");
    pthread_mutex_unlock(&st->lock);
    medic_buf_printf(b,
                     "# HELP medic_config_reloads_total Configuration reloads, by result.\n"
                     "# TYPE medic_config_reloads_total counter\n"
                     "medic_config_reloads_total{result=\"success\"} %llu\n"
                     "medic_config_reloads_total{result=\"failure\"} %llu\n"
                     "# HELP medic_config_last_reload_successful Whether the last reload "
                     "succeeded.\n"
                     "# TYPE medic_config_last_reload_successful gauge\n"
                     "medic_config_last_reload_successful %d\n"
                     "# HELP medic_config_last_reload_success_timestamp_seconds When the "
                     "configuration was last loaded.\n"
                     "# TYPE medic_config_last_reload_success_timestamp_seconds gauge\n"
                     "medic_config_last_reload_success_timestamp_seconds %lld\n"
                     "# HELP medic_mode_live 1 when medic acts (live), 0 in dry-run.\n"
                     "# TYPE medic_mode_live gauge\n"
                     "medic_mode_live %d\n"
                     "# HELP medic_build_info Build information; the value is always 1.\n"
                     "# TYPE medic_build_info gauge\n"
                     "medic_build_info{version=\"%s\",config_hash=\"%s\"} 1\n",
                     atomic_load(&st->reloads_ok), atomic_load(&st->reloads_failed),
                     atomic_load(&st->last_reload_ok),
                     (long long)atomic_load(&st->last_reload_time), live, medic_version, hash);
    if (st->engine)
        serve_engine_metrics(st->engine, b);
    if (st->actions)
        serve_actions_metrics(st->actions, b);
    if (st->fleet)
        serve_fleet_metrics(st->fleet, b);
}

static int hook_dry_run(void *ctx, const char *body, size_t len, struct medic_buf *out)
{
    struct serve_state *st = ctx;
    return serve_engine_dry_run(st->engine, body, len, out);
}

static int hook_ready(void *ctx)
{
    struct serve_state *st = ctx;
    return st->store != NULL;
}

static int hook_query(void *ctx, const struct receiver_query *q, struct medic_buf *out)
{
    struct serve_state *st = ctx;
    struct medic_error err = {0};
    int kind = audit_kind_parse(q->kind);
    if (kind < 0) {
        medic_buf_puts(out, "{\"status\":\"error\",\"error\":\"no such endpoint; use "
                            "/api/v1/decisions, notifications, alerts or actions\"}\n");
        return 404;
    }
    struct audit_filter f;
    audit_filter_init(&f);
    f.node = q->node;
    f.alertname = q->alertname;
    f.policy = q->policy;
    f.verdict = q->verdict;
    f.status = q->status;
    int64_t now = medic_time_now();
    if ((q->since && medic_time_parse_bound(q->since, now, &f.since)) ||
        (q->until && medic_time_parse_bound(q->until, now, &f.until))) {
        medic_buf_puts(out, "{\"status\":\"error\",\"error\":\"since and until take RFC 3339 "
                            "times or durations (90m, 2h, 7d)\"}\n");
        return 400;
    }
    if (q->limit) {
        char *end;
        f.limit = strtol(q->limit, &end, 10);
        if (*end || f.limit <= 0 || f.limit > 10000) {
            medic_buf_puts(out, "{\"status\":\"error\",\"error\":\"limit takes 1 to 10000\"}\n");
            return 400;
        }
    }
    char db[4096];
    pthread_mutex_lock(&st->lock);
    snprintf(db, sizeof(db), "%s", st->config.audit_path);
    pthread_mutex_unlock(&st->lock);
    struct audit_reader *reader = NULL;
    struct medic_table table;
    int code = 200;
    if (audit_reader_open(db, &reader, &err) ||
        audit_query(reader, (enum audit_kind)kind, &f, &table, &err)) {
        code = err.code == MEDIC_E_INVALID ? 400 : 503;
        medic_buf_puts(out, "{\"status\":\"error\",\"error\":");
        medic_buf_json_string(out, err.msg);
        medic_buf_puts(out, "}\n");
    } else {
        medic_buf_puts(out, "{\"status\":\"success\",\"data\":");
        medic_table_render(&table, MEDIC_FORMAT_JSON, out);
        medic_buf_puts(out, "}\n");
        medic_table_release(&table);
    }
    audit_reader_free(reader);
    return code;
}

static void settings_from_config(const struct medic_config *c, struct receiver_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->limits = c->limits;
    const struct medic_credentials *from[3] = {&c->webhook_auth, &c->read_auth, &c->admin_auth};
    struct receiver_auth *to[3] = {&s->webhook_auth, &s->read_auth, &s->admin_auth};
    for (int i = 0; i < 3; i++) {
        to[i]->bearer_token = from[i]->bearer_token;
        to[i]->basic_username = from[i]->basic_username;
        to[i]->basic_password = from[i]->basic_password;
    }
}

static int load_config(struct serve_state *st, struct medic_config *out, struct medic_error *err)
{
    int rc =
        st->config_path ? medic_config_load(st->config_path, out, err) : medic_config_defaults(out);
    if (rc)
        return rc;
    if (st->listen_override) {
        free(out->listen);
        out->listen = strdup(st->listen_override);
    }
    if (st->db_override) {
        free(out->audit_path);
        out->audit_path = strdup(st->db_override);
    }
    if (!out->listen || !out->audit_path) {
        medic_config_release(out);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    return 0;
}

static int hook_reload(void *ctx, struct medic_error *err)
{
    struct serve_state *st = ctx;
    struct medic_config fresh;
    int rc = load_config(st, &fresh, err);
    if (rc) {
        atomic_fetch_add(&st->reloads_failed, 1);
        atomic_store(&st->last_reload_ok, 0);
        medic_log_error("reload failed; keeping the running configuration", "error", err->msg,
                        NULL);
        return rc;
    }
    struct receiver_settings settings;
    settings_from_config(&fresh, &settings);
    if (receiver_server_update(st->server, &settings)) {
        medic_config_release(&fresh);
        atomic_fetch_add(&st->reloads_failed, 1);
        atomic_store(&st->last_reload_ok, 0);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&st->lock);
    if (strcmp(fresh.listen, st->config.listen) != 0 ||
        strcmp(fresh.audit_path, st->config.audit_path) != 0 ||
        (fresh.tls_cert_pem == NULL) != (st->config.tls_cert_pem == NULL))
        medic_log_warn("listen, audit path and tls changes take effect at the next restart", NULL);
    /* the listener and the store keep what they were started with */
    struct medic_config old = st->config;
    st->config = fresh;
    char *swap = st->config.listen;
    st->config.listen = old.listen;
    old.listen = swap;
    swap = st->config.audit_path;
    st->config.audit_path = old.audit_path;
    old.audit_path = swap;
    medic_log_set_level((enum medic_log_level)st->config.log_level);
    pthread_mutex_unlock(&st->lock);
    medic_config_release(&old);
    atomic_fetch_add(&st->reloads_ok, 1);
    atomic_store(&st->last_reload_ok, 1);
    atomic_store(&st->last_reload_time, medic_time_now() / MEDIC_NS_PER_SEC);
    medic_log_info("configuration reloaded", "source",
                   st->config_path ? st->config_path : "(built-in defaults)", NULL);
    return 0;
}

int medic_cmd_serve(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'}, {"listen", required_argument, NULL, 'l'},
        {"db", required_argument, NULL, 'd'},     {"log-level", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    struct serve_state st;
    memset(&st, 0, sizeof(st));
    const char *log_level = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            st.config_path = optarg;
            break;
        case 'l':
            st.listen_override = optarg;
            break;
        case 'd':
            st.db_override = optarg;
            break;
        case 'L':
            log_level = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "medic serve: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    if (log_level && medic_log_parse_level(log_level) < 0) {
        fprintf(stderr, "medic serve: --log-level is debug, info, warn or error\n");
        return 2;
    }

    /* signals are taken by sigwait() below, so block them in every thread */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct medic_error err = {0};
    if (load_config(&st, &st.config, &err)) {
        medic_log_error("cannot load configuration", "error", err.msg, NULL);
        return 1;
    }
    medic_log_set_level(
        (enum medic_log_level)(log_level ? medic_log_parse_level(log_level) : st.config.log_level));
    pthread_mutex_init(&st.lock, NULL);
    atomic_store(&st.last_reload_ok, 1);
    atomic_store(&st.last_reload_time, medic_time_now() / MEDIC_NS_PER_SEC);

    int status = 1;
    struct audit_options aopt;
    audit_options_default(&aopt);
    aopt.busy_timeout_ms = (int)(st.config.audit_busy_timeout / MEDIC_NS_PER_MS);
    aopt.max_pending = st.config.audit_max_pending;
    if (audit_store_open(st.config.audit_path, &aopt, &st.store, &err)) {
        medic_log_error("cannot open the audit log", "path", st.config.audit_path, "error", err.msg,
                        NULL);
        goto out;
    }
    if (serve_actions_start(st.store, st.config.audit_path, &st.lock, &st.config, &st.actions,
                            &err)) {
        medic_log_error("cannot start the action executor", "error", err.msg, NULL);
        goto out;
    }
    if (serve_engine_start(st.store, st.config.audit_path, &st.lock, &st.config,
                           st.config.engine_tick_interval, st.actions, &st.engine, &err)) {
        medic_log_error("cannot start the policy engine", "error", err.msg, NULL);
        goto out;
    }
    if (serve_fleet_start(&st.lock, &st.config, &st.fleet)) {
        medic_log_error("cannot start fleet scoring", NULL);
        goto out;
    }
    struct receiver_settings settings;
    settings_from_config(&st.config, &settings);
    struct receiver_listen listen = {
        .address = st.config.listen,
        .max_connections = st.config.max_connections,
        .threads =
            (unsigned int)(sysconf(_SC_NPROCESSORS_ONLN) > 1 ? sysconf(_SC_NPROCESSORS_ONLN) : 1),
        .tls_cert_pem = st.config.tls_cert_pem,
        .tls_key_pem = st.config.tls_key_pem,
    };
    struct receiver_hooks hooks = {
        .ctx = &st,
        .record = hook_record,
        .metrics = hook_metrics,
        .reload = hook_reload,
        .ready = hook_ready,
        .query = hook_query,
        .dry_run = hook_dry_run,
    };
    if (receiver_server_start(&listen, &settings, &hooks, &st.server, &err)) {
        medic_log_error("cannot start the http server", "error", err.msg, NULL);
        goto out;
    }
    if (!settings.webhook_auth.bearer_token && !settings.webhook_auth.basic_username)
        medic_log_warn("the webhook accepts unauthenticated requests; set "
                       "auth.webhook_bearer_token_file",
                       NULL);
    char policies[24];
    snprintf(policies, sizeof(policies), "%zu", st.config.policies.count);
    medic_log_info("medic serve started", "policies", policies, "listen", st.config.listen, "tls",
                   st.config.tls_cert_pem ? "on" : "off", "audit", st.config.audit_path, "mode",
                   st.config.mode == MEDIC_MODE_LIVE ? "live" : "dry-run", "config",
                   st.config.source, "version", medic_version, NULL);
    char model_hash[13];
    snprintf(model_hash, sizeof(model_hash), "%.12s", st.config.model.hash);
    medic_log_info("risk model", "model", st.config.model_path ? st.config.model_path : "built-in",
                   "sha256", model_hash, "scoring",
                   st.config.prometheus_url ? st.config.prometheus_url
                                            : "off (no prometheus.url configured)",
                   NULL);
    for (;;) {
        int sig = 0;
        if (sigwait(&signals, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            medic_log_info("SIGHUP: reloading the configuration", NULL);
            hook_reload(&st, &err);
            continue;
        }
        medic_log_info("shutting down: draining requests in flight", "signal",
                       sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
        break;
    }
    status = 0;
out:
    receiver_server_stop(st.server, 10000);
    serve_fleet_stop(st.fleet);
    serve_engine_stop(st.engine);
    serve_actions_stop(st.actions);
    audit_store_free(st.store);
    if (status == 0)
        medic_log_info("stopped; audit log closed", NULL);
    pthread_mutex_destroy(&st.lock);
    medic_config_release(&st.config);
    return status;
}

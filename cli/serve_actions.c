#include "serve_actions.h"
#include "agent_client.h"
#include "executor.h"
#include "ipmi.h"
#include "slurm.h"
#include "log.h"
#include "notify.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTION_THREADS 4
#define ACTION_QUEUE 1024

struct serve_actions {
    struct audit_store *store;
    pthread_mutex_t *config_lock;
    const struct medic_config *config;
    struct executor *executor;
};

static int hook_intent(void *ctx, const struct executor_job *job, int64_t *intent_id,
                       struct medic_error *err)
{
    struct serve_actions *a = ctx;
    struct audit_action_in in = {.created_at = medic_time_now(),
                                 .decision_id = job->decision_id,
                                 .action = job->action,
                                 .node = job->node[0] ? job->node : NULL,
                                 .target = job->node[0] ? job->node : NULL,
                                 .params_json = job->params,
                                 .result = "pending",
                                 .duration_ms = -1};
    return audit_record_action(a->store, &in, intent_id, err);
}

static void hook_outcome(void *ctx, const struct executor_job *job, int64_t intent_id,
                         enum executor_result result, int64_t duration_ms, const char *detail)
{
    struct serve_actions *a = ctx;
    struct medic_error err = {0};
    struct audit_action_in in = {.created_at = medic_time_now(),
                                 .decision_id = job->decision_id,
                                 .intent_id = intent_id,
                                 .action = job->action,
                                 .node = job->node[0] ? job->node : NULL,
                                 .target = job->node[0] ? job->node : NULL,
                                 .params_json = job->params,
                                 .result = executor_result_name(result),
                                 .duration_ms = duration_ms,
                                 .detail = detail && *detail ? detail : NULL};
    if (audit_record_action(a->store, &in, NULL, &err))
        medic_log_error("cannot record an action outcome", "error", err.msg, NULL);
    medic_log_info("action finished", "action", job->action, "node", job->node, "result",
                   executor_result_name(result), "detail", detail, NULL);
}

/* Copies of what a notify needs, so that the configuration lock is held
 * only while copying. */
struct notify_copy {
    struct notify_target target;
    char url[1024], from[256], to[16][256], routing_key[256], username[256], password[256],
        token[512];
    const char *to_ptrs[16];
};

static void copy_text(char *to, size_t size, const char *from)
{
    snprintf(to, size, "%s", from ? from : "");
}

static int find_notifier(struct serve_actions *a, const char *name, struct notify_copy *c,
                         char *detail, size_t size)
{
    int found = 0;
    memset(c, 0, sizeof(*c));
    pthread_mutex_lock(a->config_lock);
    for (size_t i = 0; i < a->config->notifier_count && !found; i++) {
        const struct medic_notifier *n = &a->config->notifiers[i];
        if (strcmp(n->name, name) != 0)
            continue;
        found = 1;
        c->target.kind = (enum notify_kind)n->type;
        copy_text(c->url, sizeof(c->url), n->url);
        copy_text(c->from, sizeof(c->from), n->from);
        copy_text(c->routing_key, sizeof(c->routing_key), n->routing_key);
        for (size_t k = 0; k < n->to_count && k < 16; k++) {
            copy_text(c->to[k], sizeof(c->to[k]), n->to[k]);
            c->to_ptrs[k] = c->to[k];
        }
        c->target.to_count = n->to_count;
        const struct credential *cred = credentials_find(&a->config->credentials, n->credentials);
        if (cred) {
            copy_text(c->username, sizeof(c->username), cred->username);
            copy_text(c->password, sizeof(c->password), cred->password);
            copy_text(c->token, sizeof(c->token), cred->token);
            if (n->type == MEDIC_NOTIFIER_PAGERDUTY && !n->routing_key)
                copy_text(c->routing_key, sizeof(c->routing_key), cred->token);
        }
    }
    pthread_mutex_unlock(a->config_lock);
    if (!found) {
        snprintf(detail, size, "notifier '%s' is not configured (removed by a reload?)", name);
        return -1;
    }
    c->target.url = c->url;
    c->target.from = c->from[0] ? c->from : NULL;
    c->target.to = c->to_ptrs;
    c->target.routing_key = c->routing_key[0] ? c->routing_key : NULL;
    c->target.username = c->username[0] ? c->username : NULL;
    c->target.password = c->password[0] ? c->password : NULL;
    c->target.token = c->token[0] && c->target.kind != NOTIFY_PAGERDUTY ? c->token : NULL;
    return 0;
}

static enum executor_result run_notify(struct serve_actions *a, const struct executor_job *job,
                                       char *detail, size_t size)
{
    cJSON *params = cJSON_Parse(job->params);
    const cJSON *notifier = cJSON_GetObjectItemCaseSensitive(params, "notifier");
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(params, "message");
    enum executor_result r = EXECUTOR_FAILED;
    struct notify_copy *c = malloc(sizeof(*c));
    if (!c || !cJSON_IsString(notifier)) {
        snprintf(detail, size, "%s", c ? "the decision names no notifier" : "out of memory");
    } else if (find_notifier(a, notifier->valuestring, c, detail, size) == 0) {
        struct notify_message m = {.decision_id = job->decision_id,
                                   .time = medic_time_now(),
                                   .node = job->node,
                                   .alertname = job->alertname,
                                   .policy = job->policy,
                                   .reason = job->reason,
                                   .text = cJSON_IsString(message) ? message->valuestring : NULL};
        struct medic_error err = {0};
        if (notify_send(&c->target, &m, NULL, &err) == 0) {
            snprintf(detail, size, "sent to notifier '%s'", notifier->valuestring);
            r = EXECUTOR_SUCCEEDED;
        } else {
            snprintf(detail, size, "notifier '%s': %s", notifier->valuestring, err.msg);
            r = strstr(err.msg, "Timeout") || strstr(err.msg, "timed out") ? EXECUTOR_TIMED_OUT
                                                                           : EXECUTOR_FAILED;
        }
        memset(c, 0, sizeof(*c)); /* secrets */
    }
    free(c);
    cJSON_Delete(params);
    return r;
}

/* The BMC of an inventory node, copied under the configuration lock. */
struct bmc_copy {
    struct ipmi_target target;
    char address[256], username[256], password[256];
};

static int find_bmc(struct serve_actions *a, const char *node, struct bmc_copy *b, char *detail,
                    size_t size)
{
    int rc = -1;
    memset(b, 0, sizeof(*b));
    pthread_mutex_lock(a->config_lock);
    const struct inventory_node *n = inventory_find(&a->config->inventory, node);
    const struct credential *cred =
        n && n->has_bmc ? credentials_find(&a->config->credentials, n->bmc.credentials) : NULL;
    struct medic_error err = {0};
    if (!n)
        snprintf(detail, size, "node '%s' is not in the inventory", node);
    else if (!n->has_bmc)
        snprintf(detail, size, "node '%s' has no bmc in the inventory", node);
    else if (!cred || !cred->username || !cred->password)
        snprintf(detail, size, "no username and password for bmc credentials '%s'",
                 n->bmc.credentials);
    else if (ipmi_workaround_flags((const char *const *)n->bmc.workarounds, n->bmc.workaround_count,
                                   strcmp(n->bmc.driver, "lan") != 0, &b->target.workarounds, &err))
        snprintf(detail, size, "%s", err.msg);
    else {
        copy_text(b->address, sizeof(b->address), n->bmc.address);
        copy_text(b->username, sizeof(b->username), cred->username);
        copy_text(b->password, sizeof(b->password), cred->password);
        b->target.address = b->address;
        b->target.username = b->username;
        b->target.password = b->password;
        b->target.lan_2_0 = strcmp(n->bmc.driver, "lan") != 0;
        b->target.cipher_suite = n->bmc.cipher_suite;
        rc = 0;
    }
    pthread_mutex_unlock(a->config_lock);
    return rc;
}

static enum executor_result run_power_cycle(struct serve_actions *a, const struct executor_job *job,
                                            char *detail, size_t size)
{
    struct bmc_copy *b = malloc(sizeof(*b));
    enum executor_result r = EXECUTOR_FAILED;
    if (!b) {
        snprintf(detail, size, "out of memory");
        return r;
    }
    if (find_bmc(a, job->node, b, detail, size) == 0) {
        cJSON *params = cJSON_Parse(job->params);
        int power_on = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(params, "power_on"));
        cJSON_Delete(params);
        struct ipmi_options o;
        ipmi_options_default(&o);
        switch (ipmi_power_cycle(&b->target, power_on, &o, detail, size)) {
        case IPMI_DONE:
            r = EXECUTOR_SUCCEEDED;
            break;
        case IPMI_TIMED_OUT:
            r = EXECUTOR_TIMED_OUT;
            break;
        default:
            r = EXECUTOR_FAILED;
        }
    }
    memset(b, 0, sizeof(*b)); /* secrets */
    free(b);
    return r;
}

static enum executor_result run_slurm(struct serve_actions *a, const struct executor_job *job,
                                      int drain, char *detail, size_t size)
{
    char node[256] = "", conf[4096] = "", scontrol[4096] = "scontrol";
    pthread_mutex_lock(a->config_lock);
    const struct inventory_node *n = inventory_find(&a->config->inventory, job->node);
    if (n && n->slurm_node)
        copy_text(node, sizeof(node), n->slurm_node);
    if (a->config->slurm_conf)
        copy_text(conf, sizeof(conf), a->config->slurm_conf);
    if (a->config->scontrol)
        copy_text(scontrol, sizeof(scontrol), a->config->scontrol);
    pthread_mutex_unlock(a->config_lock);
    if (!node[0]) {
        snprintf(detail, size, "node '%s' has no slurm node in the inventory", job->node);
        return EXECUTOR_FAILED;
    }
    struct slurm_options o;
    slurm_options_default(&o);
    o.scontrol = scontrol;
    o.slurm_conf = conf[0] ? conf : NULL;
    enum slurm_outcome r;
    if (drain) {
        cJSON *params = cJSON_Parse(job->params);
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(params, "reason");
        r = slurm_drain(&o, node, cJSON_IsString(reason) ? reason->valuestring : NULL, detail,
                        size);
        cJSON_Delete(params);
    } else {
        r = slurm_resume(&o, node, detail, size);
    }
    return r == SLURM_DONE ? EXECUTOR_SUCCEEDED
                           : (r == SLURM_TIMED_OUT ? EXECUTOR_TIMED_OUT : EXECUTOR_FAILED);
}

static enum executor_result run_power_limit(struct serve_actions *a, const struct executor_job *job,
                                            int restore, char *detail, size_t size)
{
    char url[1024] = "", token[512] = "";
    int missing_token = 0;
    pthread_mutex_lock(a->config_lock);
    const struct inventory_node *n = inventory_find(&a->config->inventory, job->node);
    if (n && n->agent_url) {
        copy_text(url, sizeof(url), n->agent_url);
        const struct credential *cred =
            credentials_find(&a->config->credentials, n->agent_credentials);
        if (cred && cred->token)
            copy_text(token, sizeof(token), cred->token);
        else
            missing_token = 1;
    }
    pthread_mutex_unlock(a->config_lock);
    if (!url[0]) {
        snprintf(detail, size, "node '%s' has no agent in the inventory", job->node);
        return EXECUTOR_FAILED;
    }
    if (missing_token) {
        snprintf(detail, size, "no token for the agent of node '%s' in the credentials file",
                 job->node);
        return EXECUTOR_FAILED;
    }
    enum agent_outcome r;
    if (restore) {
        r = agent_restore(url, token, 10000, detail, size);
    } else {
        cJSON *params = cJSON_Parse(job->params);
        const cJSON *watts = cJSON_GetObjectItemCaseSensitive(params, "watts");
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(params, "gpus"), *g;
        int gpus[64];
        size_t count = 0;
        cJSON_ArrayForEach(g, list)
        {
            if (cJSON_IsNumber(g) && count < 64)
                gpus[count++] = g->valueint;
        }
        r = cJSON_IsNumber(watts)
                ? agent_power_limit(url, token, gpus, count, watts->valueint, 10000, detail, size)
                : AGENT_FAILED;
        if (!cJSON_IsNumber(watts))
            snprintf(detail, size, "the decision has no watts");
        cJSON_Delete(params);
    }
    memset(token, 0, sizeof(token));
    return r == AGENT_DONE ? EXECUTOR_SUCCEEDED
                           : (r == AGENT_TIMED_OUT ? EXECUTOR_TIMED_OUT : EXECUTOR_FAILED);
}

static enum executor_result hook_run(void *ctx, const struct executor_job *job, char *detail,
                                     size_t size)
{
    struct serve_actions *a = ctx;
    if (strcmp(job->action, "notify") == 0)
        return run_notify(a, job, detail, size);
    if (strcmp(job->action, "ipmi_power_cycle") == 0)
        return run_power_cycle(a, job, detail, size);
    if (strcmp(job->action, "drain") == 0 || strcmp(job->action, "resume") == 0)
        return run_slurm(a, job, strcmp(job->action, "drain") == 0, detail, size);
    if (strcmp(job->action, "power_limit") == 0 || strcmp(job->action, "restore_power_limit") == 0)
        return run_power_limit(a, job, strcmp(job->action, "restore_power_limit") == 0, detail,
                               size);
    /* live mode refuses policies with actions this build cannot run, so
     * this is reached only if a reload raced a decision */
    snprintf(detail, size, "%s cannot be executed by this build", job->action);
    return EXECUTOR_FAILED;
}

struct interrupt_ctx {
    struct serve_actions *a;
    int count;
};

static int interrupt_one(void *arg, int64_t intent_id, int64_t decision_id, const char *action,
                         const char *node)
{
    struct interrupt_ctx *ic = arg;
    struct medic_error err = {0};
    struct audit_action_in in = {
        .created_at = medic_time_now(),
        .decision_id = decision_id,
        .intent_id = intent_id,
        .action = action,
        .node = node,
        .target = node,
        .result = "interrupted",
        .duration_ms = -1,
        .detail = "medic stopped while the action ran; it is not run again: check the node"};
    ic->count++;
    return audit_record_action(ic->a->store, &in, NULL, &err);
}

int serve_actions_start(struct audit_store *store, const char *db_path,
                        pthread_mutex_t *config_lock, const struct medic_config *config,
                        struct serve_actions **out, struct medic_error *err)
{
    struct serve_actions *a = calloc(1, sizeof(*a));
    if (!a)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    a->store = store;
    a->config_lock = config_lock;
    a->config = config;
    notify_global_init();
    /* intents a crash left open become interrupted, never run again */
    struct audit_reader *reader = NULL;
    struct interrupt_ctx ic = {a, 0};
    int rc = audit_reader_open(db_path, &reader, err);
    if (rc == 0)
        rc = audit_open_intents(reader, interrupt_one, &ic, err);
    audit_reader_free(reader);
    if (ic.count) {
        char n[16];
        snprintf(n, sizeof(n), "%d", ic.count);
        medic_log_warn("actions left running by a previous medic are marked interrupted", "count",
                       n, NULL);
    }
    struct executor_hooks hooks = {a, hook_intent, hook_run, hook_outcome};
    if (rc == 0)
        rc = executor_start(ACTION_THREADS, ACTION_QUEUE, &hooks, &a->executor, err);
    if (rc) {
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void serve_actions_execute(struct serve_actions *a, const struct engine_decision *d,
                           int64_t decision_id)
{
    struct executor_job job = {.decision_id = decision_id};
    copy_text(job.action, sizeof(job.action), policy_action_name(d->action));
    copy_text(job.node, sizeof(job.node), d->node);
    copy_text(job.policy, sizeof(job.policy), d->policy);
    copy_text(job.alertname, sizeof(job.alertname), d->alertname);
    copy_text(job.reason, sizeof(job.reason), d->reason);
    copy_text(job.params, sizeof(job.params), d->params);
    if (executor_submit(a->executor, &job) == 0)
        return;
    /* the decision stays visible as an action that failed to start */
    struct medic_error err = {0};
    int64_t intent = 0;
    if (hook_intent(a, &job, &intent, &err) == 0)
        hook_outcome(a, &job, intent, EXECUTOR_FAILED, 0, "the action queue is full");
}

void serve_actions_metrics(struct serve_actions *a, struct medic_buf *b)
{
    struct executor_stats s;
    executor_stats(a->executor, &s);
    medic_buf_printf(b,
                     "# HELP medic_actions_queued Actions waiting for a worker.\n"
                     "# TYPE medic_actions_queued gauge\n"
                     "medic_actions_queued %zu\n"
                     "# HELP medic_actions_in_flight Actions running.\n"
                     "# TYPE medic_actions_in_flight gauge\n"
                     "medic_actions_in_flight %zu\n"
                     "# HELP medic_actions_total Actions finished, by action and result.\n"
                     "# TYPE medic_actions_total counter\n",
                     s.queued, s.in_flight);
    for (size_t i = 0; i < EXECUTOR_ACTIONS; i++)
        for (int r = 0; r < 3; r++)
            if (s.results[i][r] || i + 1 < EXECUTOR_ACTIONS)
                medic_buf_printf(b, "medic_actions_total{action=\"%s\",result=\"%s\"} %llu\n",
                                 executor_action_names[i],
                                 executor_result_name((enum executor_result)r),
                                 (unsigned long long)s.results[i][r]);
    medic_buf_printf(b,
                     "# HELP medic_actions_rejected_total Actions not started (queue full or "
                     "intent refused).\n"
                     "# TYPE medic_actions_rejected_total counter\n"
                     "medic_actions_rejected_total %llu\n",
                     (unsigned long long)s.rejected);
}

void serve_actions_stop(struct serve_actions *a)
{
    if (!a)
        return;
    executor_stop(a->executor);
    free(a);
}

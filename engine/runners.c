/* SPDX-License-Identifier: Apache-2.0 */
/* The runners: a job's typed parameters in, one outcome out, each through
 * its transport (libcurl for notifiers and the agent, FreeIPMI for the
 * BMC, scontrol for Slurm), within that transport's hard timeouts. */
#include "engine_runners.h"
#include "agent_client.h"
#include "ipmi.h"
#include "notify.h"
#include "slurm.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum medic_outcome engine_run_notify(const struct medic_config *c, const struct executor_job *job,
                                     const struct notify_options *options, char *detail,
                                     size_t size)
{
    const char *name = job->action.u.notify.notifier;
    const struct medic_notifier *n = NULL;
    for (size_t i = 0; name && i < c->notifier_count && !n; i++)
        if (strcmp(c->notifiers[i].name, name) == 0)
            n = &c->notifiers[i];
    if (!n) {
        snprintf(detail, size, "notifier '%s' is not configured (removed by a reload?)",
                 name ? name : "");
        return MEDIC_OUTCOME_REFUSED;
    }
    const struct credential *cred = credentials_find(&c->credentials, n->credentials);
    struct notify_target t = {
        .kind = (enum notify_kind)n->type,
        .url = n->url,
        .from = n->from,
        .to = (const char *const *)n->to,
        .to_count = n->to_count,
        .routing_key = n->routing_key,
    };
    if (cred) {
        t.username = cred->username;
        t.password = cred->password;
        if (!t.url)
            t.url = cred->url; /* a secret URL kept out of medic.yaml */
        if (n->type == MEDIC_NOTIFIER_PAGERDUTY && !n->routing_key)
            t.routing_key = cred->routing_key ? cred->routing_key : cred->token;
        else if (n->type != MEDIC_NOTIFIER_PAGERDUTY)
            t.token = cred->token;
    }
    struct notify_message m = {.decision_id = job->decision_id,
                               .time = medic_time_now(),
                               .node = job->node,
                               .alertname = job->alertname,
                               .policy = job->policy,
                               .reason = job->reason,
                               .text = job->action.u.notify.message};
    struct medic_error err = {0};
    enum medic_outcome r = notify_send(&t, &m, options, &err);
    if (r == MEDIC_OUTCOME_SUCCEEDED)
        snprintf(detail, size, "sent to notifier '%s'", name);
    else
        snprintf(detail, size, "notifier '%s': %s", name, err.msg);
    return r;
}

void engine_slurm_options(const struct medic_config *c, struct slurm_options *o)
{
    slurm_options_default(o);
    o->scontrol = c->scontrol ? c->scontrol : "scontrol";
    o->slurm_conf = c->slurm_conf;
}

/* A step after its incident's drain runs only while the node is still
 * drained, with no job left: succeeded when it is, else the refusal (or
 * timed_out) that says why the step (what) is not run. */
static enum medic_outcome still_drained(const struct medic_config *c,
                                        const struct executor_job *job,
                                        const struct inventory_node *n, const char *what,
                                        char *detail, size_t size)
{
    if (!job->require_drained)
        return MEDIC_OUTCOME_SUCCEEDED;
    if (!n->slurm_node) {
        snprintf(detail, size, "node '%s' has no slurm node to check its drain; the %s is not run",
                 job->node, what);
        return MEDIC_OUTCOME_REFUSED;
    }
    struct slurm_options so;
    engine_slurm_options(c, &so);
    enum medic_outcome check = slurm_check_drained(&so, n->slurm_node, detail, size);
    if (check == MEDIC_OUTCOME_SUCCEEDED)
        return check;
    size_t at = strlen(detail);
    snprintf(detail + at, size - at, "; the %s is not run", what);
    return check == MEDIC_OUTCOME_TIMED_OUT ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_REFUSED;
}

/* A GPU of the step (index) the node has, by the inventory's gpus (not
 * said: any); else detail says it is not there. */
static int gpu_on_node(const struct inventory_node *n, int index, const char *node, char *detail,
                       size_t size)
{
    if (n->gpus <= 0 || index < n->gpus)
        return 1;
    snprintf(detail, size, "GPU %d is not on node '%s': the inventory gives it %d GPU(s)", index,
             node, n->gpus);
    return 0;
}

int engine_ipmi_target(const struct medic_config *c, const struct inventory_node *n,
                       struct ipmi_target *t, char *detail, size_t size)
{
    const struct credential *cred = credentials_find(&c->credentials, n->bmc.credentials);
    struct medic_error err = {0};
    if (!n->has_bmc) {
        snprintf(detail, size, "node '%s' has no bmc in the inventory", n->name);
        return -1;
    }
    if (!cred || !cred->username || !cred->password) {
        snprintf(detail, size, "no username and password for bmc credentials '%s'",
                 n->bmc.credentials);
        return -1;
    }
    t->lan_2_0 = strcmp(n->bmc.driver, "lan") != 0;
    if (ipmi_workaround_flags((const char *const *)n->bmc.workarounds, n->bmc.workaround_count,
                              t->lan_2_0, &t->workarounds, &err)) {
        snprintf(detail, size, "%s", err.msg);
        return -1;
    }
    t->address = n->bmc.address;
    t->username = cred->username;
    t->password = cred->password;
    t->cipher_suite = n->bmc.cipher_suite;
    return 0;
}

static enum medic_outcome run_power_cycle(const struct medic_config *c,
                                          const struct executor_job *job,
                                          const struct action_fence *fence, char *detail,
                                          size_t size)
{
    const struct inventory_node *n = inventory_find(&c->inventory, job->node);
    struct ipmi_target t = {0};
    if (!n) {
        snprintf(detail, size, "node '%s' is not in the inventory", job->node);
        return MEDIC_OUTCOME_REFUSED;
    }
    if (engine_ipmi_target(c, n, &t, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    enum medic_outcome drained = still_drained(c, job, n, "power cycle", detail, size);
    if (drained != MEDIC_OUTCOME_SUCCEEDED)
        return drained;
    struct ipmi_options o;
    ipmi_options_default(&o);
    o.fence = fence;
    return ipmi_power_cycle(&t, job->action.u.ipmi_power_cycle.power_on, &o, detail, size);
}

static enum medic_outcome run_slurm(const struct medic_config *c, const struct executor_job *job,
                                    const struct action_fence *fence, char *detail, size_t size)
{
    const struct inventory_node *n = inventory_find(&c->inventory, job->node);
    if (!n || !n->slurm_node) {
        snprintf(detail, size, "node '%s' has no slurm node in the inventory", job->node);
        return MEDIC_OUTCOME_REFUSED;
    }
    struct slurm_options o;
    engine_slurm_options(c, &o);
    o.fence = fence;
    if (job->action.kind == MEDIC_ACTION_DRAIN)
        return slurm_drain(&o, n->slurm_node, job->action.u.drain.reason, detail, size);
    return slurm_resume(&o, n->slurm_node, job->action.u.resume.drained_as, detail, size);
}

static int stop_waiting(void *arg, int64_t ms)
{
    return executor_wait(arg, ms);
}

static enum medic_outcome run_slurm_reboot(const struct engine_run_context *rc,
                                           const struct executor_job *job, char *detail,
                                           size_t size)
{
    const struct inventory_node *n = inventory_find(&rc->config->inventory, job->node);
    if (!n || !n->slurm_node) {
        snprintf(detail, size, "node '%s' has no slurm node in the inventory", job->node);
        return MEDIC_OUTCOME_REFUSED;
    }
    struct slurm_options o;
    engine_slurm_options(rc->config, &o);
    o.fence = rc->fence;
    return slurm_reboot(&o, n->slurm_node, job->action.u.slurm_reboot.within, stop_waiting,
                        rc->waiter, detail, size);
}

/* The agent of node n and its token; refused (detail) when either is missing. */
const struct credential *engine_agent_of(const struct medic_config *c,
                                         const struct inventory_node *n, const char *node,
                                         char *detail, size_t size)
{
    if (!n || !n->agent_url) {
        snprintf(detail, size, "node '%s' has no agent in the inventory", node);
        return NULL;
    }
    const struct credential *cred = credentials_find(&c->credentials, n->agent_credentials);
    if (!cred || !cred->token) {
        snprintf(detail, size, "no token for the agent of node '%s' in the credentials file", node);
        return NULL;
    }
    return cred;
}

static enum medic_outcome run_power_limit(const struct medic_config *c,
                                          const struct executor_job *job,
                                          const struct action_fence *fence, char *detail,
                                          size_t size)
{
    const struct inventory_node *n = inventory_find(&c->inventory, job->node);
    const struct credential *cred = engine_agent_of(c, n, job->node, detail, size);
    if (!cred)
        return MEDIC_OUTCOME_REFUSED;
    if (job->action.kind == MEDIC_ACTION_RESTORE_POWER_LIMIT)
        return agent_restore(n->agent_url, cred->token, 10000, detail, size);
    const struct medic_gpu_list *g = &job->action.u.power_limit.gpus;
    if (g->from_alert && g->count == 0) {
        snprintf(detail, size,
                 "the alert names no GPU (no numeric `gpu` label): `gpus: alert` cannot tell "
                 "which GPU to limit, and never limits them all");
        return MEDIC_OUTCOME_REFUSED;
    }
    for (size_t i = 0; i < g->count; i++)
        if (!gpu_on_node(n, g->items[i], job->node, detail, size))
            return MEDIC_OUTCOME_REFUSED;
    if (action_fenced(fence, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    return agent_power_limit(n->agent_url, cred->token, g->items, g->count,
                             job->action.u.power_limit.watts, 10000, detail, size);
}

/* The GPU of the alert: its index from the `gpu` label, bounded by the
 * inventory's gpus, and its UUID from the `UUID` label. */
static enum medic_outcome run_gpu_reset(const struct medic_config *c,
                                        const struct executor_job *job,
                                        const struct action_fence *fence, char *detail, size_t size)
{
    const struct inventory_node *n = inventory_find(&c->inventory, job->node);
    const struct credential *cred = engine_agent_of(c, n, job->node, detail, size);
    if (!cred)
        return MEDIC_OUTCOME_REFUSED;
    const char *gpu = job->action.u.gpu_reset.gpu, *uuid = job->action.u.gpu_reset.uuid;
    int index = medic_gpu_index(gpu);
    if (index < 0) {
        snprintf(detail, size,
                 "the alert names no GPU index (its `gpu` label is %s%s%s): gpu_reset cannot "
                 "tell which GPU to reset",
                 gpu ? "'" : "missing", gpu ? gpu : "", gpu ? "'" : "");
        return MEDIC_OUTCOME_REFUSED;
    }
    if (!gpu_on_node(n, index, job->node, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    enum medic_outcome drained = still_drained(c, job, n, "GPU reset", detail, size);
    if (drained != MEDIC_OUTCOME_SUCCEEDED)
        return drained;
    if (action_fenced(fence, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    /* the agent's own bound on nvidia-smi is 120 s: a little more here */
    return agent_gpu_reset(n->agent_url, cred->token, index, uuid, 150000, detail, size);
}

/* What the verify read of the agent: the health report (NULL: none). */
struct agent_read {
    const char *json;
    size_t len;
};

/* Evidence of the repair after a power cycle or a Slurm reboot (a
 * restart) at booted_after (RFC 3339):
 * Slurm says the node booted (or its slurmd started) in a later second, or
 * the agent says the node booted later. 1 seen, 0 not (detail says what
 * was read). No source of evidence is no evidence: never a pass. */
static int booted_since(const struct medic_config *c, const struct inventory_node *n,
                        const struct agent_read *agent, const char *booted_after, char *detail,
                        size_t size)
{
    int64_t after = 0, started = 0;
    if (medic_time_parse_rfc3339(booted_after, strlen(booted_after), &after)) {
        snprintf(detail, size, "boot: the restart's time '%s' cannot be read", booted_after);
        return 0;
    }
    char read[300] = "", from_agent[300] = "";
    int seen = 0;
    if (n->slurm_node) {
        struct slurm_options so;
        engine_slurm_options(c, &so);
        /* Slurm's times have whole seconds: a later second than the cycle's */
        seen = slurm_node_started(&so, n->slurm_node, &started, read, sizeof(read)) == 0 &&
               started / MEDIC_NS_PER_SEC > after / MEDIC_NS_PER_SEC;
    }
    if (!seen && agent->json)
        seen = agent_health_after(agent->json, agent->len, -1, after, from_agent,
                                  sizeof(from_agent)) == 1;
    if (!n->slurm_node && !agent->json) {
        snprintf(detail, size,
                 "boot: no evidence that the node booted after the restart at %s (the "
                 "inventory gives it no slurm node or agent to ask)",
                 booted_after);
        return 0;
    }
    snprintf(detail, size, "boot: %s the restart at %s (%s%s%s)", seen ? "after" : "none since",
             booted_after, read, read[0] && from_agent[0] ? "; agent: " : "", from_agent);
    return seen;
}

/* Evidence of the repair after a GPU reset at reset_after: the agent says
 * the GPU was enumerated again later. 1 seen, 0 not. */
static int reset_since(const struct inventory_node *n, const struct agent_read *agent,
                       const char *reset_after, const char *gpu, char *detail, size_t size)
{
    int64_t after = 0;
    int index = medic_gpu_index(gpu);
    if (medic_time_parse_rfc3339(reset_after, strlen(reset_after), &after) || index < 0) {
        snprintf(detail, size, "reset: the GPU reset's time '%s' or GPU '%s' cannot be read",
                 reset_after, gpu ? gpu : "");
        return 0;
    }
    if (!agent->json) {
        snprintf(detail, size,
                 "reset: no evidence that GPU %d came back after its reset at %s (%s)", index,
                 reset_after,
                 n->agent_url ? "the agent's report was not read" : "the node has no agent");
        return 0;
    }
    char read[300];
    int seen = agent_health_after(agent->json, agent->len, index, after, read, sizeof(read)) == 1;
    snprintf(detail, size, "reset: %s", read);
    return seen;
}

/* One look at the node: 1 healthy, 0 not yet (detail says what). */
static int verify_round(const struct medic_config *c, const struct inventory_node *n,
                        const struct medic_action *v, char *detail, size_t size)
{
    char part[600];
    int healthy = 1;
    const struct medic_health_criteria *h = &c->policies.safety.health;
    struct medic_buf report;
    struct agent_read agent = {0};
    medic_buf_init(&report, AGENT_HEALTH_MAX);
    detail[0] = '\0';
    if (n->agent_url) {
        const struct credential *cred = engine_agent_of(c, n, n->name, part, sizeof(part));
        enum medic_outcome o =
            cred ? agent_health_read(n->agent_url, cred->token, 10000, &report, part, sizeof(part))
                 : MEDIC_OUTCOME_REFUSED;
        if (o == MEDIC_OUTCOME_SUCCEEDED) {
            agent.json = report.data ? report.data : "";
            agent.len = report.len;
            if (agent_health_judge(agent.json, agent.len, n->gpus, h, part, sizeof(part)) != 1)
                o = MEDIC_OUTCOME_FAILED;
        }
        healthy &= o == MEDIC_OUTCOME_SUCCEEDED;
        size_t at = strlen(detail);
        snprintf(detail + at, size - at, "agent: %s", part);
    }
    if (n->slurm_node && h->slurm) {
        struct slurm_options so;
        char state[128], reason[300];
        engine_slurm_options(c, &so);
        int read = slurm_read_node(&so, n->slurm_node, state, sizeof(state), reason, sizeof(reason),
                                   part, sizeof(part));
        int up = read == 0 && !strstr(state, "DOWN") && !strstr(state, "NOT_RESPONDING") &&
                 !strstr(state, "FAIL") && !strchr(state, '*');
        healthy &= up;
        size_t at = strlen(detail);
        snprintf(detail + at, size - at, "%sslurm: %s%s", at ? "; " : "", read ? part : state,
                 read || up ? "" : " (not responding)");
    }
    if (n->has_bmc && h->bmc) {
        struct ipmi_target t = {0};
        int power = engine_ipmi_target(c, n, &t, part, sizeof(part)) == 0 ? -2 : -1;
        if (power == -2) {
            struct ipmi_options o;
            ipmi_options_default(&o);
            power = ipmi_power_state(&t, &o, part, sizeof(part));
        }
        healthy &= power == 1;
        size_t at = strlen(detail);
        snprintf(detail + at, size - at, "%sbmc: %s", at ? "; " : "",
                 power == 1   ? "power on"
                 : power == 0 ? "power off"
                              : part);
    }
    const char *booted_after = v->u.verify.booted_after, *reset_after = v->u.verify.reset_after;
    if (booted_after) {
        healthy &= booted_since(c, n, &agent, booted_after, part, sizeof(part));
        size_t at = strlen(detail);
        snprintf(detail + at, size - at, "%s%s", at ? "; " : "", part);
    }
    if (reset_after) {
        healthy &= reset_since(n, &agent, reset_after, v->u.verify.reset_gpu, part, sizeof(part));
        size_t at = strlen(detail);
        snprintf(detail + at, size - at, "%s%s", at ? "; " : "", part);
    }
    if (!booted_after && !reset_after && !n->agent_url && !(n->slurm_node && h->slurm) &&
        !(n->has_bmc && h->bmc))
        snprintf(detail, size,
                 "nothing to check: the inventory gives node '%s' no agent, slurm "
                 "node or bmc (or safety.health turns their checks off)",
                 n->name);
    medic_buf_release(&report);
    return healthy;
}

/* Looks at the node until it is healthy or the time is up. */
static enum medic_outcome run_verify(const struct engine_run_context *rc,
                                     const struct executor_job *job, char *detail, size_t size)
{
    const struct inventory_node *n = inventory_find(&rc->config->inventory, job->node);
    if (!n) {
        snprintf(detail, size, "node '%s' is not in the inventory", job->node);
        return MEDIC_OUTCOME_REFUSED;
    }
    int64_t within = (int64_t)job->action.u.verify.within * 1000;
    int64_t pause = within / 20 < 1000 ? 1000 : within / 20 > 15000 ? 15000 : within / 20;
    int64_t start = medic_time_monotonic(), checks = 0;
    for (;;) {
        char seen[1200];
        checks++;
        if (verify_round(rc->config, n, &job->action, seen, sizeof(seen))) {
            snprintf(detail, size, "healthy after %lld check(s): %s", (long long)checks, seen);
            return MEDIC_OUTCOME_SUCCEEDED;
        }
        int64_t spent = (medic_time_monotonic() - start) / MEDIC_NS_PER_MS;
        if (spent + pause > within) {
            snprintf(detail, size, "not healthy within %llds (%lld checks); last: %s",
                     (long long)(within / 1000), (long long)checks, seen);
            return MEDIC_OUTCOME_FAILED;
        }
        if (executor_wait(rc->waiter, pause)) {
            snprintf(detail, size, "medic stopped before the node passed; last: %s", seen);
            return MEDIC_OUTCOME_INTERRUPTED;
        }
    }
}

enum medic_outcome engine_run_action(const struct engine_run_context *rc,
                                     const struct executor_job *job, char *detail, size_t size)
{
    const struct medic_config *c = rc->config;
    switch (job->action.kind) {
    case MEDIC_ACTION_NOTIFY:
        return engine_run_notify(c, job, NULL, detail, size);
    case MEDIC_ACTION_IPMI_POWER_CYCLE:
        return run_power_cycle(c, job, rc->fence, detail, size);
    case MEDIC_ACTION_DRAIN:
    case MEDIC_ACTION_RESUME:
        return run_slurm(c, job, rc->fence, detail, size);
    case MEDIC_ACTION_POWER_LIMIT:
    case MEDIC_ACTION_RESTORE_POWER_LIMIT:
        return run_power_limit(c, job, rc->fence, detail, size);
    case MEDIC_ACTION_GPU_RESET:
        return run_gpu_reset(c, job, rc->fence, detail, size);
    case MEDIC_ACTION_VERIFY:
        return run_verify(rc, job, detail, size);
    case MEDIC_ACTION_SLURM_REBOOT:
        return run_slurm_reboot(rc, job, detail, size);
    case MEDIC_ACTION_KIND_COUNT:
        break;
    }
    MEDIC_BUG("an action of no kind");
    return MEDIC_OUTCOME_REFUSED;
}

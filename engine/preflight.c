/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_preflight.h"
#include "agent_client.h"
#include "buf.h"
#include "engine_runners.h"
#include "lock.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct run {
    const struct medic_config *config;
    struct preflight_report *report;
    struct medic_mutex lock;
    size_t next;
    int64_t deadline; /* monotonic */
};

/* The BMC: a session and the chassis status (the power state), nothing sent
 * to the chassis. */
static int check_bmc(const struct medic_config *c, const struct inventory_node *n, char *out,
                     size_t size)
{
    struct ipmi_target t = {0};
    char why[300];
    if (engine_ipmi_target(c, n, &t, why, sizeof(why))) {
        snprintf(out, size, "FAIL %s", why);
        return 0;
    }
    struct ipmi_options o;
    ipmi_options_default(&o);
    int power = ipmi_power_state(&t, &o, why, sizeof(why));
    if (power < 0)
        snprintf(out, size, "FAIL %s (the address, the credentials, the workarounds?)", why);
    else
        snprintf(out, size, "ok, chassis power %s", power ? "on" : "off");
    return power >= 0;
}

/* The agent: its health report, which needs the token. */
static int check_agent(const struct medic_config *c, const struct inventory_node *n, char *out,
                       size_t size)
{
    char why[300];
    const struct credential *cred = engine_agent_of(c, n, n->name, why, sizeof(why));
    if (!cred) {
        snprintf(out, size, "FAIL %s", why);
        return 0;
    }
    struct medic_buf b;
    medic_buf_init(&b, AGENT_HEALTH_MAX);
    enum medic_outcome r =
        agent_health_read(n->agent_url, cred->token, 10000, &b, why, sizeof(why));
    int ok = 0;
    if (r != MEDIC_OUTCOME_SUCCEEDED) {
        snprintf(out, size, "FAIL %s%s", why,
                 strstr(why, "HTTP 401") ? " (the token in the credentials is not the agent's)"
                                         : "");
    } else {
        cJSON *j = cJSON_ParseWithLength(b.data ? b.data : "", b.len);
        const cJSON *count = cJSON_GetObjectItemCaseSensitive(j, "gpu_count");
        const cJSON *driver = cJSON_GetObjectItemCaseSensitive(j, "driver_version");
        int gpus = cJSON_IsNumber(count) ? count->valueint : -1;
        ok = gpus >= 0 && (n->gpus <= 0 || gpus >= n->gpus);
        if (gpus < 0)
            snprintf(out, size, "FAIL %s answered, but not with a health report", n->agent_url);
        else if (!ok)
            snprintf(out, size, "FAIL %d of the inventory's %d GPU(s) visible, driver %.60s", gpus,
                     n->gpus, cJSON_IsString(driver) ? driver->valuestring : "unknown");
        else
            snprintf(out, size, "ok, %d GPU(s), driver %.60s", gpus,
                     cJSON_IsString(driver) ? driver->valuestring : "unknown");
        cJSON_Delete(j);
    }
    medic_buf_release(&b);
    return ok;
}

static int check_slurm(const struct medic_config *c, const struct inventory_node *n, char *out,
                       size_t size)
{
    struct slurm_options so;
    char state[128], reason[300], why[300];
    engine_slurm_options(c, &so);
    if (slurm_read_node(&so, n->slurm_node, state, sizeof(state), reason, sizeof(reason), why,
                        sizeof(why))) {
        snprintf(out, size, "FAIL %s", why);
        return 0;
    }
    snprintf(out, size, "ok, %s%s%.200s", state, reason[0] ? ", reason " : "", reason);
    return 1;
}

static void check_node(const struct medic_config *c, struct preflight_node *p)
{
    const struct inventory_node *n = p->node;
    int ok = 1;
    if (n->has_bmc)
        ok &= check_bmc(c, n, p->bmc, sizeof(p->bmc));
    if (n->agent_url)
        ok &= check_agent(c, n, p->agent, sizeof(p->agent));
    if (n->slurm_node)
        ok &= check_slurm(c, n, p->slurm, sizeof(p->slurm));
    p->result = ok ? PREFLIGHT_OK : PREFLIGHT_FAILED;
}

static void *worker(void *arg)
{
    struct run *r = arg;
    for (;;) {
        medic_mutex_lock(&r->lock);
        size_t i = r->next < r->report->count && medic_time_monotonic() < r->deadline
                       ? r->next++
                       : r->report->count;
        medic_mutex_unlock(&r->lock);
        if (i >= r->report->count)
            return NULL;
        check_node(r->config, &r->report->nodes[i]);
    }
}

/* The nodes to check, in inventory order. */
static int pick(const struct medic_config *c, const struct preflight_options *o,
                struct preflight_report *out, struct medic_error *err)
{
    const struct inventory *inv = &c->inventory;
    size_t want = o->nodes                              ? o->node_count
                  : o->sample && o->sample < inv->count ? o->sample
                                                        : inv->count;
    out->nodes = calloc(want ? want : 1, sizeof(*out->nodes));
    if (!out->nodes)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < want; i++) {
        const struct inventory_node *n =
            o->nodes ? inventory_find(inv, o->nodes[i]) : &inv->nodes[i * inv->count / want];
        if (!n)
            return medic_error_set(err, MEDIC_E_NOTFOUND,
                                   "node '%s' is not in the inventory (medic inventory list)",
                                   o->nodes[i]);
        out->nodes[out->count++].node = n;
        out->slurm_nodes += n->slurm_node != NULL;
    }
    return 0;
}

/* Whether a policy reboots nodes through Slurm. */
static int reboots_through_slurm(const struct medic_config *c)
{
    for (size_t i = 0; i < c->policies.count; i++)
        for (size_t k = 0; k < c->policies.items[i].step_count; k++)
            if (c->policies.items[i].steps[k].action.kind == MEDIC_ACTION_SLURM_REBOOT)
                return 1;
    return 0;
}

int engine_preflight(const struct medic_config *c, const struct preflight_options *o,
                     struct preflight_report *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    int64_t start = medic_time_monotonic();
    int rc = pick(c, o, out, err);
    if (rc)
        return rc;
    out->slurm_update = -2;
    if (out->slurm_nodes) {
        struct slurm_options so;
        engine_slurm_options(c, &so);
        out->slurm_update = slurm_may_update(&so, out->slurm_why, sizeof(out->slurm_why));
    }
    out->slurm_reboot = -2;
    if (out->slurm_nodes && reboots_through_slurm(c)) {
        struct slurm_options so;
        engine_slurm_options(c, &so);
        out->slurm_reboot = slurm_reboot_program(&so, out->reboot_why, sizeof(out->reboot_why));
    }
    struct run r = {.config = c, .report = out, .deadline = start + o->time_limit};
    medic_mutex_init(&r.lock, MEDIC_LOCK_PREFLIGHT);
    int jobs = o->jobs < 1 ? 1 : o->jobs > 64 ? 64 : o->jobs;
    pthread_t threads[64];
    int started = 0;
    for (; started < jobs && (size_t)started < out->count; started++)
        if (pthread_create(&threads[started], NULL, worker, &r))
            break;
    if (started == 0 && out->count)
        worker(&r);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    medic_mutex_destroy(&r.lock);
    out->took = medic_time_monotonic() - start;
    return 0;
}

int engine_preflight_passed(const struct preflight_report *r)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->nodes[i].result != PREFLIGHT_OK)
            return 0;
    return (r->slurm_update == 1 || r->slurm_update == -2) &&
           (r->slurm_reboot == 1 || r->slurm_reboot == -2);
}

void engine_preflight_release(struct preflight_report *r)
{
    free(r->nodes);
    memset(r, 0, sizeof(*r));
}

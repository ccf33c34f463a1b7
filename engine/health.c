/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_health.h"
#include "agent_client.h"
#include "engine_runners.h"
#include "log.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEALTH_READ_MS 1000
#define HEALTH_ROUND_MS 2000

void engine_health_begin(struct engine_health *h, const struct medic_config *config)
{
    memset(h, 0, sizeof(*h));
    h->config = config;
    for (size_t i = 0; i < config->policies.count; i++)
        h->enabled |= config->policies.items[i].recovery_mask != 0;
    h->deadline = medic_time_monotonic() + HEALTH_ROUND_MS * MEDIC_NS_PER_MS;
}

void engine_health_end(struct engine_health *h)
{
    free(h->nodes);
    memset(h, 0, sizeof(*h));
}

/* node's report, read once a round (count 0 when it could not be). */
static const struct engine_health_node *node_health(struct engine_health *h, const char *node)
{
    for (size_t i = 0; i < h->count; i++)
        if (strcmp(h->nodes[i].node, node) == 0)
            return &h->nodes[i];
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct engine_health_node *more = realloc(h->nodes, cap * sizeof(*more));
        if (!more)
            return NULL;
        h->nodes = more;
        h->cap = cap;
    }
    struct engine_health_node *x = &h->nodes[h->count++];
    memset(x, 0, sizeof(*x));
    snprintf(x->node, sizeof(x->node), "%s", node);
    const struct medic_config *c = h->config;
    const struct inventory_node *inv = inventory_find(&c->inventory, node);
    char why[300];
    const struct credential *cred = engine_agent_of(c, inv, node, why, sizeof(why));
    int64_t left = (h->deadline - medic_time_monotonic()) / MEDIC_NS_PER_MS;
    if (!cred || left <= 0)
        return x; /* no agent, or the round's time is spent: unknown */
    struct medic_buf b;
    medic_buf_init(&b, AGENT_HEALTH_MAX);
    if (agent_health_read(inv->agent_url, cred->token,
                          left < HEALTH_READ_MS ? left : HEALTH_READ_MS, &b, why,
                          sizeof(why)) != MEDIC_OUTCOME_SUCCEEDED ||
        agent_health_recovery(b.data ? b.data : "", b.len, x->codes, ENGINE_HEALTH_GPUS,
                              &x->count)) {
        x->count = 0;
        medic_log_warn("cannot read the GPUs' recovery actions: unknown this round", "node", node,
                       "error", why, NULL);
    }
    medic_buf_release(&b);
    return x;
}

void engine_health_alerts(struct engine_health *h, const struct medic_notification *n,
                          const char **out)
{
    for (size_t i = 0; i < n->alert_count; i++) {
        const struct medic_alert *a = &n->alerts[i];
        char node[128];
        out[i] = NULL;
        if (!h->enabled || a->status != MEDIC_STATUS_FIRING ||
            medic_alert_node(&a->labels, (const char *const *)h->config->node_labels,
                             h->config->node_label_count, node, sizeof(node)))
            continue;
        const struct inventory_node *inv = inventory_find(&h->config->inventory, node);
        const struct engine_health_node *x = inv ? node_health(h, inv->name) : NULL;
        if (!x || x->count == 0)
            continue;
        const char *gpu = medic_labels_get(&a->labels, "gpu");
        int index = medic_gpu_index(gpu), code = -1;
        if (index >= 0 && (size_t)index < x->count)
            code = x->codes[index];
        else if (!gpu) /* the node's: its first GPU with something to do, else none */
            for (size_t g = 0; g < x->count && code <= 0; g++)
                code = x->codes[g] > code ? x->codes[g] : code;
        out[i] = code >= 0 ? medic_recovery_names[code] : NULL;
    }
}

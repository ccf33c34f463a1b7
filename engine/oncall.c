/* SPDX-License-Identifier: Apache-2.0 */
/* What a replica tells on-call about itself, outside any decision: it
 * cannot record one while it does not lead (a replica whose clock is off
 * never leads). Sent once through safety.storm.notifier on a thread of its
 * own, so the caller (the lease's renewals) never waits on a notifier. */
#include "engine_oncall.h"
#include "engine_runners.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct notice {
    const struct medic_config *config; /* a reference of its own: it outlives a reload */
    char node[128];
    char message[1024];
};

static void *send_notice(void *arg)
{
    struct notice *n = arg;
    pthread_setname_np(pthread_self(), "medic-notice");
    const struct medic_config *c = n->config;
    const char *notifier = c->policies.safety.storm_notifier;
    if (notifier) {
        struct executor_job job;
        memset(&job, 0, sizeof(job));
        job.action.kind = MEDIC_ACTION_NOTIFY;
        job.action.u.notify.notifier = (char *)notifier;
        job.action.u.notify.message = n->message;
        snprintf(job.node, sizeof(job.node), "%s", n->node);
        snprintf(job.reason, sizeof(job.reason), "%.500s", n->message);
        char detail[600];
        enum medic_outcome o = engine_run_notify(c, &job, NULL, detail, sizeof(detail));
        medic_log_info("told on-call about this replica", "result", medic_outcome_name(o), "detail",
                       detail, NULL);
    } else {
        medic_log_warn("no safety.storm.notifier to tell on-call about this replica", "message",
                       n->message, NULL);
    }
    medic_config_unref(c);
    free(n);
    return NULL;
}

void engine_tell_oncall_async(struct config_slot *configs, const char *node, const char *message)
{
    struct notice *n = calloc(1, sizeof(*n));
    pthread_t t;
    pthread_attr_t attr;
    if (!n)
        return;
    n->config = config_slot_acquire(configs);
    snprintf(n->node, sizeof(n->node), "%s", node ? node : "");
    snprintf(n->message, sizeof(n->message), "%s", message);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, send_notice, n) != 0) {
        medic_config_unref(n->config);
        free(n);
    }
    pthread_attr_destroy(&attr);
}

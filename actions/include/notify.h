/* SPDX-License-Identifier: Apache-2.0 */
/* Notifications with libcurl: a generic JSON webhook, a Slack-compatible
 * incoming webhook, PagerDuty's Events API v2, or mail over SMTP. Bounded
 * time per attempt; transient failures (no connection, 5xx, 429, SMTP 4xx)
 * are retried with backoff; permanent ones are not. */
#ifndef MEDIC_ACTIONS_NOTIFY_H
#define MEDIC_ACTIONS_NOTIFY_H

#include "action.h"
#include "error.h"

#include <stddef.h>
#include <stdint.h>

enum notify_kind { NOTIFY_WEBHOOK, NOTIFY_SLACK, NOTIFY_PAGERDUTY, NOTIFY_SMTP };

struct notify_target {
    enum notify_kind kind;
    const char *url;
    const char *from;      /* smtp */
    const char *const *to; /* smtp */
    size_t to_count;
    const char *routing_key; /* pagerduty */
    const char *username;    /* smtp AUTH, or basic auth for webhooks; may be NULL */
    const char *password;
    const char *token; /* bearer token for webhooks; may be NULL */
};

struct notify_message {
    int64_t decision_id;
    int64_t time; /* ns */
    const char *node, *alertname, *policy, *reason;
    const char *text; /* the rendered message */
};

struct notify_options {
    long timeout_ms; /* per attempt, default 5000 */
    int attempts;    /* default 3 */
    long backoff_ms; /* first retry delay, doubled each time; default 500 */
};

void notify_options_default(struct notify_options *o);

/* Sends m to t. Returns succeeded; failed or timed_out after the retries
 * (err says what the server or the network answered last); refused when
 * the target or the message cannot be sent at all. */
enum medic_outcome notify_send(const struct notify_target *t, const struct notify_message *m,
                               const struct notify_options *o, struct medic_error *err);

/* Call once before threads start. */
void notify_global_init(void);

#endif

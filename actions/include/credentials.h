/* SPDX-License-Identifier: Apache-2.0 */
/* The credentials file: each secret named once, referenced by name from the
 * inventory (bmc.credentials, agent.credentials) and notifiers. Refused
 * unless its mode is 0600 or 0400. Secrets never reach logs, audit rows,
 * /metrics or error messages: only names do. */
#ifndef MEDIC_ACTIONS_CREDENTIALS_H
#define MEDIC_ACTIONS_CREDENTIALS_H

#include "error.h"

#include <stddef.h>

struct credential {
    char *name;
    char *username; /* NULL when not set */
    char *password;
    char *token;
    /* a notifier's secret URL (a Slack incoming webhook's embeds its key)
     * and a PagerDuty routing key; NULL when not set */
    char *url;
    char *routing_key;
};

struct credentials {
    struct credential *items;
    size_t count;
};

/* Loads path: a mapping of name -> { username, password } or { token }. */
int credentials_load(const char *path, struct credentials *out, struct medic_error *err);
void credentials_release(struct credentials *c);
const struct credential *credentials_find(const struct credentials *c, const char *name);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The settings a running server answers with (authentication, approvers,
 * limits): an owned copy of what the configuration holds, swapped whole
 * under the settings lock on a reload, so a request never sees half of
 * one configuration and half of the next. */
#include "server_internal.h"
#include "lock.h"

#include <stdlib.h>
#include <string.h>

void receiver__settings_free(struct settings_copy *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < sizeof(c->strings) / sizeof(c->strings[0]); i++)
        free(c->strings[i]);
    free(c);
}

struct settings_copy *receiver__settings_dup(const struct receiver_settings *s)
{
    struct settings_copy *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->s = *s;
    const char **fields[9] = {&c->s.webhook_auth.bearer_token,   &c->s.webhook_auth.basic_username,
                              &c->s.webhook_auth.basic_password, &c->s.read_auth.bearer_token,
                              &c->s.read_auth.basic_username,    &c->s.read_auth.basic_password,
                              &c->s.admin_auth.bearer_token,     &c->s.admin_auth.basic_username,
                              &c->s.admin_auth.basic_password};
    for (int i = 0; i < 9; i++) {
        if (!*fields[i])
            continue;
        c->strings[i] = strdup(*fields[i]);
        if (!c->strings[i]) {
            receiver__settings_free(c);
            return NULL;
        }
        *fields[i] = c->strings[i];
    }
    if (s->approver_count > RECEIVER_MAX_APPROVERS) {
        receiver__settings_free(c);
        return NULL;
    }
    for (size_t i = 0; i < s->approver_count; i++) {
        c->strings[9 + 2 * i] = strdup(s->approvers[i].name);
        c->strings[10 + 2 * i] = strdup(s->approvers[i].token);
        if (!c->strings[9 + 2 * i] || !c->strings[10 + 2 * i]) {
            receiver__settings_free(c);
            return NULL;
        }
        c->approvers[i] = (struct receiver_approver){c->strings[9 + 2 * i], c->strings[10 + 2 * i]};
    }
    c->s.approvers = c->approvers;
    return c;
}

int receiver_server_update(struct receiver_server *server, const struct receiver_settings *settings)
{
    struct settings_copy *copy = receiver__settings_dup(settings);
    if (!copy)
        return MEDIC_E_NOMEM;
    medic_rwlock_wrlock(&server->settings_lock);
    struct settings_copy *old = server->settings;
    server->settings = copy;
    medic_rwlock_unlock(&server->settings_lock);
    receiver__settings_free(old);
    return 0;
}

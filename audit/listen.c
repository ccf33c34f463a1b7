/* SPDX-License-Identifier: Apache-2.0 */
/* The word that an engine took people's requests (audit.h), from the
 * backend of the log's location where it has one. */
#include "backend.h"

#include <stdlib.h>

struct audit_listener {
    const struct audit_backend *backend;
    void *listener; /* the backend's own */
};

int audit_listener_open(const char *location, struct audit_listener **out, struct medic_error *err)
{
    const struct audit_backend *b = audit__backend_for(location);
    if (!b->listen_open)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "this audit log has no word of requests taken: its one medic's "
                               "engine says so itself");
    struct audit_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    l->backend = b;
    int rc = b->listen_open(location, &l->listener, err);
    if (rc) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

int audit_listener_wait(struct audit_listener *l, int wake_fd, int timeout_ms,
                        struct medic_error *err)
{
    return l->backend->listen_wait(l->listener, wake_fd, timeout_ms, err);
}

void audit_listener_free(struct audit_listener *l)
{
    if (!l)
        return;
    l->backend->listen_free(l->listener);
    free(l);
}

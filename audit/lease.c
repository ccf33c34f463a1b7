/* SPDX-License-Identifier: Apache-2.0 */
/* The leader's lease (audit.h), handed to the backend of the log's
 * location: only a backend several replicas share has one. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

struct audit_lease_client {
    const struct audit_backend *backend;
    void *lease; /* the backend's own */
};

/* The backend of location when it has a lease, else NULL with err set to
 * what to do. */
static const struct audit_backend *leased(const char *location, const char *why,
                                          struct medic_error *err)
{
    const struct audit_backend *b = audit__backend_for(location);
    if (b->lease_open)
        return b;
    medic_error_set(err, MEDIC_E_INVALID, "%s", why);
    return NULL;
}

int audit_lease_client_open(const char *location, const char *replica,
                            struct audit_lease_client **out, struct medic_error *err)
{
    const struct audit_backend *b =
        leased(location, "a lease needs the audit log in PostgreSQL (postgresql://...)", err);
    if (!b)
        return err->code;
    struct audit_lease_client *c = calloc(1, sizeof(*c));
    if (!c)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    c->backend = b;
    int rc = b->lease_open(location, replica, &c->lease, err);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void audit_lease_client_free(struct audit_lease_client *c)
{
    if (!c)
        return;
    c->backend->lease_free(c->lease);
    free(c);
}

int audit_lease_client_renew(struct audit_lease_client *c, const char *config_hash,
                             int64_t lease_ms, struct audit_lease *out, struct medic_error *err)
{
    return c->backend->lease_renew(c->lease, config_hash, lease_ms, out, err);
}

int audit_lease_client_clock(struct audit_lease_client *c, int64_t *db_now, int64_t *mono_at,
                             struct medic_error *err)
{
    return c->backend->lease_clock(c->lease, db_now, mono_at, err);
}

int audit_lease_client_release(struct audit_lease_client *c, int64_t epoch, struct medic_error *err)
{
    return c->backend->lease_release(c->lease, epoch, err);
}

#define NO_LEASE                                                                                   \
    "there is a lease only when replicas share a PostgreSQL audit log: give --db "                 \
    "postgresql://..."

int audit_lease_read(const char *location, struct audit_lease *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    const struct audit_backend *b = leased(location, NO_LEASE, err);
    return b ? b->lease_read(location, out, err) : err->code;
}

int audit_lease_force(const char *location, const char *reason, struct medic_error *err)
{
    const struct audit_backend *b = leased(location, NO_LEASE, err);
    return b ? b->lease_force(location, reason, err) : err->code;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The table of backends (backend.h): which one serves a location, and
 * what is the same for all of them. */
#include "backend.h"
#include "schema.h"

#include <stdio.h>
#include <string.h>

/* The backends this build has; the last, with no scheme, takes file
 * paths. */
static const struct audit_backend *const backends[] = {&audit_backend_pg, &audit_backend_sqlite};
#define BACKEND_COUNT (sizeof(backends) / sizeof(backends[0]))

/* The scheme location starts with, from b's; NULL when none. */
static const char *scheme_of(const struct audit_backend *b, const char *location)
{
    for (const char *const *sc = b->schemes; sc && *sc; sc++)
        if (strncmp(location, *sc, strlen(*sc)) == 0)
            return *sc;
    return NULL;
}

const struct audit_backend *audit__backend_for(const char *location)
{
    for (size_t i = 0; location && i < BACKEND_COUNT; i++)
        if (scheme_of(backends[i], location))
            return backends[i];
    return backends[BACKEND_COUNT - 1];
}

int audit__readable_version(int version, struct medic_error *err)
{
    if (version > AUDIT_SCHEMA_VERSION)
        return medic_error_set(err, MEDIC_E_STORE,
                               "database schema version %d is newer than this medic (%d); "
                               "upgrade medic",
                               version, AUDIT_SCHEMA_VERSION);
    return 0;
}

int audit_schema_version(void)
{
    return AUDIT_SCHEMA_VERSION;
}

int audit_location_is_shared(const char *location)
{
    return audit__backend_for(location)->shared;
}

void audit_location_redacted(const char *location, char *out, size_t size)
{
    snprintf(out, size, "%s", location);
    if (!strstr(location, "://"))
        return;
    /* scheme://user:password@host...: the password is between the first
     * ':' after the scheme and the last '@' before the path */
    const char *auth = strstr(location, "://") + 3;
    const char *path = strchr(auth, '/');
    const char *at = NULL;
    for (const char *p = auth; *p && (!path || p < path); p++)
        if (*p == '@')
            at = p;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon)
        snprintf(out, size, "%.*s***%s", (int)(colon + 1 - location), location, at);
}

void audit_library_init(void)
{
    for (size_t i = 0; i < BACKEND_COUNT; i++)
        if (backends[i]->library_init)
            backends[i]->library_init();
}

void audit_library_versions(struct medic_buf *out)
{
    for (size_t i = BACKEND_COUNT; i-- > 0;)
        backends[i]->library_version(out);
}

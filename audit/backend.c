/* SPDX-License-Identifier: Apache-2.0 */
/* Which backend (backend.h) serves a location, and what both check. */
#include "backend.h"

const struct audit_backend *audit__backend_for(const char *location)
{
    return audit_location_is_shared(location) ? &audit_backend_pg : &audit_backend_sqlite;
}

int audit__readable_version(int version, struct medic_error *err)
{
    if (version > audit_schema_version())
        return medic_error_set(err, MEDIC_E_STORE,
                               "database schema version %d is newer than this medic (%d); "
                               "upgrade medic",
                               version, audit_schema_version());
    return 0;
}

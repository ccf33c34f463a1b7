/* Which backend (backend.h) serves a location. */
#include "backend.h"

const struct audit_backend *audit__backend_for(const char *location)
{
    return audit_location_is_shared(location) ? &audit_backend_pg : &audit_backend_sqlite;
}

/* The read side's handle, shared by reader.c (queries, walks, recovery
 * reads) and verify.c (the hash chains). Private to audit/. */
#ifndef MEDIC_AUDIT_READER_INTERNAL_H
#define MEDIC_AUDIT_READER_INTERNAL_H

#include "audit.h"

#include <sqlite3.h>

struct audit_reader {
    sqlite3 *db;
};

#endif

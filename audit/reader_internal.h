/* The read side's handle, shared by reader.c (queries, walks, recovery
 * reads) and verify.c (the hash chains). Private to audit/. */
#ifndef MEDIC_AUDIT_READER_INTERNAL_H
#define MEDIC_AUDIT_READER_INTERNAL_H

#include "audit.h"
#include "table.h"

#include <sqlite3.h>

struct audit_reader {
    sqlite3 *db;
};

/* How a column of a query's result is shown. */
enum col_show { SHOW_TEXT, SHOW_INT, SHOW_REAL, SHOW_TIME, SHOW_JSON };

/* Steps st to its end, adding each row to table (initialised, ncols <= 16
 * columns) with column i shown as shows[i]; on failure table is released.
 * Returns 0 or an error. */
int audit__rows_to_table(struct audit_reader *reader, sqlite3_stmt *st, const enum col_show *shows,
                         size_t ncols, struct medic_table *table, struct medic_error *err);

#endif

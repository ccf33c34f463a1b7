/* SPDX-License-Identifier: Apache-2.0 */
/* The read side's handle, shared by reader.c (opening, on-call queries),
 * engine_reads.c (walks, recovery reads), timeline.c and verify.c (the
 * hash chains), over an SQLite file or a PostgreSQL database (db.h).
 * Private to audit/. */
#ifndef MEDIC_AUDIT_READER_INTERNAL_H
#define MEDIC_AUDIT_READER_INTERNAL_H

#include "audit.h"
#include "db.h"
#include "table.h"

struct audit_backend;

struct audit_reader {
    const struct audit_backend *backend; /* backend.h */
    void *conn;                          /* the backend's own connection */
    struct db *db;
};

/* How a column of a query's result is shown. */
enum col_show { SHOW_TEXT, SHOW_INT, SHOW_REAL, SHOW_TIME, SHOW_JSON };

/* Steps st to its end, adding each row to table (initialised, ncols <= 16
 * columns) with column i shown as shows[i]; on failure table is released.
 * Returns 0 or an error. */
int audit__rows_to_table(struct db_stmt *st, const enum col_show *shows, size_t ncols,
                         struct medic_table *table, struct medic_error *err);

#endif

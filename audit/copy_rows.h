/* SPDX-License-Identifier: Apache-2.0 */
/* Rows copied from one log into another through the SQL layer, whatever
 * either backend (private to audit/): what `medic audit migrate` and
 * `medic audit archive` both do. */
#ifndef MEDIC_AUDIT_COPY_ROWS_H
#define MEDIC_AUDIT_COPY_ROWS_H

#include "db.h"

#include <stdint.h>

/* Copies the rows of table that match where (the SQL after WHERE, its
 * ?1..?nargs bound to args; NULL: every row) in the order given ("id",
 * "rowid"), row by row through one prepared INSERT, every column's value
 * as stored (a real to its last bit, so that a hash comes out the same);
 * counts them in *rows and tells progress every 10,000 ("TABLE: N rows").
 * With page, in id order that many rows per query (the memory a query's
 * result takes is bounded, and a PostgreSQL transaction is never idle for
 * long), where the table's first column is its id, and the target's open
 * transaction committed and begun again after each full page. */
int audit__copy_rows(struct db *from, struct db *to, const char *table, const char *where,
                     const char *order, const int64_t *args, int nargs, size_t page,
                     long long *rows, void (*progress)(const char *line), struct medic_error *err);

#endif

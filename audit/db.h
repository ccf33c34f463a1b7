/* SPDX-License-Identifier: Apache-2.0 */
/* One way to run SQL on any audit backend (private to audit/): an
 * SQLite handle (sqlite/db.c) or a PostgreSQL connection (pg/db.c) behind
 * the same prepare, bind, step and column calls, each handed to the
 * backend's table (backend.h), so that a query is written once. SQL uses SQLite's numbered
 * parameters (?1, ?2, ...), rewritten to $1, $2, ... for PostgreSQL; column types come back as the
 * backend has them (an integer, a real, text, a blob or NULL). A PostgreSQL connection that broke
 * is opened again before the next statement outside a transaction (inside one, the statement fails:
 * the transaction is lost with the connection). On PostgreSQL, what needs no answer of its own
 * (BEGIN, db_exec_later, the session locks) goes with the next statement
 * that does, in one round trip (PostgreSQL's pipeline mode). */
#ifndef MEDIC_AUDIT_DB_H
#define MEDIC_AUDIT_DB_H

#include "error.h"

#include <stddef.h>
#include <stdint.h>

enum db_type { DB_NULL, DB_INT, DB_REAL, DB_TEXT, DB_BLOB };

struct db;
struct db_stmt;

/* Frees d, not the connection under it, which its opener keeps owning. */
void db_free(struct db *d);
/* An expression for the text at key of the JSON text column (an SQL name
 * and a key of letters), as d's dialect spells it, into out. */
void db_json_text(const struct db *d, const char *column, const char *key, char *out, size_t size);
/* SQLite: the rowid of the last row this connection inserted. (Inserts
 * there take no RETURNING id: SQLite fills a temporary b-tree with each
 * statement's RETURNING rows, opened and closed per row.) */
int64_t db_last_insert_id(struct db *d);

/* Runs statements that return no rows. */
int db_exec(struct db *d, const char *sql, struct medic_error *err);
/* Runs one statement whose rows nobody reads with the next statement that
 * is answered (PostgreSQL, in a transaction; else at once): its failure is
 * that statement's, and what follows the failure does not run. */
int db_exec_later(struct db *d, const char *sql, struct medic_error *err);
/* A session-level advisory lock on key (shared or not), taken with the
 * next statement that is answered, in its round trip (PostgreSQL; nothing
 * on SQLite, whose file has one writer); db_unlock_session releases it
 * right after the next statement that is answered, in the same round trip,
 * so that it is held while that one runs and no longer. A rollback
 * releases it too: it outlives the transaction otherwise. */
int db_lock_session(struct db *d, int64_t key, int shared, struct medic_error *err);
int db_unlock_session(struct db *d, int64_t key, int shared, struct medic_error *err);
/* Begins a read-only transaction that sees one moment of the database. */
int db_begin_snapshot(struct db *d, struct medic_error *err);
/* Begins a write transaction (SQLite: IMMEDIATE, the write lock at once;
 * PostgreSQL: its BEGIN goes with the first statement). */
int db_begin(struct db *d, struct medic_error *err);
int db_commit(struct db *d, struct medic_error *err);
void db_rollback(struct db *d);

/* What the last failed statement ran into. */
enum db_failure {
    DB_FAIL_OTHER,
    DB_FAIL_UNIQUE,     /* a unique constraint */
    DB_FAIL_RETRY,      /* a deadlock or a lock wait given up: the same work may succeed again */
    DB_FAIL_CONNECTION, /* the connection broke */
};
enum db_failure db_last_failure(struct db *d);

int db_prepare(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err);
/* The same for a statement run many times: SQLite keeps it persistent,
 * PostgreSQL parses it once per connection. */
int db_prepare_cached(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err);
/* PostgreSQL: a statement that takes any number of rows of strlen(types)
 * values in one array parameter per column, which its SQL unnests ("...
 * SELECT * FROM unnest(?1::bigint[], ?2::text[])"): the value of row r's
 * column k is bound as parameter r * columns + k + 1, as for that many rows
 * of VALUES, rows in order. Each column's type: 'i' bigint, 't' text, 'b'
 * bytea, 'r' double precision; any value may be NULL. Its arrays go in
 * binary. cached: parsed and planned once per connection, whatever the
 * batch's size (an insert, whose plan does not depend on the table's);
 * else planned at each run for its values (a join with a table that grows:
 * a plan kept from when the table was empty would scan it whole). db_clear
 * forgets the rows. */
int db_prepare_rows(struct db *d, const char *sql, const char *types, int cached,
                    struct db_stmt **out, struct medic_error *err);
void db_bind_int64(struct db_stmt *st, int i, int64_t v); /* i from 1 */
/* Text is not copied on SQLite: v must stay as it is until the statement
 * has been stepped and reset (the writer binds each row's values, steps,
 * then clears; a query keeps its values until it is finalized). */
void db_bind_text(struct db_stmt *st, int i, const char *v); /* NULL binds NULL */
/* len bytes of text, not NUL-terminated */
void db_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len);
void db_bind_double(struct db_stmt *st, int i, double v);
void db_bind_null(struct db_stmt *st, int i);
/* Binds len bytes without copying them: they must stay until the
 * statement has run. */
void db_bind_blob(struct db_stmt *st, int i, const void *data, size_t len);
/* Its next row: 1, none left: 0, an error: a MEDIC_E_* code (err set). */
int db_step(struct db_stmt *st, struct medic_error *err);
int db_column_count(struct db_stmt *st);
const char *db_column_name(struct db_stmt *st, int i);  /* i from 0 */
enum db_type db_column_type(struct db_stmt *st, int i); /* i from 0 */
int64_t db_column_int64(struct db_stmt *st, int i);     /* a boolean is 0 or 1 */
double db_column_double(struct db_stmt *st, int i);
const char *db_column_text(struct db_stmt *st, int i); /* NULL for a NULL */
size_t db_column_bytes(struct db_stmt *st, int i);
/* A blob's bytes (valid until the next step), its length in *len. */
const void *db_column_blob(struct db_stmt *st, int i, size_t *len);
/* Ready to run again; db_clear also forgets the bindings. */
void db_reset(struct db_stmt *st);
void db_clear(struct db_stmt *st);
void db_finalize(struct db_stmt *st);

#endif

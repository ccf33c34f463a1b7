/* SPDX-License-Identifier: Apache-2.0 */
/* One way to run SQL on either audit backend (private to audit/): an
 * SQLite handle or a PostgreSQL connection behind the same prepare, bind,
 * step and column calls, so that a query is written once. SQL uses SQLite's
 * numbered parameters (?1, ?2, ...), rewritten to $1, $2, ... for
 * PostgreSQL; column types come back as the backend has them (an integer,
 * a real, text, a blob or NULL). A PostgreSQL connection that broke is
 * opened again before the next statement outside a transaction (inside
 * one, the statement fails: the transaction is lost with the connection). */
#ifndef MEDIC_AUDIT_DB_H
#define MEDIC_AUDIT_DB_H

#include "error.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

enum db_type { DB_NULL, DB_INT, DB_REAL, DB_TEXT, DB_BLOB };

struct db;
struct db_stmt;

/* err set to "postgresql: WHAT: libpq's message" (MEDIC_E_STORE); returns
 * the code. */
int audit_pg_error(struct medic_error *err, PGconn *c, const char *what);

/* A database over a handle the caller keeps owning (db_free leaves it). */
struct db *db_over_sqlite(sqlite3 *handle);
struct db *db_over_pg(PGconn *conn);
void db_free(struct db *d);
/* Whether d is PostgreSQL, for the few expressions the dialects spell
 * differently (JSON). */
int db_is_pg(const struct db *d);
/* SQLite: the rowid of the last row this connection inserted. (Inserts
 * there take no RETURNING id: SQLite fills a temporary b-tree with each
 * statement's RETURNING rows, opened and closed per row.) */
int64_t db_last_insert_id(struct db *d);

/* Runs statements that return no rows. */
int db_exec(struct db *d, const char *sql, struct medic_error *err);
/* Begins a read-only transaction that sees one moment of the database. */
int db_begin_snapshot(struct db *d, struct medic_error *err);
/* Begins a write transaction (SQLite: IMMEDIATE, the write lock at once). */
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
/* A statement over one the caller prepared and keeps owning (the writer's
 * own, stepped to a row), for code that reads rows through this layer;
 * db_finalize frees only the wrapper. NULL when out of memory. */
struct db_stmt *db_stmt_over_sqlite(sqlite3_stmt *st);
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

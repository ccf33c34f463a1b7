/* SPDX-License-Identifier: Apache-2.0 */
/* The PostgreSQL backend's insides (private to audit/pg/ and its test
 * probes): the SQL layer on libpq (db.c, arrays.c), the statements that
 * take a batch's rows as arrays (rows.c), the schema (schema.c), the
 * leader's lease (lease.c), and the store's state. The only header that
 * names libpq. */
#ifndef MEDIC_AUDIT_PG_H
#define MEDIC_AUDIT_PG_H

#include "buf.h"
#include "rows_internal.h"

#include <libpq-fe.h>

/* ---- the SQL layer (db.c, arrays.c) ---- */

/* statements waiting to go with the next one that is answered */
#define PG_LATER 8

/* PostgreSQL's type OIDs (catalog/pg_type_d.h) */
enum {
    PG_BOOL = 16,
    PG_BYTEA = 17,
    PG_INT8 = 20,
    PG_INT2 = 21,
    PG_INT4 = 23,
    PG_TEXT = 25,
    PG_FLOAT4 = 700,
    PG_FLOAT8 = 701
};

struct pg_later {
    char sql[112];
    int lock;  /* 1: takes the session lock key, -1: releases it */
    int after; /* goes right after the next answered statement, not before it */
    int64_t key;
    int shared;
};

struct pg_db {
    struct db base;
    PGconn *c;
    int in_tx;      /* a transaction is open (or its BEGIN waits): a broken connection is kept */
    unsigned epoch; /* bumped when the connection is opened again */
    unsigned names; /* cached statements named so far */
    struct pg_later later[PG_LATER];
    int nlater;
    int64_t session_lock; /* taken on the server and not yet released; 0: none */
    int session_shared;
};

struct pg_stmt {
    struct db_stmt base;
    /* the rewritten SQL, the bound values as text, the result of the last
     * run and the row stepped to */
    char *sql;
    int nparams;
    char **params; /* nparams of each */
    int *lengths;
    int *formats;            /* 1: binary, a blob's bytes */
    char *owned;             /* params[i] is ours to free */
    int cached;              /* prepared on the server once per connection */
    unsigned prepared_epoch; /* the connection it was prepared on, plus one */
    char name[24];
    PGresult *res;
    int row;
    unsigned char *blob; /* the last blob decoded from PostgreSQL's text form */
    /* a statement of rows (db_prepare_rows): each column's values so far,
     * as the elements of a binary array, and its array once built */
    int columns;
    char *types;
    struct medic_buf *values, *arrays;
    size_t *counts;
    int mistyped; /* a value bound to a column of another type */
};

/* A statement of rows: types checked against its parameters, its
 * columns' buffers made. */
int db_pg_rows_init(struct pg_stmt *st, const char *types, struct medic_error *err);
void db_pg_rows_free(struct pg_stmt *st);
/* Forgets the rows bound. */
void db_pg_rows_clear(struct pg_stmt *st);
/* Row (i - 1) / columns's value of column (i - 1) % columns: kind 'i' an
 * int64 at v, 'r' a double at v, 't' len bytes at v, 'n' NULL. */
void db_pg_put_element(struct pg_stmt *st, int i, char kind, const void *v, size_t len);
/* Each column's array, as the statement's parameters. */
int db_pg_build_arrays(struct pg_stmt *st, struct medic_error *err);

/* err set to "postgresql: WHAT: libpq's message" (MEDIC_E_STORE); returns
 * the code. */
int audit_pg_error(struct medic_error *err, PGconn *c, const char *what);
/* The SQL layer over a connection the caller keeps owning (db_free leaves
 * it). */
struct db *audit_pg_db(PGconn *conn);

/* Its operations, for the backend's table (backend.c). */
void pg_free(struct db *d);
int pg_exec(struct db *db, const char *sql, struct medic_error *err);
int pg_exec_later(struct db *d, const char *sql, struct medic_error *err);
int pg_lock_session(struct db *d, int64_t key, int shared, struct medic_error *err);
int pg_unlock_session(struct db *d, int64_t key, int shared, struct medic_error *err);
int pg_begin(struct db *db, struct medic_error *err);
int pg_begin_snapshot(struct db *db, struct medic_error *err);
int pg_commit(struct db *db, struct medic_error *err);
void pg_rollback(struct db *db);
int64_t pg_last_insert_id(struct db *d);
int pg_prepare(struct db *db, const char *sql, int cached, struct db_stmt **out,
               struct medic_error *err);
int pg_prepare_rows(struct db *db, const char *sql, const char *types, int cached,
                    struct db_stmt **out, struct medic_error *err);
void pg_bind_int64(struct db_stmt *st, int i, int64_t v);
void pg_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len);
void pg_bind_double(struct db_stmt *st, int i, double v);
void pg_bind_blob(struct db_stmt *st, int i, const void *data, size_t len);
int pg_step(struct db_stmt *base, struct medic_error *err);
int pg_column_count(struct db_stmt *st);
const char *pg_column_name(struct db_stmt *st, int i);
enum db_type pg_column_type(struct db_stmt *base, int i);
int64_t pg_column_int64(struct db_stmt *base, int i);
double pg_column_double(struct db_stmt *base, int i);
const char *pg_column_text(struct db_stmt *base, int i);
size_t pg_column_bytes(struct db_stmt *base, int i);
const void *pg_column_blob(struct db_stmt *base, int i, size_t *len);
void pg_reset(struct db_stmt *base);
void pg_clear(struct db_stmt *base);
void pg_finalize(struct db_stmt *base);

/* ---- the store's state (s->state) ---- */

enum pg_own {
    OWN_FIRSTS,
    OWN_DUPLICATES,
    OWN_ALERTS,
    OWN_DECISIONS,
    OWN_CHANGES,
    OWN_ROWS_PUT,
    OWN_ROWS_DROP,
    OWN_MARK_EVALUATED,
    OWN_COUNT
};

struct pg_store {
    PGconn *conn; /* the writer's */
    /* the lease's check, and the statements of rows, prepared on first use */
    struct db_stmt *fence, *own[OWN_COUNT];
};

#define PG_STORE(s) ((struct pg_store *)(s)->state)

/* Statement k on the writer's connection, prepared on first use (NULL
 * with err set when it could not be). */
struct db_stmt *audit__pg_own(struct audit_store *s, enum pg_own k, struct medic_error *err);
/* Frees them, before the connection closes. */
void audit__pg_own_free(struct audit_store *s);
/* Runs a statement of rows that returns none, then forgets them. */
int audit__pg_run_rows(struct db_stmt *st, struct medic_error *err, const char *what);

/* The backend's operations (backend.h) that write an evaluation's rows. */
int audit__pg_rows_together(struct audit_store *s, const struct audit_rows *rows, size_t first,
                            size_t past_end, const int64_t *ids, size_t decision_count,
                            struct medic_error *err);
int audit__pg_insert_decisions(struct audit_store *s, const struct audit_evaluation_in *in,
                               int64_t *ids, struct medic_error *err);
int audit__pg_insert_changes(struct audit_store *s, const struct audit_evaluation_in *in,
                             const int64_t *ids, struct medic_error *err);
int audit__pg_mark_evaluated(struct audit_store *s, const struct audit_evaluation_in *in,
                             struct medic_error *err);

/* ---- the schema (schema.c) ---- */

/* Connects (10 s at most) with lock_timeout and
 * idle_in_transaction_session_timeout set, so that a replica stopped
 * mid-transaction cannot hold the others' writes for long. err never
 * carries the password. */
int audit_pg_connect(const char *url, PGconn **out, struct medic_error *err);

/* Creates the schema in an empty database, or checks the version of an
 * existing one (refusing one newer than this build). */
int audit_pg_schema(PGconn *c, struct medic_error *err);
/* An empty log at url for `medic audit migrate` to copy into: connected,
 * its schema created, checked to hold no rows. */
int audit_pg_open_target(const char *url, void **conn, struct db **db, struct medic_error *err);
/* New rows of table take ids after those copied. */
int audit_pg_ids_follow(struct db *d, const char *table, struct medic_error *err);

/* ---- the leader's lease (lease.c) ---- */

/* Takes the lease when it is free, or expired and either held last with
 * the same configuration or forced (a new epoch); renews it when this
 * replica holds it (the same epoch), for lease_ms from now, publishing
 * config_hash; else says who holds it and with which configuration. One
 * statement decides, so two replicas cannot both win. */
int audit_lease_renew(PGconn *c, const char *replica, const char *config_hash, int64_t lease_ms,
                      struct audit_lease *out, struct medic_error *err);

/* Inside an open transaction on d: checks that replica still holds an unexpired
 * lease of epoch, and keeps the lease row share-locked until the
 * transaction ends, so that a takeover waits for this transaction rather
 * than overtaking it. MEDIC_E_FENCED when it does not (roll back and step
 * down). Its statement is prepared into *cached on first use (the caller
 * finalizes it); on the writer's connection it goes in the round trip of
 * the transaction's BEGIN. */
int audit_lease_fence(struct db *d, struct db_stmt **cached, const char *replica, int64_t epoch,
                      struct medic_error *err);

/* Gives the lease up (a clean shutdown), so that another replica need not
 * wait for it to expire. */
int audit_lease_release(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err);

/* The daemon's and an operator's view of the lease, for the backend's
 * table (audit.h says what each does). */
int audit_pg_lease_open(const char *location, const char *replica, void **lease,
                        struct medic_error *err);
void audit_pg_lease_free(void *lease);
int audit_pg_lease_renew(void *lease, const char *config_hash, int64_t lease_ms,
                         struct audit_lease *out, struct medic_error *err);
int audit_pg_lease_clock(void *lease, int64_t *db_now, int64_t *mono_at, struct medic_error *err);
int audit_pg_lease_release(void *lease, int64_t epoch, struct medic_error *err);
int audit_pg_lease_read(const char *location, struct audit_lease *out, struct medic_error *err);
int audit_pg_lease_force(const char *location, const char *reason, struct medic_error *err);

/* ---- the word that an engine took people's requests (listen.c) ---- */

/* The channel the engine's transaction NOTIFYs when it marks requests
 * taken (backend.h's taken_sql). */
#define AUDIT_PG_TAKEN_CHANNEL "medic_requests_taken"
int audit_pg_listen_open(const char *location, void **out, struct medic_error *err);
int audit_pg_listen_wait(void *listener, int wake_fd, int timeout_ms, struct medic_error *err);
void audit_pg_listen_free(void *listener);

#endif

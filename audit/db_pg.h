/* SPDX-License-Identifier: Apache-2.0 */
/* The SQL layer on PostgreSQL (db_pg.c), and its statements of rows
 * (db_pg_arrays.c). Private to the SQL layer. */
#ifndef MEDIC_AUDIT_DB_PG_H
#define MEDIC_AUDIT_DB_PG_H

#include "buf.h"
#include "db_internal.h"

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

#endif

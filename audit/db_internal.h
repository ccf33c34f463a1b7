/* SPDX-License-Identifier: Apache-2.0 */
/* The SQL layer's backends (db.h): one table of operations each, in
 * db_sqlite.c and db_pg.c; db.c only dispatches. Private to the SQL
 * layer. */
#ifndef MEDIC_AUDIT_DB_INTERNAL_H
#define MEDIC_AUDIT_DB_INTERNAL_H

#include "db.h"

struct db_ops {
    void (*free)(struct db *d);
    int (*exec)(struct db *d, const char *sql, struct medic_error *err);
    int (*exec_later)(struct db *d, const char *sql, struct medic_error *err);
    int (*lock_session)(struct db *d, int64_t key, int shared, struct medic_error *err);
    int (*unlock_session)(struct db *d, int64_t key, int shared, struct medic_error *err);
    int (*begin)(struct db *d, struct medic_error *err);
    int (*begin_snapshot)(struct db *d, struct medic_error *err);
    int (*commit)(struct db *d, struct medic_error *err);
    void (*rollback)(struct db *d);
    int64_t (*last_insert_id)(struct db *d);
    int (*prepare)(struct db *d, const char *sql, int cached, struct db_stmt **out,
                   struct medic_error *err);
    /* NULL: the backend has no arrays */
    int (*prepare_rows)(struct db *d, const char *sql, const char *types, int cached,
                        struct db_stmt **out, struct medic_error *err);

    void (*bind_int64)(struct db_stmt *st, int i, int64_t v);
    void (*bind_text_len)(struct db_stmt *st, int i, const char *v, size_t len); /* NULL: NULL */
    void (*bind_double)(struct db_stmt *st, int i, double v);
    void (*bind_blob)(struct db_stmt *st, int i, const void *data, size_t len);
    int (*step)(struct db_stmt *st, struct medic_error *err);
    int (*column_count)(struct db_stmt *st);
    enum db_type (*column_type)(struct db_stmt *st, int i);
    int64_t (*column_int64)(struct db_stmt *st, int i);
    double (*column_double)(struct db_stmt *st, int i);
    const char *(*column_text)(struct db_stmt *st, int i);
    size_t (*column_bytes)(struct db_stmt *st, int i);
    const void *(*column_blob)(struct db_stmt *st, int i, size_t *len);
    void (*reset)(struct db_stmt *st);
    void (*clear)(struct db_stmt *st);
    void (*finalize)(struct db_stmt *st);
};

/* What every backend's connection and statement begin with. */
struct db {
    const struct db_ops *ops;
    int is_pg;
    enum db_failure failure;
};

struct db_stmt {
    const struct db_ops *ops;
    struct db *d; /* NULL for a borrowed SQLite statement */
};

extern const struct db_ops db_sqlite_ops;
extern const struct db_ops db_pg_ops;

#endif

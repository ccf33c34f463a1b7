/* SPDX-License-Identifier: Apache-2.0 */
/* The SQL layer's calls, each handed to its backend's table (backend.h). */
#include "backend.h"

#include <stdio.h>
#include <string.h>

void db_free(struct db *d)
{
    if (d)
        d->backend->free_db(d);
}

void db_json_text(const struct db *d, const char *column, const char *key, char *out, size_t size)
{
    const char *const *j = d->backend->json_text;
    snprintf(out, size, "%s%s%s%s%s", j[0], column, j[1], key, j[2]);
}

int64_t db_last_insert_id(struct db *d)
{
    return d->backend->last_insert_id(d);
}

enum db_failure db_last_failure(struct db *d)
{
    return d->failure;
}

int db_exec(struct db *d, const char *sql, struct medic_error *err)
{
    return d->backend->exec(d, sql, err);
}

int db_exec_later(struct db *d, const char *sql, struct medic_error *err)
{
    return d->backend->exec_later(d, sql, err);
}

int db_lock_session(struct db *d, int64_t key, int shared, struct medic_error *err)
{
    return d->backend->lock_session(d, key, shared, err);
}

int db_unlock_session(struct db *d, int64_t key, int shared, struct medic_error *err)
{
    return d->backend->unlock_session(d, key, shared, err);
}

int db_begin(struct db *d, struct medic_error *err)
{
    return d->backend->begin(d, err);
}

int db_begin_snapshot(struct db *d, struct medic_error *err)
{
    return d->backend->begin_snapshot(d, err);
}

int db_commit(struct db *d, struct medic_error *err)
{
    return d->backend->commit(d, err);
}

void db_rollback(struct db *d)
{
    d->backend->rollback(d);
}

int db_prepare(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err)
{
    return d->backend->prepare(d, sql, 0, out, err);
}

int db_prepare_cached(struct db *d, const char *sql, struct db_stmt **out, struct medic_error *err)
{
    return d->backend->prepare(d, sql, 1, out, err);
}

int db_prepare_rows(struct db *d, const char *sql, const char *types, int cached,
                    struct db_stmt **out, struct medic_error *err)
{
    if (!d->backend->prepare_rows)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "a statement of rows on a database without arrays");
    return d->backend->prepare_rows(d, sql, types, cached, out, err);
}

void db_bind_int64(struct db_stmt *st, int i, int64_t v)
{
    st->backend->bind_int64(st, i, v);
}

void db_bind_text(struct db_stmt *st, int i, const char *v)
{
    st->backend->bind_text_len(st, i, v, v ? strlen(v) : 0);
}

void db_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len)
{
    st->backend->bind_text_len(st, i, v, len);
}

void db_bind_double(struct db_stmt *st, int i, double v)
{
    st->backend->bind_double(st, i, v);
}

void db_bind_null(struct db_stmt *st, int i)
{
    st->backend->bind_text_len(st, i, NULL, 0);
}

void db_bind_blob(struct db_stmt *st, int i, const void *data, size_t len)
{
    st->backend->bind_blob(st, i, data, len);
}

int db_step(struct db_stmt *st, struct medic_error *err)
{
    return st->backend->step(st, err);
}

int db_column_count(struct db_stmt *st)
{
    return st->backend->column_count(st);
}

const char *db_column_name(struct db_stmt *st, int i)
{
    return st->backend->column_name(st, i);
}

enum db_type db_column_type(struct db_stmt *st, int i)
{
    return st->backend->column_type(st, i);
}

int64_t db_column_int64(struct db_stmt *st, int i)
{
    return st->backend->column_int64(st, i);
}

double db_column_double(struct db_stmt *st, int i)
{
    return st->backend->column_double(st, i);
}

const char *db_column_text(struct db_stmt *st, int i)
{
    return st->backend->column_text(st, i);
}

size_t db_column_bytes(struct db_stmt *st, int i)
{
    return st->backend->column_bytes(st, i);
}

const void *db_column_blob(struct db_stmt *st, int i, size_t *len)
{
    return st->backend->column_blob(st, i, len);
}

void db_reset(struct db_stmt *st)
{
    st->backend->reset(st);
}

void db_clear(struct db_stmt *st)
{
    st->backend->clear(st);
}

void db_finalize(struct db_stmt *st)
{
    if (st)
        st->backend->finalize(st);
}

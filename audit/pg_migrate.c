/* SPDX-License-Identifier: Apache-2.0 */
/* `medic audit migrate`: an SQLite audit log copied into PostgreSQL. */
#include "postgres.h"
#include "chain.h"
#include "db.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIGRATE_MAX_COLUMNS 32

/* "TABLE: N rows[ copied]" to progress, when there is one. */
static void say(void (*progress)(const char *), const char *table, long long n, int done)
{
    if (!progress)
        return;
    char line[160];
    snprintf(line, sizeof(line), "%s: %lld rows%s", table, n, done ? " copied" : "");
    progress(line);
}

/* Copies one table, row by row in rowid order, through one prepared INSERT. */
static int copy_table(sqlite3 *db, PGconn *c, const char *table, long long *rows,
                      void (*progress)(const char *), struct medic_error *err)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT * FROM %s ORDER BY rowid", table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "sqlite: cannot read %s: %s", table,
                               sqlite3_errmsg(db));
    const int n = sqlite3_column_count(st);
    if (n > MIGRATE_MAX_COLUMNS) {
        sqlite3_finalize(st);
        return medic_error_set(err, MEDIC_E_STORE, "sqlite: %s has %d columns", table, n);
    }
    char insert[2048];
    size_t at = (size_t)snprintf(insert, sizeof(insert), "INSERT INTO %s (", table);
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(insert + at, sizeof(insert) - at, "%s%s", i ? ", " : "",
                               sqlite3_column_name(st, i));
    at += (size_t)snprintf(insert + at, sizeof(insert) - at, ") VALUES (");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(insert + at, sizeof(insert) - at, "%s$%d", i ? ", " : "", i + 1);
    snprintf(insert + at, sizeof(insert) - at, ")");
    PGresult *prep = PQprepare(c, table, insert, n, NULL);
    int rc = PQresultStatus(prep) == PGRES_COMMAND_OK ? 0 : audit_pg_error(err, c, table);
    PQclear(prep);
    char reals[MIGRATE_MAX_COLUMNS][40];
    int step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *values[MIGRATE_MAX_COLUMNS];
        int lengths[MIGRATE_MAX_COLUMNS], formats[MIGRATE_MAX_COLUMNS];
        for (int i = 0; i < n; i++) {
            lengths[i] = 0;
            formats[i] = 0;
            switch (sqlite3_column_type(st, i)) {
            case SQLITE_NULL:
                values[i] = NULL;
                break;
            case SQLITE_FLOAT: /* every bit of it, so that the hash comes out the same */
                snprintf(reals[i], sizeof(reals[i]), "%.17g", sqlite3_column_double(st, i));
                values[i] = reals[i];
                break;
            case SQLITE_BLOB:
                values[i] = (const char *)sqlite3_column_blob(st, i);
                lengths[i] = sqlite3_column_bytes(st, i);
                formats[i] = 1;
                if (!values[i])
                    values[i] = "";
                break;
            default:
                values[i] = (const char *)sqlite3_column_text(st, i);
            }
        }
        PGresult *r = PQexecPrepared(c, table, n, values, lengths, formats, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            char what[96];
            snprintf(what, sizeof(what), "%s row %lld", table, *rows + 1);
            rc = audit_pg_error(err, c, what);
        }
        PQclear(r);
        if (rc == 0 && ++*rows % 10000 == 0)
            say(progress, table, *rows, 0);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = medic_error_set(err, MEDIC_E_STORE, "sqlite: cannot read %s: %s", table,
                             sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc;
}

static int open_source(const char *path, sqlite3 **db, struct medic_error *err)
{
    if (sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "sqlite: cannot open %s: %s", path,
                               sqlite3_errmsg(*db));
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(*db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version != audit_schema_version())
        return medic_error_set(err, MEDIC_E_STORE, "%s: schema version %d, not %d: %s", path,
                               version, audit_schema_version(),
                               version < 0 ? "not a medic audit log"
                                           : "run this medic's `medic serve` on it once first");
    return 0;
}

/* Whether the PostgreSQL log holds anything: migrating into one that does
 * would mix two histories. */
static int target_empty(PGconn *c, struct medic_error *err)
{
    PGresult *r = PQexec(c, "SELECT (SELECT count(*) FROM notifications) + "
                            "(SELECT count(*) FROM decisions) + (SELECT count(*) FROM actions) + "
                            "(SELECT count(*) FROM engine_rows)");
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = audit_pg_error(err, c, "cannot count the rows there");
    else if (strcmp(PQgetvalue(r, 0, 0), "0") != 0)
        rc = medic_error_set(err, MEDIC_E_STORE,
                             "postgresql: the audit log there is not empty (%s rows): migrate "
                             "into a new database",
                             PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

/* Recomputes the hash chains there, as audit_verify does for SQLite. */
static int pg_verify(PGconn *c, struct audit_verify_result *out, struct medic_error *err)
{
    struct db *d = db_over_pg(c);
    if (!d)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = audit_chain_verify(d, out, err);
    db_free(d);
    return rc;
}

int audit_migrate(const char *path, const char *url, void (*progress)(const char *line),
                  struct audit_migrated *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    sqlite3 *db = NULL;
    PGconn *c = NULL;
    int rc = open_source(path, &db, err);
    if (rc == 0)
        rc = audit_pg_connect(url, &c, err);
    if (rc == 0)
        rc = audit_pg_schema(c, err);
    if (rc == 0)
        rc = target_empty(c, err);
    /* one read snapshot of the source, one transaction on the target */
    if (rc == 0 && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        rc = medic_error_set(err, MEDIC_E_STORE, "sqlite: %s", sqlite3_errmsg(db));
    PGresult *begin = rc == 0 ? PQexec(c, "BEGIN") : NULL;
    if (rc == 0 && PQresultStatus(begin) != PGRES_COMMAND_OK)
        rc = audit_pg_error(err, c, "cannot begin");
    PQclear(begin);
    for (size_t t = 0; rc == 0 && t < AUDIT_MIGRATED_TABLES; t++) {
        rc = copy_table(db, c, audit_migrated_tables[t], &out->rows[t], progress, err);
        if (rc == 0)
            say(progress, audit_migrated_tables[t], out->rows[t], 1);
    }
    /* new rows take ids after the copied ones */
    for (size_t t = 0; rc == 0 && t < AUDIT_MIGRATED_TABLES; t++) {
        char sql[256];
        const char *name = audit_migrated_tables[t];
        if (strcmp(name, "engine_state") == 0 || strcmp(name, "engine_rows") == 0)
            continue; /* no identity */
        snprintf(sql, sizeof(sql),
                 "SELECT setval(pg_get_serial_sequence('%s', 'id'), "
                 "COALESCE((SELECT max(id) FROM %s), 0) + 1, false)",
                 name, name);
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            rc = audit_pg_error(err, c, "cannot move the id sequences on");
        PQclear(r);
    }
    if (c && PQstatus(c) == CONNECTION_OK) {
        PGresult *end = PQexec(c, rc == 0 ? "COMMIT" : "ROLLBACK");
        if (rc == 0 && PQresultStatus(end) != PGRES_COMMAND_OK)
            rc = audit_pg_error(err, c, "cannot commit");
        PQclear(end);
    }
    if (rc == 0)
        rc = pg_verify(c, &out->verified, err);
    if (db) {
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
    }
    PQfinish(c);
    return rc;
}

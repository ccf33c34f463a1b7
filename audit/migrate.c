/* SPDX-License-Identifier: Apache-2.0 */
/* `medic audit migrate`: a log one medic wrote (SQLite) copied into one
 * replicas share (PostgreSQL), through the SQL layer on both. */
#include "backend.h"
#include "chain.h"
#include "copy_rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "TABLE: N rows[ copied]" to progress, when there is one. */
static void say(void (*progress)(const char *), const char *table, long long n, int done)
{
    if (!progress)
        return;
    char line[160];
    snprintf(line, sizeof(line), "%s: %lld rows%s", table, n, done ? " copied" : "");
    progress(line);
}

/* Whether the log copied into holds anything: migrating into one that
 * does would mix two histories. */
static int target_empty(struct db *d, struct medic_error *err)
{
    struct db_stmt *st = NULL;
    int rc = db_prepare(d,
                        "SELECT (SELECT count(*) FROM notifications) + "
                        "(SELECT count(*) FROM decisions) + (SELECT count(*) FROM actions) + "
                        "(SELECT count(*) FROM engine_rows)",
                        &st, err);
    if (rc == 0 && (rc = db_step(st, err)) == 1) {
        int64_t n = db_column_int64(st, 0);
        rc = n == 0 ? 0
                    : medic_error_set(err, MEDIC_E_STORE,
                                      "the audit log there is not empty (%lld rows): migrate "
                                      "into a new database",
                                      (long long)n);
    } else if (rc == 0) {
        rc = medic_error_set(err, MEDIC_E_STORE, "cannot count the rows there");
    }
    db_finalize(st);
    return rc;
}

/* The source at path: a log of exactly this build's schema. */
static int open_source(const char *path, const struct audit_backend *b, void **conn, struct db **db,
                       struct medic_error *err)
{
    int rc = b->open_reader(path, conn, db, err);
    if (rc)
        return rc;
    struct db_stmt *st = NULL;
    int version = -1;
    if (db_prepare(*db, "PRAGMA user_version", &st, err) == 0 && db_step(st, err) == 1)
        version = (int)db_column_int64(st, 0);
    db_finalize(st);
    if (version != audit_schema_version())
        return medic_error_set(err, MEDIC_E_STORE, "%s: schema version %d, not %d: %s", path,
                               version, audit_schema_version(),
                               "run this medic's `medic serve` on it once first");
    return 0;
}

int audit_migrate(const char *path, const char *url, void (*progress)(const char *line),
                  struct audit_migrated *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    const struct audit_backend *fb = audit__backend_for(path), *tb = audit__backend_for(url);
    if (fb->shared || !tb->shared)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "a migration copies an SQLite log into an empty shared one");
    void *fconn = NULL, *tconn = NULL;
    struct db *from = NULL, *to = NULL;
    int rc = open_source(path, fb, &fconn, &from, err);
    if (rc == 0)
        rc = tb->open_target(url, &tconn, &to, err);
    if (rc == 0)
        rc = target_empty(to, err);
    /* one read snapshot of the source, one transaction on the target */
    if (rc == 0)
        rc = db_begin_snapshot(from, err);
    if (rc == 0)
        rc = db_begin(to, err);
    int began = rc == 0;
    for (size_t t = 0; rc == 0 && t < AUDIT_MIGRATED_TABLES; t++) {
        rc = audit__copy_rows(from, to, audit_migrated_tables[t], NULL, "rowid", NULL, 0, 0,
                              &out->rows[t], progress, err);
        if (rc == 0)
            say(progress, audit_migrated_tables[t], out->rows[t], 1);
    }
    /* new rows take ids after the copied ones */
    for (size_t t = 0; rc == 0 && tb->ids_follow && t < AUDIT_MIGRATED_TABLES; t++) {
        const char *name = audit_migrated_tables[t];
        if (strcmp(name, "engine_state") != 0 && strcmp(name, "engine_rows") != 0) /* no ids */
            rc = tb->ids_follow(to, name, err);
    }
    if (began && rc == 0)
        rc = db_commit(to, err);
    else if (began)
        db_rollback(to);
    if (rc == 0)
        rc = audit_chain_verify(to, &out->verified, err);
    if (from) {
        struct medic_error ignored = {0};
        db_commit(from, &ignored); /* ends the read snapshot */
    }
    if (fconn || from)
        fb->close_reader(fconn, from);
    if (tconn || to)
        tb->close_reader(tconn, to);
    return rc;
}

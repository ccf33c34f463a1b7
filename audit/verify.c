/* SPDX-License-Identifier: Apache-2.0 */
/* `medic audit verify`: recompute the SHA-256 chains of decisions,
 * actions and incident changes, and name the first row that breaks one,
 * in an SQLite or a PostgreSQL audit log; and an archive file against the
 * log it came from. A log that archived rows starts each chain where its
 * newest archive's ends. */
#include "archive.h"
#include "backend.h"
#include "chain.h"
#include "reader_internal.h"
#include "schema.h"

#include <stdio.h>
#include <string.h>

static const char *const hashed_columns[ARCHIVE_CHAINS] = {
    audit_decision_hashed_columns, audit_action_hashed_columns, audit_change_hashed_columns};

/* Walks one chain from start (rows up to after_id are skipped: an archive
 * still taking them out of the log holds them); its last hash and id in
 * end and *end_id. */
static int verify_table(struct db *d, int chain, const char *start, int64_t after_id,
                        int64_t *checked, char end[65], int64_t *end_id,
                        struct audit_verify_result *out, struct medic_error *err)
{
    const char *table = audit__archive_chains[chain];
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT %s, hash FROM %s WHERE id > ?1 ORDER BY id",
             hashed_columns[chain], table);
    struct db_stmt *st = NULL;
    if (db_prepare(d, sql, &st, err)) {
        medic_error_prefix(err, table);
        return err->code;
    }
    db_bind_int64(st, 1, after_id);
    struct audit_chain_walk walk;
    audit_chain_walk_from(&walk, table, start);
    *end_id = after_id;
    int rc, ncols = 0;
    while ((rc = db_step(st, err)) == 1) {
        ncols = ncols ? ncols : db_column_count(st);
        char computed[65];
        audit_chain_hash_db_row(st, ncols - 1, computed); /* every column but the hash */
        (*checked)++;
        if (audit_chain_walk_row(&walk, db_column_int64(st, 0), db_column_text(st, ncols - 2),
                                 db_column_text(st, ncols - 1), computed, out)) {
            rc = 0;
            break;
        }
        *end_id = db_column_int64(st, 0);
    }
    db_finalize(st);
    snprintf(end, 65, "%s", walk.prev);
    return rc < 0 ? rc : 0;
}

static int64_t *checked_of(struct audit_verify_result *out, int chain)
{
    return chain == ARCHIVE_DECISIONS ? &out->decisions_checked
           : chain == ARCHIVE_ACTIONS ? &out->actions_checked
                                      : &out->changes_checked;
}

int audit_chain_verify(struct db *d, struct audit_verify_result *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    out->ok = 1;
    int archives = audit__has_archives(d);
    if (db_begin_snapshot(d, err)) /* all three chains at one moment */
        return err->code;
    struct archive_record last, held;
    int has_last = 0, is_archive = 0, rc = 0;
    if (archives)
        rc = audit__archive_record_read(d, "state <> 'held' ORDER BY id DESC LIMIT 1", NULL, 0,
                                        &last, &has_last, err);
    if (rc == 0 && archives)
        rc = audit__archive_record_read(d, "state = 'held'", NULL, 0, &held, &is_archive, err);
    if (rc == 0 && is_archive)
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "this is an archive (%s, before %lld ms): verify it beside its log "
                             "with medic audit verify --db LOG --archive FILE",
                             held.file, (long long)held.before_at);
    for (int c = 0; rc == 0 && c < ARCHIVE_CHAINS && out->ok; c++) {
        char end[65];
        int64_t end_id;
        rc = verify_table(d, c, has_last ? last.hash[c] : AUDIT_CHAIN_GENESIS,
                          has_last ? last.last_id[c] : 0, checked_of(out, c), end, &end_id, out,
                          err);
    }
    struct medic_error ignored = {0};
    db_commit(d, &ignored);
    return rc;
}

int audit_verify(struct audit_reader *reader, struct audit_verify_result *out,
                 struct medic_error *err)
{
    return audit_chain_verify(reader->db, out, err);
}

static int differs(struct audit_verify_result *out, const char *table, int64_t id, const char *why)
{
    out->ok = 0;
    out->broken_table = table;
    out->broken_id = id;
    snprintf(out->why, sizeof(out->why), "%s", why);
    return 0;
}

/* The archive's rows against the log's record r of it, from prev's cuts
 * (NULL: the genesis). */
static int check_archive(struct db *a, const struct archive_record *r,
                         const struct archive_record *prev, struct audit_verify_result *out,
                         struct medic_error *err)
{
    for (int c = 0; c < ARCHIVE_CHAINS && out->ok; c++) {
        char end[65];
        int64_t end_id;
        int rc = verify_table(a, c, prev ? prev->hash[c] : AUDIT_CHAIN_GENESIS, 0,
                              checked_of(out, c), end, &end_id, out, err);
        if (rc)
            return rc;
        if (end_id == 0 && prev) /* none of this chain's rows moved */
            end_id = prev->last_id[c];
        if (out->ok && (strcmp(end, r->hash[c]) != 0 || end_id != r->last_id[c]))
            return differs(out, audit__archive_chains[c], end_id,
                           "the archive's chain does not end where the log's record of it "
                           "says (rows were removed or added)");
    }
    if (!out->ok)
        return 0;
    char digest[65];
    long long counts[ARCHIVED_KINDS] = {0};
    int rc = audit__archive_digest(a, digest, counts, err);
    if (rc)
        return rc;
    if (strcmp(digest, r->digest) != 0 ||
        counts[ARCHIVED_NOTIFICATIONS] != r->counts[ARCHIVED_NOTIFICATIONS] ||
        counts[ARCHIVED_ALERTS] != r->counts[ARCHIVED_ALERTS] ||
        counts[ARCHIVED_REQUESTS] != r->counts[ARCHIVED_REQUESTS])
        return differs(out, "notifications", 0,
                       "the archive's notifications, alerts or requests differ from those the "
                       "log recorded (a row was changed, removed or added)");
    return 0;
}

int audit_verify_archive(struct audit_reader *live, const char *file,
                         struct audit_verify_result *out, int64_t *record, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    out->ok = 1;
    *record = 0;
    const struct audit_backend *lite = audit__backend_for(file);
    if (lite->shared)
        return medic_error_set(err, MEDIC_E_INVALID, "--archive names a file");
    void *conn = NULL;
    struct db *a = NULL;
    int rc = lite->open_reader(file, &conn, &a, err);
    struct archive_record held, r, prev;
    int found = 0, has_prev = 0;
    if (rc == 0 && !audit__has_archives(a))
        rc = medic_error_set(err, MEDIC_E_INVALID, "%s is not an archive (no record of one)", file);
    if (rc == 0)
        rc = audit__archive_record_read(a, "state = 'held'", NULL, 0, &held, &found, err);
    if (rc == 0 && !found)
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "%s is an audit log, not an archive: medic audit archive writes "
                             "one",
                             file);
    if (rc == 0 && !audit__has_archives(live->db))
        rc = medic_error_set(err, MEDIC_E_INVALID, "the log has no record of any archive");
    int64_t id = held.id;
    if (rc == 0)
        rc = audit__archive_record_read(live->db, "id = ?1 AND state <> 'held'", &id, 1, &r, &found,
                                        err);
    if (rc == 0 && !found)
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "the log has no record of archive %lld: this archive comes from "
                             "another log, or its record was removed",
                             (long long)id);
    if (rc == 0)
        rc = audit__archive_record_read(live->db,
                                        "id < ?1 AND state <> 'held' ORDER BY id DESC LIMIT 1", &id,
                                        1, &prev, &has_prev, err);
    *record = id;
    if (rc == 0 && (held.before_at != r.before_at || strcmp(held.digest, r.digest) != 0 ||
                    memcmp(held.last_id, r.last_id, sizeof(r.last_id)) != 0 ||
                    memcmp(held.hash, r.hash, sizeof(r.hash)) != 0))
        differs(out, "audit_archives", id,
                "the archive's own record differs from the log's record of it");
    if (rc == 0 && out->ok)
        rc = check_archive(a, &r, has_prev ? &prev : NULL, out, err);
    if (conn || a)
        lite->close_reader(conn, a);
    return rc;
}

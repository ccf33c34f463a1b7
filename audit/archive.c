/* SPDX-License-Identifier: Apache-2.0 */
/* `medic audit archive`: the rows older than a time moved out of the log
 * into a file of their own, an SQLite audit log that holds only them and
 * the record of the move. The hash chains are cut where no row left
 * refers to a row moved: an action's intent goes with its outcome, a
 * decision with every action, change and request about it, and nothing
 * the engine still waits on (a step awaiting a person, an action in
 * flight) moves. The log keeps each chain's last hash moved, from which
 * its first row left starts, and a digest of the unchained rows moved, so
 * that the log alone still verifies and a changed archive is found. */
#include "archive.h"
#include "backend.h"
#include "chain.h"
#include "copy_rows.h"
#include "sha256.h"
#include "timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const audit__archive_chains[ARCHIVE_CHAINS] = {"decisions", "actions",
                                                           "incident_changes"};

_Static_assert((int)ARCHIVED_KINDS == (int)AUDIT_ARCHIVED_KINDS, "the counts audit.h shows");

/* An archive moves nothing newer than this: such a row may still be
 * retried by Alertmanager or waited on by the engine. */
#define ARCHIVE_MIN_AGE_NS (3600LL * 1000000000LL)

/* Rows read from the log per query while copying. */
#define ARCHIVE_PAGE 5000

#define RECORD_COLUMNS                                                                             \
    "id, created_at, before_at, file, state, decisions_last_id, decisions_hash, "                  \
    "actions_last_id, actions_hash, changes_last_id, changes_hash, rows_digest, notifications, "   \
    "alerts, decisions, actions, changes, requests"

/* A notification moves when it is older than ?1 and was evaluated, and
 * it is not pinned: a decision left (after the cut) is about it, or a
 * duplicate that stays names it. The pinned are found once, into a
 * temporary table, rather than by every query of a page. */
#define NOTIFICATION_MOVES                                                                         \
    "received_at < ?1 AND evaluated_at IS NOT NULL AND id NOT IN (SELECT id FROM archive_pinned)"
/* An alert moves with its notification: looked up by its key for each
 * alert of a page, rather than the notifications that move found again
 * for every page. */
#define ALERT_MOVES                                                                                \
    "notification_id NOT IN (SELECT id FROM archive_pinned) AND EXISTS (SELECT 1 FROM "            \
    "notifications n WHERE n.id = alerts.notification_id AND n.received_at < ?1 AND "              \
    "n.evaluated_at IS NOT NULL)"
#define PIN_NOTIFICATIONS                                                                          \
    "INSERT INTO archive_pinned SELECT notification_id FROM decisions WHERE id > ?2 AND "          \
    "notification_id IS NOT NULL UNION SELECT duplicate_of FROM notifications WHERE received_at "  \
    ">= ?1 AND duplicate_of IS NOT NULL UNION SELECT duplicate_of FROM notifications WHERE "       \
    "evaluated_at IS NULL AND duplicate_of IS NOT NULL"
/* A person's request moves when it was taken before ?1 and each decision
 * it names moves (up to ?2). */
#define REQUEST_TAKEN "evaluated_at IS NOT NULL AND created_at < ?1"
#define RESULT_MOVES "(result_decision_id IS NULL OR result_decision_id <= ?2)"

static const struct {
    const char *table, *moves;
} requests[] = {
    {"approvals", REQUEST_TAKEN " AND decision_id <= ?2 AND " RESULT_MOVES},
    {"pause_requests", REQUEST_TAKEN " AND " RESULT_MOVES},
    {"release_requests", REQUEST_TAKEN " AND " RESULT_MOVES},
};
#define NREQUESTS (sizeof(requests) / sizeof(requests[0]))

int audit__has_archives(struct db *d)
{
    struct db_stmt *st = NULL;
    struct medic_error ignored = {0};
    int ok = db_prepare(d, "SELECT count(*) FROM audit_archives", &st, &ignored) == 0 &&
             db_step(st, &ignored) == 1;
    db_finalize(st);
    return ok;
}

static void text_into(char *out, size_t size, const char *v)
{
    snprintf(out, size, "%s", v ? v : "");
}

int audit__archive_record_read(struct db *d, const char *where, const int64_t *args, int nargs,
                               struct archive_record *out, int *found, struct medic_error *err)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT " RECORD_COLUMNS " FROM audit_archives WHERE %s", where);
    struct db_stmt *st = NULL;
    int rc = db_prepare(d, sql, &st, err);
    for (int i = 0; rc == 0 && i < nargs; i++)
        db_bind_int64(st, i + 1, args[i]);
    *found = 0;
    memset(out, 0, sizeof(*out));
    if (rc == 0 && (rc = db_step(st, err)) == 1) {
        *found = 1;
        out->id = db_column_int64(st, 0);
        out->created_at = db_column_int64(st, 1);
        out->before_at = db_column_int64(st, 2);
        text_into(out->file, sizeof(out->file), db_column_text(st, 3));
        text_into(out->state, sizeof(out->state), db_column_text(st, 4));
        for (int c = 0; c < ARCHIVE_CHAINS; c++) {
            out->last_id[c] = db_column_int64(st, 5 + 2 * c);
            text_into(out->hash[c], sizeof(out->hash[c]), db_column_text(st, 6 + 2 * c));
        }
        text_into(out->digest, sizeof(out->digest), db_column_text(st, 11));
        for (int k = 0; k < ARCHIVED_KINDS; k++)
            out->counts[k] = db_column_int64(st, 12 + k);
        rc = 0;
    }
    db_finalize(st);
    if (rc)
        medic_error_prefix(err, "reading an archive's record");
    return rc < 0 ? rc : 0;
}

int audit__archive_record_write(struct db *d, struct archive_record *r, int keep_id,
                                struct medic_error *err)
{
    /* the archive's copy keeps the log's id; the log's own draws one */
    const char *sql =
        keep_id ? "INSERT INTO audit_archives (" RECORD_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, "
                  "?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18) RETURNING id"
                : "INSERT INTO audit_archives (created_at, before_at, file, state, "
                  "decisions_last_id, decisions_hash, actions_last_id, actions_hash, "
                  "changes_last_id, changes_hash, rows_digest, notifications, alerts, decisions, "
                  "actions, changes, requests) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                  "?11, ?12, ?13, ?14, ?15, ?16, ?17) RETURNING id";
    struct db_stmt *st = NULL;
    int rc = db_prepare(d, sql, &st, err);
    if (rc)
        return rc;
    int at = 1;
    if (keep_id)
        db_bind_int64(st, at++, r->id);
    db_bind_int64(st, at++, r->created_at);
    db_bind_int64(st, at++, r->before_at);
    db_bind_text(st, at++, r->file);
    db_bind_text(st, at++, r->state);
    for (int c = 0; c < ARCHIVE_CHAINS; c++) {
        db_bind_int64(st, at++, r->last_id[c]);
        db_bind_text(st, at++, r->hash[c]);
    }
    db_bind_text(st, at++, r->digest);
    for (int k = 0; k < ARCHIVED_KINDS; k++)
        db_bind_int64(st, at++, r->counts[k]);
    if ((rc = db_step(st, err)) == 1) {
        r->id = db_column_int64(st, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = medic_error_set(err, MEDIC_E_STORE, "the record's insert returned no id");
    }
    db_finalize(st);
    if (rc)
        medic_error_prefix(err, "recording the archive");
    return rc;
}

/* Adds every value of st's row, each with its type, to h. */
static void digest_row(struct db_stmt *st, struct medic_sha256 *h)
{
    const int n = db_column_count(st);
    for (int i = 0; i < n; i++) {
        char tag[40];
        size_t len = 0;
        const void *blob;
        switch (db_column_type(st, i)) {
        case DB_NULL:
            medic_sha256_field(h, "n");
            break;
        case DB_INT:
            snprintf(tag, sizeof(tag), "i%lld", (long long)db_column_int64(st, i));
            medic_sha256_field(h, tag);
            break;
        case DB_REAL:
            snprintf(tag, sizeof(tag), "r%.17g", db_column_double(st, i));
            medic_sha256_field(h, tag);
            break;
        case DB_BLOB:
            blob = db_column_blob(st, i, &len);
            snprintf(tag, sizeof(tag), "b%zu:", len);
            medic_sha256_update(h, tag, strlen(tag));
            if (len)
                medic_sha256_update(h, blob, len);
            break;
        default:
            len = db_column_bytes(st, i);
            snprintf(tag, sizeof(tag), "t%zu:", len);
            medic_sha256_update(h, tag, strlen(tag));
            if (len)
                medic_sha256_update(h, db_column_text(st, i), len);
        }
    }
}

int audit__archive_digest(struct db *archive, char out[65], long long counts[ARCHIVED_KINDS],
                          struct medic_error *err)
{
    static const struct {
        const char *table;
        int kind;
    } unchained[] = {{"notifications", ARCHIVED_NOTIFICATIONS},
                     {"alerts", ARCHIVED_ALERTS},
                     {"approvals", ARCHIVED_REQUESTS},
                     {"pause_requests", ARCHIVED_REQUESTS},
                     {"release_requests", ARCHIVED_REQUESTS}};
    struct medic_sha256 *h = medic_sha256_new();
    counts[ARCHIVED_NOTIFICATIONS] = counts[ARCHIVED_ALERTS] = counts[ARCHIVED_REQUESTS] = 0;
    int rc = 0;
    for (size_t t = 0; rc == 0 && t < sizeof(unchained) / sizeof(unchained[0]); t++) {
        char sql[128];
        snprintf(sql, sizeof(sql), "SELECT * FROM %s ORDER BY id", unchained[t].table);
        medic_sha256_field(h, unchained[t].table);
        struct db_stmt *st = NULL;
        if ((rc = db_prepare(archive, sql, &st, err)))
            break;
        int step;
        while ((step = db_step(st, err)) == 1) {
            digest_row(st, h);
            counts[unchained[t].kind]++;
        }
        rc = step < 0 ? step : 0;
        db_finalize(st);
    }
    medic_sha256_finish(h, out);
    if (rc)
        medic_error_prefix(err, "the archive's digest");
    return rc;
}

/* The value of a one-value query with args bound; *found 0 for no row or a
 * NULL. */
static int scalar(struct db *d, const char *sql, const int64_t *args, int nargs, int64_t *out,
                  int *found, struct medic_error *err)
{
    struct db_stmt *st = NULL;
    int rc = db_prepare(d, sql, &st, err);
    for (int i = 0; rc == 0 && i < nargs; i++)
        db_bind_int64(st, i + 1, args[i]);
    *found = 0;
    if (rc == 0 && (rc = db_step(st, err)) == 1) {
        if (db_column_type(st, 0) != DB_NULL) {
            *out = db_column_int64(st, 0);
            *found = 1;
        }
        rc = 0;
    }
    db_finalize(st);
    return rc < 0 ? rc : 0;
}

/* Lowers *cut below the smallest value sql finds with args bound; *moved
 * set when it did. */
static int lower(struct db *d, const char *sql, int64_t a1, int64_t a2, int nargs, int64_t *cut,
                 int *moved, struct medic_error *err)
{
    int64_t args[2] = {a1, a2}, v = 0;
    int found, rc = scalar(d, sql, args, nargs, &v, &found, err);
    if (rc == 0 && found && v - 1 < *cut) {
        *cut = v - 1 < 0 ? 0 : v - 1;
        *moved = 1;
    }
    return rc;
}

/* The smallest decision the engine's state still names (a step awaiting
 * a person, one it waits on, one it would undo): such a decision stays. */
static int engine_decisions(struct db *d, int64_t *least, struct medic_error *err)
{
    struct db_stmt *st = NULL;
    int rc = db_prepare(d, "SELECT value FROM engine_rows", &st, err), step;
    *least = INT64_MAX;
    while (rc == 0 && (step = db_step(st, err)) == 1) {
        const char *v = db_column_text(st, 0);
        for (const char *p = v; p && (p = strstr(p, "decision\":\"")); p++) {
            long long id = strtoll(p + strlen("decision\":\""), NULL, 10);
            if (id > 0 && id < *least)
                *least = id;
        }
    }
    if (rc == 0 && step < 0)
        rc = step;
    db_finalize(st);
    return rc;
}

/* Each chain's cut: the last id that moves. */
static int find_cuts(struct db *d, int64_t before, int64_t cut[ARCHIVE_CHAINS],
                     struct medic_error *err)
{
    int rc = 0;
    for (int c = 0; c < ARCHIVE_CHAINS && rc == 0; c++) {
        char sql[256];
        int64_t newest = 0, older = 0;
        int found;
        /* the newest row of each chain stays: the writer's next row starts
         * from its hash */
        snprintf(sql, sizeof(sql), "SELECT max(id) FROM %s", audit__archive_chains[c]);
        rc = scalar(d, sql, NULL, 0, &newest, &found, err);
        snprintf(sql, sizeof(sql), "SELECT max(id) FROM %s WHERE created_at < ?1",
                 audit__archive_chains[c]);
        if (rc == 0)
            rc = scalar(d, sql, &before, 1, &older, &found, err);
        cut[c] = older < newest ? older : (newest > 0 ? newest - 1 : 0);
    }
    int64_t least = INT64_MAX;
    if (rc == 0)
        rc = engine_decisions(d, &least, err);
    if (rc == 0 && least <= cut[ARCHIVE_DECISIONS])
        cut[ARCHIVE_DECISIONS] = least - 1;
    /* lowered until no row left refers to a row moved */
    int64_t *dc = &cut[ARCHIVE_DECISIONS], *ac = &cut[ARCHIVE_ACTIONS], *cc = &cut[ARCHIVE_CHANGES];
    for (int moved = 1; rc == 0 && moved;) {
        moved = 0;
        /* an intent goes with its outcome: one without goes nowhere */
        rc = lower(d,
                   "SELECT min(i.id) FROM actions i WHERE i.phase = 'intent' AND i.id <= ?1"
                   " AND NOT EXISTS (SELECT 1 FROM actions o WHERE o.intent_id = i.id"
                   " AND o.id <= ?1)",
                   *ac, 0, 1, ac, &moved, err);
        /* an action or a change goes with its decision, and the other way */
        if (rc == 0)
            rc = lower(d, "SELECT min(id) FROM actions WHERE id <= ?1 AND decision_id > ?2", *ac,
                       *dc, 2, ac, &moved, err);
        if (rc == 0)
            rc =
                lower(d, "SELECT min(id) FROM incident_changes WHERE id <= ?1 AND decision_id > ?2",
                      *cc, *dc, 2, cc, &moved, err);
        if (rc == 0)
            rc =
                lower(d, "SELECT min(decision_id) FROM actions WHERE id > ?1 AND decision_id <= ?2",
                      *ac, *dc, 2, dc, &moved, err);
        if (rc == 0)
            rc = lower(d,
                       "SELECT min(decision_id) FROM incident_changes WHERE id > ?1"
                       " AND decision_id <= ?2",
                       *cc, *dc, 2, dc, &moved, err);
        for (size_t r = 0; rc == 0 && r < NREQUESTS; r++) {
            char sql[1024];
            int has_decision = strcmp(requests[r].table, "approvals") == 0;
            snprintf(sql, sizeof(sql),
                     "SELECT min(v) FROM (SELECT %s AS v FROM %s WHERE NOT (%s)"
                     " UNION ALL SELECT result_decision_id FROM %s WHERE NOT (%s)) AS kept"
                     " WHERE v <= ?2",
                     has_decision ? "decision_id" : "result_decision_id", requests[r].table,
                     requests[r].moves, requests[r].table, requests[r].moves);
            rc = lower(d, sql, before, *dc, 2, dc, &moved, err);
        }
    }
    for (int c = 0; c < ARCHIVE_CHAINS; c++)
        if (cut[c] < 0)
            cut[c] = 0;
    if (rc)
        medic_error_prefix(err, "finding where the chains can be cut");
    return rc;
}

/* The last row that moves of each chain, and its hash; where none moves,
 * the previous archive's (or the genesis). */
static int chain_ends(struct db *d, const int64_t cut[ARCHIVE_CHAINS],
                      const struct archive_record *prev, struct archive_record *r,
                      struct medic_error *err)
{
    int rc = 0;
    for (int c = 0; c < ARCHIVE_CHAINS && rc == 0; c++) {
        r->last_id[c] = prev ? prev->last_id[c] : 0;
        snprintf(r->hash[c], sizeof(r->hash[c]), "%s", prev ? prev->hash[c] : AUDIT_CHAIN_GENESIS);
        char sql[160];
        snprintf(sql, sizeof(sql),
                 "SELECT id, hash FROM %s WHERE id <= ?1 ORDER BY id DESC LIMIT 1",
                 audit__archive_chains[c]);
        struct db_stmt *st = NULL;
        if ((rc = db_prepare(d, sql, &st, err)))
            break;
        db_bind_int64(st, 1, cut[c]);
        if ((rc = db_step(st, err)) == 1) {
            r->last_id[c] = db_column_int64(st, 0);
            text_into(r->hash[c], sizeof(r->hash[c]), db_column_text(st, 1));
            rc = 0;
        }
        db_finalize(st);
    }
    return rc < 0 ? rc : 0;
}

/* Copies what moves into the archive, in one read snapshot of the log. */
static int copy_moving(struct db *live, struct db *archive, int64_t before,
                       const int64_t cut[ARCHIVE_CHAINS], long long counts[ARCHIVED_KINDS],
                       void (*progress)(const char *), struct medic_error *err)
{
    int64_t args[2] = {before, cut[ARCHIVE_DECISIONS]};
    struct db_stmt *st = NULL;
    int rc = db_prepare(live, PIN_NOTIFICATIONS, &st, err);
    if (rc == 0) {
        db_bind_int64(st, 1, before);
        db_bind_int64(st, 2, cut[ARCHIVE_DECISIONS]);
        if (db_step(st, err) < 0)
            rc = err->code ? err->code : MEDIC_E_STORE;
    }
    db_finalize(st);
    if (rc)
        return rc;
    rc = audit__copy_rows(live, archive, "notifications", NOTIFICATION_MOVES, "id", args, 1,
                          ARCHIVE_PAGE, &counts[ARCHIVED_NOTIFICATIONS], progress, err);
    if (rc == 0)
        rc = audit__copy_rows(live, archive, "alerts", ALERT_MOVES, "id", args, 1, ARCHIVE_PAGE,
                              &counts[ARCHIVED_ALERTS], progress, err);
    static const int kinds[ARCHIVE_CHAINS] = {ARCHIVED_DECISIONS, ARCHIVED_ACTIONS,
                                              ARCHIVED_CHANGES};
    for (int c = 0; rc == 0 && c < ARCHIVE_CHAINS; c++)
        rc = audit__copy_rows(live, archive, audit__archive_chains[c], "id <= ?1", "id", &cut[c], 1,
                              ARCHIVE_PAGE, &counts[kinds[c]], progress, err);
    for (size_t r = 0; rc == 0 && r < NREQUESTS; r++)
        rc = audit__copy_rows(live, archive, requests[r].table, requests[r].moves, "id", args, 2,
                              ARCHIVE_PAGE, &counts[ARCHIVED_REQUESTS], progress, err);
    return rc;
}

/* "WHAT FILE (N)" to progress, when there is one. */
static void say(void (*progress)(const char *), const char *what, const char *file, long long id)
{
    if (!progress)
        return;
    char line[1200];
    snprintf(line, sizeof(line), "%s %s (record %lld)", what, file, id);
    progress(line);
}

/* The log's record id once every row it moved is out of the log. */
static int mark_done(struct db *live, int64_t id, struct medic_error *err)
{
    struct db_stmt *st = NULL;
    int rc = db_prepare(live, "UPDATE audit_archives SET state = 'done' WHERE id = ?1", &st, err);
    if (rc == 0) {
        db_bind_int64(st, 1, id);
        rc = db_step(st, err) < 0 ? err->code : 0;
    }
    db_finalize(st);
    return rc;
}

/* An archive whose rows were not all taken out of the log (the run was
 * stopped): they are taken out now, from its file. */
static int finish_earlier(const struct audit_backend *lite, struct db *live, int yield,
                          const struct audit_archive_options *o, int *resumed,
                          struct medic_error *err)
{
    struct archive_record r;
    int found = 0;
    int rc = audit__archive_record_read(live, "state = 'removing' ORDER BY id LIMIT 1", NULL, 0, &r,
                                        &found, err);
    if (rc || !found)
        return rc;
    if (access(r.file, R_OK) != 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "archive %lld (%s) was written but its rows were not all taken "
                               "out of the log, and that file cannot be read (%s): put it back "
                               "and run medic audit archive again",
                               (long long)r.id, r.file, strerror(errno));
    say(o->progress, "finishing the earlier archive into", r.file, (long long)r.id);
    void *conn = NULL;
    struct db *adb = NULL;
    rc = lite->open_target(r.file, &conn, &adb, err);
    /* stopped before the archive kept its copy of the record: kept now */
    struct archive_record held;
    int has_held = 0;
    if (rc == 0)
        rc = audit__archive_record_read(adb, "state = 'held'", NULL, 0, &held, &has_held, err);
    if (rc == 0 && !has_held) {
        held = r;
        snprintf(held.state, sizeof(held.state), "held");
        rc = audit__archive_record_write(adb, &held, 1, err);
    }
    if (rc == 0)
        rc = audit__archive_remove(live, yield, adb, &r, o->chunk, o->progress, err);
    if (conn || adb)
        lite->close_reader(conn, adb);
    if (rc == 0)
        rc = mark_done(live, r.id, err);
    *resumed = rc == 0;
    return rc;
}

static int archive_into(struct db *live, int yield, const struct audit_backend *lite,
                        const struct audit_archive_options *o, struct audit_archived *out,
                        struct medic_error *err)
{
    const int64_t before = o->before / MEDIC_NS_PER_MS;
    struct archive_record prev, r;
    memset(&r, 0, sizeof(r));
    int has_prev = 0;
    int64_t cut[ARCHIVE_CHAINS];
    void *aconn = NULL;
    struct db *adb = NULL;
    /* created before the snapshot: PostgreSQL's read-only transaction
     * writes a temporary table but creates none */
    int rc = db_exec(live, "CREATE TEMP TABLE IF NOT EXISTS archive_pinned (id BIGINT PRIMARY KEY)",
                     err);
    if (rc == 0)
        rc = db_exec(live, "DELETE FROM archive_pinned", err);
    if (rc == 0)
        rc = db_begin_snapshot(live, err);
    int snap = rc == 0;
    if (rc == 0)
        rc = audit__archive_record_read(live, "state <> 'held' ORDER BY id DESC LIMIT 1", NULL, 0,
                                        &prev, &has_prev, err);
    if (rc == 0)
        rc = find_cuts(live, before, cut, err);
    if (rc == 0)
        rc = chain_ends(live, cut, has_prev ? &prev : NULL, &r, err);
    if (rc == 0)
        rc = lite->open_target(o->out, &aconn, &adb, err);
    /* the archive holds rows whose references stay in the log */
    if (rc == 0)
        rc = db_exec(adb, "PRAGMA foreign_keys = OFF", err);
    if (rc == 0)
        rc = db_begin(adb, err);
    if (rc == 0)
        rc = copy_moving(live, adb, before, cut, r.counts, o->progress, err);
    if (rc == 0)
        rc = db_commit(adb, err);
    if (snap) {
        struct medic_error ignored = {0};
        db_commit(live, &ignored); /* ends the snapshot */
    }
    long long counted[ARCHIVED_KINDS] = {0}, moving = 0;
    if (rc == 0)
        rc = audit__archive_digest(adb, r.digest, counted, err);
    for (int k = 0; k < ARCHIVED_KINDS; k++)
        moving += r.counts[k];
    if (rc == 0 && moving == 0) { /* no archive of nothing */
        lite->close_reader(aconn, adb);
        unlink(o->out);
        return 0;
    }
    r.created_at = medic_time_now() / MEDIC_NS_PER_MS;
    r.before_at = before;
    snprintf(r.file, sizeof(r.file), "%s", o->out);
    /* the log's record first: from it on, the log's chains start where
     * the archive's end, and a stopped run is finished by the next */
    snprintf(r.state, sizeof(r.state), "removing");
    if (rc == 0)
        rc = audit__archive_record_write(live, &r, 0, err);
    snprintf(r.state, sizeof(r.state), "held");
    if (rc == 0)
        rc = audit__archive_record_write(adb, &r, 1, err);
    if (rc == 0)
        say(o->progress, "written, now taking its rows out of the log:", o->out, (long long)r.id);
    if (rc == 0)
        rc = audit__archive_remove(live, yield, adb, &r, o->chunk, o->progress, err);
    if (aconn || adb)
        lite->close_reader(aconn, adb);
    /* a file the log has no record of holds nothing anyone needs: gone, so
     * that the same command can run again */
    if (rc && !r.id && (aconn || adb))
        unlink(o->out);
    if (rc == 0)
        rc = mark_done(live, r.id, err);
    out->record = r.id;
    memcpy(out->counts, r.counts, sizeof(out->counts));
    for (int c = 0; c < ARCHIVE_CHAINS; c++)
        out->last_id[c] = r.last_id[c];
    return rc;
}

int audit_archive(const char *location, const struct audit_archive_options *o,
                  struct audit_archived *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    if (o->before > medic_time_now() - ARCHIVE_MIN_AGE_NS)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "--before must be at least an hour ago: newer rows may still be "
                               "retried by Alertmanager or awaited by the engine");
    if (access(o->out, F_OK) == 0)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "%s already exists: an archive goes into a new file", o->out);
    const struct audit_backend *b = audit__backend_for(location),
                               *lite = audit__backend_for(o->out);
    if (lite->shared)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "--out is a file (an SQLite audit log of the rows moved)");
    void *conn = NULL;
    struct db *live = NULL;
    int rc = b->open_target(location, &conn, &live, err);
    if (rc == 0)
        rc = finish_earlier(lite, live, !b->shared, o, &out->resumed, err);
    if (rc == 0)
        rc = archive_into(live, !b->shared, lite, o, out, err);
    if (conn || live)
        b->close_reader(conn, live);
    return rc;
}

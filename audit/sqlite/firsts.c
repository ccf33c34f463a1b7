/* SPDX-License-Identifier: Apache-2.0 */
/* The dedupe keys of the log's first notifications, in the writer's
 * memory (sqlite.h): a notification's duplicate check finds the ids stored
 * under its key's first 64 bits here and reads only those rows, by id, to
 * compare the whole key. An index on the prefix instead put every
 * notification into a random leaf of a b-tree, which on a log of weeks is
 * a page read and written per notification.
 *
 * The table is a hint that may hold too much, never too little: ids whose
 * rows were rolled back or archived are still listed (their rows fail the
 * comparison), and every first notification in the log is listed: those
 * of the log when it was opened (the index notifications_firsts, in id
 * order), the writer's own as it stores them, and those another process
 * stored, read in each write transaction once PRAGMA data_version says
 * another connection committed. */
#include "sqlite.h"

#include <stdlib.h>

/* Open addressing, linear probing; an id of 0 is an empty slot (ids start
 * at 1). The same prefix may be listed under several ids. */
static size_t slot_of(const struct lite_firsts *f, int64_t prefix)
{
    return (size_t)(uint64_t)prefix & (f->cap - 1);
}

static void put(struct lite_firsts *f, int64_t prefix, int64_t id)
{
    size_t i = slot_of(f, prefix);
    while (f->slots[i].id)
        i = (i + 1) & (f->cap - 1);
    f->slots[i].prefix = prefix;
    f->slots[i].id = id;
    f->count++;
}

int audit__firsts_add(struct lite_firsts *f, int64_t prefix, int64_t id)
{
    if ((f->count + 1) * 2 > f->cap) { /* at most half full */
        size_t cap = f->cap ? f->cap * 2 : 1024;
        struct lite_first *slots = calloc(cap, sizeof(*slots));
        if (!slots)
            return MEDIC_E_NOMEM;
        struct lite_first *old = f->slots;
        size_t old_cap = f->cap;
        f->slots = slots;
        f->cap = cap;
        f->count = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].id)
                put(f, old[i].prefix, old[i].id);
        free(old);
    }
    put(f, prefix, id);
    return 0;
}

int64_t audit__firsts_next(const struct lite_firsts *f, int64_t prefix, size_t *at)
{
    if (!f->cap)
        return 0;
    size_t i = *at == AUDIT_FIRSTS_START ? slot_of(f, prefix) : *at;
    for (; f->slots[i].id; i = (i + 1) & (f->cap - 1))
        if (f->slots[i].prefix == prefix) {
            *at = (i + 1) & (f->cap - 1); /* the table is never full: an empty slot ends */
            return f->slots[i].id;
        }
    return 0;
}

static void forget(struct lite_firsts *f)
{
    free(f->slots);
    f->slots = NULL;
    f->cap = f->count = 0;
    f->known_to = 0;
}

void audit__firsts_release(struct lite_firsts *f)
{
    forget(f);
    sqlite3_finalize(f->version);
    sqlite3_finalize(f->newest);
    sqlite3_finalize(f->is_first);
    *f = (struct lite_firsts){0};
}

/* Lists the first notifications stored after id `after`. */
static int read_after(struct lite_firsts *f, sqlite3 *db, int64_t after, struct medic_error *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT id, dedupe_prefix FROM notifications INDEXED BY"
                                " notifications_firsts WHERE duplicate_of IS NULL AND id > ?1"
                                " ORDER BY id",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 1, after);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        rc = audit__firsts_add(f, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 0))
                 ? SQLITE_NOMEM
                 : SQLITE_OK;
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return 0;
    return medic_error_set(err, rc == SQLITE_NOMEM ? MEDIC_E_NOMEM : MEDIC_E_STORE,
                           "cannot read the log's notifications for their duplicate check: %s",
                           rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
}

/* The integer the cached statement *st (sql) gives. */
static int read_int(sqlite3 *db, sqlite3_stmt **st, const char *sql, int64_t *out)
{
    int rc = *st ? SQLITE_OK : sqlite3_prepare_v2(db, sql, -1, st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(*st)) == SQLITE_ROW) {
        *out = sqlite3_column_int64(*st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_reset(*st);
    return rc;
}

/* PRAGMA data_version and the newest notification's id (0: none). */
static int read_state(struct lite_firsts *f, sqlite3 *db, int64_t *version, int64_t *newest,
                      struct medic_error *err)
{
    *newest = 0;
    if (read_int(db, &f->version, "PRAGMA data_version", version) != SQLITE_OK ||
        read_int(db, &f->newest, "SELECT coalesce(max(id), 0) FROM notifications", newest) !=
            SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "cannot read the log's state: %s",
                               sqlite3_errmsg(db));
    return 0;
}

int audit__firsts_load(struct lite_firsts *f, sqlite3 *db, struct medic_error *err)
{
    forget(f);
    int64_t newest = 0;
    int rc = read_state(f, db, &f->data_version, &newest, err);
    /* what another process stores meanwhile is read again: listed twice */
    if (rc == 0 && (rc = read_after(f, db, 0, err)) == 0)
        f->known_to = newest;
    return rc;
}

/* known_to is the newest id committed when the last write transaction
 * began, not the newest the writer stored: a transaction rolled back
 * leaves its ids to be given again, maybe to another process's rows. */
int audit__firsts_catch_up(struct lite_firsts *f, sqlite3 *db, struct medic_error *err)
{
    int64_t version = 0, newest = 0;
    int rc = read_state(f, db, &version, &newest, err);
    if (rc || version == f->data_version) { /* no other connection committed since */
        f->known_to = rc ? f->known_to : newest;
        return rc;
    }
    if (newest < f->known_to) {
        /* another process removed the newest notifications (an archive of
         * everything): SQLite may give their ids again, so read all */
        rc = audit__firsts_load(f, db, err);
    } else if ((rc = read_after(f, db, f->known_to, err)) == 0) {
        f->known_to = newest; /* this writer's own since are listed twice, harmlessly */
    }
    f->data_version = version;
    return rc;
}

int audit__firsts_find(struct lite_firsts *f, sqlite3 *db, int64_t prefix, const char *key,
                       int64_t *first, struct medic_error *err)
{
    *first = 0;
    int rc = f->is_first ? SQLITE_OK
                         : sqlite3_prepare_v2(db,
                                              "SELECT 1 FROM notifications WHERE id = ?1 AND"
                                              " duplicate_of IS NULL AND dedupe_key = ?2",
                                              -1, &f->is_first, NULL);
    size_t at = AUDIT_FIRSTS_START;
    for (int64_t id; rc == SQLITE_OK && !*first && (id = audit__firsts_next(f, prefix, &at));) {
        sqlite3_bind_int64(f->is_first, 1, id);
        sqlite3_bind_text(f->is_first, 2, key, -1, SQLITE_STATIC);
        rc = sqlite3_step(f->is_first);
        if (rc == SQLITE_ROW)
            *first = id;
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
        sqlite3_reset(f->is_first);
    }
    return rc == SQLITE_OK ? 0
                           : medic_error_set(err, MEDIC_E_STORE, "looking up duplicates: %s",
                                             sqlite3_errmsg(db));
}

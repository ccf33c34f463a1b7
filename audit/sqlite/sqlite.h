/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite backend's insides (private to audit/sqlite/): the store's
 * state (s->state), the threads that make its commits durable and copy
 * its WAL, its schema's migrations, and its SQL layer's operations, which
 * its table (backend.c) lists. The only place outside this folder's .c
 * files that names sqlite3. */
#ifndef MEDIC_AUDIT_SQLITE_H
#define MEDIC_AUDIT_SQLITE_H

#include "backend.h"

#include <pthread.h>
#include <sqlite3.h>

/* When the checkpointer copies (checkpointer.c): under the store's lock. */
struct ckpt_plan {
    int running;   /* asked, and not done yet */
    int asked_at;  /* the WAL's frames when it was last asked */
    int catch_ups; /* times asked past AUDIT_WAL_RESTART_PAGES */
};

/* A committed batch waiting for its WAL sync. */
struct synced {
    struct job *batch;
    int fd; /* the WAL to fdatasync; -1: nothing was left to sync */
    int64_t start;
    struct synced *next;
};

/* firsts.c: the dedupe keys' first 64 bits of the log's first
 * notifications (duplicate_of NULL) with their ids, in memory: the
 * writer's duplicate check reads only the rows listed under a key's
 * prefix. Loaded when the log is opened (audit__firsts_load), added to as
 * the writer stores (audit__firsts_add), and brought up to date in each
 * write transaction with what other processes stored
 * (audit__firsts_catch_up). audit__firsts_find sets *first to the id of
 * the first notification stored with key (0: none), reading only the rows
 * listed under its prefix; audit__firsts_next gives those ids one by one
 * from *at (AUDIT_FIRSTS_START at first), then 0. */
struct lite_first {
    int64_t prefix;
    int64_t id; /* 0: an empty slot */
};
struct lite_firsts {
    struct lite_first *slots;
    size_t cap, count;    /* cap a power of two, at least twice count */
    int64_t known_to;     /* every first up to this id is listed */
    int64_t data_version; /* PRAGMA data_version when last read */
    sqlite3_stmt *version, *newest, *is_first;
};
#define AUDIT_FIRSTS_START ((size_t)-1)
int audit__firsts_load(struct lite_firsts *f, sqlite3 *db, struct medic_error *err);
int audit__firsts_catch_up(struct lite_firsts *f, sqlite3 *db, struct medic_error *err);
int audit__firsts_add(struct lite_firsts *f, int64_t prefix, int64_t id);
int audit__firsts_find(struct lite_firsts *f, sqlite3 *db, int64_t prefix, const char *key,
                       int64_t *first, struct medic_error *err);
int64_t audit__firsts_next(const struct lite_firsts *f, int64_t prefix, size_t *at);
void audit__firsts_release(struct lite_firsts *f);

/* The store's state on SQLite (s->state). */
struct lite_store {
    sqlite3 *conn; /* the writer's */
    struct lite_firsts firsts;
    /* at synchronous=FULL through the gathering VFS: a commit leaves its
     * WAL sync to the syncer thread (syncer.c), which completes the batches
     * once that sync is done, while the writer goes on with the next
     * batch; under the store's lock */
    int deferring;
    int syncer_up; /* the syncer thread runs */
    pthread_t syncer;
    pthread_cond_t synced_work; /* a batch handed over, or stopping */
    struct synced *to_sync, *to_sync_tail;
    int syncing; /* a sync in flight */
    int syncer_stopping;
    int wal_frames; /* in the WAL after the last commit (the writer's own) */
    /* checkpointer.c, started with the syncer: its connection, and where
     * its checkpoint stands (under the store's lock) */
    sqlite3 *ckpt_db;
    pthread_t checkpointer;
    pthread_cond_t ckpt_work;
    struct ckpt_plan ckpt_plan;
    int ckpt_stopping;
};

#define LITE_STORE(s) ((struct lite_store *)(s)->state)

/* syncer.c: the thread that makes committed batches durable, started by
 * audit__syncer_start when deferring; audit__syncer_hand gives it a
 * committed batch (or syncs and completes it at once when memory is
 * short); audit__syncer_stop completes everything handed, then joins.
 * audit__syncer_busy (under the store's lock): a sync is in flight or
 * waits. */
int audit__syncer_start(struct audit_store *s);
void audit__syncer_hand(struct audit_store *s, struct job *batch, int fd, int64_t start);
void audit__syncer_stop(struct audit_store *s);
int audit__syncer_busy(const struct audit_store *s);

/* WAL pages committed after which the checkpointer copies them. Past
 * AUDIT_WAL_RESTART_PAGES in all, it is asked again once
 * AUDIT_CATCH_UP_PAGES are (twice at most), and the writer copies what it
 * left itself, so that its next transaction starts the WAL again from its
 * beginning. */
#define AUDIT_CHECKPOINT_PAGES 1000
#define AUDIT_WAL_RESTART_PAGES 8000
#define AUDIT_CATCH_UP_PAGES 200

/* checkpointer.c: the thread that copies the WAL's pages into the
 * database on a connection of its own (path), started when deferring.
 * audit__checkpointer_ask, on the writer after each commit with the WAL's
 * frames, asks it to copy what is committed as said above; it returns 1
 * when the writer should now copy the rest itself (the checkpointer idle,
 * and the rest small or asked for twice), else 0.
 * audit__checkpointer_stop joins it (nothing when not started). */
int audit__checkpointer_start(struct audit_store *s, const char *path);
int audit__checkpointer_ask(struct audit_store *s, int frames);
void audit__checkpointer_stop(struct audit_store *s);

/* The decision audit__checkpointer_ask takes, on its own: after a commit
 * that left frames in the WAL, wait; ask the checkpointer (p->running set
 * until it is done); or finish the copy on the writer. */
enum ckpt_step { CKPT_WAIT, CKPT_ASK, CKPT_FINISH };
enum ckpt_step audit__ckpt_plan_next(struct ckpt_plan *p, int frames);

/* schema.c: brings db up to the newest schema, keeping the version in
 * PRAGMA user_version: a new file at once from the schema's description, an
 * older one one transaction per version. Refuses a database newer than
 * this build. audit_lite_migrate_steps always takes the steps (a test
 * compares what both give). */
int audit_lite_migrate(sqlite3 *db, struct medic_error *err);
int audit_lite_migrate_steps(sqlite3 *db, struct medic_error *err);

/* db.c: the first column of the first row sql gives, else otherwise (the
 * statement failed or gave no row). */
int64_t audit_lite_int(sqlite3 *db, const char *sql, int64_t otherwise);

/* db.c: the SQL layer over a handle the caller keeps owning (db_free
 * leaves it), and its operations for the backend's table. */
struct db *audit_lite_db(sqlite3 *handle);
void lite_free(struct db *d);
int lite_exec(struct db *d, const char *sql, struct medic_error *err);
int lite_no_lock(struct db *d, int64_t key, int shared, struct medic_error *err);
int lite_begin(struct db *d, struct medic_error *err);
int lite_begin_snapshot(struct db *d, struct medic_error *err);
int lite_commit(struct db *d, struct medic_error *err);
void lite_rollback(struct db *d);
int64_t lite_last_insert_id(struct db *d);
int lite_prepare(struct db *d, const char *sql, int cached, struct db_stmt **out,
                 struct medic_error *err);
void lite_bind_int64(struct db_stmt *st, int i, int64_t v);
void lite_bind_text_len(struct db_stmt *st, int i, const char *v, size_t len);
void lite_bind_double(struct db_stmt *st, int i, double v);
void lite_bind_blob(struct db_stmt *st, int i, const void *data, size_t len);
int lite_step(struct db_stmt *st, struct medic_error *err);
int lite_column_count(struct db_stmt *st);
const char *lite_column_name(struct db_stmt *st, int i);
enum db_type lite_column_type(struct db_stmt *st, int i);
int64_t lite_column_int64(struct db_stmt *st, int i);
double lite_column_double(struct db_stmt *st, int i);
const char *lite_column_text(struct db_stmt *st, int i);
size_t lite_column_bytes(struct db_stmt *st, int i);
const void *lite_column_blob(struct db_stmt *st, int i, size_t *len);
void lite_reset(struct db_stmt *st);
void lite_clear(struct db_stmt *st);
void lite_finalize(struct db_stmt *st);

#endif

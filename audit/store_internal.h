/* SPDX-License-Identifier: Apache-2.0 */
/* The audit store's insides, shared by store.c (the queue, the writer
 * thread, group commit) and rows.c (the statements and the rows each kind
 * of request writes). Private to audit/. */
#ifndef MEDIC_AUDIT_STORE_INTERNAL_H
#define MEDIC_AUDIT_STORE_INTERNAL_H

#include "audit.h"
#include "lock.h"
#include "db.h"

#include <pthread.h>

struct audit_backend;

/* JOB_LEASE writes nothing: its transaction only checks the leader's term. */
enum job_kind {
    JOB_NOTIFICATION,
    JOB_DECISION,
    JOB_ACTION,
    JOB_EVALUATION,
    JOB_LEASE,
    JOB_APPROVAL,
    JOB_PAUSE,
    JOB_RELEASE
};

/* What the caller's thread computes before queueing a notification, so
 * that the single writer thread does only database work: the dedupe key
 * and every alert's labels and annotations as JSON, NUL-separated in one
 * buffer (offsets[2i] labels, offsets[2i+1] annotations, offsets[2n] the
 * end). */
struct prepared_notification {
    char dedupe_key[65];
    int64_t dedupe_prefix;
    unsigned char *compressed; /* the raw body compressed, when that is smaller */
    size_t compressed_len;     /* 0: store the body as it is */
    struct medic_buf json;
    size_t *offsets;
};

struct job {
    enum job_kind kind;
    const void *in;
    const struct prepared_notification *prepared;
    void *out;
    int64_t id;
    int rc;
    int done;
    int left_out;        /* failed alone: its batch committed without it */
    int written;         /* written with the batch's others (PostgreSQL), in this transaction */
    pthread_cond_t cond; /* signalled when done: wakes only this job's caller */
    struct medic_error err;
    struct job *next;
    /* asynchronous jobs: called on the writer or the syncer thread when
     * durable, then the job (heap, owned by the store) is freed */
    audit_done_fn done_fn;
    void *done_arg;
    struct prepared_notification owned_prep;
};

enum stmt_id {
    ST_FIND_FIRST,
    ST_INSERT_NOTIFICATION,
    ST_INSERT_ALERT,
    ST_INSERT_DECISION,
    ST_INSERT_ACTION,
    ST_LAST_DECISION_HASH,
    ST_LAST_ACTION_HASH,
    ST_SET_DECISION_HASH,
    ST_SET_ACTION_HASH,
    ST_MARK_EVALUATED,
    ST_PUT_ENGINE_ROW,
    ST_DROP_ENGINE_ROW,
    ST_DROP_ENGINE_ROWS,
    ST_DROP_LEGACY_STATE,
    ST_INSERT_CHANGE,
    ST_LAST_CHANGE_HASH,
    ST_SET_CHANGE_HASH,
    ST_INSERT_FIRST, /* PostgreSQL: a notification, unless its key is stored already */
    ST_INSERT_APPROVAL,
    ST_MARK_APPROVAL,
    ST_INSERT_PAUSE,
    ST_MARK_PAUSE,
    ST_INSERT_RELEASE,
    ST_MARK_RELEASE,
    ST_COUNT
};

/* The three hash chains. */
enum chain { CHAIN_DECISIONS, CHAIN_ACTIONS, CHAIN_CHANGES, CHAIN_COUNT };

struct audit_store {
    const struct audit_backend *backend; /* backend.h */
    void *state;                         /* the backend's own: its connection, its threads */
    struct db *db;
    struct db_stmt *stmts[ST_COUNT];
    /* each chain's last hash in the open transaction ("": not read yet);
     * forgotten when a transaction begins */
    char chain_head[CHAIN_COUNT][65];
    struct audit_options options;
    pthread_t writer;
    /* the queue, the stats and the term; a backend's threads use it too */
    struct medic_mutex lock;
    pthread_cond_t work;
    struct job *head, *tail;
    size_t pending;
    int stopping;
    struct audit_stats stats; /* under lock */
    /* several replicas: the term this replica leads (epoch 0: it does not),
     * checked by every transaction that writes a decision or an intent */
    char replica[64];
    int64_t epoch;
    /* writers of their own for notifications, each on its own connection
     * (backend.h's notification_lanes); NULL in a lane */
    struct audit_store **lanes;
    size_t lane_count;
};

/* Tells the batch's callers how it ended (rc and err for every job not
 * left out), from the time it began; frees its asynchronous jobs. */
void audit__complete_batch(struct audit_store *s, struct job *batch, int rc,
                           const struct medic_error *err, int64_t start);

int audit__prepare_notification(const struct audit_notification_in *in,
                                struct prepared_notification *p);
void audit__prepared_release(struct prepared_notification *p);
int audit__run_job(struct audit_store *s, struct job *job);
int audit__prepare_all(struct audit_store *s, struct medic_error *err);
/* Whether a job appends to a hash chain; whether only the leader may
 * write it (a decision or an action's intent: an outcome records what
 * already ran). */
int audit__job_chains(const struct job *j);
int audit__job_fenced(const struct job *j);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log: every notification (raw payload kept), its alerts, every
 * decision and every action outcome, in one SQLite database in WAL mode.
 *
 * Writes go through one writer thread that groups concurrent requests into
 * one transaction (group commit): a caller blocks until its rows are
 * durable, and each request is all-or-nothing inside the batch. Readers
 * open the database read-only and may run while the daemon writes. */
#ifndef MEDIC_AUDIT_H
#define MEDIC_AUDIT_H

#include "alert.h"
#include "buf.h"
#include "error.h"
#include "table.h"

#include <stddef.h>
#include <stdint.h>

struct audit_store;

struct audit_options {
    size_t max_pending;   /* queued write requests before MEDIC_E_BUSY; default 4096 */
    int busy_timeout_ms;  /* wait for a lock held by another process; default 5000 */
    int synchronous_full; /* 1 (default): fsync the WAL at every commit */
    /* 1 (default): with synchronous_full, SQLite, that fsync runs on a
     * thread of its own while the writer goes on with the next batch (an
     * answer still waits for it) */
    int defer_syncs;
    /* a backend several processes write (PostgreSQL): connections that
     * store notifications beside the writer of everything else, which
     * keeps its order; 0: none; default AUDIT_WRITERS_AUTO, a quarter of
     * the cores, at most 4 */
    size_t notification_writers;
};
#define AUDIT_WRITERS_AUTO ((size_t)-1)

/* The store's own defaults, for a store opened without a configuration
 * (the configuration's directive table states the same; a test checks). */
#define AUDIT_DEFAULT_MAX_PENDING 4096
#define AUDIT_DEFAULT_BUSY_TIMEOUT_MS 5000
void audit_options_default(struct audit_options *options);

/* Opens (creating when missing) and migrates the database at location, a
 * path or a postgresql:// URL, then starts the writer thread. */
int audit_store_open(const char *location, const struct audit_options *options,
                     struct audit_store **out, struct medic_error *err);
/* Finishes queued writes, stops the writer and closes. NULL is a no-op. */
void audit_store_free(struct audit_store *store);

/* What the receiver hands over for one webhook request. */
struct audit_notification_in {
    const struct medic_notification *notification;
    const char *raw; /* the body exactly as received */
    size_t raw_len;
    int64_t received_at;            /* ns */
    const char *remote_addr;        /* may be NULL */
    const char *const *alert_nodes; /* alert_count entries, NULL where unknown */
};

struct audit_notification_result {
    int64_t id;             /* the row written for this request */
    int duplicate;          /* 1 when it repeats an earlier notification */
    int64_t duplicate_of;   /* that notification's id */
    int64_t first_alert_id; /* its alerts' ids follow on from this one; 0 when none */
};

/* Commits a notification and its alerts, or records it as a duplicate of an
 * earlier one with the same dedupe key (then no alert rows are added).
 * Blocks until durable. Errors: MEDIC_E_BUSY (queue full), MEDIC_E_STORE,
 * MEDIC_E_CLOSED. */
int audit_record_notification(struct audit_store *store, const struct audit_notification_in *in,
                              struct audit_notification_result *out, struct medic_error *err);

/* Called on one of the audit log's threads once a request is durable
 * (rc 0) or has failed (rc and err). It must not block, nor wait for the
 * audit log. */
typedef void (*audit_done_fn)(void *arg, int rc, const struct medic_error *err);

/* The same as audit_record_notification without blocking: returns 0 when
 * queued, and done(arg, ...) runs later; in and out must stay valid until
 * then. Returns MEDIC_E_BUSY or MEDIC_E_CLOSED at once (done is not
 * called) when the request cannot be queued. */
int audit_record_notification_async(struct audit_store *store,
                                    const struct audit_notification_in *in,
                                    struct audit_notification_result *out, audit_done_fn done,
                                    void *arg, struct medic_error *err);

/* A decision of the policy engine; verdict is execute, dry_run,
 * suppressed or no_match. Strings may be NULL. */
struct audit_decision_in {
    int64_t created_at;
    int64_t notification_id; /* 0 when none */
    int64_t alert_id;        /* 0 when none */
    const char *fingerprint;
    const char *node;
    const char *alertname;
    const char *policy;
    int step; /* -1 when none */
    const char *action;
    const char *params_json;
    double risk; /* NAN when unknown */
    const char *model_hash;
    const char *verdict;
    const char *reason;
    const char *config_hash;
};

/* Appends a decision to the hash chain; writes its id into out_id. */
int audit_record_decision(struct audit_store *store, const struct audit_decision_in *in,
                          int64_t *out_id, struct medic_error *err);

/* An action's intent (before it runs) or outcome (after). result is
 * pending for an intent; succeeded, failed, timed_out or interrupted for
 * an outcome. A decision gets at most one intent, enforced by the schema. */
struct audit_action_in {
    int64_t created_at;
    int64_t decision_id;
    int64_t intent_id; /* the intent an outcome closes; 0 for an intent */
    const char *action;
    const char *node;
    const char *target;
    const char *params_json;
    const char *result;
    int64_t duration_ms; /* -1 when not measured */
    const char *detail;
};

struct audit_reader;

/* Calls fn for every answer no engine took yet, oldest first. */
struct audit_pending_approval {
    int64_t id, decision_id, created_at;
    int approve;
    int undo; /* a denial that asks medic to undo what the incident holds */
    const char *by, *reason;
};
typedef int (*audit_approval_fn)(void *arg, const struct audit_pending_approval *a);
int audit_pending_approvals(struct audit_reader *reader, audit_approval_fn fn, void *arg,
                            struct medic_error *err);
/* What came of answer id: done 0 while the engine has not taken it. */
struct audit_approval_result {
    int done;
    int64_t decision_id; /* the decision it led to; 0: none */
    char verdict[16];    /* that decision's verdict ("" when none) */
    char action[32];     /* and its action ("" when none) */
    char result[600];
};
int audit_approval_result(struct audit_reader *reader, int64_t id,
                          struct audit_approval_result *out, struct medic_error *err);
/* Why decision_id is not a step waiting for approval, as a person reads
 * it: never pending, answered already (by whom), withdrawn or expired
 * (the decision that says so), or no such decision. */
int audit_pending_fate(struct audit_reader *reader, int64_t decision_id, char *out, size_t size,
                       struct medic_error *err);
/* Calls fn for every pause request no engine took yet, oldest first. */
struct audit_pending_pause {
    int64_t id, created_at, until;
    int pause;
    const char *by, *reason;
};
typedef int (*audit_pause_fn)(void *arg, const struct audit_pending_pause *p);
int audit_pending_pauses(struct audit_reader *reader, audit_pause_fn fn, void *arg,
                         struct medic_error *err);
/* Calls fn for every release no engine took yet, oldest first. */
struct audit_pending_release {
    int64_t id, created_at;
    const char *node, *by, *reason;
};
typedef int (*audit_release_fn)(void *arg, const struct audit_pending_release *r);
int audit_pending_releases(struct audit_reader *reader, audit_release_fn fn, void *arg,
                           struct medic_error *err);
int audit_release_result(struct audit_reader *reader, int64_t id, struct audit_approval_result *out,
                         struct medic_error *err);
/* What came of pause request id (as for answers: done, result). */
int audit_pause_result(struct audit_reader *reader, int64_t id, struct audit_approval_result *out,
                       struct medic_error *err);

int audit_record_action(struct audit_store *store, const struct audit_action_in *in,
                        int64_t *out_id, struct medic_error *err);

/* An incident's change of state (from equals state when it opened). */
struct audit_change_in {
    int64_t created_at;
    int64_t incident;
    const char *node;
    const char *policy;
    const char *from;
    const char *state;
    const char *cause;
    long decision; /* index in the evaluation's decisions that caused it; -1: none */
};

/* One row of the engine's state: kind and key name it, value is its JSON
 * (NULL: delete the row; kind NULL: delete every row, the whole state
 * follows). Returns 0 or an error code. */
typedef int (*audit_row_fn)(void *arg, const char *kind, const char *key, const char *value,
                            size_t len);

/* The rows of the engine's state a round changed, serialised by the
 * engine's thread before it hands them over: the writer only writes these
 * bytes (no lock of the engine's is held while it does). A value may name
 * decisions of the same evaluation that have no id yet: each reference
 * gives the bytes to replace ([offset, offset + len) of the value) and
 * the decision's index; the writer puts its id there as a JSON string. */
struct audit_row_ref {
    size_t offset, len, decision;
};
struct audit_row {
    size_t kind, key, value; /* offsets into data: NUL-terminated; value SIZE_MAX: deleted */
    size_t value_len;
    size_t first_ref, ref_count; /* into refs */
};
struct audit_rows {
    struct medic_buf data;
    struct audit_row *items;
    size_t count, cap;
    struct audit_row_ref *refs;
    size_t ref_count, ref_cap;
    int clear_first; /* every stored row goes first: the rows are the whole state */
};
void audit_rows_init(struct audit_rows *r);
void audit_rows_release(struct audit_rows *r);
/* Adds a row (value NULL: its removal; kind NULL: clear_first, and the
 * rows added so far are dropped). MEDIC_E_NOMEM, else 0. */
int audit_rows_add(struct audit_rows *r, const char *kind, const char *key, const char *value,
                   size_t len, const struct audit_row_ref *refs, size_t ref_count);

/* One round of the policy engine: its decisions, its incidents' changes,
 * the notifications it evaluated and the rows of its state that changed,
 * committed together, so that a crash never leaves a decision without the
 * state that remembers it (which would decide it again after a restart). */
/* A person's answer to a step waiting for approval (a pending decision):
 * recorded by whichever replica took it, taken by the leader's engine
 * once. Times are ns. */
struct audit_approval_in {
    int64_t created_at;
    int64_t decision_id; /* the pending decision */
    int approve;         /* 1 approve, 0 deny */
    const char *by;      /* who: the credential's name */
    const char *reason;  /* may be NULL */
    const char *remote_addr;
    int undo; /* a denial that asks medic to undo what the incident holds */
};
int audit_record_approval(struct audit_store *store, const struct audit_approval_in *in,
                          int64_t *out_id, struct medic_error *err);

/* A person's pause of every disruptive step, fleet-wide, or its end. */
struct audit_pause_in {
    int64_t created_at;
    int pause; /* 1 pause, 0 unpause */
    const char *by;
    const char *reason;
    int64_t until; /* MEDIC_TIME_UNSET: until unpaused */
    const char *remote_addr;
};
int audit_record_pause(struct audit_store *store, const struct audit_pause_in *in, int64_t *out_id,
                       struct medic_error *err);

/* A person's release of a quarantined node (after the repair). */
struct audit_release_in {
    int64_t created_at;
    const char *node;
    const char *by;
    const char *reason;
    const char *remote_addr;
};
int audit_record_release(struct audit_store *store, const struct audit_release_in *in,
                         int64_t *out_id, struct medic_error *err);

/* A person's request (an answer, a pause, a release) the engine took in an
 * evaluation: what came of it (result) and the decision that says so (its
 * index among the evaluation's decisions; -1: none). */
struct audit_request_mark {
    int64_t id;
    long decision;
    const char *result;
};

struct audit_evaluation_in {
    const struct audit_request_mark *approvals;
    size_t approval_count;
    const struct audit_request_mark *pauses;
    size_t pause_count;
    const struct audit_request_mark *releases;
    size_t release_count;
    const struct audit_decision_in *decisions;
    size_t decision_count;
    const struct audit_change_in *changes;
    size_t change_count;
    const int64_t *evaluated; /* notification ids */
    size_t evaluated_count;
    int64_t evaluated_at;           /* ns */
    const struct audit_rows *state; /* the state's changed rows; NULL: none */
    int drop_legacy_state;          /* remove the single-document state of an earlier medic */
};

/* Records an evaluation; decision_ids (decision_count entries, may be NULL)
 * receive the decisions' ids. */
int audit_record_evaluation(struct audit_store *store, const struct audit_evaluation_in *in,
                            int64_t *decision_ids, struct medic_error *err);

/* Counters for /metrics. Commit durations are in a histogram with the
 * bucket bounds of audit_commit_buckets (seconds). */
#define AUDIT_COMMIT_BUCKETS 12
extern const double audit_commit_buckets[AUDIT_COMMIT_BUCKETS];

struct audit_stats {
    uint64_t commits;
    uint64_t commit_failures;
    uint64_t requests_committed;
    uint64_t fenced; /* decisions and intents refused: this replica did not lead */
    /* SQLite: checkpoints run by the checkpointer thread (the bulk of the
     * WAL's pages), and by the writer (the pages left when the WAL must
     * start again under a load that never pauses) */
    uint64_t checkpoints_copied;
    uint64_t checkpoints_finished;
    uint64_t commit_bucket_counts[AUDIT_COMMIT_BUCKETS]; /* cumulative */
    double commit_seconds_sum;
    size_t queue_depth;
    size_t max_pending;
    int unhealthy; /* 1 from a failed commit until the next one that writes */
};

void audit_store_stats(struct audit_store *store, struct audit_stats *out);

/* Several replicas on PostgreSQL: the term of the lease this replica
 * holds (epoch 0: none). Every transaction that writes a decision or an
 * action's intent checks it against the lease row and is refused with
 * MEDIC_E_FENCED when it is not current. Without a term set, a PostgreSQL
 * store refuses them all; SQLite ignores it (one process owns the file). */
void audit_store_set_term(struct audit_store *store, const char *replica, int64_t epoch);
/* Whether this replica may act now: on PostgreSQL, a transaction that
 * checks its term against the lease row (MEDIC_E_FENCED when the lease is
 * gone or another holds it); on SQLite always 0. Asked right before every
 * command that disrupts a node. */
int audit_store_check_lease(struct audit_store *store, struct medic_error *err);

/* Several replicas sharing a PostgreSQL log: the leader's lease, as a
 * renewal or a read saw it. */
struct audit_lease {
    int64_t epoch;         /* the lease's term now */
    char holder[64];       /* the replica holding it */
    int ours;              /* whether that is this replica */
    int live;              /* not expired */
    char config_hash[65];  /* the holder's configuration ("": none published yet) */
    char forced[512];      /* an operator's word that another configuration may take it */
    char last_forced[768]; /* the last takeover so forced: the word, who took it, when */
    int took_forced;       /* this renewal began a term over another configuration */
};

/* The lease seen from one replica, on a connection of its own, opened at
 * the first renewal and again after it broke. */
struct audit_lease_client;
int audit_lease_client_open(const char *location, const char *replica,
                            struct audit_lease_client **out, struct medic_error *err);
void audit_lease_client_free(struct audit_lease_client *c);
/* Renews this replica's lease, or takes it when it is free, or expired
 * and either last held with the same configuration or forced; publishes
 * config_hash beside it. out says who holds it now. */
int audit_lease_client_renew(struct audit_lease_client *c, const char *config_hash,
                             int64_t lease_ms, struct audit_lease *out, struct medic_error *err);
/* The database's clock (clock_timestamp(), ns since the epoch) into
 * *db_now, read on the lease's connection, and the midpoint of the local
 * monotonic clock around the query into *mono_at (its round trip bounds
 * the error): the caller compares whichever local clock it keeps. */
int audit_lease_client_clock(struct audit_lease_client *c, int64_t *db_now, int64_t *mono_at,
                             struct medic_error *err);
/* Gives the lease of epoch up, so that another replica need not wait. */
int audit_lease_client_release(struct audit_lease_client *c, int64_t epoch,
                               struct medic_error *err);
/* The lease as stored (medic audit lease); MEDIC_E_NOTFOUND when no
 * replica ever took it, MEDIC_E_INVALID when location is not PostgreSQL. */
int audit_lease_read(const char *location, struct audit_lease *out, struct medic_error *err);
/* An operator's word, recorded in the lease: the next replica to take it
 * once it expires may do so although its configuration differs from the
 * last holder's. Used once. */
int audit_lease_force(const char *location, const char *reason, struct medic_error *err);

/* Word that an engine took people's requests (an answer, a pause, a
 * release), where the log can give it: on PostgreSQL the engine's
 * transaction says so to every replica listening when it commits. A
 * log one medic owns has none (MEDIC_E_INVALID): its own engine says so. */
struct audit_listener;
int audit_listener_open(const char *location, struct audit_listener **out, struct medic_error *err);
/* Waits at most timeout_ms (-1: no limit) for that word, or for wake_fd
 * (-1: none) to be readable: AUDIT_LISTEN_SAID when the word came, 0
 * otherwise, a negative MEDIC_E_* code when the connection broke (the next
 * wait connects again). */
#define AUDIT_LISTEN_SAID 1
int audit_listener_wait(struct audit_listener *l, int wake_fd, int timeout_ms,
                        struct medic_error *err);
void audit_listener_free(struct audit_listener *l); /* NULL: nothing */

/* ---- read side ---- */

struct audit_reader;

/* Opens an existing database read-only. */
int audit_reader_open(const char *path, struct audit_reader **out, struct medic_error *err);
void audit_reader_free(struct audit_reader *reader);

enum audit_kind {
    AUDIT_NOTIFICATIONS,
    AUDIT_ALERTS,
    AUDIT_DECISIONS,
    AUDIT_ACTIONS,
    AUDIT_INCIDENTS, /* each incident as it is now (its last change) */
    AUDIT_CHANGES,   /* every change of every incident */
    AUDIT_APPROVALS, /* people's answers to steps waiting for approval */
    AUDIT_PAUSES,    /* people's pauses of the fleet, and their ends */
    AUDIT_KIND_COUNT
};

/* Parses "notifications", "alerts", "decisions", "actions", "incidents",
 * "changes", "approvals" or "pauses"; -1 if not. */
int audit_kind_parse(const char *name);

/* Filters of `medic audit`; NULL or 0 means "any". Times are ns. */
struct audit_filter {
    const char *node;
    const char *alertname;
    const char *policy;
    const char *verdict;
    const char *status;
    const char *state; /* an incident's state */
    int64_t incident;  /* 0: any */
    int64_t decision;  /* decisions: that one; actions: its intent and outcome; 0: any */
    int waiting;       /* decisions: only steps still waiting for a person */
    int64_t since;     /* MEDIC_TIME_UNSET when open */
    int64_t until;
    long limit; /* 0: default 100 */
    /* errors name the filters as the HTTP API's query parameters
     * (state=...), not as the command line's options (--state) */
    int as_query;
};

void audit_filter_init(struct audit_filter *filter);

/* Runs an on-call query, newest first, into table (initialised here). */
int audit_query(struct audit_reader *reader, enum audit_kind kind,
                const struct audit_filter *filter, struct medic_table *table,
                struct medic_error *err);

/* One node's timeline, oldest first: its alerts, the decisions about it,
 * its incidents' changes and the actions on it, the newest limit (0: 100)
 * rows from since to until (MEDIC_TIME_UNSET: open). Columns time, kind
 * (alert, decision, incident, action), id (the row's in its table), what
 * and detail. */
int audit_timeline(struct audit_reader *reader, const char *node, int64_t since, int64_t until,
                   long limit, struct medic_table *table, struct medic_error *err);

/* The body of notification id exactly as Alertmanager sent it (stored
 * compressed), appended to out. MEDIC_E_NOTFOUND when there is no such
 * notification. */
int audit_read_payload(struct audit_reader *reader, int64_t id, struct medic_buf *out,
                       struct medic_error *err);

/* Calls fn for up to limit notifications (duplicates included) the engine
 * has not evaluated yet, oldest first: id, the id of its first alert
 * (alerts have consecutive ids; AUDIT_DUPLICATE for a duplicate, whose
 * alerts were recorded with the first), when it was received, and the
 * body as received. A non-zero return from fn stops the walk and is
 * returned. */
#define AUDIT_DUPLICATE (-1)
typedef int (*audit_pending_fn)(void *arg, int64_t id, int64_t first_alert_id, int64_t received_at,
                                const char *body, size_t len);
int audit_pending_notifications(struct audit_reader *reader, size_t limit, audit_pending_fn fn,
                                void *arg, struct medic_error *err);

/* An action medic carried out and saw succeed, with the alert behind it:
 * what `medic model dataset` takes for a confirmed fault. at is the
 * alert's startsAt (the decision's time when unset), ns; gpu the alert's
 * gpu label or NULL. */
struct audit_fault {
    const char *action, *node, *alertname, *gpu;
    int64_t at;
};
typedef int (*audit_fault_fn)(void *arg, const struct audit_fault *fault);

/* Calls fn for each confirmed fault whose time is in [since, until), oldest
 * first, keeping those whose action is one of actions (all when
 * action_count is 0). */
int audit_confirmed_faults(struct audit_reader *reader, int64_t since, int64_t until,
                           const char *const *actions, size_t action_count, audit_fault_fn fn,
                           void *arg, struct medic_error *err);

/* Whether node has a decision other than no_match in [since, until). */
int audit_node_has_decisions(struct audit_reader *reader, const char *node, int64_t since,
                             int64_t until, int *out, struct medic_error *err);

/* Calls fn for every notification received in [since, until), duplicates
 * included (duplicate 1: the engine sees their alerts again), oldest
 * first, with the time it was received (ns). */
typedef int (*audit_walk_fn)(void *arg, int64_t id, int64_t received_at, int duplicate,
                             const char *body, size_t len);
int audit_walk_notifications(struct audit_reader *reader, int64_t since, int64_t until,
                             audit_walk_fn fn, void *arg, struct medic_error *err);

/* The outcome of decision_id's action: result (succeeded, failed, ...)
 * and detail into the buffers. MEDIC_E_NOTFOUND while it has none. */
int audit_decision_outcome(struct audit_reader *reader, int64_t decision_id, char *result,
                           size_t result_size, char *detail, size_t detail_size,
                           struct medic_error *err);

/* The newest decision and action ids at one moment: a recovery walks
 * only what was written up to then, before this run decided or started
 * anything of its own. */
struct audit_recovery_bound {
    int64_t decision_id, action_id;
};
int audit_recovery_bound(struct audit_reader *reader, struct audit_recovery_bound *out,
                         struct medic_error *err);

/* Calls fn for every action intent up to bound that has no outcome (left
 * by a crash or a former leader), oldest first. */
typedef int (*audit_intent_fn)(void *arg, int64_t intent_id, int64_t decision_id,
                               const char *action, const char *node);
int audit_open_intents(struct audit_reader *reader, const struct audit_recovery_bound *bound,
                       audit_intent_fn fn, void *arg, struct medic_error *err);

/* A decision to execute that never got an action intent: it was queued in
 * memory when medic stopped. Times are ns; strings may be NULL. */
struct audit_unstarted {
    int64_t decision_id, created_at;
    const char *node, *alertname, *policy, *action, *params_json, *reason;
    int64_t alert_started_at; /* the alert's startsAt, else the decision's time */
    int resolved;             /* the alert resolved after the decision */
};
typedef int (*audit_unstarted_fn)(void *arg, const struct audit_unstarted *decision);
/* Calls fn for every such decision up to bound, oldest first. */
int audit_unstarted_decisions(struct audit_reader *reader, const struct audit_recovery_bound *bound,
                              audit_unstarted_fn fn, void *arg, struct medic_error *err);

/* Calls fn for every row of the engine's saved state (a non-zero return
 * stops the walk and is returned); sets *count to the rows seen. */
int audit_read_engine_rows(struct audit_reader *reader, audit_row_fn fn, void *arg, size_t *count,
                           struct medic_error *err);

/* The state an earlier medic saved as one document, into out;
 * MEDIC_E_NOTFOUND when there is none. */
int audit_read_engine_state(struct audit_reader *reader, struct medic_buf *out,
                            struct medic_error *err);

struct audit_verify_result {
    int ok;
    int64_t decisions_checked;
    int64_t actions_checked;
    int64_t changes_checked;
    const char *broken_table; /* "decisions", "actions" or "incident_changes" when not ok */
    int64_t broken_id;
    char why[160];
};

/* Recomputes the hash chains; names the first broken row. Returns 0 when
 * the check ran (see out->ok), an error when it could not run. */
int audit_verify(struct audit_reader *reader, struct audit_verify_result *out,
                 struct medic_error *err);

/* Verifies the archive file (`medic audit archive`) against the log it
 * came from: its rows' chains from the log's previous archive up to the
 * hashes the log keeps for it, and the digest and counts of its other
 * rows; out->ok 0 names what differs. *record is the log's record of it. */
int audit_verify_archive(struct audit_reader *live, const char *file,
                         struct audit_verify_result *out, int64_t *record, struct medic_error *err);

/* ---- archives: the rows older than a time moved out of the log ---- */

struct audit_archive_options {
    int64_t before;  /* ns: rows older than this move (at least an hour ago) */
    const char *out; /* the archive: a new SQLite file */
    size_t chunk;    /* rows taken out of the log per transaction (0: 2,000) */
    void (*progress)(const char *line);
};
enum {
    AUDIT_ARCHIVED_KINDS = 6
}; /* notifications, alerts, decisions, actions, changes,
      people's requests */
struct audit_archived {
    int64_t record;                         /* the log's record of this archive */
    long long counts[AUDIT_ARCHIVED_KINDS]; /* rows moved */
    int64_t last_id[3];                     /* the last decision, action and change moved */
    int resumed;                            /* an earlier archive's rows were taken out first */
};
/* Moves the rows older than o->before that nothing left refers to into
 * o->out, records where each chain was cut in the log, and takes them out
 * of the log while the daemon writes. */
int audit_archive(const char *location, const struct audit_archive_options *o,
                  struct audit_archived *out, struct medic_error *err);

/* The schema version this build writes (PRAGMA user_version). */
int audit_schema_version(void);

/* ---- where the log lives ---- */

/* Whether location names a log several replicas can share (PostgreSQL:
 * postgresql:// or postgres://), rather than one medic's file. */
int audit_location_is_shared(const char *location);

/* location for a log line: a URL's password replaced by "***". */
void audit_location_redacted(const char *location, char *out, size_t size);

/* Once, before any thread starts: the database libraries' process-wide
 * settings (SQLite keeps no allocation statistics, which take a global
 * mutex per allocation). */
void audit_library_init(void);

/* The database libraries medic runs with, one "  name:  version" line
 * each, for medic version. */
void audit_library_versions(struct medic_buf *out);

/* Copies the one-medic log at path into the empty shared one at url in one
 * transaction, table by table in id order, then verifies the chains there;
 * progress lines go to progress (NULL: none). */
#define AUDIT_MIGRATED_TABLES 11
extern const char *const audit_migrated_tables[AUDIT_MIGRATED_TABLES];
struct audit_migrated {
    long long rows[AUDIT_MIGRATED_TABLES]; /* per table, in audit_migrated_tables order */
    struct audit_verify_result verified;
};
int audit_migrate(const char *path, const char *url, void (*progress)(const char *line),
                  struct audit_migrated *out, struct medic_error *err);

#endif

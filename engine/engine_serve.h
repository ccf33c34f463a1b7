/* SPDX-License-Identifier: Apache-2.0 */
/* The running daemon, shared by the files that answer its HTTP hooks
 * (serve.c, metrics.c, api.c). Private to engine/. */
#ifndef MEDIC_ENGINE_SERVE_H
#define MEDIC_ENGINE_SERVE_H

#include "audit.h"
#include "lock.h"
#include "buf.h"
#include "config.h"
#include "engine.h"
#include "engine_answers.h"
#include "engine_readers.h"
#include "engine_dispatch.h"
#include "engine_fleet.h"
#include "engine_slurm_view.h"
#include "engine_leader.h"
#include "engine_pipeline.h"
#include "handover.h"
#include "page.h"
#include "server.h"

#include <pthread.h>
#include <stdatomic.h>

struct engine {
    const struct engine_serve_options *options;
    struct config_slot *configs; /* the running configuration's snapshots */
    /* the configuration it started with (a reference): what a reload
     * cannot change is read there, and a reload's change of it is named */
    const struct medic_config *started;
    const char *listen; /* started's: what the listener and store started with */
    const char *audit_path;
    struct audit_store *store;
    /* the policy engine and dispatch run while this replica leads (always,
     * on SQLite): the leader thread swaps them under role, for writing;
     * what uses them holds it for reading */
    struct medic_rwlock role;
    struct engine_pipeline *pipeline;
    struct engine_dispatch *dispatch;
    /* what the pipeline of a term is handed (dispatch's outcomes among
     * it), and what its rounds publish for dispatch: made before both and
     * released after both, so that neither points at the other */
    struct handover inbox;
    struct engine_leader *leader; /* NULL: one replica on SQLite */
    int shared_log;               /* PostgreSQL: other replicas commit to the log too */
    /* what the last leader left is taken up (serve.c's recover): on a
     * shared log by a thread of its own, started after a renewal (the
     * leader thread goes on renewing the lease while it runs: telling
     * on-call may wait on a notifier); recovery_live and the thread are
     * the leader thread's alone */
    atomic_int recovered;
    int recovery_live;
    pthread_t recovery;
    /* on a shared log the start of a term (serve.c's gain) runs on a thread
     * of its own too, while the leader thread renews the lease; the fields
     * are the leader thread's alone, start_rc the start's result once joined */
    int start_live;
    int start_rc;
    pthread_t starting;
    struct engine_fleet *fleet;
    struct engine_slurm_view *slurm; /* Slurm's nodes: maintenance, drains to reconcile */
    struct receiver_server *server;
    struct engine_answers *answers; /* people's requests waiting for their result */
    struct engine_readers *readers; /* pages and audit queries, off the HTTP threads */
    struct page_source page;        /* what the on-call page reads the daemon through */
    atomic_ullong reloads_ok;
    atomic_ullong reloads_failed;
    atomic_int last_reload_ok;
    atomic_llong last_reload_time;
};

/* A copy of the policy engine's state: the running engine's, or on a
 * replica that does not lead, the one last committed to the audit log. */
int engine_copy_state(struct engine *e, struct policy_state **out, struct medic_error *err);
/* The time the policy engine decides at (engine_pipeline_now); on a
 * replica that does not lead, the wall clock. */
int64_t engine_now(struct engine *e);
/* fn with the running engine's state in place (see
 * engine_pipeline_with_state), or on a replica that does not lead, with
 * the state last committed to the audit log; fn's result, or a failure to
 * read that state (err set). */
int engine_with_state(struct engine *e, engine_state_fn fn, void *arg, struct medic_error *err);
/* The topology groups of config's group caps that hold disrupted nodes
 * now (at most max into out; 0 when the state cannot be read). */
size_t engine_group_usage(struct engine *e, const struct medic_config *config,
                          struct policy_group_use *out, size_t max);
/* The engine's counters; zeros on a replica that does not lead. */
void engine_stats(struct engine *e, struct engine_pipeline_stats *out);

/* The receiver hooks for /metrics, GET /api/v1/<kind> and POST
 * /api/v1/dry-run. */
void engine_metrics(void *engine, struct medic_buf *out);
/* GET /api/v1/<kind>: answered on a reader (RECEIVER_LATER), or at once
 * with later NULL. */
int engine_api_query(void *engine, const struct receiver_query *q,
                     const struct receiver_later *later, struct medic_buf *out);
int engine_api_dry_run(void *engine, const char *body, size_t len, struct medic_buf *out);
/* POST /api/v1/approvals/ID: a person's answer to a pending step,
 * recorded, then RECEIVER_LATER: the engine's result comes through later
 * (engine_answers: 202 when no engine took it within 10 s); a refusal
 * before anything was recorded is answered at once. */
int engine_api_approve(void *engine, const char *id, const char *body, size_t len, const char *who,
                       const char *remote_addr, const struct receiver_later *later,
                       struct medic_buf *out);
/* POST /api/v1/nodes/NODE/release: a person's release of a quarantined
 * node (as approve). */
int engine_api_release(void *engine, const char *node, const char *body, size_t len,
                       const char *who, const char *remote_addr, const struct receiver_later *later,
                       struct medic_buf *out);
/* POST /api/v1/pause (pause 1) and DELETE /api/v1/pause (pause 0): the
 * fleet-wide pause (as approve). */
int engine_api_pause(void *engine, int pause, const char *body, size_t len, const char *who,
                     const char *remote_addr, const struct receiver_later *later,
                     struct medic_buf *out);
/* An answer was recorded: the engine, when this replica leads, takes it
 * now (a leader elsewhere reads it from the shared log). */
void engine_approval_recorded(struct engine *e);
/* The on-call page's view of the daemon (engine/page_source.c), set
 * before the server starts; and the receiver's hooks for its pages and
 * forms, which hand them to the page (page/). */
void engine_page_source(struct engine *e, struct page_source *out);
int engine_page(void *engine, enum receiver_page page, const char *arg, const char *authorization,
                const struct receiver_later *later, struct medic_buf *out);
int engine_page_form(void *engine, enum receiver_page form, const char *arg, const char *body,
                     size_t len, const char *who, const char *authorization, const char *origin,
                     const char *host, const char *remote_addr, const struct receiver_later *later,
                     struct medic_buf *out);

#endif

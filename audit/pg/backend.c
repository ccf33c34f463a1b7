/* SPDX-License-Identifier: Apache-2.0 */
/* The PostgreSQL backend (backend.h): a log several replicas share. The
 * leader's term is checked in every transaction that decides or starts an
 * action, and every statement is a round trip, so a batch's rows go
 * together (rows.c): its notifications in one insert (the unique index
 * decides which are first, duplicates follow), their alerts in one insert
 * under the id lock; an evaluation's decisions, incident changes, state
 * rows and evaluated marks in one statement each. What needs no answer of
 * its own (BEGIN, the locks) goes with the next statement (db.h). */
#include "pg.h"
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The notifications' own rows: firsts in one statement (the unique index
 * turns a key already stored into nothing), then duplicates. */
static int store_notifications(struct audit_store *s, struct job **jobs, size_t n,
                               struct medic_error *err)
{
    struct db_stmt *st = audit__pg_own(s, OWN_FIRSTS, err);
    if (!st)
        return err->code;
    for (size_t i = 0; i < n; i++)
        audit__bind_notification_at(st, (int)i * NOTIFICATION_COLUMNS, jobs[i], 0);
    /* each key stored goes to the first job with that key */
    int rc = 0, r;
    while ((r = db_step(st, err)) == 1) {
        int64_t id = db_column_int64(st, 0);
        const char *key = db_column_text(st, 1);
        for (size_t i = 0; i < n; i++) {
            struct audit_notification_result *out = jobs[i]->out;
            if (!out->id && strcmp(jobs[i]->prepared->dedupe_key, key) == 0) {
                out->id = id;
                break;
            }
        }
    }
    db_clear(st);
    if (r < 0)
        return r;
    /* the others repeat a key stored before, by this batch or earlier */
    size_t dups = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct audit_notification_result *out = jobs[i]->out;
        if (out->id)
            continue;
        const char *key = jobs[i]->prepared->dedupe_key;
        for (size_t k = 0; k < n && !out->duplicate_of; k++) {
            const struct audit_notification_result *o = jobs[k]->out;
            if (o->id && !o->duplicate && strcmp(jobs[k]->prepared->dedupe_key, key) == 0)
                out->duplicate_of = o->id;
        }
        if (!out->duplicate_of)
            rc = audit__find_first(s, jobs[i]->prepared, &out->duplicate_of, err);
        if (rc == 0 && !out->duplicate_of)
            rc = medic_error_set(err, MEDIC_E_STORE,
                                 "storing the notification: its key is taken but not found");
        out->duplicate = 1;
        dups++;
    }
    if (rc || dups == 0)
        return rc;
    if (!(st = audit__pg_own(s, OWN_DUPLICATES, err)))
        return err->code;
    int at = 0;
    for (size_t i = 0; i < n; i++) {
        const struct audit_notification_result *out = jobs[i]->out;
        if (out->duplicate)
            audit__bind_notification_at(st, NOTIFICATION_COLUMNS * at++, jobs[i],
                                        out->duplicate_of);
    }
    /* RETURNING gives the rows in the order they were given */
    size_t next = 0;
    while ((r = db_step(st, err)) == 1) {
        while (next < n && !((struct audit_notification_result *)jobs[next]->out)->duplicate)
            next++;
        if (next < n)
            ((struct audit_notification_result *)jobs[next++]->out)->id = db_column_int64(st, 0);
    }
    db_clear(st);
    return r < 0 ? r : 0;
}

/* The job that holds the next alert to store, from (*job, *alert) on:
 * duplicates store none, and a job's alerts end at its count. */
static struct audit_notification_result *next_alert(struct job **jobs, size_t *job, size_t *alert)
{
    for (;;) {
        struct audit_notification_result *out = jobs[*job]->out;
        const struct medic_notification *n =
            ((const struct audit_notification_in *)jobs[*job]->in)->notification;
        if (!out->duplicate && *alert < n->alert_count)
            return out;
        ++*job;
        *alert = 0;
    }
}

/* The first notifications' alerts in one statement, holding
 * ALERT_IDS_LOCK while it runs: shared when each has one alert (any order
 * of ids will do), else alone, so that each notification's alerts get
 * consecutive ids. */
static int store_alerts(struct audit_store *s, struct job **jobs, size_t n, struct medic_error *err)
{
    size_t total = 0;
    int shared = 1;
    for (size_t i = 0; i < n; i++)
        if (!((struct audit_notification_result *)jobs[i]->out)->duplicate) {
            size_t count =
                ((const struct audit_notification_in *)jobs[i]->in)->notification->alert_count;
            total += count;
            shared &= count <= 1;
        }
    if (total == 0)
        return 0;
    struct db_stmt *st = audit__pg_own(s, OWN_ALERTS, err);
    if (!st)
        return err->code;
    int rc = db_lock_session(s->db, ALERT_IDS_LOCK, shared, err);
    if (rc == 0) /* with the insert; if it fails, the rollback releases it */
        rc = db_unlock_session(s->db, ALERT_IDS_LOCK, shared, err);
    size_t job = 0, alert = 0; /* the next alert to store */
    for (size_t k = 0; rc == 0 && k < total; k++) {
        const struct audit_notification_result *out = next_alert(jobs, &job, &alert);
        audit__bind_alert_at(st, (int)k * ALERT_COLUMNS, jobs[job], out->id, alert++);
    }
    /* RETURNING gives the ids in the order given: each notification's
     * first, and a check that they follow on */
    job = 0;
    alert = 0;
    int64_t expect = 0;
    int r = 0;
    while (rc == 0 && (r = db_step(st, err)) == 1) {
        int64_t id = db_column_int64(st, 0);
        struct audit_notification_result *out = next_alert(jobs, &job, &alert);
        if (alert == 0)
            out->first_alert_id = id;
        else if (id != expect)
            rc = medic_error_set(err, MEDIC_E_STORE, "storing alerts: their ids do not follow on");
        expect = id + 1;
        alert++;
    }
    db_clear(st);
    return rc == 0 && r < 0 ? r : rc;
}

static int pg_write_together(struct audit_store *s, struct job *batch, struct medic_error *err)
{
    size_t n = 0;
    for (struct job *j = batch; j; j = j->next)
        n += j->kind == JOB_NOTIFICATION && !j->left_out;
    if (n == 0)
        return 0;
    struct job **jobs = calloc(n, sizeof(*jobs));
    if (!jobs)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    n = 0;
    for (struct job *j = batch; j; j = j->next)
        if (j->kind == JOB_NOTIFICATION && !j->left_out) {
            jobs[n++] = j;
            memset(j->out, 0, sizeof(struct audit_notification_result));
        }
    int rc = store_notifications(s, jobs, n, err);
    if (rc == 0)
        rc = store_alerts(s, jobs, n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        jobs[i]->written = 1;
    free(jobs);
    return rc;
}

/* The lock every transaction that appends to a hash chain takes first, so
 * that chained rows of two replicas (a former leader recording an
 * outcome, the new one deciding) never interleave. */
#define CHAIN_LOCK "SELECT pg_advisory_xact_lock(7308604759930986497)"

/* The chain lock when the batch appends to a chain, and the leader's term
 * checked (the lease row share-locked until the commit) when it decides or
 * starts an action; a replica that does not lead has those requests
 * refused (MEDIC_E_FENCED). */
static int pg_guard(struct audit_store *s, struct job *batch, struct medic_error *err)
{
    int chained = 0, leads = 0;
    for (struct job *j = batch; j; j = j->next)
        if (!j->left_out) {
            chained |= audit__job_chains(j);
            leads |= audit__job_fenced(j);
        }
    if (chained && db_exec_later(s->db, CHAIN_LOCK, err))
        return err->code;
    if (!leads)
        return 0;
    medic_mutex_lock(&s->lock);
    char replica[sizeof(s->replica)];
    memcpy(replica, s->replica, sizeof(replica));
    int64_t epoch = s->epoch;
    medic_mutex_unlock(&s->lock);
    struct medic_error why = {0};
    int rc = epoch ? audit_lease_fence(s->db, &PG_STORE(s)->fence, replica, epoch, &why)
                   : medic_error_set(&why, MEDIC_E_FENCED, "this replica is not the leader");
    if (rc && rc != MEDIC_E_FENCED) {
        *err = why;
        return rc;
    }
    for (struct job *j = batch; rc && j; j = j->next)
        if (!j->left_out && audit__job_fenced(j)) {
            j->left_out = 1;
            j->rc = MEDIC_E_FENCED;
            j->err = why;
        }
    return 0;
}

/* Several writers: the insert as first is tried, and the unique index on
 * the key turns it into nothing when another replica (or this batch)
 * stored the key already; then it is a duplicate of the one found. */
static int pg_insert_notification(struct audit_store *s, struct job *job, int64_t *id,
                                  int64_t *first)
{
    struct db_stmt *st = s->stmts[ST_INSERT_FIRST];
    *first = 0;
    audit__bind_notification_at(st, 0, job, 0);
    int rc = audit__step_id(st, id, &job->err, "storing the notification");
    if (rc || *id)
        return rc;
    if ((rc = audit__find_first(s, job->prepared, first, &job->err)))
        return rc;
    if (!*first)
        return medic_error_set(&job->err, MEDIC_E_STORE,
                               "storing the notification: its key is taken but not found");
    return audit__insert_notification_row(s, job, *first, id);
}

/* A notification's alerts under the id lock (see ALERT_IDS_LOCK). */
static int pg_insert_alerts(struct audit_store *s, struct job *job, int64_t id)
{
    const struct medic_notification *n =
        ((const struct audit_notification_in *)job->in)->notification;
    int shared = n->alert_count <= 1;
    int rc = db_lock_session(s->db, ALERT_IDS_LOCK, shared, &job->err);
    if (rc == 0)
        rc = audit__insert_alerts_each(s, job, id);
    if (rc == 0) /* else the rollback releases it */
        rc = db_unlock_session(s->db, ALERT_IDS_LOCK, shared, &job->err);
    return rc;
}

/* Connects and creates or checks the schema. A connection that breaks
 * later is opened again by the first batch after it (db.h). */
static int pg_open(struct audit_store *s, const char *url, struct medic_error *err)
{
    struct pg_store *p = calloc(1, sizeof(*p));
    if (!p)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    s->state = p;
    int rc = audit_pg_connect(url, &p->conn, err);
    if (rc == 0)
        rc = audit_pg_schema(p->conn, err);
    if (rc == 0 && !(s->db = audit_pg_db(p->conn)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

static void pg_close(struct audit_store *s)
{
    struct pg_store *p = PG_STORE(s);
    if (!p)
        return;
    db_finalize(p->fence);
    audit__pg_own_free(s);
    db_free(s->db);
    PQfinish(p->conn);
    free(p);
    s->state = NULL;
}

static void pg_finish(struct audit_store *s, struct job *batch, int rc,
                      const struct medic_error *err, int64_t start)
{
    audit__complete_batch(s, batch, rc, err, start); /* durable at COMMIT */
}

static int pg_open_reader(const char *url, void **conn, struct db **db, struct medic_error *err)
{
    PGconn *c = NULL;
    int rc = audit_pg_connect(url, &c, err);
    *conn = c;
    if (rc)
        return rc;
    PGresult *v = PQexec(c, "SELECT max(version) FROM medic_schema");
    int version = PQresultStatus(v) == PGRES_TUPLES_OK && !PQgetisnull(v, 0, 0)
                      ? atoi(PQgetvalue(v, 0, 0))
                      : 0;
    PQclear(v);
    if (version <= 0)
        return medic_error_set(err, MEDIC_E_STORE,
                               "postgresql: no medic audit log in this database (medic_schema)");
    rc = audit__readable_version(version, err);
    if (rc == 0 && !(*db = audit_pg_db(c)))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return rc;
}

static void pg_close_reader(void *conn, struct db *db)
{
    db_free(db);
    PQfinish(conn);
}

static void pg_library_version(struct medic_buf *out)
{
    int pq = PQlibVersion();
    medic_buf_printf(out, "  libpq:          %d.%d\n", pq / 10000, pq % 10000);
}

static const char *const pg_schemes[] = {"postgresql://", "postgres://", NULL};

const struct audit_backend audit_backend_pg = {
    .name = "postgresql",
    .schemes = pg_schemes,
    .shared = 1,
    .parallel_notifications = 1,
    .returning_id = " RETURNING id",
    .sql_types = {[SCHEMA_ID] = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                  [SCHEMA_KEY] = "BIGINT PRIMARY KEY",
                  [SCHEMA_INT] = "BIGINT",
                  [SCHEMA_REAL] = "DOUBLE PRECISION",
                  [SCHEMA_TEXT] = "TEXT",
                  [SCHEMA_BLOB] = "BYTEA",
                  [SCHEMA_TIMESTAMP] = "TIMESTAMPTZ"},
    .json_text = {"(", "::json ->> '", "')"},
    .library_version = pg_library_version,
    .open = pg_open,
    .close = pg_close,
    .guard = pg_guard,
    .write_together = pg_write_together,
    .finish = pg_finish,
    .insert_notification = pg_insert_notification,
    .insert_alerts = pg_insert_alerts,
    .insert_decisions = audit__pg_insert_decisions,
    .insert_changes = audit__pg_insert_changes,
    .mark_evaluated = audit__pg_mark_evaluated,
    .state_rows_together = audit__pg_rows_together,
    .open_reader = pg_open_reader,
    .close_reader = pg_close_reader,
    .open_target = audit_pg_open_target,
    .ids_follow = audit_pg_ids_follow,
    .lease_open = audit_pg_lease_open,
    .lease_free = audit_pg_lease_free,
    .lease_renew = audit_pg_lease_renew,
    .lease_clock = audit_pg_lease_clock,
    .lease_release = audit_pg_lease_release,
    .lease_read = audit_pg_lease_read,
    .lease_force = audit_pg_lease_force,
    .taken_sql = "NOTIFY " AUDIT_PG_TAKEN_CHANNEL,
    .listen_open = audit_pg_listen_open,
    .listen_wait = audit_pg_listen_wait,
    .listen_free = audit_pg_listen_free,
    .free_db = pg_free,
    .exec = pg_exec,
    .exec_later = pg_exec_later,
    .lock_session = pg_lock_session,
    .unlock_session = pg_unlock_session,
    .begin = pg_begin,
    .begin_snapshot = pg_begin_snapshot,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .last_insert_id = pg_last_insert_id,
    .prepare = pg_prepare,
    .prepare_rows = pg_prepare_rows,
    .bind_int64 = pg_bind_int64,
    .bind_text_len = pg_bind_text_len,
    .bind_double = pg_bind_double,
    .bind_blob = pg_bind_blob,
    .step = pg_step,
    .column_count = pg_column_count,
    .column_name = pg_column_name,
    .column_type = pg_column_type,
    .column_int64 = pg_column_int64,
    .column_double = pg_column_double,
    .column_text = pg_column_text,
    .column_bytes = pg_column_bytes,
    .column_blob = pg_column_blob,
    .reset = pg_reset,
    .clear = pg_clear,
    .finalize = pg_finalize,
};

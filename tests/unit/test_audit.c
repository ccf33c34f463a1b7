/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log: migrations, notifications and duplicates, the hash chain
 * and its verification, one action per decision, queries, concurrency. */
#include "audit.h"
#include "payload.h"
#include "sqlite/sqlite.h"
#include "timeutil.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <sys/stat.h>

#include <cmocka.h>

static char dir[64];
static char db_path[128];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/medic-test-audit-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(db_path, sizeof(db_path), "%s/audit.db", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char path[160];
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s%s", db_path, suffixes[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}

static struct audit_store *open_store(void)
{
    struct audit_store *s = NULL;
    struct medic_error err = {0};
    if (audit_store_open(db_path, NULL, &s, &err))
        fail_msg("open: %s", err.msg);
    return s;
}

static void parse(const char *text, struct medic_notification *n)
{
    struct receiver_limits lim;
    struct medic_error err = {0};
    receiver_limits_default(&lim);
    medic_notification_init(n);
    if (receiver_payload_parse(text, strlen(text), &lim, n, &err))
        fail_msg("parse: %s", err.msg);
}

static const char firing[] =
    "{\"version\":\"4\",\"groupKey\":\"{}:{alertname=\\\"GPUXidError\\\"}\",\"status\":\"firing\","
    "\"receiver\":\"medic\",\"alerts\":[{\"status\":\"firing\",\"labels\":{\"alertname\":"
    "\"GPUXidError\",\"instance\":\"gpu-node-01:9400\",\"gpu\":\"0\"},\"startsAt\":"
    "\"2026-11-22T07:54:16Z\",\"fingerprint\":\"35d73987604a9be0\"},{\"status\":\"firing\","
    "\"labels\":{\"alertname\":\"GPUXidError\",\"instance\":\"gpu-node-01:9400\",\"gpu\":\"1\"},"
    "\"startsAt\":\"2026-11-22T07:54:16Z\",\"fingerprint\":\"45d73987604a9be0\"}]}";

static int64_t record(struct audit_store *s, const char *text, int *duplicate)
{
    struct medic_notification n;
    parse(text, &n);
    const char *nodes[2] = {"gpu-node-01", "gpu-node-01"};
    struct audit_notification_in in = {&n,   text, strlen(text), medic_time_now(), "127.0.0.1:1",
                                       nodes};
    struct audit_notification_result res;
    struct medic_error err = {0};
    if (audit_record_notification(s, &in, &res, &err))
        fail_msg("record: %s", err.msg);
    medic_notification_release(&n);
    *duplicate = res.duplicate;
    return res.duplicate ? res.duplicate_of : res.id;
}

static int64_t count(const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void exec_rw(const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

/* Stores body as notification id's payload the way earlier versions did
 * (zlib, encoding 'deflate'). */
static void store_deflated(int64_t id, const char *body)
{
    unsigned char z[4096];
    uLongf zlen = sizeof(z);
    assert_int_equal(compress2(z, &zlen, (const Bytef *)body, strlen(body), 1), Z_OK);
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "UPDATE notifications SET payload = ?1,"
                                        " payload_encoding = 'deflate' WHERE id = ?2",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_blob(st, 1, z, (int)zlen, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, id);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_schema_and_duplicates(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    assert_int_equal(count("PRAGMA user_version"), audit_schema_version());
    assert_int_equal(count("SELECT count(*) FROM pragma_journal_mode WHERE journal_mode='wal'"), 1);
    int dup;
    int64_t first = record(s, firing, &dup);
    assert_false(dup);
    assert_int_equal(record(s, firing, &dup), first);
    assert_true(dup);
    assert_int_equal(count("SELECT count(*) FROM notifications"), 2);
    assert_int_equal(count("SELECT count(*) FROM notifications WHERE duplicate_of IS NULL"), 1);
    assert_int_equal(count("SELECT count(*) FROM alerts"), 2); /* only the first's */
    assert_int_equal(count("SELECT count(*) FROM alerts WHERE node='gpu-node-01'"), 2);
    assert_int_equal(count("SELECT payload_bytes FROM notifications WHERE id=1"),
                     (int64_t)strlen(firing));
    assert_true(count("SELECT length(payload) FROM notifications WHERE id=1") <
                (int64_t)strlen(firing)); /* compressed */
    assert_int_equal(count("SELECT count(*) FROM notifications WHERE payload_encoding='lz4'"), 2);
    audit_store_free(s);
    /* the body comes back byte for byte */
    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    struct medic_buf body;
    medic_buf_init(&body, 0);
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    assert_int_equal(audit_read_payload(r, first, &body, &err), 0);
    assert_int_equal(body.len, strlen(firing));
    assert_memory_equal(body.data, firing, body.len);
    assert_int_equal(audit_read_payload(r, 99, &body, &err), MEDIC_E_NOTFOUND);
    medic_buf_release(&body);
    audit_reader_free(r);
    /* a body that an earlier version stored with zlib reads back too */
    store_deflated(first, firing);
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    medic_buf_init(&body, 0);
    assert_int_equal(audit_read_payload(r, first, &body, &err), 0);
    assert_int_equal(body.len, strlen(firing));
    assert_memory_equal(body.data, firing, body.len);
    medic_buf_release(&body);
    audit_reader_free(r);
    /* a corrupted stored body is reported, not returned */
    exec_rw("UPDATE notifications SET payload = x'00112233' WHERE id = 1");
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    medic_buf_init(&body, 0);
    assert_int_equal(audit_read_payload(r, first, &body, &err), MEDIC_E_STORE);
    assert_non_null(strstr(err.msg, "corrupt"));
    medic_buf_release(&body);
    audit_reader_free(r);
    /* reopening migrates nothing and keeps the rows */
    s = open_store();
    assert_int_equal(record(s, firing, &dup), first);
    assert_true(dup);
    audit_store_free(s);
}

/* A notification of any number of alerts: every one is there at its
 * position, and their ids follow one another from the first alert's id
 * the store reports (the engine names each alert by it). */
static void test_alerts_of_any_count(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    const size_t counts[] = {1, 3, 8, 9, 19};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t k = counts[c];
        char text[16384], sql[256];
        int len = snprintf(text, sizeof(text),
                           "{\"version\":\"4\",\"groupKey\":\"{}:{count=\\\"%zu\\\"}\","
                           "\"status\":\"firing\",\"receiver\":\"medic\",\"alerts\":[",
                           k);
        const char *nodes[19];
        for (size_t i = 0; i < k; i++) {
            len += snprintf(text + len, sizeof(text) - (size_t)len,
                            "%s{\"status\":\"firing\",\"labels\":{\"alertname\":\"X\","
                            "\"gpu\":\"%zu\"},\"startsAt\":\"2026-11-22T07:54:16Z\","
                            "\"fingerprint\":\"f%zu-%zu\"}",
                            i ? "," : "", i, k, i);
            nodes[i] = "gpu-node-01";
        }
        snprintf(text + len, sizeof(text) - (size_t)len, "]}");
        struct medic_notification n;
        parse(text, &n);
        struct audit_notification_in in = {&n, text, strlen(text), medic_time_now(), NULL, nodes};
        struct audit_notification_result res;
        struct medic_error err = {0};
        if (audit_record_notification(s, &in, &res, &err))
            fail_msg("record: %s", err.msg);
        medic_notification_release(&n);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM alerts WHERE notification_id = %lld",
                 (long long)res.id);
        assert_int_equal(count(sql), (int64_t)k);
        snprintf(sql, sizeof(sql), "SELECT min(id) FROM alerts WHERE notification_id = %lld",
                 (long long)res.id);
        assert_int_equal(count(sql), res.first_alert_id);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM alerts WHERE notification_id = %lld AND id = %lld + "
                 "position AND fingerprint = 'f%zu-' || position",
                 (long long)res.id, (long long)res.first_alert_id, k);
        assert_int_equal(count(sql), (int64_t)k);
    }
    audit_store_free(s);
}

static void test_newer_schema_refused(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    audit_store_free(s);
    exec_rw("PRAGMA user_version = 99");
    struct medic_error err = {0};
    assert_int_equal(audit_store_open(db_path, NULL, &s, &err), MEDIC_E_STORE);
    assert_non_null(strstr(err.msg, "newer than this medic"));
    struct audit_reader *r = NULL;
    assert_int_equal(audit_reader_open(db_path, &r, &err), MEDIC_E_STORE);
    exec_rw("PRAGMA user_version = 1");
}

/* A log whose directory is missing names the directory and what to do. */
static void test_store_in_a_missing_directory(void **state)
{
    (void)state;
    char path[200];
    snprintf(path, sizeof(path), "%s.nodir/medic.db", db_path);
    struct audit_store *s = NULL;
    struct medic_error err = {0};
    assert_int_equal(audit_store_open(path, NULL, &s, &err), MEDIC_E_STORE);
    assert_non_null(strstr(err.msg, ".nodir' does not exist (create it, or set audit.path)"));
}

/* A reader pointed at a file that is not there says so and what to do,
 * and creates nothing (the database is opened read-only). */
static void test_reader_of_a_missing_file(void **state)
{
    (void)state;
    char missing[160];
    snprintf(missing, sizeof(missing), "%s.missing", db_path);
    unlink(missing);
    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    assert_int_equal(audit_reader_open(missing, &r, &err), MEDIC_E_STORE);
    assert_null(r);
    assert_non_null(strstr(err.msg, "no audit database at"));
    assert_non_null(strstr(err.msg, "--db names another"));
    assert_int_equal(access(missing, F_OK), -1);
}

struct pending_seen {
    int64_t ids[8], first_alerts[8];
    size_t count;
};

static int on_pending(void *arg, int64_t id, int64_t first_alert, int64_t received_at,
                      const char *body, size_t len)
{
    (void)body;
    (void)received_at;
    (void)len;
    struct pending_seen *p = arg;
    if (p->count < 8) {
        p->ids[p->count] = id;
        p->first_alerts[p->count] = first_alert;
    }
    p->count++;
    return 0;
}

static struct pending_seen pending_now(void)
{
    struct pending_seen p = {0};
    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    assert_int_equal(audit_pending_notifications(r, 100, on_pending, &p, &err), 0);
    audit_reader_free(r);
    return p;
}

/* Schema 7: duplicates wait for the engine too (their alerts are seen
 * again); the ones an earlier schema stored unevaluated are not a backlog
 * after the upgrade. */
static void test_duplicates_pending_since_schema_7(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    int dup = 0;
    int64_t first = record(s, firing, &dup);
    record(s, firing, &dup);
    assert_true(dup);
    audit_store_free(s);
    /* as schema 6 left it: the duplicate never evaluated, and the index of
     * pending notifications without duplicates */
    exec_rw("UPDATE notifications SET evaluated_at = 1 WHERE duplicate_of IS NULL;"
            "UPDATE notifications SET evaluated_at = NULL WHERE duplicate_of IS NOT NULL;"
            "DROP INDEX notifications_pending;"
            "CREATE INDEX notifications_pending ON notifications(id)"
            "  WHERE evaluated_at IS NULL AND duplicate_of IS NULL;"
            "PRAGMA user_version = 6");
    s = open_store();
    assert_int_equal(count("PRAGMA user_version"), audit_schema_version());
    assert_int_equal(count("SELECT count(*) FROM notifications WHERE evaluated_at IS NULL"), 0);
    assert_int_equal(count("SELECT count(*) FROM sqlite_schema WHERE name = "
                           "'notifications_pending' AND sql LIKE '%duplicate_of%'"),
                     0);
    assert_int_equal(pending_now().count, 0);
    /* a new duplicate waits, marked as one; the first has its alerts' ids */
    record(s, firing, &dup);
    assert_true(dup);
    struct pending_seen p = pending_now();
    assert_int_equal(p.count, 1);
    assert_true(p.ids[0] > first);
    assert_int_equal(p.first_alerts[0], AUDIT_DUPLICATE);
    exec_rw("UPDATE notifications SET evaluated_at = NULL WHERE id = 1");
    p = pending_now();
    assert_int_equal(p.count, 2);
    assert_int_equal(p.ids[0], first);
    assert_true(p.first_alerts[0] > 0);
    audit_store_free(s);
}

static int64_t decide(struct audit_store *s, const char *node, const char *verdict, double risk)
{
    struct audit_decision_in d = {.created_at = medic_time_now(),
                                  .node = node,
                                  .alertname = "GPUXidError",
                                  .policy = "xid-fell-off-bus",
                                  .step = 0,
                                  .action = "drain",
                                  .params_json = "{\"reason\":\"Xid 79\"}",
                                  .risk = risk,
                                  .model_hash = "abc",
                                  .verdict = verdict,
                                  .reason = "policy matched",
                                  .config_hash = "cfg"};
    int64_t id = 0;
    struct medic_error err = {0};
    if (audit_record_decision(s, &d, &id, &err))
        fail_msg("decision: %s", err.msg);
    return id;
}

static int act(struct audit_store *s, int64_t decision, int64_t intent, const char *result,
               int64_t *id)
{
    struct audit_action_in a = {.created_at = medic_time_now(),
                                .decision_id = decision,
                                .intent_id = intent,
                                .action = "drain",
                                .node = "gpu-node-01",
                                .target = "gpu-node-01",
                                .result = result,
                                .duration_ms = intent ? 12 : -1,
                                .detail = intent ? "State=IDLE+DRAIN" : NULL};
    struct medic_error err = {0};
    return audit_record_action(s, &a, id, &err);
}

static void test_chain_and_verify(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    int64_t d1 = decide(s, "gpu-node-01", "execute", 0.93);
    int64_t d2 = decide(s, "gpu-node-02", "suppressed", NAN);
    decide(s, "gpu-node-03", "dry_run", 0.5);
    decide(s, "gpu-node-04", "error", NAN); /* schema 3: an alert medic could not decide */
    int64_t intent, outcome;
    assert_int_equal(act(s, d1, 0, "pending", &intent), 0);
    assert_int_equal(act(s, d1, intent, "succeeded", &outcome), 0);
    /* one action per decision, ever */
    int64_t again;
    assert_int_not_equal(act(s, d1, 0, "pending", &again), 0);
    /* one outcome per intent */
    assert_int_not_equal(act(s, d1, intent, "failed", &again), 0);
    /* an intent is pending, an outcome is not */
    assert_int_not_equal(act(s, d2, 0, "succeeded", &again), 0);
    audit_store_free(s);

    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    struct audit_verify_result v;
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    assert_int_equal(audit_verify(r, &v, &err), 0);
    assert_true(v.ok);
    assert_int_equal(v.decisions_checked, 4);
    assert_int_equal(v.actions_checked, 2);

    /* a changed field is found at its row */
    exec_rw("UPDATE decisions SET verdict = 'dry_run' WHERE id = 2");
    assert_int_equal(audit_verify(r, &v, &err), 0);
    assert_false(v.ok);
    assert_string_equal(v.broken_table, "decisions");
    assert_int_equal(v.broken_id, 2);
    assert_non_null(strstr(v.why, "content does not match"));
    exec_rw("UPDATE decisions SET verdict = 'suppressed' WHERE id = 2");
    assert_int_equal(audit_verify(r, &v, &err), 0);
    assert_true(v.ok);

    /* a changed risk (a REAL) is found too */
    exec_rw("UPDATE decisions SET risk = 0.94 WHERE id = 1");
    assert_int_equal(audit_verify(r, &v, &err), 0);
    assert_false(v.ok);
    assert_int_equal(v.broken_id, 1);
    exec_rw("UPDATE decisions SET risk = 0.93 WHERE id = 1");

    /* a removed row breaks the link of the next one */
    exec_rw("DELETE FROM decisions WHERE id = 2");
    assert_int_equal(audit_verify(r, &v, &err), 0);
    assert_false(v.ok);
    assert_int_equal(v.broken_id, 3);
    assert_non_null(strstr(v.why, "prev_hash does not match the hash of row 1"));

    /* an action outcome rewritten */
    exec_rw("UPDATE actions SET result = 'failed' WHERE id = 2");
    audit_reader_free(r);
}

struct writer_arg {
    struct audit_store *store;
    int index;
    int rc;
};

static void *concurrent_writer(void *p)
{
    struct writer_arg *a = p;
    char text[sizeof(firing) + 64];
    /* each thread its own group key, so none is a duplicate */
    snprintf(text, sizeof(text), "%s", firing);
    char *g = strstr(text, "GPUXidError");
    g[0] = (char)('A' + a->index % 26);
    g[1] = (char)('a' + a->index / 26);
    struct medic_notification n;
    struct receiver_limits lim;
    struct medic_error err = {0};
    receiver_limits_default(&lim);
    medic_notification_init(&n);
    a->rc = receiver_payload_parse(text, strlen(text), &lim, &n, &err);
    struct audit_notification_in in = {&n, text, strlen(text), medic_time_now(), NULL, NULL};
    struct audit_notification_result res;
    if (a->rc == 0)
        a->rc = audit_record_notification(a->store, &in, &res, &err);
    medic_notification_release(&n);
    return NULL;
}

static void test_group_commit_concurrent(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    enum { N = 64 };
    pthread_t threads[N];
    struct writer_arg args[N];
    for (int i = 0; i < N; i++) {
        args[i] = (struct writer_arg){s, i, -1};
        pthread_create(&threads[i], NULL, concurrent_writer, &args[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(args[i].rc, 0);
    }
    struct audit_stats st;
    audit_store_stats(s, &st);
    assert_int_equal(st.requests_committed, N);
    assert_true(st.commits >= 1 && st.commits <= N);
    assert_int_equal(st.queue_depth, 0);
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM notifications WHERE duplicate_of IS NULL"), N);
    assert_int_equal(count("SELECT count(*) FROM alerts"), 2 * N);
}

static void test_store_locked_is_an_error_not_a_partial_write(void **state)
{
    (void)state;
    struct audit_options opt;
    audit_options_default(&opt);
    opt.busy_timeout_ms = 50;
    struct audit_store *s = NULL;
    struct medic_error err = {0};
    assert_int_equal(audit_store_open(db_path, &opt, &s, &err), 0);
    sqlite3 *locker;
    assert_int_equal(sqlite3_open(db_path, &locker), SQLITE_OK);
    assert_int_equal(sqlite3_exec(locker, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    struct medic_notification n;
    parse(firing, &n);
    struct audit_notification_in in = {&n, firing, strlen(firing), medic_time_now(), NULL, NULL};
    struct audit_notification_result res;
    assert_int_equal(audit_record_notification(s, &in, &res, &err), MEDIC_E_STORE);
    assert_non_null(strstr(err.msg, "locked"));
    sqlite3_exec(locker, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(locker);
    assert_int_equal(count("SELECT count(*) FROM notifications"), 0);
    assert_int_equal(audit_record_notification(s, &in, &res, &err), 0);
    medic_notification_release(&n);
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM alerts"), 2);
}

/* An asynchronous notification whose outcome the test waits for. */
struct queued {
    char text[sizeof(firing) + 64];
    struct medic_notification n;
    struct audit_notification_in in;
    struct audit_notification_result res;
    pthread_mutex_t lock;
    int done, rc;
};

static void queued_done(void *arg, int rc, const struct medic_error *err)
{
    (void)err;
    struct queued *q = arg;
    pthread_mutex_lock(&q->lock);
    q->rc = rc;
    q->done = 1;
    pthread_mutex_unlock(&q->lock);
}

static void queue_notification(struct audit_store *s, struct queued *q, int index)
{
    snprintf(q->text, sizeof(q->text), "%s", firing);
    char *g = strstr(q->text, "GPUXidError"); /* its own group key */
    g[0] = (char)('A' + index);
    parse(q->text, &q->n);
    q->in = (struct audit_notification_in){&q->n, q->text, strlen(q->text), medic_time_now(),
                                           NULL,  NULL};
    pthread_mutex_init(&q->lock, NULL);
    q->done = 0;
    struct medic_error err = {0};
    assert_int_equal(audit_record_notification_async(s, &q->in, &q->res, queued_done, q, &err), 0);
}

static int queued_wait(struct queued *q)
{
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&q->lock);
        int done = q->done, rc = q->rc;
        pthread_mutex_unlock(&q->lock);
        if (done) {
            medic_notification_release(&q->n);
            pthread_mutex_destroy(&q->lock);
            return rc;
        }
        usleep(10000);
    }
    fail_msg("the queued notification was never answered");
    return -1;
}

/* Waits until the writer's queue holds exactly depth requests. */
static void wait_queue_depth(struct audit_store *s, size_t depth)
{
    struct audit_stats st;
    for (int i = 0; i < 1000; i++) {
        audit_store_stats(s, &st);
        if (st.queue_depth == depth)
            return;
        usleep(5000);
    }
    fail_msg("queue depth %zu, waited for %zu", st.queue_depth, depth);
}

struct second_intent {
    struct audit_store *store;
    int64_t decision;
    int rc;
    struct medic_error err;
};

static void *record_second_intent(void *p)
{
    struct second_intent *a = p;
    struct audit_action_in in = {.created_at = medic_time_now(),
                                 .decision_id = a->decision,
                                 .action = "drain",
                                 .node = "gpu-node-01",
                                 .target = "gpu-node-01",
                                 .result = "pending",
                                 .duration_ms = -1};
    int64_t id;
    a->rc = audit_record_action(a->store, &in, &id, &a->err);
    return NULL;
}

static void test_a_failing_request_leaves_its_batch_committed(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    int64_t d = decide(s, "gpu-node-01", "execute", 0.9), intent;
    assert_int_equal(act(s, d, 0, "pending", &intent), 0);
    /* another connection holds the write lock: the writer takes the first
     * request and waits for the lock, the next three queue as one batch */
    sqlite3 *locker;
    assert_int_equal(sqlite3_open(db_path, &locker), SQLITE_OK);
    assert_int_equal(sqlite3_exec(locker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    static struct queued q[3];
    queue_notification(s, &q[0], 0);
    wait_queue_depth(s, 0);
    queue_notification(s, &q[1], 1);
    struct second_intent second = {s, d, 0, {0}};
    pthread_t t;
    pthread_create(&t, NULL, record_second_intent, &second);
    wait_queue_depth(s, 2);
    queue_notification(s, &q[2], 2);
    wait_queue_depth(s, 3);
    struct audit_stats before;
    audit_store_stats(s, &before);
    assert_int_equal(sqlite3_exec(locker, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(locker);
    pthread_join(t, NULL);
    /* the second intent for one decision is refused, alone */
    assert_int_equal(second.rc, MEDIC_E_STORE);
    assert_int_equal(second.err.code, MEDIC_E_INVALID);
    for (int i = 0; i < 3; i++)
        assert_int_equal(queued_wait(&q[i]), 0);
    struct audit_stats after;
    audit_store_stats(s, &after);
    assert_int_equal(after.requests_committed - before.requests_committed, 3);
    assert_int_equal(after.commits - before.commits, 2); /* the lone request, then the batch */
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM notifications"), 3);
    assert_int_equal(count("SELECT count(*) FROM alerts"), 6);
    assert_int_equal(count("SELECT count(*) FROM actions"), 1);
}

static void test_queries(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    int dup;
    record(s, firing, &dup);
    record(s, firing, &dup);
    decide(s, "gpu-node-01", "execute", 0.9);
    decide(s, "gpu-node-02", "suppressed", 0.2);
    audit_store_free(s);
    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    struct medic_table t;
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    struct audit_filter f;
    audit_filter_init(&f);
    assert_int_equal(audit_query(r, AUDIT_NOTIFICATIONS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 2);
    medic_table_release(&t);
    f.node = "gpu-node-01";
    assert_int_equal(audit_query(r, AUDIT_NOTIFICATIONS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 2); /* the duplicate's alerts are the first's */
    medic_table_release(&t);
    assert_int_equal(audit_query(r, AUDIT_ALERTS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 2);
    medic_table_release(&t);
    assert_int_equal(audit_query(r, AUDIT_DECISIONS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 1);
    medic_table_release(&t);
    audit_filter_init(&f);
    f.verdict = "suppressed";
    assert_int_equal(audit_query(r, AUDIT_DECISIONS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 1);
    assert_string_equal(t.cells[2], "gpu-node-02");
    medic_table_release(&t);
    assert_int_equal(audit_query(r, AUDIT_ALERTS, &f, &t, &err), MEDIC_E_INVALID);
    assert_string_equal(err.msg, "--verdict does not apply to alerts");
    /* a value no row can have is refused, not answered with nothing */
    f.verdict = "bogus";
    assert_int_equal(audit_query(r, AUDIT_DECISIONS, &f, &t, &err), MEDIC_E_INVALID);
    assert_string_equal(err.msg, "verdict 'bogus' is not one of execute, dry_run, suppressed, "
                                 "no_match, error, pending");
    audit_filter_init(&f);
    f.status = "done";
    assert_int_equal(audit_query(r, AUDIT_ACTIONS, &f, &t, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "status 'done' is not one of pending, succeeded"));
    audit_filter_init(&f);
    f.since = medic_time_now() + 60 * MEDIC_NS_PER_SEC;
    assert_int_equal(audit_query(r, AUDIT_ALERTS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 0);
    medic_table_release(&t);
    audit_filter_init(&f);
    f.limit = 1;
    assert_int_equal(audit_query(r, AUDIT_NOTIFICATIONS, &f, &t, &err), 0);
    assert_int_equal(t.nrows, 1);
    assert_string_equal(t.cells[0], "2"); /* newest first */
    medic_table_release(&t);
    audit_reader_free(r);
}

/* Stores a notification of one alert named alertname on node, received at
 * the given time (ms); returns its id. */
static int64_t record_alert_at(struct audit_store *s, int64_t at_ms, const char *alertname,
                               const char *node)
{
    char text[512];
    snprintf(
        text, sizeof(text),
        "{\"version\":\"4\",\"groupKey\":\"{}:{at=\\\"%lld\\\"}\",\"status\":"
        "\"firing\",\"receiver\":\"medic\",\"alerts\":[{\"status\":\"firing\",\"labels\":"
        "{\"alertname\":\"%s\",\"instance\":\"%s:9400\"},\"startsAt\":\"2026-11-22T07:54:16Z\","
        "\"fingerprint\":\"%016llx\"}]}",
        (long long)at_ms, alertname, node, (unsigned long long)at_ms);
    struct medic_notification n;
    parse(text, &n);
    const char *nodes[1] = {node};
    struct audit_notification_in in = {&n,   text, strlen(text), at_ms * MEDIC_NS_PER_MS,
                                       NULL, nodes};
    struct audit_notification_result res;
    struct medic_error err = {0};
    if (audit_record_notification(s, &in, &res, &err))
        fail_msg("record: %s", err.msg);
    medic_notification_release(&n);
    return res.id;
}

/* The alerts have indexes by notification and by node only: a range of
 * time and an alertname are found through their notifications. Each
 * filter still gives exactly the alerts it names, newest first, also when
 * the order of receipt is not the order of storage. */
static void test_alert_queries(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    const int64_t t0 = 1795000000000; /* ms */
    /* stored in this order; the third was received before the second */
    record_alert_at(s, t0, "GPUXidError", "gpu-node-01");
    record_alert_at(s, t0 + 2000, "GPUHot", "gpu-node-02");
    record_alert_at(s, t0 + 1000, "GPUXidError", "gpu-node-02");
    record_alert_at(s, t0 + 3000, "GPUXidError", "gpu-node-01");
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND"
                           " tbl_name = 'alerts' AND sql IS NOT NULL"),
                     2);
    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    struct medic_table t;
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    struct {
        const char *node, *alertname;
        int64_t since, until; /* ms after t0; -1 = unset */
        const char *ids;      /* the alerts' ids, newest first */
    } cases[] = {
        {NULL, NULL, -1, -1, "4 2 3 1"},         {NULL, "GPUXidError", -1, -1, "4 3 1"},
        {NULL, NULL, 1000, 3000, "2 3"},         {NULL, "GPUXidError", 500, -1, "4 3"},
        {"gpu-node-02", NULL, -1, -1, "2 3"},    {"gpu-node-01", NULL, 1, -1, "4"},
        {"gpu-node-02", "GPUHot", -1, 2000, ""},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct audit_filter f;
        audit_filter_init(&f);
        f.node = cases[c].node;
        f.alertname = cases[c].alertname;
        if (cases[c].since >= 0)
            f.since = (t0 + cases[c].since) * MEDIC_NS_PER_MS;
        if (cases[c].until >= 0)
            f.until = (t0 + cases[c].until) * MEDIC_NS_PER_MS;
        assert_int_equal(audit_query(r, AUDIT_ALERTS, &f, &t, &err), 0);
        char ids[64] = "";
        for (size_t i = 0; i < t.nrows; i++) {
            size_t at = strlen(ids);
            snprintf(ids + at, sizeof(ids) - at, "%s%s", i ? " " : "", t.cells[i * t.ncols]);
        }
        if (strcmp(ids, cases[c].ids) != 0)
            fail_msg("case %zu: alerts %s, expected %s", c, ids, cases[c].ids);
        medic_table_release(&t);
    }
    audit_reader_free(r);
}

/* The writer's list of first notifications by key prefix: every id listed
 * under a prefix is given, others never, also past a growth. */
static void test_firsts_list(void **state)
{
    (void)state;
    struct lite_firsts f = {0};
    const int64_t p = 0x1234567890abcdefLL;
    assert_int_equal(audit__firsts_add(&f, p, 1), 0);
    assert_int_equal(audit__firsts_add(&f, p + 1024, 2), 0); /* the same slot */
    assert_int_equal(audit__firsts_add(&f, p, 3), 0);
    for (int64_t id = 4; id < 5000; id++)
        assert_int_equal(audit__firsts_add(&f, id * 7919, id), 0);
    size_t at = AUDIT_FIRSTS_START;
    int64_t seen = 0;
    for (int64_t id; (id = audit__firsts_next(&f, p, &at));)
        seen |= (int64_t)1 << id;
    assert_int_equal(seen, (1 << 1) | (1 << 3));
    at = AUDIT_FIRSTS_START;
    assert_int_equal(audit__firsts_next(&f, p + 1024, &at), 2);
    assert_int_equal(audit__firsts_next(&f, p + 1024, &at), 0);
    for (int64_t id = 4; id < 5000; id++) {
        at = AUDIT_FIRSTS_START;
        assert_int_equal(audit__firsts_next(&f, id * 7919, &at), id);
    }
    at = AUDIT_FIRSTS_START;
    assert_int_equal(audit__firsts_next(&f, 5, &at), 0);
    audit__firsts_release(&f);
}

/* Inserts a first notification of the key on the connection db. */
static void insert_first_on(sqlite3 *db, const char *key, int64_t prefix)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "INSERT INTO notifications (received_at, group_key, status, alert_count, dedupe_key,"
             " dedupe_prefix, payload, payload_encoding, payload_bytes) VALUES (1, 'elsewhere',"
             " 'firing', 0, '%s', %lld, x'7b7d', 'identity', 2)",
             key, (long long)prefix);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

/* Inserts, on a connection of its own as another process would, a first
 * notification of the body's dedupe key; returns its id. */
static int64_t insert_first_elsewhere(const char *body)
{
    struct medic_notification n;
    parse(body, &n);
    char key[65];
    medic_notification_dedupe_key(&n, key);
    medic_notification_release(&n);
    uint64_t prefix = 0;
    for (int i = 0; i < 16; i++)
        prefix = prefix << 4 | (uint64_t)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    insert_first_on(db, key, (int64_t)prefix);
    sqlite3_close(db);
    return count("SELECT max(id) FROM notifications");
}

/* An id the writer stored in a transaction rolled back, then given to
 * another process's first notification, is listed in the writer's next
 * transaction. */
static void test_firsts_after_rollback(void **state)
{
    (void)state;
    audit_store_free(open_store()); /* the schema */
    sqlite3 *writer, *other;
    assert_int_equal(sqlite3_open(db_path, &writer), SQLITE_OK);
    assert_int_equal(sqlite3_open(db_path, &other), SQLITE_OK);
    struct lite_firsts f = {0};
    struct medic_error err = {0};
    assert_int_equal(audit__firsts_load(&f, writer, &err), 0);
    assert_int_equal(sqlite3_exec(writer, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(audit__firsts_catch_up(&f, writer, &err), 0);
    insert_first_on(writer, "aaaa", 7);
    assert_int_equal(audit__firsts_add(&f, 7, sqlite3_last_insert_rowid(writer)), 0);
    assert_int_equal(sqlite3_exec(writer, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    insert_first_on(other, "bbbb", 9);
    int64_t theirs = sqlite3_last_insert_rowid(other);
    assert_int_equal(theirs, 1); /* the id the writer's rolled-back row had */
    assert_int_equal(sqlite3_exec(writer, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(audit__firsts_catch_up(&f, writer, &err), 0);
    size_t at = AUDIT_FIRSTS_START;
    assert_int_equal(audit__firsts_next(&f, 9, &at), theirs);
    assert_int_equal(sqlite3_exec(writer, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    audit__firsts_release(&f);
    sqlite3_close(other);
    sqlite3_close(writer);
}

/* The duplicate check without an index by key: the firsts of a log
 * reopened, those another process stored while the writer runs, and none
 * whose row was taken out of the log meanwhile. */
static void test_duplicates_listed(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    int dup;
    int64_t first = record(s, firing, &dup);
    assert_false(dup);
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM sqlite_master WHERE name ="
                           " 'notifications_first_by_dedupe_prefix'"),
                     0);
    s = open_store(); /* read from the log when it opens */
    assert_int_equal(record(s, firing, &dup), first);
    assert_true(dup);
    /* stored by another process while this one runs */
    char other[sizeof(firing) + 16];
    snprintf(other, sizeof(other), "%s", firing);
    memcpy(strstr(other, "GPUXidError"), "GPUXidErrar", 11); /* another group key */
    int64_t elsewhere = insert_first_elsewhere(other);
    assert_int_equal(record(s, other, &dup), elsewhere);
    assert_true(dup);
    /* a first taken out of the log (an archive) is no longer one */
    char third[sizeof(firing) + 16];
    snprintf(third, sizeof(third), "%s", firing);
    memcpy(strstr(third, "GPUXidError"), "GPUXidErrir", 11);
    int64_t gone = record(s, third, &dup);
    assert_false(dup);
    char sql[160];
    snprintf(sql, sizeof(sql),
             "DELETE FROM alerts WHERE notification_id = %lld;"
             " DELETE FROM notifications WHERE id = %lld",
             (long long)gone, (long long)gone);
    exec_rw(sql);
    int64_t again = record(s, third, &dup);
    assert_false(dup);
    assert_int_not_equal(again, 0);
    assert_int_equal(record(s, third, &dup), again);
    assert_true(dup);
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM notifications WHERE duplicate_of IS NULL"), 3);
}

/* The writer's WAL writes are gathered into one per commit (wal_gather.h):
 * a commit is visible to another connection as soon as it returns, and
 * one far over the 128 KiB a single write may carry is whole. The
 * checkpointer thread copies the WAL's pages into the database meanwhile,
 * the writer finishes the copy, and the WAL starts again from its
 * beginning. */
static void test_wal_writes_gathered_are_whole_and_visible(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    assert_non_null(sqlite3_vfs_find("medic-wal-gather"));
    sqlite3 *reader;
    assert_int_equal(sqlite3_open_v2(db_path, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    enum { NOTIFICATIONS = 140, ALERTS = 400 };
    size_t cap = 1 << 20;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int k = 0; k < NOTIFICATIONS; k++) {
        /* 400 alerts with long annotations: about 300 KiB of rows a commit */
        size_t len = (size_t)snprintf(text, cap,
                                      "{\"version\":\"4\",\"groupKey\":\"big-%d\",\"status\":"
                                      "\"firing\",\"receiver\":\"medic\",\"alerts\":[",
                                      k);
        for (int i = 0; i < ALERTS; i++)
            len += (size_t)snprintf(
                text + len, cap - len,
                "%s{\"status\":\"firing\",\"labels\":{\"alertname\":\"GPUHot\",\"node\":"
                "\"node-%04d\",\"gpu\":\"%d\"},\"annotations\":{\"summary\":\"%0600d\"},"
                "\"startsAt\":\"2026-11-22T07:54:16Z\",\"fingerprint\":\"%08x%08x\"}",
                i ? "," : "", i, k, i * 7919 + k, k, i);
        len += (size_t)snprintf(text + len, cap - len, "]}");
        assert_true(len < cap);
        struct medic_notification n;
        parse(text, &n);
        struct audit_notification_in in = {&n, text, len, medic_time_now(), "127.0.0.1:1", NULL};
        struct audit_notification_result res;
        struct medic_error err = {0};
        if (audit_record_notification(s, &in, &res, &err))
            fail_msg("record: %s", err.msg);
        medic_notification_release(&n);
        /* committed: another connection sees every row at once */
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(reader, "SELECT count(*) FROM alerts", -1, &st, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int64(st, 0), (int64_t)(k + 1) * ALERTS);
        sqlite3_finalize(st);
    }
    free(text);
    sqlite3_close(reader);
    /* the checkpointer copies every 1,000 pages (AUDIT_CHECKPOINT_PAGES)
     * while the commits leave their syncs to the syncer; past 8,000 pages
     * (AUDIT_WAL_RESTART_PAGES) the writer finishes the copy, after two
     * more of the checkpointer's at most, unless a transaction began with
     * every page copied and started the WAL again itself (as between these
     * commits, one at a time): the WAL starts again from its beginning and
     * stays under 40 MiB, where these 140 commits of about 130 pages would
     * make it 75 MiB */
    struct audit_stats st;
    audit_store_stats(s, &st);
    assert_true(st.checkpoints_copied > 0);
    char wal[160];
    snprintf(wal, sizeof(wal), "%s-wal", db_path);
    struct stat sb;
    assert_int_equal(stat(wal, &sb), 0);
    assert_true(sb.st_size < 40 * 1024 * 1024);
    audit_store_free(s);
    assert_int_equal(count("SELECT count(*) FROM notifications"), NOTIFICATIONS);
    assert_int_equal(count("SELECT count(*) FROM alerts WHERE length(annotations) > 600"),
                     NOTIFICATIONS * ALERTS);
    assert_int_equal(count("SELECT count(*) FROM pragma_integrity_check WHERE "
                           "integrity_check = 'ok'"),
                     1);
}

/* The checkpoint plan under a writer that never pauses (so that the WAL
 * never starts again on its own): for commits of c pages and a
 * checkpointer that takes d commits' time per copy, the checkpointer is
 * asked every AUDIT_CHECKPOINT_PAGES and never while it copies, and the
 * writer finishes the copy (the WAL starts again) soon after
 * AUDIT_WAL_RESTART_PAGES, only while the checkpointer is idle. */
static void test_checkpoint_plan(void **state)
{
    (void)state;
    const int sizes[] = {1, 7, 40, 130, 600}, delays[] = {0, 1, 3, 10, 50};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (size_t j = 0; j < sizeof(delays) / sizeof(delays[0]); j++) {
            const int c = sizes[i], d = delays[j];
            struct ckpt_plan p = {0};
            int frames = 0, most = 0, busy = 0, asks = 0, restarts = 0, last_ask = 0;
            for (int k = 0; k < 200000 / c + 2000; k++) {
                frames += c;
                most = frames > most ? frames : most;
                if (p.running && busy-- == 0)
                    p.running = 0; /* the checkpointer is done */
                int was_running = p.running;
                enum ckpt_step step = audit__ckpt_plan_next(&p, frames);
                if (was_running)
                    assert_int_equal(step, CKPT_WAIT);
                if (step == CKPT_ASK) {
                    assert_true(frames >= AUDIT_CHECKPOINT_PAGES);
                    assert_true(frames - last_ask >= AUDIT_CATCH_UP_PAGES);
                    assert_int_equal(p.running, 1);
                    last_ask = frames;
                    busy = d;
                    asks++;
                } else if (step == CKPT_FINISH) {
                    assert_true(frames >= AUDIT_WAL_RESTART_PAGES);
                    frames = last_ask = 0; /* the next transaction starts the WAL again */
                    restarts++;
                }
            }
            assert_true(restarts > 0);
            assert_true(asks >=
                        restarts *
                            (AUDIT_WAL_RESTART_PAGES / (AUDIT_CHECKPOINT_PAGES + c * (d + 1)) - 1));
            /* past the WAL's size: the copy under way, two more, then the writer's */
            if (most > AUDIT_WAL_RESTART_PAGES + 3 * (d + 1) * c + AUDIT_CATCH_UP_PAGES + c)
                fail_msg("commits of %d pages, copies of %d commits: the WAL reached %d pages", c,
                         d, most);
        }
}

/* The engine's changed rows reach the writer as bytes; a decision of the
 * same round is named there by its index, and the row is stored with the
 * id the decision got. A reference to a decision the round did not make
 * fails the whole round: nothing of it is stored. */
struct stored_rows {
    char text[4][256];
    int count;
};

static int keep_row(void *arg, const char *kind, const char *key, const char *value, size_t len)
{
    struct stored_rows *r = arg;
    if (r->count < 4)
        snprintf(r->text[r->count++], sizeof(r->text[0]), "%s %s %.*s", kind, key, (int)len, value);
    return 0;
}

static void test_state_rows_name_decisions_by_id(void **state)
{
    (void)state;
    struct audit_store *s = open_store();
    struct medic_error err = {0};
    struct audit_decision_in d[2];
    for (int i = 0; i < 2; i++)
        d[i] = (struct audit_decision_in){.created_at = medic_time_now(),
                                          .node = "gpu-node-01",
                                          .policy = "xid",
                                          .step = i,
                                          .action = "drain",
                                          .risk = NAN,
                                          .verdict = "execute",
                                          .reason = "test",
                                          .config_hash = "builtin"};
    static const char incident[] =
        "{\"awaiting_decision\":\"-1\",\"undo\":[{\"decision\":\"-2\"}]}";
    const char *first = strstr(incident, "\"-1\""), *second = strstr(incident, "\"-2\"");
    struct audit_row_ref refs[2] = {{(size_t)(first - incident), 4, 0},
                                    {(size_t)(second - incident), 4, 1}};
    struct audit_rows rows;
    audit_rows_init(&rows);
    assert_int_equal(audit_rows_add(&rows, "incident", "7", incident, strlen(incident), refs, 2),
                     0);
    assert_int_equal(audit_rows_add(&rows, "node", "gpu-node-01", "{}", 2, NULL, 0), 0);
    int64_t ids[2] = {0, 0};
    struct audit_evaluation_in in = {.decisions = d, .decision_count = 2, .state = &rows};
    assert_int_equal(audit_record_evaluation(s, &in, ids, &err), 0);
    assert_true(ids[0] > 0 && ids[1] == ids[0] + 1);
    audit_rows_release(&rows);

    /* a reference past the round's decisions: the round fails, whole */
    audit_rows_init(&rows);
    assert_int_equal(audit_rows_add(&rows, "node", "gpu-node-01", NULL, 0, NULL, 0), 0);
    struct audit_row_ref wrong = {refs[0].offset, 4, 5};
    assert_int_equal(audit_rows_add(&rows, "incident", "8", incident, strlen(incident), &wrong, 1),
                     0);
    int64_t more[2];
    assert_int_not_equal(audit_record_evaluation(s, &in, more, &err), 0);
    assert_non_null(strstr(err.msg, "names a decision it did not make"));
    audit_rows_release(&rows);
    audit_store_free(s);

    struct audit_reader *r = NULL;
    assert_int_equal(audit_reader_open(db_path, &r, &err), 0);
    struct stored_rows got = {0};
    size_t count = 0;
    assert_int_equal(audit_read_engine_rows(r, keep_row, &got, &count, &err), 0);
    audit_reader_free(r);
    assert_int_equal(count, 2);
    char want[256];
    snprintf(want, sizeof(want),
             "incident 7 {\"awaiting_decision\":\"%lld\",\"undo\":[{\"decision\":\"%lld\"}]}",
             (long long)ids[0], (long long)ids[1]);
    int seen_incident = 0, seen_node = 0;
    for (int i = 0; i < got.count; i++) {
        seen_incident |= strcmp(got.text[i], want) == 0;
        seen_node |= strcmp(got.text[i], "node gpu-node-01 {}") == 0;
    }
    if (!seen_incident || !seen_node)
        fail_msg("stored rows: '%s' / '%s'", got.text[0], got.text[1]);
}

static void test_reader_refuses_other_files(void **state)
{
    (void)state;
    struct audit_reader *r = NULL;
    struct medic_error err = {0};
    assert_int_equal(audit_reader_open("/nonexistent/medic.db", &r, &err), MEDIC_E_STORE);
    exec_rw("CREATE TABLE t(x)");
    assert_int_equal(audit_reader_open(db_path, &r, &err), MEDIC_E_STORE);
    assert_non_null(strstr(err.msg, "not a medic audit database"));
}

/* What a log's schema is, as SQLite sees it: every table's columns (name,
 * type, NOT NULL, default, key), foreign keys and CHECK constraints, and
 * every index's definition, whitespace and "IF NOT EXISTS" aside. */
static void schema_of(sqlite3 *db, struct medic_buf *out)
{
    static const char *const queries[] = {
        "SELECT m.name, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value, p.pk"
        " FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'"
        " ORDER BY m.name, p.cid",
        "SELECT m.name, f.\"table\", f.\"from\", f.\"to\" FROM sqlite_master m,"
        " pragma_foreign_key_list(m.name) f WHERE m.type = 'table' ORDER BY 1, 2, 3",
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        " ORDER BY name",
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name",
    };
    for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(db, queries[q], -1, &st, NULL), SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(st); c++) {
                const char *v = (const char *)sqlite3_column_text(st, c);
                char text[4096];
                snprintf(text, sizeof(text), "%s", v ? v : "NULL");
                /* of a table's SQL only its CHECKs, in order, and of an
                 * index's all of it, each with its spaces dropped */
                char *from = text;
                if (q == 3 && c == 1) {
                    char checks[4096] = "";
                    for (char *k = strstr(text, "CHECK"); k; k = strstr(k + 1, "CHECK")) {
                        int depth = 0;
                        char *e = strchr(k, '(');
                        for (; e && *e; e++)
                            if (*e == '(')
                                depth++;
                            else if (*e == ')' && --depth == 0)
                                break;
                        if (e && *e)
                            strncat(checks, k,
                                    (size_t)(e - k + 1) < 1000 ? (size_t)(e - k + 1) : 1000);
                    }
                    snprintf(text, sizeof(text), "%s", checks);
                }
                char *ifne = strstr(from, "IF NOT EXISTS ");
                if (ifne)
                    memmove(ifne, ifne + 14, strlen(ifne + 14) + 1);
                for (const char *p = from; *p; p++)
                    if (*p != ' ' && *p != '\n')
                        medic_buf_append(out, p, 1);
                medic_buf_puts(out, "|");
            }
            medic_buf_puts(out, "\n");
        }
        sqlite3_finalize(st);
    }
}

/* Writing a row of the log builds no temporary b-tree to check it (SQLite
 * builds one for a CHECK with an IN list of three or more values, about
 * 1.6 us a row): every table's insert, as the schema compiles it. */
static void test_rows_checked_without_temporary_trees(void **state)
{
    (void)state;
    sqlite3 *db;
    struct medic_error err = {0};
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    if (audit_lite_migrate(db, &err))
        fail_msg("%s", err.msg);
    sqlite3_stmt *tables;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT name FROM sqlite_schema WHERE type = 'table'"
                                        " AND name NOT LIKE 'sqlite_%'",
                                        -1, &tables, NULL),
                     SQLITE_OK);
    int checked = 0;
    while (sqlite3_step(tables) == SQLITE_ROW) {
        char sql[200];
        snprintf(sql, sizeof(sql), "EXPLAIN INSERT INTO %s DEFAULT VALUES",
                 (const char *)sqlite3_column_text(tables, 0));
        sqlite3_stmt *plan;
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &plan, NULL), SQLITE_OK);
        int ops = 0, trees = 0;
        while (sqlite3_step(plan) == SQLITE_ROW) {
            ops++;
            trees += strcmp((const char *)sqlite3_column_text(plan, 1), "OpenEphemeral") == 0;
        }
        sqlite3_finalize(plan);
        if (trees)
            fail_msg("%s: a temporary b-tree for each row", sql);
        checked += ops > 0;
    }
    sqlite3_finalize(tables);
    assert_true(checked >= 10); /* it read every table's plan */
    /* the check itself: an IN list of three builds one */
    sqlite3_stmt *plan;
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TEMP TABLE listed (x TEXT CHECK (x IN ('a','b','c')))",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(
        sqlite3_prepare_v2(db, "EXPLAIN INSERT INTO listed DEFAULT VALUES", -1, &plan, NULL),
        SQLITE_OK);
    int trees = 0;
    while (sqlite3_step(plan) == SQLITE_ROW)
        trees += strcmp((const char *)sqlite3_column_text(plan, 1), "OpenEphemeral") == 0;
    sqlite3_finalize(plan);
    assert_int_equal(trees, 1);
    sqlite3_close(db);
}

/* A new log is created from the schema's description; an old one is
 * brought up by the migration steps: both end with the same schema. */
static void test_new_and_migrated_schemas_agree(void **state)
{
    (void)state;
    char stepped_path[160];
    snprintf(stepped_path, sizeof(stepped_path), "%s/stepped.db", dir);
    sqlite3 *fresh, *stepped;
    struct medic_error err = {0};
    assert_int_equal(sqlite3_open(db_path, &fresh), SQLITE_OK);
    assert_int_equal(sqlite3_open(stepped_path, &stepped), SQLITE_OK);
    if (audit_lite_migrate(fresh, &err) || audit_lite_migrate_steps(stepped, &err))
        fail_msg("%s", err.msg);
    struct medic_buf a, b;
    medic_buf_init(&a, 0);
    medic_buf_init(&b, 0);
    schema_of(fresh, &a);
    schema_of(stepped, &b);
    assert_true(a.len > 1000); /* it read the tables */
    assert_non_null(strstr(a.data, "CHECK(verdict='execute'ORverdict='dry_run'ORverdict="
                                   "'suppressed'ORverdict='no_match'ORverdict='error'ORverdict="
                                   "'pending')"));
    if (strcmp(a.data, b.data) != 0) {
        size_t i = 0;
        while (a.data[i] == b.data[i])
            i++;
        size_t from = i > 200 ? i - 200 : 0;
        fail_msg("a new log and a migrated one differ at byte %zu:\nnew:      %.300s\nmigrated: "
                 "%.300s",
                 i, a.data + from, b.data + from);
    }
    medic_buf_release(&a);
    medic_buf_release(&b);
    sqlite3_close(fresh);
    sqlite3_close(stepped);
    unlink(stepped_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema_and_duplicates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alerts_of_any_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_of_a_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_in_a_missing_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates_pending_since_schema_7, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_and_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_locked_is_an_error_not_a_partial_write, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_failing_request_leaves_its_batch_committed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_queries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alert_queries, setup, teardown),
        cmocka_unit_test(test_firsts_list),
        cmocka_unit_test_setup_teardown(test_firsts_after_rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates_listed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_refuses_other_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_rows_name_decisions_by_id, setup, teardown),
        cmocka_unit_test(test_checkpoint_plan),
        cmocka_unit_test_setup_teardown(test_rows_checked_without_temporary_trees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_and_migrated_schemas_agree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_writes_gathered_are_whole_and_visible, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

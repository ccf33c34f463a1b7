/* SPDX-License-Identifier: Apache-2.0 */
/* What the audit writer spends per notification, without HTTP: the real
 * 3-alert payload parsed once, then stored COUNT times (each with its own
 * group key, so each is a new notification) by THREADS callers through the
 * store the daemon uses (audit_record_notification, group commit, WAL
 * synced at each commit, the embedded defaults' options), while a thread
 * marks them evaluated every 10 ms as the engine's rounds do. Prints the
 * CPU each of the store's threads spent per notification (user + system,
 * /proc/self/task/N/stat) and the rate.
 *
 *   [NODES=N] [WARM=N] build/dev/bench/writer-bench [COUNT [THREADS [DB]]]
 *
 * NODES spreads the notifications' alerts over that many nodes (each
 * notification's three on one node, the nodes in turn; default 1), as a
 * fleet's are; WARM stores that many first, unmeasured, so that COUNT is
 * measured on a log that has grown (its indexes larger than SQLite's page
 * cache, as a fleet's log is after weeks).
 *
 * The daemon's HTTP threads, the engine's decisions and the durable
 * floor are in bench/http-bench.sh; this isolates the writer, whose CPU
 * per notification is the ceiling of one machine's webhook rate. */
#include "audit.h"
#include "payload.h"
#include "timeutil.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 256
#define EVALUATE_EVERY_NS (10 * MEDIC_NS_PER_MS)

struct bench {
    struct audit_store *store;
    const struct medic_notification *n;
    const char *raw;
    size_t raw_len;
    long count, capacity, nodes;             /* capacity: every notification of the run */
    atomic_long next, failed, committed_all; /* committed_all: warm ones included */
    /* committed ids waiting for their evaluated mark */
    pthread_mutex_t lock;
    int64_t *committed;
    size_t committed_count;
    atomic_int done;
};

static void *store_some(void *arg)
{
    struct bench *b = arg;
    char key[64], node[32];
    const char *nodes[3] = {node, node, node};
    for (;;) {
        long i = atomic_fetch_add(&b->next, 1);
        if (i >= b->count)
            return NULL;
        snprintf(node, sizeof(node), "gpu-node-%05ld", i % b->nodes);
        struct medic_notification n = *b->n; /* shares the parsed alerts */
        snprintf(key, sizeof(key), "{}:{bench=\"%ld\"}", i);
        n.group_key = key;
        struct audit_notification_in in = {.notification = &n,
                                           .raw = b->raw,
                                           .raw_len = b->raw_len,
                                           .received_at = medic_time_now(),
                                           .alert_nodes = nodes};
        struct audit_notification_result res;
        struct medic_error err = {0};
        if (audit_record_notification(b->store, &in, &res, &err)) {
            atomic_fetch_add(&b->failed, 1);
            continue;
        }
        pthread_mutex_lock(&b->lock);
        b->committed[b->committed_count++] = res.id;
        atomic_fetch_add(&b->committed_all, 1);
        pthread_mutex_unlock(&b->lock);
    }
}

/* The engine's part of the writer's work: the evaluated marks. */
static void *evaluate(void *arg)
{
    struct bench *b = arg;
    int64_t *ids = calloc((size_t)b->capacity, sizeof(*ids));
    for (int last = 0; ids && !last;) {
        last = atomic_load(&b->done);
        struct timespec pause = {0, EVALUATE_EVERY_NS};
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&b->lock);
        size_t k = b->committed_count;
        memcpy(ids, b->committed, k * sizeof(*ids));
        b->committed_count = 0;
        pthread_mutex_unlock(&b->lock);
        if (!k)
            continue;
        struct audit_evaluation_in in = {
            .evaluated = ids, .evaluated_count = k, .evaluated_at = medic_time_now()};
        struct medic_error err = {0};
        if (audit_record_evaluation(b->store, &in, NULL, &err))
            fprintf(stderr, "writer-bench: evaluation: %s\n", err.msg);
    }
    free(ids);
    return NULL;
}

static int count_pending(void *arg, int64_t id, int64_t first_alert_id, int64_t received_at,
                         const char *body, size_t len)
{
    (void)id, (void)first_alert_id, (void)received_at, (void)body, (void)len;
    ++*(long *)arg;
    return 0;
}

/* CPU seconds of this process's threads named name. */
static double thread_cpu(const char *name)
{
    double total = 0;
    DIR *d = opendir("/proc/self/task");
    long hz = sysconf(_SC_CLK_TCK);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[300], line[1024];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(line, 1, sizeof(line) - 1, f);
        fclose(f);
        line[len] = 0;
        char *open = strchr(line, '('), *close = strrchr(line, ')');
        if (!open || !close || (size_t)(close - open - 1) != strlen(name) ||
            strncmp(open + 1, name, strlen(name)) != 0)
            continue;
        unsigned long utime = 0, stime = 0;
        /* after ")": state, then fields 4..13, then utime (14) and stime (15) */
        if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                   &stime) == 2)
            total += (double)(utime + stime) / (double)hz;
    }
    if (d)
        closedir(d);
    return total;
}

static int read_payload(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    *out = malloc(1 << 20);
    *len = *out ? fread(*out, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    return *out && *len ? 0 : -1;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 20000;
    long threads = argc > 2 ? atol(argv[2]) : 32;
    long nodes = getenv("NODES") ? atol(getenv("NODES")) : 1;
    long warm = getenv("WARM") ? atol(getenv("WARM")) : 0;
    char db[256];
    snprintf(db, sizeof(db), "%s", argc > 3 ? argv[3] : "/tmp/medic-writer-bench.db");
    const char *payload = getenv("PAYLOAD") ? getenv("PAYLOAD")
                                            : MEDIC_SOURCE_DIR
                              "/tests/fixtures/alertmanager/am-webhook-multi-alert.json";
    if (count < 1 || threads < 1 || threads > MAX_THREADS || nodes < 1 || warm < 0) {
        fprintf(
            stderr,
            "usage: [NODES=N (1..)] [WARM=N (0..)] writer-bench [COUNT [THREADS (1..%d) [DB]]]\n",
            MAX_THREADS);
        return 2;
    }
    char *raw = NULL;
    size_t raw_len = 0;
    struct medic_notification n;
    struct receiver_limits limits;
    struct medic_error err = {0};
    receiver_limits_default(&limits);
    medic_notification_init(&n);
    if (read_payload(payload, &raw, &raw_len) ||
        receiver_payload_parse(raw, raw_len, &limits, &n, &err)) {
        fprintf(stderr, "writer-bench: cannot read the payload %s %s\n", payload, err.msg);
        return 1;
    }
    for (const char *suffix = ""; suffix;) { /* a fresh log each run */
        char path[300];
        snprintf(path, sizeof(path), "%s%s", db, suffix);
        unlink(path);
        suffix = !*suffix ? "-wal" : strcmp(suffix, "-wal") == 0 ? "-shm" : NULL;
    }
    struct audit_options options;
    audit_options_default(&options);
    struct bench b = {.n = &n,
                      .raw = raw,
                      .raw_len = raw_len,
                      .count = warm,
                      .capacity = warm + count,
                      .nodes = nodes};
    b.committed = calloc((size_t)(warm + count), sizeof(*b.committed));
    pthread_mutex_init(&b.lock, NULL);
    if (!b.committed || audit_store_open(db, &options, &b.store, &err)) {
        fprintf(stderr, "writer-bench: %s\n", err.msg);
        return 1;
    }
    static const char *const names[] = {"medic-audit", "medic-sync", "medic-ckpt"};
    pthread_t t[MAX_THREADS], ev;
    pthread_create(&ev, NULL, evaluate, &b);
    for (long i = 0; warm && i < threads; i++) /* the log grown first, unmeasured */
        pthread_create(&t[i], NULL, store_some, &b);
    for (long i = 0; warm && i < threads; i++)
        pthread_join(t[i], NULL);
    if (warm)
        printf("writer-bench: %ld notifications stored first\n", warm);
    double before[3];
    for (int i = 0; i < 3; i++)
        before[i] = thread_cpu(names[i]);
    long failed_before = atomic_load(&b.failed);
    atomic_store(&b.next, warm); /* each caller of the first took one more */
    b.count = warm + count;
    int64_t start = medic_time_monotonic();
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, store_some, &b);
    for (long i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double seconds = (double)(medic_time_monotonic() - start) / 1e9;
    atomic_store(&b.done, 1);
    pthread_join(ev, NULL);
    long stored = count - (atomic_load(&b.failed) - failed_before);
    printf("writer-bench: %ld notifications (3 alerts, %ld node%s) from %ld callers in %.2f s: "
           "%.0f/s%s\n",
           stored, nodes, nodes == 1 ? "" : "s", threads, seconds, (double)stored / seconds,
           atomic_load(&b.failed) ? " (some failed)" : "");
    for (int i = 0; i < 3; i++)
        printf("  %-12s %6.1f us of CPU per notification\n", names[i],
               (thread_cpu(names[i]) - before[i]) * 1e6 / (double)(stored ? stored : 1));
    audit_store_free(b.store);
    /* every notification stored was marked evaluated */
    long pending = 0;
    struct audit_reader *reader = NULL;
    if (audit_reader_open(db, &reader, &err) ||
        audit_pending_notifications(reader, (size_t)(warm + count), count_pending, &pending,
                                    &err)) {
        fprintf(stderr, "writer-bench: cannot read the log back: %s\n", err.msg);
        pending = -1;
    }
    audit_reader_free(reader);
    if (pending)
        fprintf(stderr, "writer-bench: %ld notifications were not marked evaluated\n", pending);
    medic_notification_release(&n);
    free(raw);
    free(b.committed);
    long all = atomic_load(&b.committed_all);
    if (all != warm + count)
        fprintf(stderr, "writer-bench: %ld notifications committed of %ld\n", all, warm + count);
    return atomic_load(&b.failed) || pending || all != warm + count ? 1 : 0;
}

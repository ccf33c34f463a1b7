/* SPDX-License-Identifier: Apache-2.0 */
/* durable-floor: the least a durable webhook receiver must do, as a
 * reference for medic in the same run. libmicrohttpd with medic's
 * threading (a thread pool, one per core, on epoll, each request suspended
 * while its write is pending), each body appended to one file, and 200
 * only after a group commit's fdatasync covers it: one thread writes and
 * syncs everything that arrived while the last sync ran. Nothing else: no
 * parsing, no database, no policy.
 *
 *   durable-floor PORT FILE
 *
 * Runs until SIGINT or SIGTERM. */
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_BODY ((size_t)1 << 20)

struct request {
    struct MHD_Connection *conn;
    char *body;
    size_t len, cap;
    int state; /* 0 reading, 1 waiting for its sync, 2 synced, 3 failed */
    struct request *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static struct request *queued;
static int fd = -1, stopping;

/* Writes and syncs everything queued since the last sync, then resumes
 * its requests. */
static void *syncer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!queued && !stopping)
            pthread_cond_wait(&work, &lock);
        if (!queued && stopping)
            break;
        struct request *batch = queued;
        queued = NULL;
        pthread_mutex_unlock(&lock);
        /* the batch in one write (as a commit writes its pages), then one sync */
        size_t total = 0;
        for (struct request *r = batch; r; r = r->next)
            total += r->len + 1;
        char *all = malloc(total ? total : 1);
        size_t at = 0;
        for (struct request *r = batch; all && r; r = r->next) {
            memcpy(all + at, r->body, r->len);
            at += r->len;
            all[at++] = '\n';
        }
        int ok = all && write(fd, all, total) == (ssize_t)total && fdatasync(fd) == 0;
        free(all);
        pthread_mutex_lock(&lock);
        for (struct request *r = batch, *next; r; r = next) {
            next = r->next;
            r->state = ok ? 2 : 3;
            MHD_resume_connection(r->conn);
        }
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned int code, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)url;
    (void)version;
    struct request *r = *con_cls;
    if (!r) {
        if (strcmp(method, "POST") != 0)
            return answer(c, 405, "{\"status\":\"error\"}\n");
        if (!(r = calloc(1, sizeof(*r))))
            return MHD_NO;
        r->conn = c;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->len + *upload_size > MAX_BODY)
            return MHD_NO;
        if (r->len + *upload_size > r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 4096;
            while (cap < r->len + *upload_size)
                cap *= 2;
            char *b = realloc(r->body, cap);
            if (!b)
                return MHD_NO;
            r->body = b;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload, *upload_size);
        r->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->state == 0) { /* whole: queue it for the next sync */
        r->state = 1;
        MHD_suspend_connection(c);
        pthread_mutex_lock(&lock);
        r->next = queued;
        queued = r;
        pthread_cond_signal(&work);
        pthread_mutex_unlock(&lock);
        return MHD_YES;
    }
    return r->state == 2 ? answer(c, 200, "{\"status\":\"accepted\"}\n")
                         : answer(c, 503, "{\"status\":\"error\"}\n");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct request *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: durable-floor PORT FILE\n", stderr);
        return 2;
    }
    fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    pthread_t t;
    pthread_create(&t, NULL, syncer, NULL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC,
        (uint16_t)atoi(argv[1]), NULL, NULL, on_request, NULL, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned int)(cpus > 1 ? cpus : 1), MHD_OPTION_CONNECTION_LIMIT, 512,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "durable-floor: cannot listen on port %s\n", argv[1]);
        return 1;
    }
    int sig;
    sigwait(&stop, &sig);
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    MHD_stop_daemon(d);
    close(fd);
    return 0;
}

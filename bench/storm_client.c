/* SPDX-License-Identifier: Apache-2.0 */
/* storm-client: POSTs a list of Alertmanager notifications to a webhook,
 * each exactly once, over a fixed number of connections that each wait for
 * their answer before sending the next (as Alertmanager's notifiers do).
 * A C client, as cheap per request as Alertmanager's, so that the storm
 * benchmark measures medic and not its clients.
 *
 *   storm-client URL BODIES_FILE CONNECTIONS
 *
 * BODIES_FILE holds one JSON notification per line. Prints
 * "storm: posted N non-200 E in S s" and exits 1 when a transfer failed. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slot {
    CURL *easy;
    size_t body; /* the index of the body in flight */
};

static size_t discard(char *data, size_t size, size_t n, void *arg)
{
    (void)data;
    (void)arg;
    return size * n;
}

static char **read_lines(const char *path, size_t *count)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char **lines = NULL, *line = NULL;
    size_t cap = 0, n = 0, size = 0;
    ssize_t len;
    while ((len = getline(&line, &size, f)) > 0) {
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!len)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            lines = realloc(lines, cap * sizeof(*lines));
            if (!lines)
                exit(2);
        }
        if (!(lines[n++] = strdup(line)))
            exit(2);
    }
    free(line);
    fclose(f);
    *count = n;
    return lines;
}

static void start(CURLM *m, struct slot *s, const char *url, struct curl_slist *headers,
                  char **bodies, size_t i)
{
    s->body = i;
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, bodies[i]);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, (char *)s);
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT, 120L);
    curl_multi_add_handle(m, s->easy);
}

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[3]) < 1) {
        fprintf(stderr, "usage: storm-client URL BODIES_FILE CONNECTIONS\n");
        return 2;
    }
    size_t count = 0;
    char **bodies = read_lines(argv[2], &count);
    if (!bodies) {
        fprintf(stderr, "storm-client: cannot read %s\n", argv[2]);
        return 2;
    }
    size_t conns = (size_t)atoi(argv[3]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)conns);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    struct slot *slots = calloc(conns, sizeof(*slots));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t next = 0, done = 0, non200 = 0, failed = 0;
    for (size_t c = 0; c < conns && next < count; c++) {
        slots[c].easy = curl_easy_init();
        start(m, &slots[c], argv[1], headers, bodies, next++);
    }
    while (done < count) {
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int queued;
        while ((msg = curl_multi_info_read(m, &queued))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct slot *s = NULL;
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result != CURLE_OK) {
                fprintf(stderr, "storm-client: body %zu: %s\n", s->body,
                        curl_easy_strerror(msg->data.result));
                failed++;
            } else if (code != 200) {
                non200++;
            }
            done++;
            curl_multi_remove_handle(m, s->easy);
            /* the same handle, so the same connection, sends the next */
            if (next < count)
                start(m, s, argv[1], headers, bodies, next++);
        }
        if (done < count)
            curl_multi_poll(m, NULL, 0, 1000, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("storm: posted %zu non-200 %zu in %.3f s\n", count - failed, non200, seconds);
    for (size_t c = 0; c < conns; c++)
        if (slots[c].easy)
            curl_easy_cleanup(slots[c].easy);
    for (size_t i = 0; i < count; i++)
        free(bodies[i]);
    free(bodies);
    free(slots);
    curl_slist_free_all(headers);
    curl_multi_cleanup(m);
    curl_global_cleanup();
    return failed ? 1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "agent.h"
#include "boot.h"
#include "lock.h"
#include "buf.h"
#include "log.h"
#include "nvml.h"
#include "reset.h"
#include "secure.h"
#include "timeutil.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define AGENT_MAX_GPUS 64
#define AGENT_MAX_BODY 4096

struct agent {
    struct MHD_Daemon *daemon;
    struct nvml *nvml;
    char *token;
    char *state_file;
    struct medic_mutex lock;           /* remembered limits and their file */
    double remembered[AGENT_MAX_GPUS]; /* 0: none */
    int port;
    struct gpu_reset_options reset;
    int resetting; /* a GPU reset runs (under lock): NVML is closed meanwhile */
};

struct request {
    struct medic_buf body;
    int too_large;
};

static void load_state(struct agent *a)
{
    FILE *f = fopen(a->state_file, "r");
    unsigned int i;
    double w;
    while (f && fscanf(f, "%u %lf", &i, &w) == 2)
        if (i < AGENT_MAX_GPUS)
            a->remembered[i] = w;
    if (f)
        fclose(f);
}

static int save_state(struct agent *a)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", a->state_file);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    for (unsigned int i = 0; i < AGENT_MAX_GPUS; i++)
        if (a->remembered[i] > 0)
            fprintf(f, "%u %.3f\n", i, a->remembered[i]);
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    return ok && rename(tmp, a->state_file) == 0 ? 0 : -1;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int code, struct medic_buf *b)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(b->len, b->data ? b->data : (void *)"",
                                                             MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned int code, const char *msg)
{
    struct medic_buf b;
    medic_buf_init(&b, 4096);
    medic_buf_puts(&b, "{\"status\":\"error\",\"error\":");
    medic_buf_json_string(&b, msg);
    medic_buf_puts(&b, "}\n");
    enum MHD_Result r = reply(c, code, &b);
    medic_buf_release(&b);
    return r;
}

static void gpu_json(struct medic_buf *b, const struct nvml_gpu *g, double remembered)
{
    medic_buf_printf(b, "{\"index\":%u,\"uuid\":", g->index);
    medic_buf_json_string(b, g->uuid);
    medic_buf_puts(b, ",\"name\":");
    medic_buf_json_string(b, g->name);
    medic_buf_printf(b,
                     ",\"power_limit_w\":%.1f,\"min_w\":%.1f,\"max_w\":%.1f,\"default_w\":%.1f,"
                     "\"power_draw_w\":%.1f",
                     g->limit_w, g->min_w, g->max_w, g->default_w, g->draw_w);
    if (remembered > 0)
        medic_buf_printf(b, ",\"replaced_limit_w\":%.1f", remembered);
    medic_buf_puts(b, "}");
}

static enum MHD_Result list_gpus(struct agent *a, struct MHD_Connection *c)
{
    struct medic_error err = {0};
    unsigned int count;
    if (nvml_count(a->nvml, &count, &err))
        return reply_error(c, 500, err.msg);
    struct medic_buf b;
    medic_buf_init(&b, 0);
    medic_buf_puts(&b, "{\"status\":\"success\",\"gpus\":[");
    for (unsigned int i = 0; i < count && i < AGENT_MAX_GPUS; i++) {
        struct nvml_gpu g;
        if (nvml_read(a->nvml, i, &g, &err)) {
            medic_buf_release(&b);
            return reply_error(c, 500, err.msg);
        }
        if (i)
            medic_buf_puts(&b, ",");
        medic_mutex_lock(&a->lock);
        gpu_json(&b, &g, a->remembered[i]);
        medic_mutex_unlock(&a->lock);
    }
    medic_buf_puts(&b, "]}\n");
    enum MHD_Result r = reply(c, 200, &b);
    medic_buf_release(&b);
    return r;
}

static void json_reading(struct medic_buf *b, const char *name, long long value)
{
    if (value < 0)
        medic_buf_printf(b, ",\"%s\":null", name);
    else
        medic_buf_printf(b, ",\"%s\":%lld", name, value);
}

static void json_flag(struct medic_buf *b, const char *name, int value)
{
    medic_buf_printf(b, ",\"%s\":%s", name, value < 0 ? "null" : value ? "true" : "false");
}

static void json_time(struct medic_buf *b, const char *name, int64_t t)
{
    char when[40];
    medic_buf_printf(b, ",\"%s\":", name);
    if (t > 0)
        medic_buf_json_string(b, medic_time_format(t, when, sizeof(when)));
    else
        medic_buf_puts(b, "null");
}

static void health_json(struct medic_buf *b, const struct nvml_gpu *g, const struct nvml_health *h,
                        double remembered, int64_t enumerated_at)
{
    medic_buf_printf(b, "{\"index\":%u,\"uuid\":", g->index);
    medic_buf_json_string(b, g->uuid);
    json_time(b, "enumerated_at", enumerated_at);
    medic_buf_puts(b, ",\"name\":");
    medic_buf_json_string(b, g->name);
    medic_buf_puts(b, ",\"recovery_action\":");
    if (h->recovery < 0)
        medic_buf_puts(b, "null");
    else
        medic_buf_json_string(b, nvml_recovery_name(h->recovery));
    json_reading(b, "recovery_action_code", h->recovery);
    json_flag(b, "persistence_mode", h->persistence);
    if (h->remap_known)
        medic_buf_printf(b,
                         ",\"remapped_rows\":{\"correctable\":%u,\"uncorrectable\":%u,"
                         "\"pending\":%s,\"failure\":%s}",
                         h->remap_correctable, h->remap_uncorrectable,
                         h->remap_pending ? "true" : "false", h->remap_failure ? "true" : "false");
    else
        medic_buf_puts(b, ",\"remapped_rows\":null");
    json_flag(b, "retired_pages_pending", h->retired_pending);
    json_reading(b, "volatile_dbe", h->dbe_volatile);
    json_reading(b, "compute_processes", h->processes);
    medic_buf_printf(b, ",\"power_limit_w\":%.1f", g->limit_w);
    if (remembered > 0)
        medic_buf_printf(b, ",\"replaced_limit_w\":%.1f", remembered);
    medic_buf_puts(b, ",\"unavailable\":");
    medic_buf_json_string(b, h->unavailable);
    medic_buf_puts(b, "}");
}

/* GET /v1/health: what the driver says of every GPU it sees. Readings the
 * driver does not offer are null, named in "unavailable" with the reason;
 * medic decides what is healthy (against the inventory's GPU count). */
static enum MHD_Result report_health(struct agent *a, struct MHD_Connection *c)
{
    struct medic_error err = {0};
    unsigned int count;
    if (nvml_count(a->nvml, &count, &err))
        return reply_error(c, 500, err.msg);
    char driver[96];
    nvml_driver_version(a->nvml, driver, sizeof(driver));
    int64_t enumerated_at = nvml_opened_at(a->nvml);
    struct node_boot boot;
    node_boot_read(NULL, &boot);
    struct medic_buf b;
    medic_buf_init(&b, 0);
    medic_buf_puts(&b, "{\"status\":\"success\",\"driver_version\":");
    medic_buf_json_string(&b, driver);
    medic_buf_puts(&b, ",\"boot_id\":");
    if (boot.id[0])
        medic_buf_json_string(&b, boot.id);
    else
        medic_buf_puts(&b, "null");
    json_time(&b, "booted_at", boot.booted_at);
    medic_buf_printf(&b, ",\"gpu_count\":%u,\"gpus\":[", count);
    for (unsigned int i = 0; i < count && i < AGENT_MAX_GPUS; i++) {
        struct nvml_gpu g;
        struct nvml_health h;
        if (nvml_read(a->nvml, i, &g, &err) || nvml_health(a->nvml, i, &h, &err)) {
            medic_buf_release(&b);
            return reply_error(c, 500, err.msg);
        }
        if (i)
            medic_buf_puts(&b, ",");
        medic_mutex_lock(&a->lock);
        health_json(&b, &g, &h, a->remembered[i], enumerated_at);
        medic_mutex_unlock(&a->lock);
    }
    medic_buf_puts(&b, "]}\n");
    enum MHD_Result r = reply(c, 200, &b);
    medic_buf_release(&b);
    return r;
}

static enum MHD_Result set_limit(struct agent *a, struct MHD_Connection *c, unsigned int index,
                                 const struct medic_buf *body)
{
    cJSON *j = cJSON_ParseWithLength(body->data ? body->data : "", body->len);
    const cJSON *watts = cJSON_GetObjectItemCaseSensitive(j, "watts");
    if (!cJSON_IsNumber(watts)) {
        cJSON_Delete(j);
        return reply_error(c, 400, "expected {\"watts\": N}");
    }
    double w = watts->valuedouble;
    cJSON_Delete(j);
    struct medic_error err = {0};
    struct nvml_gpu g;
    unsigned int count = 0;
    if (nvml_count(a->nvml, &count, &err))
        return reply_error(c, 500, err.msg);
    if (index >= count || index >= AGENT_MAX_GPUS) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no GPU %u on this node: it has %u (indexes 0..%u)", index,
                 count, count ? count - 1 : 0);
        return reply_error(c, 404, msg);
    }
    if (nvml_read(a->nvml, index, &g, &err))
        return reply_error(c, 500, err.msg);
    if (w < g.min_w || w > g.max_w) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%.1f W is outside GPU %u's limits %.1f..%.1f W", w, index,
                 g.min_w, g.max_w);
        return reply_error(c, 400, msg);
    }
    medic_mutex_lock(&a->lock);
    /* remember the limit medic replaced, once: a second limit keeps the first original */
    int first = a->remembered[index] <= 0;
    if (first)
        a->remembered[index] = g.limit_w;
    /* never above the limit that was there before medic: an operator's
     * stricter cap stays in force */
    double original = a->remembered[index];
    int saved = save_state(a);
    medic_mutex_unlock(&a->lock);
    int kept = w > original;
    if (kept)
        w = original;
    if (saved) {
        if (first) {
            medic_mutex_lock(&a->lock);
            a->remembered[index] = 0;
            medic_mutex_unlock(&a->lock);
        }
        return reply_error(c, 500, "cannot write the agent's state file");
    }
    if (nvml_set_limit(a->nvml, index, w, &err))
        return reply_error(c, 500, err.msg);
    struct medic_buf b;
    medic_buf_init(&b, 0);
    medic_buf_printf(&b,
                     "{\"status\":\"success\",\"index\":%u,\"previous_w\":%.1f,\"limit_w\":%.1f,"
                     "\"kept_original\":%s}\n",
                     index, g.limit_w, w, kept ? "true" : "false");
    medic_log_info("power limit set", "gpu", g.uuid, NULL);
    enum MHD_Result r = reply(c, 200, &b);
    medic_buf_release(&b);
    return r;
}

static enum MHD_Result restore_all(struct agent *a, struct MHD_Connection *c)
{
    struct medic_buf b;
    struct medic_error err = {0};
    medic_buf_init(&b, 0);
    medic_buf_puts(&b, "{\"status\":\"success\",\"restored\":[");
    int n = 0, failed = 0;
    medic_mutex_lock(&a->lock);
    for (unsigned int i = 0; i < AGENT_MAX_GPUS; i++) {
        if (a->remembered[i] <= 0)
            continue;
        if (nvml_set_limit(a->nvml, i, a->remembered[i], &err)) {
            failed = 1;
            break;
        }
        medic_buf_printf(&b, "%s{\"index\":%u,\"limit_w\":%.1f}", n++ ? "," : "", i,
                         a->remembered[i]);
        a->remembered[i] = 0;
    }
    save_state(a);
    medic_mutex_unlock(&a->lock);
    enum MHD_Result r;
    if (failed)
        r = reply_error(c, 500, err.msg);
    else if (n == 0)
        r = reply_error(c, 409, "no power limit of medic's to restore on this node");
    else {
        medic_buf_puts(&b, "]}\n");
        r = reply(c, 200, &b);
    }
    medic_buf_release(&b);
    return r;
}

/* "/v1/gpus/N/WHAT": N is 1 to 3 decimal digits, nothing else (a wider
 * number must never wrap around to another GPU); returns WHAT
 * ("power-limit", "reset") or NULL. */
static const char *gpu_path(const char *url, unsigned int *index)
{
    static const char prefix[] = "/v1/gpus/";
    if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
        return NULL;
    const char *p = url + sizeof(prefix) - 1;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || digits > 3 || p[digits] != '/')
        return NULL;
    *index = 0;
    for (size_t i = 0; i < digits; i++)
        *index = *index * 10 + (unsigned int)(p[i] - '0');
    return p + digits + 1;
}

/* POST /v1/gpus/N/reset {"uuid": "GPU-...", "check_only": false}: one at
 * a time; NVML is closed while it runs, so other requests are answered
 * 503 meanwhile. */
static enum MHD_Result reset_gpu(struct agent *a, struct MHD_Connection *c, unsigned int index,
                                 const struct medic_buf *body)
{
    cJSON *j = body->len ? cJSON_ParseWithLength(body->data, body->len) : cJSON_CreateObject();
    const cJSON *uuid = cJSON_GetObjectItemCaseSensitive(j, "uuid");
    const cJSON *check = cJSON_GetObjectItemCaseSensitive(j, "check_only");
    if (!cJSON_IsObject(j) ||
        (uuid &&
         (!cJSON_IsString(uuid) || !uuid->valuestring[0] || strlen(uuid->valuestring) >= 96)) ||
        (check && !cJSON_IsBool(check))) {
        cJSON_Delete(j);
        return reply_error(c, 400,
                           "expected {\"uuid\": \"GPU-...\", \"check_only\": false} (both "
                           "optional)");
    }
    medic_mutex_lock(&a->lock);
    int busy = a->resetting;
    a->resetting = 1;
    medic_mutex_unlock(&a->lock);
    if (busy) {
        cJSON_Delete(j);
        return reply_error(c, 409, "another GPU reset runs on this node");
    }
    struct gpu_reset_request r = {
        .index = index, .uuid = uuid ? uuid->valuestring : NULL, .check_only = cJSON_IsTrue(check)};
    struct medic_buf b;
    medic_buf_init(&b, 0);
    unsigned int code = gpu_reset(a->nvml, &a->reset, &r, &b);
    cJSON_Delete(j);
    medic_mutex_lock(&a->lock);
    a->resetting = 0;
    medic_mutex_unlock(&a->lock);
    enum MHD_Result ret = reply(c, code, &b);
    medic_buf_release(&b);
    return ret;
}

static int resetting(struct agent *a)
{
    medic_mutex_lock(&a->lock);
    int r = a->resetting;
    medic_mutex_unlock(&a->lock);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct agent *a = cls;
    struct request *req = *con_cls;
    if (!req) {
        if (!(req = calloc(1, sizeof(*req))))
            return MHD_NO;
        medic_buf_init(&req->body, AGENT_MAX_BODY);
        *con_cls = req;
        if (strcmp(url, "/-/healthy") == 0)
            return MHD_YES;
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        const char *tok = auth && strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 : NULL;
        if (!tok || !medic_secure_equals(tok, strlen(tok), a->token))
            return reply_error(c, 401, tok ? "wrong token" : "a bearer token is required");
        return MHD_YES;
    }
    if (*upload_size) {
        if (medic_buf_append(&req->body, upload, *upload_size))
            req->too_large = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    if (req->too_large)
        return reply_error(c, 413, "body over 4 KiB");
    if (strcmp(url, "/-/healthy") == 0) {
        struct medic_buf b;
        medic_buf_init(&b, 64);
        medic_buf_puts(&b, "{\"status\":\"healthy\"}\n");
        enum MHD_Result r = reply(c, 200, &b);
        medic_buf_release(&b);
        return r;
    }
    unsigned int index = 0;
    const char *what = gpu_path(url, &index);
    if (what && strcmp(what, "reset") == 0)
        return strcmp(method, "POST") == 0 ? reset_gpu(a, c, index, &req->body)
                                           : reply_error(c, 405, "use POST");
    if (resetting(a))
        return reply_error(c, 503,
                           "a GPU reset runs on this node: NVML is closed meanwhile; "
                           "try again in a minute");
    if (strcmp(url, "/v1/gpus") == 0)
        return strcmp(method, "GET") == 0 ? list_gpus(a, c) : reply_error(c, 405, "use GET");
    if (strcmp(url, "/v1/health") == 0)
        return strcmp(method, "GET") == 0 ? report_health(a, c) : reply_error(c, 405, "use GET");
    if (strcmp(url, "/v1/restore") == 0)
        return strcmp(method, "POST") == 0 ? restore_all(a, c) : reply_error(c, 405, "use POST");
    if (what && strcmp(what, "power-limit") == 0)
        return strcmp(method, "POST") == 0 ? set_limit(a, c, index, &req->body)
                                           : reply_error(c, 405, "use POST");
    return reply_error(c, 404, "no such endpoint");
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct request *req = *con_cls;
    if (req) {
        medic_buf_release(&req->body);
        free(req);
        *con_cls = NULL;
    }
}

int agent_start(const struct agent_options *o, struct agent **out, struct medic_error *err)
{
    struct agent *a = calloc(1, sizeof(*a));
    if (!a)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    medic_mutex_init(&a->lock, MEDIC_LOCK_AGENT);
    a->token = strdup(o->token);
    a->state_file = strdup(o->state_file);
    a->reset.nvidia_smi = o->nvidia_smi ? o->nvidia_smi : "nvidia-smi";
    a->reset.timeout_ms = 120000; /* nvidia-smi --gpu-reset, killed past this */
    int rc = a->token && a->state_file ? 0 : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (rc == 0)
        rc = nvml_open(o->nvml_library, &a->nvml, err);
    if (rc == 0)
        load_state(a);
    char host[256] = "";
    const char *colon = strrchr(o->listen, ':');
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (rc == 0) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *res = NULL;
        snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - o->listen) : 0, o->listen);
        if (!colon || getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res) != 0)
            rc = medic_error_set(err, MEDIC_E_INVALID, "listen address '%s' is not HOST:PORT",
                                 o->listen);
        else {
            memcpy(&ss, res->ai_addr, res->ai_addrlen);
            freeaddrinfo(res);
        }
    }
    if (rc == 0) {
        unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
        if (ss.ss_family == AF_INET6)
            flags |= MHD_USE_IPv6;
        int tls = o->tls_cert_pem && o->tls_key_pem;
        if (tls)
            flags |= MHD_USE_TLS;
        struct MHD_OptionItem opts[] = {
            {MHD_OPTION_SOCK_ADDR, 0, &ss},
            {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_done, a},
            {MHD_OPTION_CONNECTION_LIMIT, 64, NULL},
            /* a GPU reset takes up to a couple of minutes: the other
             * threads answer meanwhile */
            {MHD_OPTION_THREAD_POOL_SIZE, 4, NULL},
            {MHD_OPTION_CONNECTION_TIMEOUT, 30, NULL},
            {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)o->tls_cert_pem},
            {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)o->tls_key_pem},
            {MHD_OPTION_END, 0, NULL},
        };
        a->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, a, MHD_OPTION_ARRAY, opts,
                                     MHD_OPTION_END);
        if (!a->daemon)
            rc = medic_error_set(err, MEDIC_E_IO, "cannot listen on %s", o->listen);
    }
    if (rc) {
        agent_stop(a);
        return rc;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_BIND_PORT);
    a->port = info ? info->port : 0;
    *out = a;
    return 0;
}

int agent_port(struct agent *a)
{
    return a->port;
}

void agent_stop(struct agent *a)
{
    if (!a)
        return;
    if (a->daemon)
        MHD_stop_daemon(a->daemon);
    nvml_close(a->nvml);
    if (a->token)
        memset(a->token, 0, strlen(a->token));
    free(a->token);
    free(a->state_file);
    medic_mutex_destroy(&a->lock);
    free(a);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "server_internal.h"
#include "lock.h"
#include "log.h"
#include "timeutil.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* A webhook's time from its first byte to its answer, into the histogram. */
static void observe_webhook(struct receiver_server *srv, const struct request *req)
{
    int64_t ns = medic_time_monotonic() - req->started;
    size_t b = 0;
    while (b < WEBHOOK_BUCKETS && (double)ns / 1e9 > receiver__webhook_buckets[b])
        b++;
    atomic_fetch_add(&srv->webhook_buckets[b], 1);
    atomic_fetch_add(&srv->webhook_ns_sum, (unsigned long long)(ns > 0 ? ns : 0));
}

static void count_request(struct receiver_server *srv, enum handler h, unsigned int code)
{
    for (size_t i = 0; i < N_CODES; i++) {
        if (receiver__tracked_codes[i] == code) {
            atomic_fetch_add(&srv->requests[h][i], 1);
            return;
        }
    }
}

enum MHD_Result receiver__respond(struct receiver_server *srv, struct MHD_Connection *conn,
                                  struct request *req, unsigned int code, const char *content_type,
                                  const char *body, size_t len, const char *extra_header,
                                  const char *extra_value)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (extra_header)
        MHD_add_response_header(resp, extra_header, extra_value);
    if (atomic_load(&srv->stopping))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result r = MHD_queue_response(conn, code, resp);
    MHD_destroy_response(resp);
    if (!req->counted) {
        count_request(srv, req->handler, code);
        if (req->handler == H_WEBHOOK)
            observe_webhook(srv, req);
        req->counted = 1;
    }
    return r;
}

static enum MHD_Result respond_json(struct receiver_server *srv, struct MHD_Connection *conn,
                                    struct request *req, unsigned int code, const char *json)
{
    return receiver__respond(srv, conn, req, code, "application/json", json, strlen(json), NULL,
                             NULL);
}

enum MHD_Result receiver__respond_error(struct receiver_server *srv, struct MHD_Connection *conn,
                                        struct request *req, unsigned int code, const char *message,
                                        const char *extra_header, const char *extra_value)
{
    struct medic_buf b;
    medic_buf_init(&b, 8192);
    medic_buf_puts(&b, "{\"status\":\"error\",\"error\":");
    medic_buf_json_string(&b, message);
    medic_buf_puts(&b, "}\n");
    enum MHD_Result r = receiver__respond(srv, conn, req, code, "application/json",
                                          b.data ? b.data : "", b.len, extra_header, extra_value);
    medic_buf_release(&b);
    return r;
}

static void remote_address(struct MHD_Connection *conn, char *out, size_t size)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    out[0] = '\0';
    if (!info || !info->client_addr)
        return;
    char host[INET6_ADDRSTRLEN], port[8];
    socklen_t len = info->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                             : sizeof(struct sockaddr_in);
    if (getnameinfo(info->client_addr, len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(out, size, "%s:%s", host, port);
}

static void request_free(struct request *req)
{
    medic_buf_release(&req->body);
    medic_buf_release(&req->later_body);
    medic_notification_release(&req->notification);
    free(req);
}

static void waiting_add(struct receiver_server *srv, struct request *req)
{
    medic_mutex_lock(&srv->waiting_lock);
    req->waiting_prev = NULL;
    req->waiting_next = srv->waiting;
    if (srv->waiting)
        srv->waiting->waiting_prev = req;
    srv->waiting = req;
    atomic_store(&req->state, WEBHOOK_WAITING);
    medic_mutex_unlock(&srv->waiting_lock);
}

/* Under waiting_lock. */
static void waiting_remove(struct receiver_server *srv, struct request *req)
{
    if (req->waiting_prev)
        req->waiting_prev->waiting_next = req->waiting_next;
    else if (srv->waiting == req)
        srv->waiting = req->waiting_next;
    if (req->waiting_next)
        req->waiting_next->waiting_prev = req->waiting_prev;
    req->waiting_prev = req->waiting_next = NULL;
}

int receiver__suspend(struct receiver_server *srv, struct request *req)
{
    /* Once stopping, nothing more is suspended: libmicrohttpd aborts when it
     * is stopped with a suspended connection. If this check sees stopping
     * unset, the stop has yet to read in_flight, which already counts this
     * request (from its first call), so the stop waits for it (both are
     * sequentially consistent atomics). */
    if (atomic_load(&srv->stopping))
        return -1;
    waiting_add(srv, req);
    MHD_suspend_connection(req->conn);
    return 0;
}

void receiver__resume(struct request *req, void (*keep)(struct request *req, void *arg), void *arg)
{
    struct receiver_server *srv = req->srv;
    medic_mutex_lock(&srv->waiting_lock);
    if (atomic_load(&req->state) == WEBHOOK_ABANDONED) {
        int free_now = req->mhd_done;
        req->mhd_done = 1; /* the other side is done with it too */
        medic_mutex_unlock(&srv->waiting_lock);
        if (free_now)
            request_free(req);
        return;
    }
    waiting_remove(srv, req);
    keep(req, arg);
    atomic_store(&req->state, WEBHOOK_DONE);
    medic_mutex_unlock(&srv->waiting_lock);
    MHD_resume_connection(req->conn);
}

static void keep_recorded(struct request *req, void *arg)
{
    const struct medic_error *err = arg;
    req->record_rc = err ? (err->code ? err->code : MEDIC_E_IO) : 0;
    if (err)
        req->record_err = *err;
}

/* The audit writer's answer: keep it and let libmicrohttpd call us again;
 * a request the stop already answered is only freed (the server itself
 * outlives the writer: receiver_server_free comes after the store's). */
static void on_recorded(void *request, int rc, const struct medic_error *err)
{
    struct medic_error copy = {0};
    if (rc) {
        if (err)
            copy = *err;
        copy.code = rc;
    }
    receiver__resume(request, keep_recorded, rc ? &copy : NULL);
}

static enum MHD_Result answer_recorded(struct receiver_server *srv, struct MHD_Connection *conn,
                                       struct request *req)
{
    const struct medic_notification *n = &req->notification;
    const struct receiver_record_result *res = &req->result;
    int rc = req->record_rc;
    if (rc == MEDIC_E_INVALID)
        return receiver__respond_error(srv, conn, req, MHD_HTTP_BAD_REQUEST, req->record_err.msg,
                                       NULL, NULL);
    if (rc) {
        /* Alertmanager retries 5xx, so a notification that could not be
         * committed is not lost */
        medic_log_error("cannot commit notification", "remote", req->remote, "error",
                        req->record_err.msg, NULL);
        return receiver__respond_error(srv, conn, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                       req->record_err.msg, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    char body[160];
    if (res->duplicate) {
        snprintf(body, sizeof(body),
                 "{\"status\":\"accepted\",\"id\":%lld,\"duplicate\":true,\"duplicate_of\":%lld}\n",
                 (long long)res->id, (long long)res->duplicate_of);
        atomic_fetch_add(&srv->notifications_duplicate, 1);
    } else {
        snprintf(body, sizeof(body), "{\"status\":\"accepted\",\"id\":%lld,\"duplicate\":false}\n",
                 (long long)res->id);
        atomic_fetch_add(&srv->notifications_accepted, 1);
        for (size_t i = 0; i < n->alert_count; i++)
            atomic_fetch_add(n->alerts[i].status == MEDIC_STATUS_FIRING ? &srv->alerts_firing
                                                                        : &srv->alerts_resolved,
                             1);
    }
    char id[24], count[24];
    snprintf(id, sizeof(id), "%lld", (long long)res->id);
    snprintf(count, sizeof(count), "%zu", n->alert_count);
    medic_log_debug("notification committed", "id", id, "alerts", count, "duplicate",
                    res->duplicate ? "true" : "false", "group_key", n->group_key, NULL);
    return respond_json(srv, conn, req, MHD_HTTP_OK, body);
}

static enum MHD_Result handle_webhook(struct receiver_server *srv, struct MHD_Connection *conn,
                                      struct request *req)
{
    if (atomic_load(&req->state) == WEBHOOK_DONE)
        return answer_recorded(srv, conn, req);
    if (atomic_load(&req->state) == WEBHOOK_ABANDONED)
        return receiver__respond_error(
            srv, conn, req, MHD_HTTP_SERVICE_UNAVAILABLE,
            "shutting down before the commit was confirmed; send it again",
            MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (atomic_load(&req->state) == WEBHOOK_WAITING)
        return MHD_YES; /* not resumed yet */

    struct receiver_limits limits;
    medic_rwlock_rdlock(&srv->settings_lock);
    limits = srv->settings->s.limits;
    medic_rwlock_unlock(&srv->settings_lock);

    struct medic_error err = {0};
    remote_address(conn, req->remote, sizeof(req->remote));
    int rc = receiver_payload_parse(req->body.data ? req->body.data : "", req->body.len, &limits,
                                    &req->notification, &err);
    if (rc) {
        medic_log_warn("rejected notification", "remote", req->remote, "error", err.msg, NULL);
        return receiver__respond_error(srv, conn, req, MHD_HTTP_BAD_REQUEST, err.msg, NULL, NULL);
    }
    /* suspend first: the writer may finish before record() returns;
     * Alertmanager retries the 503 of a server that stops */
    if (receiver__suspend(srv, req))
        return receiver__respond_error(srv, conn, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                       "shutting down", MHD_HTTP_HEADER_RETRY_AFTER, "1");
    rc = srv->hooks.record(srv->hooks.ctx, &req->notification, req->body.data, req->body.len,
                           req->remote, &req->result, on_recorded, req, &err);
    if (rc)
        on_recorded(req, rc, &err);
    return MHD_YES;
}

static int start_query(struct receiver_server *srv, struct MHD_Connection *conn,
                       struct request *req, const char *url, const struct receiver_later *later,
                       struct medic_buf *b)
{
    (void)url;
    struct receiver_query q = {.kind = req->arg};
#define ARG(name) MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name)
    q.node = ARG("node");
    q.alertname = ARG("alertname");
    q.policy = ARG("policy");
    q.verdict = ARG("verdict");
    q.status = ARG("status");
    q.since = ARG("since");
    q.until = ARG("until");
    q.limit = ARG("limit");
    q.state = ARG("state");
    q.incident = ARG("incident");
    q.decision = ARG("decision");
#undef ARG
    return srv->hooks.query(srv->hooks.ctx, &q, later, b);
}

static int start_page(struct receiver_server *srv, struct MHD_Connection *conn, struct request *req,
                      const char *url, const struct receiver_later *later, struct medic_buf *b)
{
    (void)url;
    return srv->hooks.page(
        srv->hooks.ctx, req->page, req->arg,
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION), later,
        b);
}

static enum MHD_Result dispatch(struct receiver_server *srv, struct MHD_Connection *conn,
                                struct request *req, const char *url)
{
    struct medic_error err = {0};
    switch (req->handler) {
    case H_WEBHOOK:
        return handle_webhook(srv, conn, req);
    case H_HEALTHY:
        return receiver__respond(srv, conn, req, MHD_HTTP_OK, "text/plain; charset=utf-8",
                                 "medic is healthy.\n", 18, NULL, NULL);
    case H_READY:
        if (atomic_load(&srv->stopping) || (srv->hooks.ready && !srv->hooks.ready(srv->hooks.ctx)))
            return receiver__respond(srv, conn, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                     "text/plain; charset=utf-8", "medic is not ready.\n", 20, NULL,
                                     NULL);
        return receiver__respond(srv, conn, req, MHD_HTTP_OK, "text/plain; charset=utf-8",
                                 "medic is ready.\n", 16, NULL, NULL);
    case H_METRICS: {
        struct medic_buf b;
        medic_buf_init(&b, 0);
        receiver__render_metrics(srv, &b);
        enum MHD_Result r = receiver__respond(srv, conn, req, MHD_HTTP_OK,
                                              "text/plain; version=0.0.4; charset=utf-8",
                                              b.data ? b.data : "", b.len, NULL, NULL);
        medic_buf_release(&b);
        return r;
    }
    case H_RELOAD:
        if (!srv->hooks.reload || srv->hooks.reload(srv->hooks.ctx, &err) == 0)
            return respond_json(srv, conn, req, MHD_HTTP_OK, "{\"status\":\"reloaded\"}\n");
        /* a configuration that is refused is the client's to fix: 400 with
         * its FILE:LINE:COL message; the running one stays */
        return receiver__respond_error(srv, conn, req,
                                       err.code == MEDIC_E_NOMEM ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                                 : MHD_HTTP_BAD_REQUEST,
                                       err.msg, NULL, NULL);
    case H_API_QUERY:
        if (!srv->hooks.query)
            return receiver__respond_error(srv, conn, req, MHD_HTTP_NOT_FOUND, "no such endpoint",
                                           NULL, NULL);
        return receiver__answer_later(srv, conn, req, url, start_query);
    case H_DRY_RUN: {
        if (!srv->hooks.dry_run)
            return receiver__respond_error(srv, conn, req, MHD_HTTP_NOT_FOUND, "no such endpoint",
                                           NULL, NULL);
        struct medic_buf b;
        medic_buf_init(&b, (size_t)32 << 20);
        int code = srv->hooks.dry_run(srv->hooks.ctx, req->body.data ? req->body.data : "",
                                      req->body.len, &b);
        enum MHD_Result r =
            receiver__respond(srv, conn, req, (unsigned int)code, "application/json",
                              b.data ? b.data : "", b.len, NULL, NULL);
        medic_buf_release(&b);
        return r;
    }
    case H_APPROVAL:
    case H_PAUSE:
    case H_RELEASE:
    case H_PAGE_FORM:
        return receiver__person_request(srv, conn, req, url);
    case H_PAGE:
        if (!srv->hooks.page)
            return receiver__respond_error(srv, conn, req, MHD_HTTP_NOT_FOUND, "no such endpoint",
                                           NULL, NULL);
        return receiver__answer_later(srv, conn, req, url, start_page);
    default:
        return receiver__respond_error(srv, conn, req, MHD_HTTP_NOT_FOUND, "no such endpoint", NULL,
                                       NULL);
    }
}

/* The first call for a request: everything that can be refused before the
 * body is read (route, method, credentials, content type, declared size). */
static enum MHD_Result first_call(struct receiver_server *srv, struct MHD_Connection *conn,
                                  struct request *req, const char *url, const char *method)
{
    if (req->handler == H_OTHER)
        return receiver__respond_error(srv, conn, req, MHD_HTTP_NOT_FOUND, "no such endpoint", NULL,
                                       NULL);
    if (!receiver__method_ok(req->handler, method)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "method %.16s is not allowed on %s; use %s", method, url,
                 receiver__allowed_method(req->handler));
        return receiver__respond_error(srv, conn, req, MHD_HTTP_METHOD_NOT_ALLOWED, msg,
                                       MHD_HTTP_HEADER_ALLOW,
                                       receiver__allowed_method(req->handler));
    }
    const char *challenge = NULL;
    if (!receiver__authenticate(srv, conn, req->handler, &challenge)) {
        const char *given =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        /* a browser cannot send a bearer token: say how on-call signs in */
        int browser = (req->handler == H_PAGE || req->handler == H_PAGE_FORM) &&
                      strncmp(challenge, "Bearer", 6) == 0;
        return receiver__respond_error(
            srv, conn, req, MHD_HTTP_UNAUTHORIZED,
            browser ? "credentials required: this page takes a bearer token, which a browser "
                      "cannot send; set auth.read_basic_auth (and auth.admin_basic_auth for the "
                      "forms) so that a browser asks for a user and password"
            : given ? "wrong credentials"
                    : "credentials required",
            MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    }
    req->deleting = strcmp(method, "DELETE") == 0;
    enum route_body body = receiver__handlers[req->handler].body;
    if (body == BODY_NONE || req->deleting)
        return MHD_YES;
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    if (body == BODY_FORM ? !receiver__is_form_content_type(ct)
                          : !receiver__is_json_content_type(ct)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "content type '%.64s' is not supported; send %s",
                 ct ? ct : "(none)",
                 body == BODY_FORM ? "application/x-www-form-urlencoded" : "application/json");
        return receiver__respond_error(srv, conn, req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, msg, NULL,
                                       NULL);
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > req->body.limit) {
        char msg[96];
        snprintf(msg, sizeof(msg), "body of %.20s bytes is over the limit of %zu bytes", cl,
                 req->body.limit);
        return receiver__respond_error(srv, conn, req, MHD_HTTP_CONTENT_TOO_LARGE, msg, NULL, NULL);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct receiver_server *srv = cls;
    struct request *req = *con_cls;
    if (!req) {
        req = calloc(1, sizeof(*req));
        if (!req)
            return MHD_NO;
        receiver__route(url, method, req);
        req->conn = conn;
        req->srv = srv;
        req->started = medic_time_monotonic();
        medic_notification_init(&req->notification);
        medic_rwlock_rdlock(&srv->settings_lock);
        /* a person's request or a form is a reason of a few lines */
        medic_buf_init(&req->body, receiver__handlers[req->handler].body == BODY_JSON ||
                                           receiver__handlers[req->handler].body == BODY_FORM
                                       ? 16384
                                       : srv->settings->s.limits.max_body_bytes);
        medic_rwlock_unlock(&srv->settings_lock);
        medic_buf_init(&req->later_body, (size_t)1 << 20); /* a person's request's answer */
        *con_cls = req;
        atomic_fetch_add(&srv->in_flight, 1);
        return first_call(srv, conn, req, url, method);
    }
    if (*upload_data_size) {
        /* libmicrohttpd cannot answer in the middle of an upload, so an
         * oversized body (chunked, or longer than its Content-Length said)
         * is read and dropped, then answered 413; a sender that goes on far
         * past the limit is disconnected */
        if (req->too_large) {
            req->discarded += *upload_data_size;
            *upload_data_size = 0;
            return req->discarded > 16 * req->body.limit ? MHD_NO : MHD_YES;
        }
        if (medic_buf_append(&req->body, upload_data, *upload_data_size)) {
            req->too_large = 1;
            req->discarded = req->body.len + *upload_data_size;
            medic_buf_release(&req->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    receiver__request_whole(srv->deadlines, conn);
    if (req->too_large) {
        char msg[96];
        snprintf(msg, sizeof(msg), "body is over the limit of %zu bytes", req->body.limit);
        return receiver__respond_error(srv, conn, req, MHD_HTTP_CONTENT_TOO_LARGE, msg, NULL, NULL);
    }
    return dispatch(srv, conn, req, url);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct receiver_server *srv = cls;
    receiver__request_ended(srv->deadlines, conn);
    struct request *req = *con_cls;
    if (!req)
        return;
    *con_cls = NULL;
    atomic_fetch_sub(&srv->in_flight, 1);
    medic_mutex_lock(&srv->waiting_lock);
    int keep = atomic_load(&req->state) == WEBHOOK_ABANDONED && !req->mhd_done;
    req->mhd_done = 1; /* an abandoned one is freed by the writer's answer */
    medic_mutex_unlock(&srv->waiting_lock);
    if (!keep)
        request_free(req);
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t len = strlen(msg);
    while (len && msg[len - 1] == '\n')
        msg[--len] = '\0';
    medic_log_warn("http server", "detail", msg, NULL);
}

static int parse_listen(const char *address, struct sockaddr_storage *ss, struct medic_error *err)
{
    char host[256];
    const char *colon = strrchr(address, ':');
    if (!colon || (size_t)(colon - address) >= sizeof(host))
        return medic_error_set(err, MEDIC_E_INVALID, "listen address '%s' is not HOST:PORT",
                               address);
    snprintf(host, sizeof(host), "%.*s", (int)(colon - address), address);
    char *h = host;
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &res);
    if (gai != 0)
        return medic_error_set(err, MEDIC_E_INVALID, "cannot resolve listen address '%s': %s",
                               address, gai_strerror(gai));
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* Once stopping, a new connection is closed as soon as it is accepted.
 * (MHD_quiesce_daemon would stop the accepting, but in libmicrohttpd
 * 0.9.75 it races its epoll workers for the listen socket's removal and
 * aborts the process when the worker wins.) */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)addr;
    (void)len;
    return atomic_load(&((struct receiver_server *)cls)->stopping) ? MHD_NO : MHD_YES;
}

int receiver_server_start(const struct receiver_listen *listen,
                          const struct receiver_settings *settings,
                          const struct receiver_hooks *hooks, struct receiver_server **out,
                          struct medic_error *err)
{
    struct sockaddr_storage ss;
    int rc = parse_listen(listen->address, &ss, err);
    if (rc)
        return rc;
    struct receiver_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    srv->hooks = *hooks;
    medic_rwlock_init(&srv->settings_lock, MEDIC_LOCK_RECEIVER_SETTINGS);
    medic_mutex_init(&srv->waiting_lock, MEDIC_LOCK_RECEIVER_WAITING);
    srv->settings = receiver__settings_dup(settings);
    if (!srv->settings) {
        receiver_server_free(srv);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    if (receiver__deadlines_start(listen->request_timeout, &srv->deadlines)) {
        receiver_server_free(srv);
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the request deadlines");
    }
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                         MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    int tls = listen->tls_cert_pem && listen->tls_key_pem;
    if (tls)
        flags |= MHD_USE_TLS;
    uint16_t port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_error, NULL},
        {MHD_OPTION_SOCK_ADDR, 0, &ss},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)listen->max_connections, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)listen->max_connections_per_address, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)receiver__on_connection, srv->deadlines},
        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)listen->threads, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, 30, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, srv},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)listen->tls_cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)listen->tls_key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    srv->daemon = MHD_start_daemon(flags, port, on_accept, srv, on_request, srv, MHD_OPTION_ARRAY,
                                   opts, MHD_OPTION_END);
    if (!srv->daemon) {
        receiver_server_free(srv);
        return medic_error_set(err, MEDIC_E_IO,
                               "cannot listen on %s%s (address in use, or a bad TLS "
                               "certificate or key?)",
                               listen->address, tls ? " with TLS" : "");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : port;
    *out = srv;
    return 0;
}

int receiver_server_port(struct receiver_server *server)
{
    return server->port;
}

/* Waits until no request is in flight or deadline (monotonic) passes. */
static void drain_until(struct receiver_server *server, int64_t deadline)
{
    while (atomic_load(&server->in_flight) > 0 && medic_time_monotonic() < deadline)
        usleep(10000);
}

void receiver_server_stop(struct receiver_server *server, int drain_ms)
{
    if (!server || !server->daemon)
        return;
    /* from now on on_accept closes every new connection; the listen socket
     * itself closes with MHD_stop_daemon */
    atomic_store(&server->stopping, 1);
    drain_until(server, medic_time_monotonic() + (int64_t)drain_ms * MEDIC_NS_PER_MS);
    /* webhooks whose commit did not come back in time (a disk that hangs):
     * answered 503 now, which Alertmanager retries, since libmicrohttpd
     * must not be stopped with a connection suspended */
    medic_mutex_lock(&server->waiting_lock);
    int abandoned = 0;
    while (server->waiting) {
        struct request *req = server->waiting;
        waiting_remove(server, req);
        atomic_store(&req->state, WEBHOOK_ABANDONED);
        MHD_resume_connection(req->conn);
        abandoned++;
    }
    medic_mutex_unlock(&server->waiting_lock);
    if (abandoned) {
        char n[16];
        snprintf(n, sizeof(n), "%d", abandoned);
        medic_log_warn("webhooks whose commit did not come back before the shutdown deadline "
                       "are answered 503 (Alertmanager sends them again)",
                       "count", n, NULL);
        drain_until(server, medic_time_monotonic() + 2 * MEDIC_NS_PER_SEC);
    }
    MHD_stop_daemon(server->daemon);
    server->daemon = NULL;
}

void receiver_server_free(struct receiver_server *server)
{
    if (!server)
        return;
    receiver_server_stop(server, 0);
    receiver__deadlines_stop(server->deadlines);
    receiver__settings_free(server->settings);
    medic_rwlock_destroy(&server->settings_lock);
    medic_mutex_destroy(&server->waiting_lock);
    free(server);
}

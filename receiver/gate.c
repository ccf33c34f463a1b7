/* SPDX-License-Identifier: Apache-2.0 */
#include "server_internal.h"
#include "lock.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const struct route_handler receiver__handlers[H_COUNT] = {
#define HANDLER_ROW(h, name, methods, cred, body) [h] = {name, methods, cred, body},
    RECEIVER_HANDLERS(HANDLER_ROW)
#undef HANDLER_ROW
};
const double receiver__webhook_buckets[WEBHOOK_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                           0.1,   0.25,   0.5,   1,    2.5,   5};
const unsigned int receiver__tracked_codes[N_CODES] = {200, 400, 401, 404, 405, 413, 415, 500, 503};

static const struct route {
    const char *method; /* "": any */
    const char *pattern;
    enum handler handler;
    enum receiver_page page;
} routes[] = {
#define ROUTE_ROW(method, pattern, handler, page) {method, pattern, handler, page},
    RECEIVER_ROUTES(ROUTE_ROW)
#undef ROUTE_ROW
};
#define ROUTE_COUNT (sizeof(routes) / sizeof(routes[0]))

/* Whether url matches pattern; what its {} or {*} took into arg (at most
 * ROUTE_ARG_MAX - 1 bytes: a longer one does not match). */
static int route_matches(const char *pattern, const char *url, char arg[ROUTE_ARG_MAX])
{
    const char *p = pattern, *u = url;
    arg[0] = '\0';
    while (*p) {
        size_t n;
        if (strncmp(p, "{*}", 3) == 0) {
            n = strlen(u);
            p += 3;
        } else if (strncmp(p, "{}", 2) == 0) {
            n = strcspn(u, "/");
            p += 2;
        } else {
            if (*p++ != *u++)
                return 0;
            continue;
        }
        if (n >= ROUTE_ARG_MAX)
            return 0;
        memcpy(arg, u, n);
        arg[n] = '\0';
        u += n;
    }
    return *u == '\0';
}

void receiver__route(const char *url, const char *method, struct request *req)
{
    for (size_t i = 0; i < ROUTE_COUNT; i++) {
        const struct route *r = &routes[i];
        if ((!r->method[0] || strcmp(r->method, method) == 0) &&
            route_matches(r->pattern, url, req->arg)) {
            req->handler = r->handler;
            req->page = r->page;
            return;
        }
    }
    req->handler = H_OTHER;
    req->page = RECEIVER_PAGE_NONE;
    req->arg[0] = '\0';
}

const char *receiver_page_pattern(enum receiver_page page)
{
    for (size_t i = 0; i < ROUTE_COUNT && page != RECEIVER_PAGE_NONE; i++)
        if (routes[i].page == page)
            return routes[i].pattern;
    return NULL;
}

int receiver_page_url(enum receiver_page page, const char *arg, char *out, size_t size)
{
    const char *pattern = receiver_page_pattern(page);
    if (pattern) {
        const char *brace = strchr(pattern, '{');
        int n = brace ? snprintf(out, size, "%.*s%s%s", (int)(brace - pattern), pattern,
                                 arg ? arg : "", strchr(brace, '}') + 1)
                      : snprintf(out, size, "%s", pattern);
        if (n >= 0 && (size_t)n < size)
            return 0;
    }
    if (size)
        out[0] = '\0';
    return -1;
}

const char *receiver__allowed_method(enum handler h)
{
    return receiver__handlers[h].methods;
}

int receiver__method_ok(enum handler h, const char *method)
{
    /* the Allow list, each method named whole */
    const char *allowed = receiver__handlers[h].methods;
    size_t len = strlen(method);
    for (const char *p = allowed; (p = strstr(p, method)) != NULL; p += len)
        if ((p == allowed || p[-1] == ' ') && (p[len] == '\0' || p[len] == ','))
            return 1;
    return 0;
}

/* Which credentials guard a handler. */
const struct receiver_auth *receiver__auth_for(const struct receiver_settings *s, enum handler h)
{
    switch (receiver__handlers[h].credential) {
    case CRED_WEBHOOK:
        return &s->webhook_auth;
    case CRED_READ:
        return &s->read_auth;
    case CRED_ADMIN:
    case CRED_PERSON: /* and the approvers' tokens: see receiver__authenticate */
        return &s->admin_auth;
    case CRED_NONE:
        break;
    }
    return NULL;
}

int receiver__authenticate(struct receiver_server *srv, struct MHD_Connection *conn, enum handler h,
                           const char **challenge)
{
    const char *authorization =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    char *user = NULL, *pass = NULL;
    int ok;
    medic_rwlock_rdlock(&srv->settings_lock);
    const struct receiver_auth *auth = receiver__auth_for(&srv->settings->s, h);
    /* a person's request (an answer, a pause, a release) always comes with
     * a credential that names a person: an approver's token, or an admin
     * credential of its own; never none, never the webhook's */
    int people = receiver__handlers[h].credential == CRED_PERSON;
    int admin_may = !people || srv->settings->s.admin_is_a_person;
    if (!people && (!auth || !receiver_auth_required(auth))) {
        medic_rwlock_unlock(&srv->settings_lock);
        return 1;
    }
    /* the people who may act (the admin, the approvers) may read whatever
     * the read credential may: the page, the API, the metrics */
    int reads = receiver__handlers[h].credential == CRED_READ;
    int acts = people || reads;
    /* a browser asks its user only for basic auth: the page offers it
     * first where it is set, beside a bearer token */
    int page = h == H_PAGE || h == H_PAGE_FORM;
    *challenge = auth->basic_username && (page || !auth->bearer_token)
                     ? (auth->bearer_token ? "Basic realm=\"medic\", Bearer realm=\"medic\""
                                           : "Basic realm=\"medic\"")
                     : "Bearer realm=\"medic\"";
    if (acts && authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const struct receiver_settings *s = &srv->settings->s;
        for (size_t i = 0; i < s->approver_count; i++)
            if (receiver_secure_equals(authorization + 7, strlen(authorization + 7),
                                       s->approvers[i].token)) {
                medic_rwlock_unlock(&srv->settings_lock);
                return 1;
            }
    }
    const struct receiver_auth *admin = &srv->settings->s.admin_auth;
    if ((auth->basic_username || (reads && admin->basic_username)) && authorization &&
        strncasecmp(authorization, "Basic ", 6) == 0)
        user = MHD_basic_auth_get_username_password(conn, &pass);
    ok = admin_may && receiver_auth_required(auth) &&
         receiver_auth_check(auth, authorization, user, pass);
    if (!ok && reads && receiver_auth_required(admin))
        ok = receiver_auth_check(admin, authorization, user, pass);
    medic_rwlock_unlock(&srv->settings_lock);
    if (user)
        MHD_free(user);
    if (pass)
        MHD_free(pass);
    return ok;
}

void receiver__identity(struct receiver_server *srv, struct MHD_Connection *conn, char *out,
                        size_t size)
{
    const char *authorization =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    snprintf(out, size, "admin");
    if (!authorization)
        return;
    if (strncasecmp(authorization, "Basic ", 6) == 0) {
        char *pass = NULL, *user = MHD_basic_auth_get_username_password(conn, &pass);
        if (user)
            snprintf(out, size, "%s", user);
        if (user)
            MHD_free(user);
        if (pass)
            MHD_free(pass);
        return;
    }
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return;
    medic_rwlock_rdlock(&srv->settings_lock);
    const struct receiver_settings *s = &srv->settings->s;
    for (size_t i = 0; i < s->approver_count; i++)
        if (receiver_secure_equals(authorization + 7, strlen(authorization + 7),
                                   s->approvers[i].token)) {
            snprintf(out, size, "%s", s->approvers[i].name);
            break;
        }
    medic_rwlock_unlock(&srv->settings_lock);
}

/* Whether ct names the media type (parameters after ';' allowed). */
static int content_type_is(const char *ct, const char *type)
{
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    size_t n = strlen(type);
    if (strncasecmp(ct, type, n) != 0)
        return 0;
    ct += n;
    while (*ct == ' ')
        ct++;
    return *ct == '\0' || *ct == ';';
}

int receiver__is_form_content_type(const char *ct)
{
    return content_type_is(ct, "application/x-www-form-urlencoded");
}

int receiver__is_json_content_type(const char *ct)
{
    return content_type_is(ct, "application/json");
}

static void render_webhook_histogram(struct receiver_server *srv, struct medic_buf *b)
{
    medic_buf_puts(b, "# HELP medic_webhook_duration_seconds POST /webhook from its first byte "
                      "to its answer (the commit included).\n"
                      "# TYPE medic_webhook_duration_seconds histogram\n");
    unsigned long long cumulative = 0;
    for (size_t i = 0; i <= WEBHOOK_BUCKETS; i++) {
        cumulative += atomic_load(&srv->webhook_buckets[i]);
        if (i < WEBHOOK_BUCKETS)
            medic_buf_printf(b, "medic_webhook_duration_seconds_bucket{le=\"%g\"} %llu\n",
                             receiver__webhook_buckets[i], cumulative);
    }
    medic_buf_printf(b,
                     "medic_webhook_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                     "medic_webhook_duration_seconds_sum %.9f\n"
                     "medic_webhook_duration_seconds_count %llu\n",
                     cumulative, (double)atomic_load(&srv->webhook_ns_sum) / 1e9, cumulative);
}

void receiver__render_metrics(struct receiver_server *srv, struct medic_buf *b)
{
    render_webhook_histogram(srv, b);
    medic_buf_puts(b, "# HELP medic_http_requests_total HTTP requests by handler and status "
                      "code.\n# TYPE medic_http_requests_total counter\n");
    for (int h = 0; h < H_COUNT; h++)
        for (size_t c = 0; c < N_CODES; c++) {
            unsigned long long v = atomic_load(&srv->requests[h][c]);
            if (v || (h == H_WEBHOOK && receiver__tracked_codes[c] == 200))
                medic_buf_printf(b, "medic_http_requests_total{handler=\"%s\",code=\"%u\"} %llu\n",
                                 receiver__handlers[h].name, receiver__tracked_codes[c], v);
        }
    medic_buf_printf(b,
                     "# HELP medic_notifications_total Notifications committed, by result.\n"
                     "# TYPE medic_notifications_total counter\n"
                     "medic_notifications_total{result=\"accepted\"} %llu\n"
                     "medic_notifications_total{result=\"duplicate\"} %llu\n"
                     "# HELP medic_duplicates_total Notifications recorded as duplicates of an "
                     "earlier one.\n"
                     "# TYPE medic_duplicates_total counter\n"
                     "medic_duplicates_total %llu\n"
                     "# HELP medic_alerts_total Alerts committed from accepted notifications, by "
                     "status.\n"
                     "# TYPE medic_alerts_total counter\n"
                     "medic_alerts_total{status=\"firing\"} %llu\n"
                     "medic_alerts_total{status=\"resolved\"} %llu\n"
                     "# HELP medic_http_requests_in_flight HTTP requests being served.\n"
                     "# TYPE medic_http_requests_in_flight gauge\n"
                     "medic_http_requests_in_flight %d\n"
                     "# HELP medic_http_request_deadline_closed_total Connections closed because "
                     "their request was not whole within limits.request_timeout.\n"
                     "# TYPE medic_http_request_deadline_closed_total counter\n"
                     "medic_http_request_deadline_closed_total %llu\n",
                     atomic_load(&srv->notifications_accepted),
                     atomic_load(&srv->notifications_duplicate),
                     atomic_load(&srv->notifications_duplicate), atomic_load(&srv->alerts_firing),
                     atomic_load(&srv->alerts_resolved), atomic_load(&srv->in_flight),
                     receiver__deadlines_closed(srv->deadlines));
    if (srv->hooks.metrics)
        srv->hooks.metrics(srv->hooks.ctx, b);
}

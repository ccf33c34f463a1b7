/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP server's insides, shared by server.c (the daemon, the request
 * cycle, the webhook) and gate.c (routes, methods, credentials, content
 * type, its own metrics). Private to receiver/. */
#ifndef MEDIC_RECEIVER_SERVER_INTERNAL_H
#define MEDIC_RECEIVER_SERVER_INTERNAL_H

#include "server.h"
#include "lock.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

/* Who may call a handler (the credentials in receiver_settings). */
enum route_credential {
    CRED_NONE,    /* anyone */
    CRED_WEBHOOK, /* webhook_auth */
    CRED_READ,    /* read_auth, and whoever may act (the admin, the approvers) */
    CRED_ADMIN,   /* admin_auth */
    CRED_PERSON,  /* a credential that names a person: an approver, or the admin's own */
};

/* Its body: none, a webhook's (limits.max_body_bytes), a person's JSON or
 * a form's (16 KiB: a reason of a few lines). */
enum route_body { BODY_NONE, BODY_WEBHOOK, BODY_JSON, BODY_FORM };

/* Every handler in one table: its name in /metrics, the methods it
 * allows, who may call it and what body it takes. Which URL reaches it is
 * in the table of routes below. */
#define RECEIVER_HANDLERS(X)                                                                       \
    X(H_WEBHOOK, "/webhook", "POST", CRED_WEBHOOK, BODY_WEBHOOK)                                   \
    X(H_METRICS, "/metrics", "GET", CRED_READ, BODY_NONE)                                          \
    X(H_HEALTHY, "/-/healthy", "GET, HEAD", CRED_NONE, BODY_NONE)                                  \
    X(H_READY, "/-/ready", "GET, HEAD", CRED_NONE, BODY_NONE)                                      \
    X(H_RELOAD, "/-/reload", "POST", CRED_ADMIN, BODY_NONE)                                        \
    X(H_API_QUERY, "/api/v1/query", "GET", CRED_READ, BODY_NONE)                                   \
    X(H_DRY_RUN, "/api/v1/dry-run", "POST", CRED_READ, BODY_WEBHOOK)                               \
    /* GET / and /nodes/NAME, and the pages to act from */                                         \
    X(H_PAGE, "/", "GET", CRED_READ, BODY_NONE)                                                    \
    /* POST /api/v1/approvals/ID */                                                                \
    X(H_APPROVAL, "/api/v1/approvals", "POST", CRED_PERSON, BODY_JSON)                             \
    /* POST and DELETE /api/v1/pause (DELETE: no body) */                                          \
    X(H_PAUSE, "/api/v1/pause", "POST, DELETE", CRED_PERSON, BODY_JSON)                            \
    /* POST /api/v1/nodes/NODE/release */                                                          \
    X(H_RELEASE, "/api/v1/nodes/release", "POST", CRED_PERSON, BODY_JSON)                          \
    /* the page's forms: POST /approvals/ID, /pause, /unpause, /release/NODE */                    \
    X(H_PAGE_FORM, "/ (forms)", "POST", CRED_PERSON, BODY_FORM)                                    \
    X(H_OTHER, "other", "GET", CRED_NONE, BODY_NONE)

enum handler {
#define HANDLER_ENUM(h, name, methods, cred, body) h,
    RECEIVER_HANDLERS(HANDLER_ENUM)
#undef HANDLER_ENUM
        H_COUNT
};
/* Which URL reaches which handler, tried in this order: the method (""
 * any), the path pattern, the handler, and for the on-call page's handlers
 * which page or form (receiver_page_url spells a page's URL from its
 * first row). In a pattern "{}" takes one path segment (perhaps empty) and
 * "{*}" the rest of the path; either is the request's argument (a
 * decision id, a node, an API's kind). */
#define RECEIVER_ROUTES(X)                                                                         \
    X("POST", "/approvals/{}", H_PAGE_FORM, RECEIVER_PAGE_APPROVAL)                                \
    X("POST", "/pause", H_PAGE_FORM, RECEIVER_PAGE_PAUSE)                                          \
    X("POST", "/unpause", H_PAGE_FORM, RECEIVER_PAGE_UNPAUSE)                                      \
    X("POST", "/release/{}", H_PAGE_FORM, RECEIVER_PAGE_RELEASE)                                   \
    X("", "/approvals/{}", H_PAGE, RECEIVER_PAGE_APPROVAL)                                         \
    X("", "/pause", H_PAGE, RECEIVER_PAGE_PAUSE)                                                   \
    X("", "/release/{}", H_PAGE, RECEIVER_PAGE_RELEASE)                                            \
    X("", "/webhook", H_WEBHOOK, RECEIVER_PAGE_NONE)                                               \
    X("", "/metrics", H_METRICS, RECEIVER_PAGE_NONE)                                               \
    X("", "/-/healthy", H_HEALTHY, RECEIVER_PAGE_NONE)                                             \
    X("", "/-/ready", H_READY, RECEIVER_PAGE_NONE)                                                 \
    X("", "/-/reload", H_RELOAD, RECEIVER_PAGE_NONE)                                               \
    X("", "/api/v1/dry-run", H_DRY_RUN, RECEIVER_PAGE_NONE)                                        \
    X("", "/api/v1/approvals/{*}", H_APPROVAL, RECEIVER_PAGE_NONE)                                 \
    X("", "/api/v1/pause", H_PAUSE, RECEIVER_PAGE_NONE)                                            \
    X("", "/api/v1/nodes/{}/release", H_RELEASE, RECEIVER_PAGE_NONE)                               \
    X("", "/api/v1/{*}", H_API_QUERY, RECEIVER_PAGE_NONE)                                          \
    X("", "/", H_PAGE, RECEIVER_PAGE_FLEET)                                                        \
    X("", "/nodes/{}", H_PAGE, RECEIVER_PAGE_NODE)

struct route_handler {
    const char *name;    /* in /metrics */
    const char *methods; /* its Allow header */
    enum route_credential credential;
    enum route_body body;
};
extern const struct route_handler receiver__handlers[H_COUNT];
/* The status codes /metrics counts per handler. */
#define N_CODES 9
extern const unsigned int receiver__tracked_codes[N_CODES];

struct settings_copy {
    struct receiver_settings s;
    char *strings[9 + 2 * RECEIVER_MAX_APPROVERS];
    struct receiver_approver approvers[RECEIVER_MAX_APPROVERS];
};
/* An owned copy of s (settings.c); NULL when out of memory or with more
 * approvers than RECEIVER_MAX_APPROVERS. */
struct settings_copy *receiver__settings_dup(const struct receiver_settings *s);
void receiver__settings_free(struct settings_copy *c);

#define WEBHOOK_BUCKETS 12
extern const double receiver__webhook_buckets[WEBHOOK_BUCKETS];

struct receiver_server {
    struct MHD_Daemon *daemon;
    struct receiver_hooks hooks;
    struct medic_rwlock settings_lock;
    struct settings_copy *settings;
    atomic_int in_flight;
    atomic_int stopping;
    int port;
    atomic_ullong requests[H_COUNT][N_CODES];
    atomic_ullong notifications_accepted;
    atomic_ullong notifications_duplicate;
    atomic_ullong alerts_firing;
    atomic_ullong alerts_resolved;
    /* POST /webhook from its first byte to its answer: a count per bucket
     * (the last one past every bound) and the sum, for the histogram */
    atomic_ullong webhook_buckets[WEBHOOK_BUCKETS + 1];
    atomic_ullong webhook_ns_sum;
    struct receiver_deadlines *deadlines;
    /* webhooks whose commit is pending (suspended), for a stop that cannot
     * wait for them: each is answered 503 and let go */
    struct medic_mutex waiting_lock;
    struct request *waiting;
};

/* deadline.c: each connection's request must be whole within the request
 * timeout (the header and the body), or its socket is shut down. */
struct receiver_deadlines;
int receiver__deadlines_start(int64_t timeout, struct receiver_deadlines **out);
/* After the daemon stopped. NULL is a no-op. */
void receiver__deadlines_stop(struct receiver_deadlines *d);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION, cls the deadlines. */
void receiver__on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                             enum MHD_ConnectionNotificationCode code);
/* conn's request arrived whole: no deadline until the next one. */
void receiver__request_whole(struct receiver_deadlines *d, struct MHD_Connection *conn);
/* conn's request ended: a next one on the connection has its own deadline. */
void receiver__request_ended(struct receiver_deadlines *d, struct MHD_Connection *conn);
/* Connections closed at their deadline so far. */
unsigned long long receiver__deadlines_closed(struct receiver_deadlines *d);

/* ABANDONED: the stop answered it 503 before its commit came back; the
 * writer's answer then frees it. */
enum webhook_state { WEBHOOK_NEW, WEBHOOK_WAITING, WEBHOOK_DONE, WEBHOOK_ABANDONED };

/* Per-request state kept between libmicrohttpd's calls. */
/* The longest argument a route takes from a URL (a node's name is at
 * most 127 bytes); a longer one matches no route. */
#define ROUTE_ARG_MAX 256

struct request {
    enum handler handler;
    enum receiver_page page; /* the on-call page's page or form, for H_PAGE and H_PAGE_FORM */
    char arg[ROUTE_ARG_MAX]; /* what the route's {} or {*} took */
    struct MHD_Connection *conn;
    struct medic_buf body;
    /* a webhook request between parse and commit */
    atomic_int state;
    struct medic_notification notification;
    struct receiver_record_result result;
    int record_rc;
    struct medic_error record_err;
    char remote[INET6_ADDRSTRLEN + 8];
    int too_large;
    size_t discarded;
    int counted;
    int64_t started; /* monotonic, when its first call came */
    struct receiver_server *srv;
    struct request *waiting_prev, *waiting_next; /* in srv->waiting while its commit is pending */
    int mhd_done; /* libmicrohttpd finished with it (an abandoned one waits for the writer) */
    int deleting; /* its method is DELETE */
    /* a person's request answered later: its answer, kept until resumed */
    unsigned int later_code;
    struct medic_buf later_body;
};

/* Suspends req's connection while its answer is made elsewhere (a webhook's
 * commit, a person's request taken by the engine): 0, or -1 when the
 * server stops (answer 503 at once). Call before handing it over: the
 * answer may come before the hand-over returns. */
int receiver__suspend(struct receiver_server *srv, struct request *req);
/* The answer to a suspended request came: keep(req, arg) stores it under
 * the lock and the connection resumes; a request the stop already answered
 * is only freed (when libmicrohttpd is done with it too). */
void receiver__resume(struct request *req, void (*keep)(struct request *req, void *arg), void *arg);

/* The route of url for method (H_OTHER when none): its handler, and into
 * req its page and argument. */
void receiver__route(const char *url, const char *method, struct request *req);
const char *receiver__allowed_method(enum handler h);
int receiver__method_ok(enum handler h, const char *method);
const struct receiver_auth *receiver__auth_for(const struct receiver_settings *s, enum handler h);
/* Who a request that authenticate() accepted came as, for the audit log:
 * an approver's name, a basic-auth user, or the class of the bearer
 * token ("admin"). */
void receiver__identity(struct receiver_server *srv, struct MHD_Connection *conn, char *out,
                        size_t size);
int receiver__authenticate(struct receiver_server *srv, struct MHD_Connection *conn, enum handler h,
                           const char **challenge);
/* Queues the answer (body copied; one extra header when not NULL) and
 * counts it for /metrics; an error as {"status":"error","error":...}. */
enum MHD_Result receiver__respond(struct receiver_server *srv, struct MHD_Connection *conn,
                                  struct request *req, unsigned int code, const char *content_type,
                                  const char *body, size_t len, const char *extra_header,
                                  const char *extra_value);
enum MHD_Result receiver__respond_error(struct receiver_server *srv, struct MHD_Connection *conn,
                                        struct request *req, unsigned int code, const char *message,
                                        const char *extra_header, const char *extra_value);
/* people.c: a person's request (an answer to a pending step, a pause or
 * its end, one of the page's forms), named by its credentials. */
/* Starts a request whose answer may come later: RECEIVER_LATER when it
 * took later, else the HTTP status with the answer in out. */
typedef int (*receiver__later_start)(struct receiver_server *srv, struct MHD_Connection *conn,
                                     struct request *req, const char *url,
                                     const struct receiver_later *later, struct medic_buf *out);
/* Runs start with req's connection suspended, and answers once it said
 * (later.c); libmicrohttpd calls the handler again when it resumes. */
enum MHD_Result receiver__answer_later(struct receiver_server *srv, struct MHD_Connection *conn,
                                       struct request *req, const char *url,
                                       receiver__later_start start);
enum MHD_Result receiver__person_request(struct receiver_server *srv, struct MHD_Connection *conn,
                                         struct request *req, const char *url);
/* The on-call page loads nothing, and its forms post to medic only. */
#define RECEIVER_PAGE_CSP                                                                          \
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "                          \
    "frame-ancestors 'none'; base-uri 'none'"
int receiver__is_json_content_type(const char *ct);
int receiver__is_form_content_type(const char *ct);
void receiver__render_metrics(struct receiver_server *srv, struct medic_buf *b);

#endif

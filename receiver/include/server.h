/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP front of `medic serve` (libmicrohttpd, epoll, a thread per
 * core). A webhook request waiting for its commit is suspended, so it holds
 * no thread; the audit writer resumes it when its rows are durable.
 * The server knows nothing of the audit log: the wiring layer passes hooks
 * that commit notifications, answer queries and reload the config. */
#ifndef MEDIC_RECEIVER_SERVER_H
#define MEDIC_RECEIVER_SERVER_H

#include "alert.h"
#include "auth.h"
#include "buf.h"
#include "error.h"
#include "payload.h"

#include <stdint.h>

struct receiver_record_result {
    int64_t id;
    int duplicate;
    int64_t duplicate_of;
};

/* A GET /api/v1/<kind> query: the query-string arguments by name. */
struct receiver_query {
    const char *kind;
    const char *node, *alertname, *policy, *verdict, *status, *since, *until, *limit;
    const char *state, *incident; /* incidents and changes */
    const char *decision;         /* decisions and actions */
};

/* Tells the server that a notification handed to record() is durable
 * (rc 0) or failed; may be called from any thread. */
typedef void (*receiver_record_done)(void *request, int rc, const struct medic_error *err);

/* A person's request answered later (the engine takes it in a round):
 * done(request, code, body, len) is called exactly once, from any thread;
 * the connection waits suspended meanwhile, no HTTP thread with it. */
typedef void (*receiver_later_done)(void *request, unsigned int code, const char *body, size_t len);
struct receiver_later {
    receiver_later_done done;
    void *request;
};

/* The on-call page's pages and forms, each reached by the routes the
 * receiver's table gives it (POST for a form, GET for its page). */
enum receiver_page {
    RECEIVER_PAGE_NONE,     /* not a page of the on-call page's */
    RECEIVER_PAGE_FLEET,    /* the fleet */
    RECEIVER_PAGE_NODE,     /* a node's page; its argument the node */
    RECEIVER_PAGE_APPROVAL, /* a step waiting for approval; its argument the decision's id */
    RECEIVER_PAGE_PAUSE,    /* pause the fleet */
    RECEIVER_PAGE_UNPAUSE,  /* the pause's end (a form only) */
    RECEIVER_PAGE_RELEASE,  /* give a quarantined node back; its argument the node */
};
/* The path of page with arg in its place (a decision id, a node, as
 * given: the caller escapes the whole for HTML), into out; -1 when it does
 * not fit or page has none. */
int receiver_page_url(enum receiver_page page, const char *arg, char *out, size_t size);
/* Its route's pattern ("/release/{}": the argument where "{}" is); NULL
 * for RECEIVER_PAGE_NONE. */
const char *receiver_page_pattern(enum receiver_page page);

/* What a person's hook returns when it took `later` and answers through it. */
#define RECEIVER_LATER 0

/* A person's request (POST /api/v1/approvals/ID, .../nodes/NODE/release):
 * arg is what the route took (the ID, the NODE), body its JSON, who the
 * credential's name; the result as JSON into out and the HTTP status
 * returned, or RECEIVER_LATER when the hook took later and answers
 * through it once the engine took the request. */
typedef int (*receiver_person_fn)(void *ctx, const char *arg, const char *body, size_t len,
                                  const char *who, const char *remote_addr,
                                  const struct receiver_later *later, struct medic_buf *out);
/* The fleet-wide pause (pause 1) or its end (pause 0), as a person's
 * request. */
typedef int (*receiver_pause_fn)(void *ctx, int pause, const char *body, size_t len,
                                 const char *who, const char *remote_addr,
                                 const struct receiver_later *later, struct medic_buf *out);

struct receiver_hooks {
    void *ctx;
    /* Starts committing a parsed notification and returns at once: 0 when
     * it was queued (then done(request, ...) is called exactly once, from
     * any thread, and n, raw and out stay valid until then), or
     * MEDIC_E_BUSY / MEDIC_E_CLOSED / another error (503) when it was not
     * (done is not called). The answer goes out only after done. */
    int (*record)(void *ctx, const struct medic_notification *n, const char *raw, size_t raw_len,
                  const char *remote_addr, struct receiver_record_result *out,
                  receiver_record_done done, void *request, struct medic_error *err);
    /* Appends the wiring layer's metrics to the exposition. */
    void (*metrics)(void *ctx, struct medic_buf *out);
    /* Reloads the configuration; 0 or an error with a message. */
    int (*reload)(void *ctx, struct medic_error *err);
    /* 1 when the daemon can accept notifications. */
    int (*ready)(void *ctx);
    /* Answers an audit query as JSON into out and returns the HTTP status,
     * or RECEIVER_LATER when it answers through later (q lives only during
     * the call). */
    int (*query)(void *ctx, const struct receiver_query *q, const struct receiver_later *later,
                 struct medic_buf *out);
    /* POST /api/v1/dry-run: a webhook payload in, decisions out as JSON, no
     * side effects; returns the HTTP status. */
    int (*dry_run)(void *ctx, const char *body, size_t len, struct medic_buf *out);
    /* GET of one of the on-call page's pages (arg: what its route took
     * from the URL, decoded): HTML and the HTTP status, or RECEIVER_LATER
     * when it answers through later (a page that reads the log or an
     * agent). */
    int (*page)(void *ctx, enum receiver_page page, const char *arg, const char *authorization,
                const struct receiver_later *later, struct medic_buf *out);
    /* POST of one of the page's forms (application/x-www-form-urlencoded),
     * from who, with the request's Authorization (their anti-forgery
     * tokens are bound to it), Origin and Host (NULL when absent); HTML
     * into out; returns the HTTP status, or RECEIVER_LATER as approve. */
    int (*page_form)(void *ctx, enum receiver_page form, const char *arg, const char *body,
                     size_t len, const char *who, const char *authorization, const char *origin,
                     const char *host, const char *remote_addr, const struct receiver_later *later,
                     struct medic_buf *out);
    /* POST /api/v1/approvals/ID: a person's answer to the step decision ID
     * left pending (the person, pause and release hooks alike, and
     * page_form with HTML, answer through later once the engine took the
     * request). */
    receiver_person_fn approve;
    /* POST /api/v1/nodes/NODE/release: a person gives a quarantined
     * node back after the repair. */
    receiver_person_fn release;
    /* POST /api/v1/pause (pause 1, a JSON body) and DELETE /api/v1/pause
     * (pause 0): the fleet-wide pause. */
    receiver_pause_fn pause;
};

/* A person who may answer steps waiting for approval, by bearer token. */
struct receiver_approver {
    const char *name;
    const char *token;
};
#define RECEIVER_MAX_APPROVERS 64

/* What may change on reload. Strings are copied. */
struct receiver_settings {
    struct receiver_limits limits;
    struct receiver_auth webhook_auth;
    struct receiver_auth read_auth;
    struct receiver_auth admin_auth; /* also answers approvals, as "admin" or its user */
    /* admin_auth is an admin credential of its own (not the webhook's, as
     * live mode lends it for a reload): only then may it make people's
     * requests (answers, pauses, releases), which otherwise need an
     * approver's token: the credential that fires alerts never approves */
    int admin_is_a_person;
    const struct receiver_approver *approvers;
    size_t approver_count;
};

struct receiver_listen {
    const char *address; /* host:port; an IPv6 host in brackets */
    size_t max_connections;
    size_t max_connections_per_address; /* more from one address are closed at once */
    int64_t request_timeout; /* ns: a request's header and body arrive within it, or it is closed */
    unsigned int threads;    /* polling threads; at least 1 */
    const char *tls_cert_pem; /* both NULL for plain HTTP */
    const char *tls_key_pem;
};

struct receiver_server;

int receiver_server_start(const struct receiver_listen *listen,
                          const struct receiver_settings *settings,
                          const struct receiver_hooks *hooks, struct receiver_server **out,
                          struct medic_error *err);

/* Replaces the settings for requests that start from now on. */
int receiver_server_update(struct receiver_server *server,
                           const struct receiver_settings *settings);

/* The port actually bound (useful with port 0). */
int receiver_server_port(struct receiver_server *server);

/* Stops accepting, lets requests in flight finish (up to drain_ms), answers
 * 503 to webhooks whose commit has not come back by then, and closes every
 * connection. A commit that comes back later (the record hook's callback)
 * is still taken: free the server only once the hook's store is closed.
 * NULL is a no-op. */
void receiver_server_stop(struct receiver_server *server, int drain_ms);
/* Stops the server if it runs, then frees it. NULL is a no-op. */
void receiver_server_free(struct receiver_server *server);

#endif

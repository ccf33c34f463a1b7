/* SPDX-License-Identifier: Apache-2.0 */
/* The on-call page: GET / (the fleet as medic sees it now), GET
 * /nodes/NAME (one node), and the places a person acts from
 * (/approvals/ID, /pause, /release/NODE) with their forms. Server-rendered
 * HTML that works without JavaScript and loads nothing (the receiver sends
 * it with a Content-Security-Policy that forbids anything else); every
 * value that can come from an alert is escaped. A room of its own: it
 * reads the daemon only through struct page_source, as the receiver
 * reaches it through struct receiver_hooks, and keeps no state but its
 * forms' secret. */
#ifndef MEDIC_PAGE_H
#define MEDIC_PAGE_H

#include "audit.h"
#include "buf.h"
#include "error.h"
#include "policy_engine.h"
#include "server.h"

#include <stddef.h>
#include <stdint.h>

/* What a page reads the engine's state with: the policy context of the
 * running configuration (its policies, safety settings and inventory) and
 * its mode. */
struct page_view {
    const struct policy_context *ctx;
    const char *mode; /* "live", "approve", "dry-run" */
    int acts;         /* the mode acts (live or approve) */
};
typedef int (*page_state_fn)(void *arg, const struct page_view *view, struct policy_state *st);

/* What the page reads of the daemon, and asks of it. */
struct page_source {
    void *ctx;
    /* fn with the engine's state in place (on a replica that does not
     * lead, the state last committed) and the running configuration's
     * view; fn's result, or a failure to read (err set). */
    int (*with_state)(void *ctx, page_state_fn fn, void *arg, struct medic_error *err);
    /* A reader of the audit log (audit_reader_free it). */
    int (*open_reader)(void *ctx, struct audit_reader **out, struct medic_error *err);
    /* The replicas and which leads, in a line; "" for a medic alone. */
    void (*replicas)(void *ctx, char *out, size_t size);
    /* The node's health report from its agent (JSON into report, within
     * 1 s): 0; 1 when there is nothing to ask (no agent or token: why says
     * which); -1 when the agent did not answer (why). *gpus: the
     * inventory's GPUs of the node (0: not said). */
    int (*agent_health)(void *ctx, const char *node, struct medic_buf *report, int *gpus, char *why,
                        size_t size);
    /* job on one of the daemon's readers, its page handed to later:
     * 0, or non-zero when none can take it (free_arg(arg) is then the
     * caller's). */
    int (*run_later)(void *ctx, int (*job)(void *arg, struct medic_buf *out), void *arg,
                     void (*free_arg)(void *arg), const struct receiver_later *later);
    /* A person's requests, as the HTTP API takes them (receiver_hooks). */
    receiver_person_fn approve, release;
    receiver_pause_fn pause;
};

/* GET of one of the page's pages (arg: what its route took from the URL):
 * HTML into out and the HTTP status, or RECEIVER_LATER when it answers
 * through later (a page that reads the log or an agent runs on a reader,
 * never on the HTTP thread). As receiver_hooks.page. */
int page_render(const struct page_source *src, enum receiver_page page, const char *arg,
                const char *authorization, const struct receiver_later *later,
                struct medic_buf *out);

/* POST of one of the page's forms: the anti-forgery token and the origin
 * checked, then the request the HTTP API would take, its answer rendered
 * as a page. As receiver_hooks.page_form. */
int page_form(const struct page_source *src, enum receiver_page form, const char *arg,
              const char *body, size_t len, const char *who, const char *authorization,
              const char *origin, const char *host, const char *remote_addr,
              const struct receiver_later *later, struct medic_buf *out);

/* Larger forms are refused. */
#define PAGE_FORM_MAX_BYTES 16384

/* The fields of one of the page's forms (application/x-www-form-urlencoded):
 * csrf, decision, reason, until, undo, each decoded and capped; other
 * fields are refused. 0, or MEDIC_E_INVALID with why. */
struct page_form_fields {
    char csrf[65];
    char decision[16];
    char reason[512];
    char until[64];
    char undo[8]; /* "yes": the deny form's undo box was ticked */
};
int page_parse_form(const char *body, size_t len, struct page_form_fields *out, char *why,
                    size_t size);

/* The anti-forgery token of the form that posts to path, for a request
 * that came with authorization (its Authorization header; NULL: none),
 * made at now (ns): a keyed hash under a secret this daemon drew at random
 * when it started, so that another site cannot make it without the
 * credential, nobody can guess a password from it offline, and it does not
 * outlive the daemon. 32 hex digits. */
void page_form_token(const char *authorization, const char *path, int64_t now, char out[33]);
/* Whether token is one page_form_token made for authorization and path
 * at most PAGE_FORM_TOKEN_LIFE ago (compared in constant time). */
#define PAGE_FORM_TOKEN_LIFE (2 * 3600 * MEDIC_NS_PER_SEC)
int page_form_token_valid(const char *authorization, const char *path, const char *token,
                          int64_t now);

#endif

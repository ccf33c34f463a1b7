/* SPDX-License-Identifier: Apache-2.0 */
/* Requests answered later: a person's request waits for the engine's
 * round, a page or an audit query for a reader of the log or an agent.
 * Their connection is suspended while the wiring layer works elsewhere,
 * and resumed with its answer (receiver_later): no HTTP thread waits, so
 * Alertmanager's POSTs are answered at their usual latency whatever
 * people and readers do. */
#include "server_internal.h"

#include <microhttpd.h>
#include <string.h>

struct later_answer {
    unsigned int code;
    const char *body;
    size_t len;
};

static void keep_answer(struct request *req, void *arg)
{
    const struct later_answer *a = arg;
    req->later_code = a->code;
    medic_buf_reset(&req->later_body);
    if (medic_buf_append(&req->later_body, a->body, a->len)) {
        static const char oom[] = "{\"status\":\"error\",\"error\":\"out of memory\"}\n";
        req->later_code = 503;
        medic_buf_reset(&req->later_body);
        medic_buf_append(&req->later_body, oom, sizeof(oom) - 1);
    }
}

/* The wiring layer's answer (any thread, exactly once). */
static void on_answered(void *request, unsigned int code, const char *body, size_t len)
{
    struct later_answer a = {code, body ? body : "", len};
    receiver__resume(request, keep_answer, &a);
}

static enum MHD_Result respond(struct receiver_server *srv, struct MHD_Connection *conn,
                               struct request *req)
{
    /* a page loads nothing: not from medic, not from anywhere */
    int html = req->handler == H_PAGE || req->handler == H_PAGE_FORM;
    return receiver__respond(
        srv, conn, req, req->later_code, html ? "text/html; charset=utf-8" : "application/json",
        req->later_body.data ? req->later_body.data : "", req->later_body.len,
        html ? "Content-Security-Policy" : NULL, html ? RECEIVER_PAGE_CSP : NULL);
}

enum MHD_Result receiver__answer_later(struct receiver_server *srv, struct MHD_Connection *conn,
                                       struct request *req, const char *url,
                                       receiver__later_start start)
{
    int state = atomic_load(&req->state);
    if (state == WEBHOOK_DONE)
        return respond(srv, conn, req);
    if (state == WEBHOOK_ABANDONED)
        return receiver__respond_error(srv, conn, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                       "shutting down before the answer was ready; send it again",
                                       MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (state == WEBHOOK_WAITING)
        return MHD_YES; /* not resumed yet */
    /* suspended first: the answer may come before start returns */
    if (receiver__suspend(srv, req))
        return receiver__respond_error(srv, conn, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                       "shutting down", MHD_HTTP_HEADER_RETRY_AFTER, "1");
    struct receiver_later later = {on_answered, req};
    struct medic_buf b;
    medic_buf_init(&b, (size_t)32 << 20);
    int code = start(srv, conn, req, url, &later, &b);
    if (code != RECEIVER_LATER) /* answered now */
        on_answered(req, (unsigned int)code, b.data ? b.data : "", b.len);
    medic_buf_release(&b);
    return MHD_YES;
}

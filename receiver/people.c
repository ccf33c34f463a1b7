/* SPDX-License-Identifier: Apache-2.0 */
/* A person's requests over HTTP, named by the credentials that came with
 * them (receiver__identity): an answer to a step waiting for approval
 * (POST /api/v1/approvals/ID), the pause (POST and DELETE /api/v1/pause),
 * a release of a quarantined node (POST /api/v1/nodes/NODE/release),
 * and the on-call page's forms that do the same (POST /approvals/ID,
 * /pause, /unpause). The wiring layer's hooks decide; this file only
 * hands each request over and answers with what they said. */
#include "server_internal.h"

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

enum MHD_Result receiver__person_request(struct receiver_server *srv, struct MHD_Connection *conn,
                                         struct request *req, const char *url)
{
    const struct receiver_hooks *h = &srv->hooks;
    int form = req->handler == H_PAGE_FORM, approval = req->handler == H_APPROVAL;
    int release = req->handler == H_RELEASE;
    if (form ? !h->page_form : approval ? !h->approve : release ? !h->release : !h->pause)
        return receiver__respond_error(srv, conn, req, MHD_HTTP_NOT_FOUND, "no such endpoint", NULL,
                                       NULL);
    char who[128];
    receiver__identity(srv, conn, who, sizeof(who));
    const char *body = req->body.data ? req->body.data : "";
    struct medic_buf b;
    medic_buf_init(&b, (size_t)1 << 20);
    int code;
    if (form)
        code = h->page_form(
            h->ctx, url, body, req->body.len, who,
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"),
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST), req->remote,
            &b);
    else if (approval)
        code = h->approve(h->ctx, url + 18, body, req->body.len, who, req->remote, &b);
    else if (release) { /* /api/v1/nodes/NODE/release */
        char node[160];
        size_t n = strlen(url) - 14 - 8;
        snprintf(node, sizeof(node), "%.*s", n < sizeof(node) ? (int)n : 0, url + 14);
        code = h->release(h->ctx, node, body, req->body.len, who, req->remote, &b);
    } else
        code = h->pause(h->ctx, !req->deleting, body, req->body.len, who, req->remote, &b);
    enum MHD_Result r = receiver__respond(
        srv, conn, req, (unsigned int)code, form ? "text/html; charset=utf-8" : "application/json",
        b.data ? b.data : "", b.len, form ? "Content-Security-Policy" : NULL,
        form ? RECEIVER_PAGE_CSP : NULL);
    medic_buf_release(&b);
    return r;
}

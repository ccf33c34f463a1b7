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

static int start_request(struct receiver_server *srv, struct MHD_Connection *conn,
                         struct request *req, const char *url, const struct receiver_later *later,
                         struct medic_buf *b)
{
    (void)url;
    const struct receiver_hooks *h = &srv->hooks;
    int form = req->handler == H_PAGE_FORM, approval = req->handler == H_APPROVAL;
    int release = req->handler == H_RELEASE;
    if (form ? !h->page_form : approval ? !h->approve : release ? !h->release : !h->pause) {
        medic_buf_puts(b, "{\"status\":\"error\",\"error\":\"no such endpoint\"}\n");
        return MHD_HTTP_NOT_FOUND;
    }
    char who[128];
    receiver__identity(srv, conn, who, sizeof(who));
    const char *body = req->body.data ? req->body.data : "";
    if (form)
        return h->page_form(
            h->ctx, req->page, req->arg, body, req->body.len, who,
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"),
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST), req->remote,
            later, b);
    if (approval)
        return h->approve(h->ctx, req->arg, body, req->body.len, who, req->remote, later, b);
    if (release)
        return h->release(h->ctx, req->arg, body, req->body.len, who, req->remote, later, b);
    return h->pause(h->ctx, !req->deleting, body, req->body.len, who, req->remote, later, b);
}

enum MHD_Result receiver__person_request(struct receiver_server *srv, struct MHD_Connection *conn,
                                         struct request *req, const char *url)
{
    /* recorded by the hook, then taken by the engine in a round */
    return receiver__answer_later(srv, conn, req, url, start_request);
}

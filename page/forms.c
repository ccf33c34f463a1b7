/* SPDX-License-Identifier: Apache-2.0 */
/* The on-call page's places to act, server-rendered, no JavaScript:
 * GET /approvals/ID (a step waiting for approval, with an approve and a
 * deny form), GET /pause (the pause, with its form) and GET /release/NODE
 * (a quarantined node, with the release form), and their forms' POSTs. A form carries an
 * anti-forgery token bound to the credential the page was read with (page_form_token); a POST
 * whose token does not match, or that comes from another origin, is refused and changes nothing.
 * Writes need the admin or an approver's credential (the receiver checks it); what they do is what
 * POST /api/v1/approvals/ID, /api/v1/pause and /api/v1/nodes/NODE/release do, recorded with who did
 * it. */
#include "page_internal.h"
#include "audit.h"
#include "auth.h"
#include "html.h"
#include "policy_engine.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A form's opening tag that posts to form (with arg, percent-encoded in
 * the URL), and its anti-forgery token, bound to authorization and to
 * the form's path as the receiver's route decodes it. */
static void form_start(struct medic_buf *out, const char *authorization, enum receiver_page form,
                       const char *arg)
{
    const char *pattern = receiver_page_pattern(form), *brace = strchr(pattern, '{');
    medic_buf_puts(out, "<form method=\"post\" action=\"");
    if (brace) {
        medic_buf_printf(out, "%.*s", (int)(brace - pattern), pattern);
        medic_html_path_segment(out, arg ? arg : "");
        medic_html_text(out, strchr(brace, '}') + 1);
    } else {
        medic_html_text(out, pattern);
    }
    medic_buf_puts(out, "\">");
    char path[300], token[33];
    receiver_page_url(form, arg, path, sizeof(path));
    page_form_token(authorization, path, medic_time_now(), token);
    medic_buf_printf(out, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", token);
}

struct pending_view {
    int64_t decision_id, incident, until;
    char node[128], policy[65];
    char offer[MEDIC_ACTION_TEXT_MAX + 200]; /* the exact action an approval runs */
    size_t step;
    int found;
};

static int find_step(void *arg, const struct policy_pending_step *p)
{
    struct pending_view *v = arg;
    if (p->decision_id != v->decision_id)
        return 0;
    v->found = 1;
    v->incident = p->incident;
    v->until = p->until;
    v->step = p->step;
    snprintf(v->node, sizeof(v->node), "%s", p->node);
    snprintf(v->policy, sizeof(v->policy), "%s", p->policy);
    snprintf(v->offer, sizeof(v->offer), "%s", p->offer ? p->offer : "");
    return 1;
}

static int look_up(void *arg, const struct page_view *view, struct policy_state *st)
{
    (void)view;
    policy_pending_steps(st, find_step, arg);
    return 0;
}

/* The page of one waiting step, with its forms. */
static int approval_form(const struct pending_view *v, const char *authorization,
                         struct medic_buf *out)
{
    char arg[24], until[40];
    long long id = (long long)v->decision_id;
    snprintf(arg, sizeof(arg), "%lld", id);
    page__start(out, "approval - medic");
    medic_buf_puts(out, "<p><a href=\"/\">&larr; all nodes</a></p>");
    if (!v->found) {
        medic_buf_printf(out,
                         "<h1>Decision %lld waits for nobody</h1><p>It was never pending, was "
                         "answered already, withdrawn (its alerts resolved) or expired.</p>"
                         "</body></html>\n",
                         id);
        return 404;
    }
    medic_time_format(v->until, until, sizeof(until));
    medic_buf_printf(out, "<h1>Step %zu of policy ", v->step + 1);
    medic_html_text(out, v->policy);
    medic_buf_puts(out, " on node ");
    medic_html_text(out, v->node);
    medic_buf_printf(out, "</h1><p>Incident %lld, pending decision %lld, waiting until %s.</p>",
                     (long long)v->incident, id, until);
    medic_buf_puts(out, "<p>Approved, medic runs exactly <code>");
    medic_html_text(out, v->offer[0] ? v->offer : "(not recorded: an approval offers it again)");
    medic_buf_puts(out, "</code> on node ");
    medic_html_text(out, v->node);
    medic_buf_puts(out, " if every guard still holds then (a guard that clears by itself holds "
                        "it until it clears), or nothing if the step changed since; denied, it "
                        "never runs.</p>");
    medic_buf_puts(out, "<p><a href=\"/nodes/");
    medic_html_path_segment(out, v->node);
    medic_buf_puts(out, "\">the node's timeline</a></p>");
    form_start(out, authorization, RECEIVER_PAGE_APPROVAL, arg);
    medic_buf_puts(out, "<input type=\"hidden\" name=\"decision\" value=\"approve\">"
                        "<label>reason (optional) <input name=\"reason\" maxlength=\"500\" "
                        "size=\"60\"></label> <button type=\"submit\">approve</button></form>");
    form_start(out, authorization, RECEIVER_PAGE_APPROVAL, arg);
    medic_buf_puts(out, "<input type=\"hidden\" name=\"decision\" value=\"deny\">"
                        "<label>reason <input name=\"reason\" maxlength=\"500\" size=\"60\" "
                        "required></label> <label><input type=\"checkbox\" name=\"undo\" "
                        "value=\"yes\"> and give the node back now (otherwise it stays as "
                        "medic holds it, for a person to release)</label> "
                        "<button type=\"submit\">deny</button></form></body></html>\n");
    return 200;
}

/* GET /approvals/ID. */
int page__approval(const struct page_source *src, int64_t id, const char *authorization,
                   struct medic_buf *out)
{
    struct medic_error err = {0};
    struct pending_view *v = calloc(1, sizeof(*v)); /* its offer is up to 16 KiB */
    if (!v)
        return 503;
    v->decision_id = id;
    int code =
        src->with_state(src->ctx, look_up, v, &err) ? 503 : approval_form(v, authorization, out);
    free(v);
    return code;
}

static int read_pause(void *arg, const struct page_view *view, struct policy_state *st)
{
    (void)view;
    policy_paused(st, arg);
    return 0;
}

/* GET /pause. */
int page__pause(const struct page_source *src, const char *authorization, struct medic_buf *out)
{
    struct medic_error err = {0};
    struct policy_pause_state p = {0};
    if (src->with_state(src->ctx, read_pause, &p, &err))
        return 503;
    page__start(out, "pause - medic");
    medic_buf_puts(out, "<p><a href=\"/\">&larr; all nodes</a></p><h1>Pause the fleet</h1>");
    if (p.by[0]) {
        medic_buf_puts(out, "<p>Paused by ");
        medic_html_text(out, p.by);
        medic_buf_puts(out, ": ");
        medic_html_text(out, p.reason);
        medic_buf_puts(out, ".</p>");
        form_start(out, authorization, RECEIVER_PAGE_UNPAUSE, NULL);
        medic_buf_puts(out, "<button type=\"submit\">unpause</button></form>");
    } else {
        medic_buf_puts(out, "<p>Not paused.</p>");
    }
    medic_buf_puts(out, "<p>While paused, every disruptive step is held fleet-wide; resume and "
                        "restore_power_limit still run.</p>");
    form_start(out, authorization, RECEIVER_PAGE_PAUSE, NULL);
    medic_buf_puts(out, "<label>reason <input name=\"reason\" maxlength=\"500\" size=\"60\" "
                        "required></label> <label>until (optional: 2h, or an RFC 3339 time) "
                        "<input name=\"until\" maxlength=\"60\"></label> <button "
                        "type=\"submit\">pause</button></form></body></html>\n");
    return 200;
}

struct quarantine_view {
    const char *node;
    char why[400], policy[65];
    int64_t incident, since;
    int found;
};

static int find_quarantined(void *arg, const struct policy_quarantined_node *q)
{
    struct quarantine_view *v = arg;
    if (strcmp(q->node, v->node) != 0)
        return 0;
    v->found = 1;
    v->incident = q->incident;
    v->since = q->since;
    snprintf(v->why, sizeof(v->why), "%s", q->why);
    snprintf(v->policy, sizeof(v->policy), "%s", q->policy);
    return 1;
}

static int look_up_quarantine(void *arg, const struct page_view *view, struct policy_state *st)
{
    (void)view;
    policy_quarantined(st, find_quarantined, arg);
    return 0;
}

/* GET /release/NODE. */
int page__release(const struct page_source *src, const char *node, const char *authorization,
                  struct medic_buf *out)
{
    struct medic_error err = {0};
    struct quarantine_view v = {.node = node};
    if (src->with_state(src->ctx, look_up_quarantine, &v, &err))
        return 503;
    page__start(out, "release - medic");
    medic_buf_puts(out, "<p><a href=\"/\">&larr; all nodes</a></p><h1>Node ");
    medic_html_text(out, node);
    if (!v.found) {
        medic_buf_puts(out, " is not quarantined</h1><p>Nothing to release.</p></body></html>\n");
        return 404;
    }
    char since[40];
    medic_time_format(v.since, since, sizeof(since));
    medic_buf_printf(out, " is quarantined</h1><p>Since %s (incident %lld, policy ", since,
                     (long long)v.incident);
    medic_html_text(out, v.policy);
    medic_buf_puts(out, "): ");
    medic_html_text(out, v.why);
    medic_buf_puts(out, ".</p><p>medic keeps it as it is and takes no disruptive action on it. "
                        "Released, it is resumed (its power limits restored) and takes repairs "
                        "again.</p><p><a href=\"/nodes/");
    medic_html_path_segment(out, node);
    medic_buf_puts(out, "\">the node's timeline</a></p>");
    form_start(out, authorization, RECEIVER_PAGE_RELEASE, node);
    medic_buf_puts(out, "<label>what was repaired <input name=\"reason\" maxlength=\"500\" "
                        "size=\"60\" required></label> <button type=\"submit\">release</button>"
                        "</form></body></html>\n");
    return 200;
}

/* Whether origin (NULL: none sent) is this server, as the browser reached
 * it (host: the Host header). */
static int same_origin(const char *origin, const char *host)
{
    if (!origin)
        return 1; /* the anti-forgery token decides */
    if (!host)
        return 0;
    const char *rest = strncmp(origin, "https://", 8) == 0  ? origin + 8
                       : strncmp(origin, "http://", 7) == 0 ? origin + 7
                                                            : NULL;
    return rest && strcmp(rest, host) == 0;
}

static int result_page(struct medic_buf *out, int code, const char *title, const char *text)
{
    page__start(out, "medic");
    medic_buf_puts(out, "<h1>");
    medic_html_text(out, title);
    medic_buf_puts(out, "</h1><p>");
    medic_html_text(out, text);
    medic_buf_puts(out, "</p><p><a href=\"/\">back to the fleet</a></p></body></html>\n");
    return code;
}

/* The result page for the API's JSON answer (code, answer). */
static unsigned int form_result(unsigned int code, const char *answer, size_t len,
                                struct medic_buf *out)
{
    cJSON *root = cJSON_ParseWithLength(answer ? answer : "", len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(data, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    const char *said = cJSON_IsString(result)  ? result->valuestring
                       : cJSON_IsString(error) ? error->valuestring
                                               : "no such form";
    result_page(out, (int)code, code == 200 ? "Done" : code == 202 ? "Recorded" : "Not done", said);
    cJSON_Delete(root);
    return code;
}

/* A form's request answered later: the API's JSON answer rendered as the
 * result page, then handed to the form's connection (request: a copy of
 * its receiver_later). */
static void form_answered(void *request, unsigned int code, const char *answer, size_t len)
{
    struct receiver_later *f = request;
    struct medic_buf page;
    medic_buf_init(&page, 1 << 20);
    form_result(code, answer, len, &page);
    f->done(f->request, code, page.data ? page.data : "", page.len);
    medic_buf_release(&page);
    free(f);
}

int page_form(const struct page_source *src, enum receiver_page which, const char *arg,
              const char *body, size_t len, const char *who, const char *authorization,
              const char *origin, const char *host, const char *remote_addr,
              const struct receiver_later *later, struct medic_buf *out)
{
    struct page_form_fields form;
    char why[300];
    if (!same_origin(origin, host))
        return result_page(out, 403, "Refused",
                           "the form came from another site: nothing was done");
    if (page_parse_form(body, len, &form, why, sizeof(why)))
        return result_page(out, 400, "Refused", why);
    char path[300];
    if (receiver_page_url(which, arg, path, sizeof(path)) || !form.csrf[0] ||
        !page_form_token_valid(authorization, path, form.csrf, medic_time_now()))
        return result_page(out, 403, "Refused",
                           "the form's token does not match (load the page again): nothing "
                           "was done");
    /* the request as the HTTP API takes it */
    cJSON *json = cJSON_CreateObject();
    if (form.decision[0])
        cJSON_AddStringToObject(json, "decision", form.decision);
    if (form.reason[0])
        cJSON_AddStringToObject(json, "reason", form.reason);
    if (form.until[0])
        cJSON_AddStringToObject(json, "until", form.until);
    if (strcmp(form.undo, "yes") == 0)
        cJSON_AddTrueToObject(json, "undo");
    char *text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    struct receiver_later *f = text ? malloc(sizeof(*f)) : NULL;
    if (!f) {
        cJSON_free(text);
        return result_page(out, 503, "Not done", "out of memory");
    }
    *f = *later;
    struct receiver_later mine = {form_answered, f};
    struct medic_buf answer;
    medic_buf_init(&answer, 1 << 20);
    int code = 404;
    switch (which) {
    case RECEIVER_PAGE_APPROVAL:
        code = src->approve(src->ctx, arg, text, strlen(text), who, remote_addr, &mine, &answer);
        break;
    case RECEIVER_PAGE_RELEASE:
        code = src->release(src->ctx, arg, text, strlen(text), who, remote_addr, &mine, &answer);
        break;
    case RECEIVER_PAGE_PAUSE:
        code = src->pause(src->ctx, 1, text, strlen(text), who, remote_addr, &mine, &answer);
        break;
    case RECEIVER_PAGE_UNPAUSE:
        code = src->pause(src->ctx, 0, text, 0, who, remote_addr, &mine, &answer);
        break;
    case RECEIVER_PAGE_NONE:
    case RECEIVER_PAGE_FLEET:
    case RECEIVER_PAGE_NODE: /* pages without a form */
        break;
    }
    cJSON_free(text);
    if (code != RECEIVER_LATER) { /* refused at once: answered here */
        free(f);
        code = (int)form_result((unsigned int)code, answer.data, answer.len, out);
    }
    medic_buf_release(&answer);
    return code;
}

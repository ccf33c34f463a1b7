/* SPDX-License-Identifier: Apache-2.0 */
/* The on-call page's fleet and node pages: GET / (the fleet as medic sees
 * it now) and GET /nodes/NAME (one node's timeline), and which page a GET
 * is. Its styles are inline. */
#include "page_internal.h"
#include "html.h"
#include "policy_engine.h"
#include "table.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_DECISIONS 50  /* recent decisions on the front page */
#define PAGE_TIMELINE 500  /* rows of a node's timeline */
#define PAGE_INCIDENTS 200 /* open incidents listed (a storm opens one per node) */
#define PAGE_REFRESH 30    /* seconds: the page reloads itself, without JavaScript */

static const char page_style[] =
    "body{font:14px/1.4 'DejaVu Sans',sans-serif;margin:16px 24px;color:#1d1d1f}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}"
    "table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:3px 8px;"
    "border-bottom:1px solid #ddd;vertical-align:top}th{background:#f2f2f4;font-weight:600}"
    "td.detail{font-size:12px;color:#555;word-break:break-all}td.nowrap{white-space:nowrap}"
    ".badge{display:inline-block;padding:1px 8px;border-radius:8px;font-weight:600}"
    ".live{background:#fde2e1;color:#a4161a}.dry_run{background:#e7f0fd;color:#1d4ed8}"
    ".storm{background:#fde2e1;color:#a4161a}.calm{background:#e6f4ea;color:#137333}"
    ".execute{color:#a4161a;font-weight:600}.suppressed{color:#8a5a00}.error{color:#a4161a}"
    ".summary span{margin-right:18px}.empty{color:#777;font-style:italic}a{color:#1d4ed8}";

/* refresh: seconds after which the browser loads the page again (0: never) */
static void page_start(struct medic_buf *out, const char *title, int refresh)
{
    medic_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                        "<meta name=\"viewport\" content=\"width=device-width\">");
    if (refresh > 0)
        medic_buf_printf(out, "<meta http-equiv=\"refresh\" content=\"%d\">", refresh);
    medic_buf_puts(out, "<title>");
    medic_html_text(out, title);
    medic_buf_printf(out, "</title><style>%s</style></head><body>\n", page_style);
}

static void node_link(struct medic_buf *out, const char *node)
{
    if (!node || !*node) {
        medic_buf_puts(out, "-");
        return;
    }
    medic_buf_puts(out, "<a href=\"/nodes/");
    medic_html_path_segment(out, node);
    medic_buf_puts(out, "\">");
    medic_html_text(out, node);
    medic_buf_puts(out, "</a>");
}

/* Times and names read better on one line. */
static int nowrap(const char *column)
{
    size_t n = strlen(column);
    return strcmp(column, "time") == 0 || strcmp(column, "due") == 0 ||
           strcmp(column, "policy") == 0 || strcmp(column, "kind") == 0 ||
           (n > 3 && strcmp(column + n - 3, "_at") == 0);
}

static int column(const struct medic_table *t, const char *name)
{
    for (size_t i = 0; i < t->ncols; i++)
        if (strcmp(t->names[i], name) == 0)
            return (int)i;
    return -1;
}

/* A table of the named columns (in that order), its first max_rows rows;
 * the "node" column links to the node's page, the "verdict" one carries
 * its class, "detail" and "reason" are set small. */
static void html_table(struct medic_buf *out, const struct medic_table *t,
                       const char *const *columns, size_t ncolumns, size_t max_rows,
                       const char *empty)
{
    if (t->nrows == 0) {
        medic_buf_puts(out, "<p class=\"empty\">");
        medic_html_text(out, empty);
        medic_buf_puts(out, "</p>\n");
        return;
    }
    int idx[16];
    medic_buf_puts(out, "<table><thead><tr>");
    for (size_t c = 0; c < ncolumns && c < 16; c++) {
        idx[c] = column(t, columns[c]);
        medic_buf_puts(out, "<th>");
        medic_html_text(out, columns[c]);
        medic_buf_puts(out, "</th>");
    }
    medic_buf_puts(out, "</tr></thead><tbody>\n");
    size_t shown = t->nrows < max_rows ? t->nrows : max_rows;
    for (size_t r = 0; r < shown; r++) {
        medic_buf_puts(out, "<tr>");
        for (size_t c = 0; c < ncolumns && c < 16; c++) {
            const char *v = idx[c] >= 0 ? t->cells[r * t->ncols + (size_t)idx[c]] : NULL;
            const char *name = columns[c];
            if (strcmp(name, "verdict") == 0 && v) {
                medic_buf_puts(out, "<td class=\"");
                medic_html_text(out, v);
                medic_buf_puts(out, "\">");
            } else {
                medic_buf_puts(out, strcmp(name, "detail") == 0 || strcmp(name, "reason") == 0
                                        ? "<td class=\"detail\">"
                                    : nowrap(name) ? "<td class=\"nowrap\">"
                                                   : "<td>");
            }
            if (strcmp(name, "node") == 0)
                node_link(out, v);
            else
                medic_html_text(out, v ? v : "-");
            medic_buf_puts(out, "</td>");
        }
        medic_buf_puts(out, "</tr>\n");
    }
    medic_buf_puts(out, "</tbody></table>\n");
    if (t->nrows > shown)
        medic_buf_printf(out, "<p class=\"empty\">and %zu more, not shown</p>\n", t->nrows - shown);
}

/* What the summary shows, read with the incidents. */
struct fleet_summary {
    const char *mode;
    int acts, storm;
    size_t open_incidents, disrupted_nodes;
    size_t in_flight_cap, inventory, max_disrupted;
    double fraction;
    struct policy_group_use groups[32];
    size_t group_count;
    int group_labelled[32]; /* the group's cap names an inventory label */
    struct policy_pause_state pause;
};

static void summarize(struct fleet_summary *f, const struct page_view *view,
                      struct policy_state *st)
{
    const struct policy_safety *s = &view->ctx->policies->safety;
    f->mode = view->mode;
    f->acts = view->acts;
    f->storm = policy_storm_active(st);
    f->open_incidents = policy_open_incidents(st);
    f->disrupted_nodes = policy_disrupted_nodes(st);
    f->in_flight_cap = s->max_disruptive_in_flight;
    f->fraction = s->max_disrupted_fraction;
    f->inventory = view->ctx->inventory ? view->ctx->inventory->count : 0;
    f->max_disrupted = policy_max_disrupted_nodes(s, f->inventory);
    f->group_count = s->group_cap_count && view->ctx->inventory
                         ? policy_group_usage(st, s, view->ctx->inventory, f->groups, 32)
                         : 0;
    for (size_t i = 0; i < f->group_count; i++)
        f->group_labelled[i] =
            f->groups[i].cap < s->group_cap_count && s->group_caps[f->groups[i].cap].label;
    policy_paused(st, &f->pause);
}

static void summary(struct medic_buf *out, const struct page_source *src,
                    const struct fleet_summary *f)
{
    const struct policy_pause_state *pause = &f->pause;
    if (pause->by[0]) {
        char since[40], until[40] = "until unpaused";
        medic_time_format(pause->since, since, sizeof(since));
        if (pause->until != MEDIC_TIME_UNSET) {
            char t[40];
            snprintf(until, sizeof(until), "until %s",
                     medic_time_format(pause->until, t, sizeof(t)));
        }
        medic_buf_puts(out, "<p class=\"summary\"><b class=\"badge storm\">paused</b> by ");
        medic_html_text(out, pause->by);
        medic_buf_puts(out, ": ");
        medic_html_text(out, pause->reason);
        medic_buf_printf(out,
                         " (since %s, %s): every disruptive step is held; resume and "
                         "restore_power_limit still run</p>\n",
                         since, until);
    }
    char who[512] = "";
    src->replicas(src->ctx, who, sizeof(who));
    if (who[0]) {
        medic_buf_puts(out, "<p class=\"summary\"><span>replicas: ");
        medic_html_text(out, who);
        medic_buf_puts(out, "</span></p>\n");
    }
    medic_buf_printf(out,
                     "<p class=\"summary\"><span>mode <b class=\"badge %s\">%s</b></span>"
                     "<span>storm <b class=\"badge %s\">%s</b></span>"
                     "<span>open incidents <b>%zu</b></span>"
                     "<span>nodes disrupted by medic <b>%zu</b> (caps: %zu disruptive actions in "
                     "flight; %.3g of %zu inventory nodes = %zu)</span>"
                     "<span><a href=\"/pause\">pause or unpause the fleet</a></span></p>\n",
                     f->acts ? "live" : "dry_run", f->mode, f->storm ? "storm" : "calm",
                     f->storm ? "active" : "none", f->open_incidents, f->disrupted_nodes,
                     f->in_flight_cap, f->fraction, f->inventory, f->max_disrupted);
    /* the topology groups that hold disrupted nodes, against their caps */
    if (f->group_count) {
        medic_buf_puts(out, "<p class=\"summary\"><span>group caps:");
        for (size_t i = 0; i < f->group_count; i++) {
            const struct policy_group_use *use = &f->groups[i];
            medic_buf_puts(out, i ? ", " : " ");
            medic_html_text(out, use->label);
            medic_buf_puts(out, f->group_labelled[i] ? "=" : " ");
            medic_html_text(out, use->group);
            medic_buf_printf(out, " <b%s>%zu of %zu</b>",
                             use->disrupted >= use->limit ? " class=\"badge storm\"" : "",
                             use->disrupted, use->limit);
        }
        medic_buf_puts(out, "</span></p>\n");
    }
}

static const char *const incident_columns[] = {
    "incident", "node", "policy", "state", "alerts", "risk", "next_step", "due", "opened_at"};
static const char *const decision_columns[] = {
    "created_at", "node", "alertname", "policy", "step", "action", "verdict", "risk", "reason"};
static const char *const timeline_columns[] = {"time", "kind", "what", "detail"};

#define COUNT(a) (sizeof(a) / sizeof(a[0]))

/* The steps waiting for a person that the front page lists first. */
#define PAGE_PENDING 100
struct pending_list {
    struct {
        int64_t incident, decision_id, until;
        char node[128], policy[65];
        char offer[400]; /* the exact action an approval runs */
        size_t step;
    } items[PAGE_PENDING];
    size_t count, more;
};

static int collect_pending(void *arg, const struct policy_pending_step *p)
{
    struct pending_list *l = arg;
    if (l->count == PAGE_PENDING) {
        l->more++;
        return 0;
    }
    l->items[l->count].incident = p->incident;
    l->items[l->count].decision_id = p->decision_id;
    l->items[l->count].until = p->until;
    l->items[l->count].step = p->step;
    snprintf(l->items[l->count].node, sizeof(l->items[l->count].node), "%s", p->node);
    snprintf(l->items[l->count].policy, sizeof(l->items[l->count].policy), "%s", p->policy);
    medic_text_fit(l->items[l->count].offer, sizeof(l->items[l->count].offer),
                   p->offer ? p->offer : "(not recorded: approving offers it again)",
                   strlen(p->offer ? p->offer : "(not recorded: approving offers it again)"));
    l->count++;
    return 0;
}

/* The steps waiting for a person (of node only, when not NULL), each with
 * the page to answer it on. */
static void pending_section(struct medic_buf *out, const struct pending_list *l, const char *node)
{
    size_t shown = 0;
    for (size_t i = 0; i < l->count; i++)
        shown += !node || strcmp(l->items[i].node, node) == 0;
    if (shown == 0)
        return;
    medic_buf_puts(out, "<h2>Waiting for approval</h2>\n<table><thead><tr><th>node</th>"
                        "<th>action (what an approval runs)</th><th>policy</th><th>step</th>"
                        "<th>incident</th><th>waits until</th><th></th></tr></thead><tbody>\n");
    for (size_t i = 0; i < l->count; i++) {
        if (node && strcmp(l->items[i].node, node) != 0)
            continue;
        char until[40];
        medic_time_format(l->items[i].until, until, sizeof(until));
        medic_buf_puts(out, "<tr><td>");
        node_link(out, l->items[i].node);
        medic_buf_puts(out, "</td><td><code>");
        medic_html_text(out, l->items[i].offer);
        medic_buf_puts(out, "</code></td><td>");
        medic_html_text(out, l->items[i].policy);
        medic_buf_printf(out, "</td><td>%zu</td><td>%lld</td><td class=\"nowrap\">%s</td><td>",
                         l->items[i].step + 1, (long long)l->items[i].incident, until);
        if (l->items[i].decision_id > 0)
            medic_buf_printf(out, "<a href=\"/approvals/%lld\">approve or deny</a>",
                             (long long)l->items[i].decision_id);
        else
            medic_buf_puts(out, "being recorded");
        medic_buf_puts(out, "</td></tr>\n");
    }
    medic_buf_puts(out, "</tbody></table>\n");
    if (l->more)
        medic_buf_printf(out, "<p class=\"empty\">and %zu more, not shown</p>\n", l->more);
}

struct incidents_view {
    const char *node;
    struct medic_table *table;
    struct fleet_summary *summary;
    struct pending_list *pending;
};

static int view_incidents(void *arg, const struct page_view *view, struct policy_state *state)
{
    struct incidents_view *v = arg;
    if (v->summary)
        summarize(v->summary, view, state);
    if (v->pending)
        policy_pending_steps(state, collect_pending, v->pending);
    return policy_open_incidents_table(view->ctx, state, v->node, PAGE_INCIDENTS, v->table);
}

/* The first open incidents the page lists, read in the engine's state in
 * place (on a replica that does not lead, the state last committed), and
 * the summary from the same state when summary is not NULL. Costs the
 * engine a walk to the incidents listed, not a copy of its state. */
static int open_incidents(const struct page_source *src, const char *node, struct medic_table *t,
                          struct fleet_summary *summary, struct pending_list *pending,
                          struct medic_error *err)
{
    struct incidents_view v = {.node = node, .table = t, .summary = summary, .pending = pending};
    int rc = src->with_state(src->ctx, view_incidents, &v, err);
    if (rc && !err->msg[0])
        medic_error_set(err, rc, "out of memory");
    return rc;
}

static int front_page(const struct page_source *src, struct audit_reader *reader,
                      struct medic_buf *out, struct medic_error *err)
{
    struct medic_table incidents, decisions;
    struct pending_list *pending = calloc(1, sizeof(*pending));
    struct fleet_summary *summed = calloc(1, sizeof(*summed));
    if (!pending || !summed || open_incidents(src, NULL, &incidents, summed, pending, err)) {
        free(pending);
        free(summed);
        return 503;
    }
    struct audit_filter f;
    audit_filter_init(&f);
    f.limit = PAGE_DECISIONS;
    if (audit_query(reader, AUDIT_DECISIONS, &f, &decisions, err)) {
        medic_table_release(&incidents);
        free(pending);
        free(summed);
        return 503;
    }
    page_start(out, "medic", PAGE_REFRESH);
    medic_buf_puts(out, "<h1>medic</h1>\n");
    summary(out, src, summed);
    free(summed);
    pending_section(out, pending, NULL);
    free(pending);
    medic_buf_printf(out,
                     "<h2>Open incidents (the first %d, in the order medic serves them)</h2>\n",
                     PAGE_INCIDENTS);
    html_table(out, &incidents, incident_columns, COUNT(incident_columns), PAGE_INCIDENTS,
               "No open incidents.");
    medic_buf_printf(out, "<h2>Recent decisions (the last %d)</h2>\n", PAGE_DECISIONS);
    html_table(out, &decisions, decision_columns, COUNT(decision_columns), PAGE_DECISIONS,
               "No decisions yet.");
    medic_buf_puts(out, "</body></html>\n");
    medic_table_release(&incidents);
    medic_table_release(&decisions);
    return 200;
}

static int node_page(const struct page_source *src, struct audit_reader *reader, const char *node,
                     struct medic_buf *out, struct medic_error *err)
{
    struct medic_table incidents, timeline;
    struct pending_list *pending = calloc(1, sizeof(*pending));
    if (!pending)
        return 503;
    if (open_incidents(src, node, &incidents, NULL, pending, err)) {
        free(pending);
        return 503;
    }
    if (audit_timeline(reader, node, MEDIC_TIME_UNSET, MEDIC_TIME_UNSET, PAGE_TIMELINE, &timeline,
                       err)) {
        medic_table_release(&incidents);
        free(pending);
        return 503;
    }
    char title[200];
    snprintf(title, sizeof(title), "%s - medic", node);
    page_start(out, title, PAGE_REFRESH);
    medic_buf_puts(out, "<p><a href=\"/\">&larr; all nodes</a></p><h1>");
    medic_html_text(out, node);
    medic_buf_puts(out, "</h1>\n");
    pending_section(out, pending, node); /* what waits for a person here, first */
    free(pending);
    medic_buf_puts(out, "<h2>Open incidents</h2>\n");
    html_table(out, &incidents, incident_columns, COUNT(incident_columns), PAGE_INCIDENTS,
               "No open incident on this node.");
    page__gpus(out, src, node);
    medic_buf_printf(out,
                     "<h2>Timeline (oldest first, the last %d rows)</h2>\n"
                     "<p>Alerts, decisions, incident changes and actions. The same in a "
                     "terminal: <code>medic audit timeline --node ",
                     PAGE_TIMELINE);
    medic_html_text(out, node);
    medic_buf_puts(out, "</code></p>\n");
    html_table(out, &timeline, timeline_columns, COUNT(timeline_columns), PAGE_TIMELINE,
               "Nothing recorded about this node.");
    medic_buf_puts(out, "</body></html>\n");
    medic_table_release(&incidents);
    medic_table_release(&timeline);
    return 200;
}

/* A node's name as the inventory could hold it: 1 to 127 bytes, no
 * control characters (a "%00" in the URL arrives as an empty name). */
static int node_name_ok(const char *node)
{
    size_t len = strlen(node);
    if (len == 0 || len > 127)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)node[i] < 0x20 || node[i] == 0x7f)
            return 0;
    return 1;
}

void page__start(struct medic_buf *out, const char *title)
{
    page_start(out, title, 0); /* a page with a form never reloads itself */
}

static int page_now(const struct page_source *src, enum receiver_page page, const char *arg,
                    const char *authorization, struct medic_buf *out);

/* A page handed to a reader, with copies of what it needs. */
struct page_job {
    const struct page_source *src;
    enum receiver_page page;
    char *arg, *authorization;
};

static void page_job_free(void *arg)
{
    struct page_job *j = arg;
    free(j->arg);
    free(j->authorization);
    free(j);
}

static int page_job_run(void *arg, struct medic_buf *out)
{
    struct page_job *j = arg;
    return page_now(j->src, j->page, j->arg, j->authorization, out);
}

int page_render(const struct page_source *src, enum receiver_page page, const char *arg,
                const char *authorization, const struct receiver_later *later,
                struct medic_buf *out)
{
    if (!later)
        return page_now(src, page, arg, authorization, out);
    struct page_job *j = calloc(1, sizeof(*j));
    int rc = MEDIC_E_NOMEM;
    if (j && (j->arg = strdup(arg)) &&
        (!authorization || (j->authorization = strdup(authorization)))) {
        j->page = page;
        j->src = src;
        rc = src->run_later(src->ctx, page_job_run, j, page_job_free, later);
    }
    if (rc == 0)
        return RECEIVER_LATER;
    if (j)
        page_job_free(j);
    page_start(out, "busy - medic", PAGE_REFRESH);
    medic_buf_puts(out, "<h1>medic is busy: many pages wait; this one loads again by "
                        "itself</h1></body></html>\n");
    return 503;
}

static int not_found(struct medic_buf *out)
{
    page_start(out, "not found - medic", 0);
    medic_buf_puts(out, "<h1>No such page</h1><p>See <a href=\"/\">the fleet</a>.</p>"
                        "</body></html>\n");
    return 404;
}

static int page_now(const struct page_source *src, enum receiver_page page, const char *arg,
                    const char *authorization, struct medic_buf *out)
{
    struct medic_error err = {0};
    const char *node = NULL;
    switch (page) {
    case RECEIVER_PAGE_APPROVAL: {
        char *end;
        long long id = strtoll(arg, &end, 10);
        if (*end || id <= 0)
            return 404;
        int code = page__approval(src, id, authorization, out);
        if (code == 503) {
            medic_buf_reset(out);
            page_start(out, "unavailable - medic", PAGE_REFRESH);
            medic_buf_puts(out, "<h1>medic cannot show this page now</h1></body></html>\n");
        }
        return code;
    }
    case RECEIVER_PAGE_PAUSE:
        return page__pause(src, authorization, out);
    case RECEIVER_PAGE_RELEASE:
        if (node_name_ok(arg))
            return page__release(src, arg, authorization, out);
        return not_found(out);
    case RECEIVER_PAGE_NODE:
        node = arg;
        break;
    case RECEIVER_PAGE_FLEET:
        break;
    case RECEIVER_PAGE_UNPAUSE: /* a form, not a page */
    case RECEIVER_PAGE_NONE:
        return not_found(out);
    }
    if (node && !node_name_ok(node)) {
        page_start(out, "bad node name - medic", 0);
        medic_buf_puts(out, "<h1>Not a node name</h1><p>A node's page is /nodes/NAME, NAME being "
                            "1 to 127 characters without control characters (as the inventory "
                            "names nodes). See <a href=\"/\">the fleet</a>.</p></body></html>\n");
        return 400;
    }
    struct audit_reader *reader = NULL;
    int code = src->open_reader(src->ctx, &reader, &err) ? 503
               : node                                    ? node_page(src, reader, node, out, &err)
                                                         : front_page(src, reader, out, &err);
    audit_reader_free(reader);
    if (code != 200 || out->error) {
        int too_large = code == 200;
        medic_buf_reset(out);
        page_start(out, "unavailable - medic", PAGE_REFRESH);
        medic_buf_puts(out, "<h1>medic cannot show this page now</h1><p>");
        medic_html_text(out, too_large ? "the page is too large" : err.msg);
        medic_buf_puts(out, "</p></body></html>\n");
        code = 503;
    }
    return code;
}

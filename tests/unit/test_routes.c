/* SPDX-License-Identifier: Apache-2.0 */
/* The receiver's table of routes: every route reaches its own handler (no
 * earlier route shadows it), every handler and every page of the on-call
 * page is reached by one, what a route takes from the URL is its
 * argument, and a page's URL as receiver_page_url spells it routes back to
 * that page. A route or handler added in one place only fails here. */
#include "server_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

struct row {
    const char *method, *pattern;
    enum handler handler;
    enum receiver_page page;
};
static const struct row rows[] = {
#define ROW(method, pattern, handler, page) {method, pattern, handler, page},
    RECEIVER_ROUTES(ROW)
#undef ROW
};
#define ROWS (sizeof(rows) / sizeof(rows[0]))

/* The pattern with its {} or {*} replaced by arg. */
static void sample_url(const char *pattern, const char *arg, char *out, size_t size)
{
    const char *brace = strchr(pattern, '{');
    if (brace)
        snprintf(out, size, "%.*s%s%s", (int)(brace - pattern), pattern, arg,
                 strchr(brace, '}') + 1);
    else
        snprintf(out, size, "%s", pattern);
}

static void test_every_route_reaches_its_handler(void **state)
{
    (void)state;
    for (size_t i = 0; i < ROWS; i++) {
        char url[300];
        sample_url(rows[i].pattern, "gpu-node-07", url, sizeof(url));
        struct request req;
        memset(&req, 0, sizeof(req));
        receiver__route(url, rows[i].method[0] ? rows[i].method : "GET", &req);
        if (req.handler != rows[i].handler || req.page != rows[i].page)
            fail_msg("%s %s reaches handler %d page %d, not its own (%d, %d): an earlier route "
                     "shadows it",
                     rows[i].method, url, req.handler, req.page, rows[i].handler, rows[i].page);
        if (strchr(rows[i].pattern, '{'))
            assert_string_equal(req.arg, "gpu-node-07");
        else
            assert_string_equal(req.arg, "");
    }
}

static void test_every_handler_and_page_has_a_route(void **state)
{
    (void)state;
    for (int h = 0; h < H_COUNT; h++) {
        int routed = h == H_OTHER; /* what no route reaches */
        for (size_t i = 0; i < ROWS; i++)
            routed |= rows[i].handler == (enum handler)h;
        if (!routed)
            fail_msg("handler %s has no route", receiver__handlers[h].name);
    }
    for (int p = RECEIVER_PAGE_FLEET; p <= RECEIVER_PAGE_RELEASE; p++) {
        char url[300];
        assert_int_equal(receiver_page_url((enum receiver_page)p, "n1", url, sizeof(url)), 0);
        struct request req;
        memset(&req, 0, sizeof(req));
        /* a page is read with GET, a form posted (the pause's end is a form only) */
        receiver__route(url, p == RECEIVER_PAGE_UNPAUSE ? "POST" : "GET", &req);
        assert_int_equal(req.page, p);
        assert_true(req.handler == H_PAGE || req.handler == H_PAGE_FORM);
        receiver__route(url, "POST", &req);
        if (p != RECEIVER_PAGE_FLEET && p != RECEIVER_PAGE_NODE)
            assert_int_equal(req.handler, H_PAGE_FORM);
    }
    char url[8];
    assert_int_equal(receiver_page_url(RECEIVER_PAGE_NONE, NULL, url, sizeof(url)), -1);
    assert_int_equal(receiver_page_url(RECEIVER_PAGE_RELEASE, "a-long-node", url, sizeof(url)),
                     -1); /* does not fit */
}

static void test_arguments_and_what_no_route_takes(void **state)
{
    (void)state;
    struct request req;
    memset(&req, 0, sizeof(req));
    receiver__route("/api/v1/nodes/gpu-3/release", "POST", &req);
    assert_int_equal(req.handler, H_RELEASE);
    assert_string_equal(req.arg, "gpu-3");
    receiver__route("/api/v1/approvals/12", "POST", &req);
    assert_int_equal(req.handler, H_APPROVAL);
    assert_string_equal(req.arg, "12");
    /* an API's kind is the rest of the path */
    receiver__route("/api/v1/decisions", "GET", &req);
    assert_int_equal(req.handler, H_API_QUERY);
    assert_string_equal(req.arg, "decisions");
    /* a node's page takes one segment; a page under it is no route */
    receiver__route("/nodes/gpu-3", "GET", &req);
    assert_int_equal(req.handler, H_PAGE);
    assert_int_equal(req.page, RECEIVER_PAGE_NODE);
    receiver__route("/nodes/gpu-3/x", "GET", &req);
    assert_int_equal(req.handler, H_OTHER);
    receiver__route("/webhooks", "POST", &req);
    assert_int_equal(req.handler, H_OTHER);
    receiver__route("/unpause", "GET", &req); /* a form only */
    assert_int_equal(req.handler, H_OTHER);
    /* an argument longer than any route takes matches none */
    char url[600] = "/nodes/";
    memset(url + 7, 'n', 400);
    url[407] = '\0';
    receiver__route(url, "GET", &req);
    assert_int_equal(req.handler, H_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_reaches_its_handler),
        cmocka_unit_test(test_every_handler_and_page_has_a_route),
        cmocka_unit_test(test_arguments_and_what_no_route_takes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

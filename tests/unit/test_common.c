/* SPDX-License-Identifier: Apache-2.0 */
/* The shared layer: times, durations, UTF-8, buffers, tables, node names,
 * SHA-256, the YAML tree. */
#include "action.h"
#include "alert.h"
#include "auth.h"
#include "buf.h"
#include "hostlist.h"
#include "html.h"
#include "json.h"
#include "lock.h"
#include "map.h"
#include "sha256.h"
#include "table.h"
#include "timeutil.h"
#include "timezone.h"
#include "utf8.h"
#include "yaml_tree.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int64_t parse(const char *s)
{
    int64_t t = 0;
    assert_int_equal(medic_time_parse_rfc3339(s, strlen(s), &t), 0);
    return t;
}

static void test_rfc3339(void **state)
{
    (void)state;
    assert_true(parse("1970-01-01T00:00:00Z") == 0);
    assert_true(parse("1970-01-01T00:00:01.5Z") == 1500000000);
    assert_true(parse("2026-11-22T07:54:16.335297267Z") ==
                INT64_C(1795334056) * MEDIC_NS_PER_SEC + 335297267);
    assert_true(parse("2026-11-22T09:54:16.335297267+02:00") ==
                parse("2026-11-22T07:54:16.335297267Z"));
    assert_true(parse("2026-11-22t07:54:16z") == parse("2026-11-22T07:54:16Z"));
    assert_true(parse("0001-01-01T00:00:00Z") == MEDIC_TIME_UNSET);
    assert_true(parse("2024-02-29T00:00:00-00:30") == parse("2024-02-29T00:30:00Z"));
    static const char *const bad[] = {"",
                                      "2026-11-22",
                                      "2026-11-22T07:54:16",
                                      "2026-13-01T00:00:00Z",
                                      "2026-11-22T24:00:00Z",
                                      "2023-02-29T00:00:00Z",
                                      "2026-11-22T07:54:16.Z",
                                      "2026-11-22T07:54:16Z ",
                                      "0001-01-01T00:00:01Z",
                                      "2026-11-22T07:54:16+0200"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t t;
        if (medic_time_parse_rfc3339(bad[i], strlen(bad[i]), &t) == 0)
            fail_msg("accepted '%s'", bad[i]);
    }
    char out[40];
    assert_string_equal(
        medic_time_format(parse("2026-11-22T07:54:16.335297267Z"), out, sizeof(out)),
        "2026-11-22T07:54:16.335Z");
    assert_string_equal(medic_time_format(MEDIC_TIME_UNSET, out, sizeof(out)),
                        "0001-01-01T00:00:00Z");
    assert_string_equal(medic_time_format(-1, out, sizeof(out)), "1969-12-31T23:59:59.999Z");
}

static void test_durations(void **state)
{
    (void)state;
    int64_t d;
    assert_int_equal(medic_duration_parse("90m", &d), 0);
    assert_true(d == 90 * 60 * MEDIC_NS_PER_SEC);
    assert_int_equal(medic_duration_parse("1h30m", &d), 0);
    assert_true(d == 90 * 60 * MEDIC_NS_PER_SEC);
    assert_int_equal(medic_duration_parse("7d", &d), 0);
    assert_true(d == 7 * 86400 * MEDIC_NS_PER_SEC);
    assert_int_equal(medic_duration_parse("500ms", &d), 0);
    assert_true(d == 500 * MEDIC_NS_PER_MS);
    assert_int_equal(medic_duration_parse("", &d), MEDIC_E_INVALID);
    assert_int_equal(medic_duration_parse("5", &d), MEDIC_E_INVALID);
    assert_int_equal(medic_duration_parse("-5m", &d), MEDIC_E_INVALID);
    assert_int_equal(medic_duration_parse("5y", &d), MEDIC_E_INVALID);
    assert_int_equal(medic_duration_parse("99999999999999w", &d), MEDIC_E_INVALID);
    int64_t now = parse("2026-11-22T08:00:00Z"), t;
    assert_int_equal(medic_time_parse_bound("2h", now, &t), 0);
    assert_true(t == parse("2026-11-22T06:00:00Z"));
    assert_int_equal(medic_time_parse_bound("2026-11-21T22:00:00Z", now, &t), 0);
    assert_true(t == parse("2026-11-21T22:00:00Z"));
    assert_int_equal(medic_time_parse_bound("last night", now, &t), MEDIC_E_INVALID);
}

static void test_utf8(void **state)
{
    (void)state;
    const char ok[] = "gpu \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5";
    assert_int_equal(medic_utf8_check(ok, strlen(ok)), strlen(ok));
    assert_int_equal(medic_utf8_check("ab\xff", 3), 2);
    assert_int_equal(medic_utf8_check("a\xe2\x82", 3), 1);        /* cut short */
    assert_int_equal(medic_utf8_check("\xe0\x80\x80", 3), 0);     /* overlong */
    assert_int_equal(medic_utf8_check("\xed\xbf\xbf", 3), 0);     /* surrogate */
    assert_int_equal(medic_utf8_check("\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
}

static void test_buf_cap_and_json(void **state)
{
    (void)state;
    struct medic_buf b;
    medic_buf_init(&b, 8);
    assert_int_equal(medic_buf_puts(&b, "12345678"), 0);
    assert_int_equal(medic_buf_puts(&b, "9"), MEDIC_E_LIMIT);
    assert_string_equal(b.data, "12345678");
    medic_buf_release(&b);
    medic_buf_init(&b, 0);
    medic_buf_json_string(&b, "a\"b\\c\nd\x01");
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\nd\\u0001\"");
    medic_buf_release(&b);
}

/* A capped buffer fails whole: an overflow sticks, a JSON string that does
 * not fit leaves nothing behind, and broken UTF-8 never reaches JSON. */
static void test_buf_fails_whole(void **state)
{
    (void)state;
    struct medic_buf b;
    medic_buf_init(&b, 10);
    assert_int_equal(medic_buf_puts(&b, "{\"a\":"), 0);
    assert_int_equal(medic_buf_json_string(&b, "0123456789"), MEDIC_E_LIMIT);
    assert_string_equal(b.data, "{\"a\":"); /* no half string */
    assert_int_equal(b.error, MEDIC_E_LIMIT);
    assert_int_equal(medic_buf_puts(&b, "}"), MEDIC_E_LIMIT); /* sticks */
    medic_buf_reset(&b);
    assert_int_equal(medic_buf_puts(&b, "ok"), 0);
    medic_buf_release(&b);

    medic_buf_init(&b, 0);
    /* a cut two-byte character and a stray continuation byte */
    assert_int_equal(medic_buf_json_stringn(&b, "\xc3\xa9x\xc3", 4), 0);
    assert_string_equal(b.data, "\"\xc3\xa9x\\ufffd\"");
    medic_buf_reset(&b);
    assert_int_equal(medic_buf_json_string(&b, "\x80\xe2\x82\xac"), 0);
    assert_string_equal(b.data, "\"\\ufffd\xe2\x82\xac\"");
    medic_buf_release(&b);
}

static void test_utf8_cut(void **state)
{
    (void)state;
    const char *euro = "ab\xe2\x82\xac"; /* 5 bytes */
    assert_int_equal(medic_utf8_boundary(euro, 5), 5);
    assert_int_equal(medic_utf8_boundary(euro, 4), 2);
    assert_int_equal(medic_utf8_boundary(euro, 3), 2);
    assert_int_equal(medic_utf8_boundary(euro, 2), 2);
    assert_int_equal(medic_utf8_boundary("\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(medic_utf8_boundary("\xf0\x9f\x98\x80", 3), 0);
    char out[64];
    char long_text[200];
    for (size_t i = 0; i + 2 < sizeof(long_text); i += 2)
        memcpy(long_text + i, "\xc3\xa9", 2);
    size_t n = medic_text_fit(out, sizeof(out), long_text, sizeof(long_text) - 2);
    assert_true(n < sizeof(out));
    assert_int_equal(medic_utf8_check(out, n), n);
    assert_non_null(strstr(out, MEDIC_ACTION_TEXT_CUT_MARKER));
    n = medic_text_fit(out, sizeof(out), "short", 5);
    assert_string_equal(out, "short");
}

/* The action table drives names, kinds and JSON. */
static void test_actions(void **state)
{
    (void)state;
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++)
        assert_int_equal(medic_action_parse_kind(medic_action_name((enum medic_action_kind)k)), k);
    assert_int_equal(medic_action_parse_kind("reboot"), -1);
    assert_true(medic_action_disruptive(MEDIC_ACTION_DRAIN));
    assert_false(medic_action_disruptive(MEDIC_ACTION_NOTIFY));
    struct medic_action a, copy;
    medic_action_init(&a, MEDIC_ACTION_NOTIFY);
    assert_int_equal(medic_action_set_text(&a, "notifier", "oncall", 6), 0);
    assert_int_equal(medic_action_set_text(&a, "message", "a\"b\n\x01", 5), 0);
    assert_int_equal(medic_action_set_text(&a, "watts", "1", 1), MEDIC_E_INVALID);
    assert_int_equal(medic_action_copy(&copy, &a), 0);
    medic_action_release(&a);
    struct medic_buf b;
    medic_buf_init(&b, 0);
    assert_int_equal(medic_action_params_json(&copy, &b), 0);
    assert_string_equal(b.data, "{\"notifier\":\"oncall\",\"message\":\"a\\\"b\\n\\u0001\"}");
    medic_action_release(&copy);
    medic_action_init(&a, MEDIC_ACTION_POWER_LIMIT);
    a.u.power_limit.watts = 300;
    a.u.power_limit.gpus.items[0] = 1;
    a.u.power_limit.gpus.items[1] = 3;
    a.u.power_limit.gpus.count = 2;
    medic_buf_reset(&b);
    assert_int_equal(medic_action_params_json(&a, &b), 0);
    assert_string_equal(b.data, "{\"watts\":300,\"gpus\":[1,3]}");
    medic_buf_release(&b);
    /* a message far over the cap is cut at a character boundary, marked */
    size_t big = 3 * MEDIC_ACTION_TEXT_MAX;
    char *text = malloc(big);
    assert_non_null(text);
    for (size_t i = 0; i + 3 <= big; i += 3)
        memcpy(text + i, "\xe2\x82\xac", 3);
    medic_action_init(&a, MEDIC_ACTION_NOTIFY);
    assert_int_equal(medic_action_set_text(&a, "message", text, big), 0);
    size_t len = strlen(a.u.notify.message);
    assert_true(len <= MEDIC_ACTION_TEXT_MAX);
    assert_int_equal(medic_utf8_check(a.u.notify.message, len), len);
    assert_non_null(strstr(a.u.notify.message, MEDIC_ACTION_TEXT_CUT_MARKER));
    medic_action_release(&a);
    free(text);
    for (int o = 0; o < MEDIC_OUTCOME_COUNT; o++)
        assert_true(strlen(medic_outcome_strerror((enum medic_outcome)o)) > 10);
    assert_string_equal(medic_outcome_name(MEDIC_OUTCOME_TIMED_OUT), "timed_out");
}

static void test_table_formats(void **state)
{
    (void)state;
    static const char *const names[] = {"id", "reason"};
    static const enum medic_column_type types[] = {MEDIC_COL_INT, MEDIC_COL_TEXT};
    struct medic_table t;
    assert_int_equal(medic_table_init(&t, 2, names, types), 0);
    const char *row1[] = {"1", "Xid 79, \"fell off\""};
    const char *row2[] = {"2", NULL};
    medic_table_add_row(&t, row1);
    medic_table_add_row(&t, row2);
    struct medic_buf b;
    medic_buf_init(&b, 0);
    medic_table_render(&t, MEDIC_FORMAT_CSV, &b);
    assert_string_equal(b.data, "id,reason\r\n1,\"Xid 79, \"\"fell off\"\"\"\r\n2,\r\n");
    medic_buf_reset(&b);
    medic_table_render(&t, MEDIC_FORMAT_JSON, &b);
    assert_string_equal(b.data, "[\n {\"id\":1,\"reason\":\"Xid 79, \\\"fell off\\\"\"},\n "
                                "{\"id\":2,\"reason\":null}\n]\n");
    medic_buf_reset(&b);
    medic_table_render(&t, MEDIC_FORMAT_TABLE, &b);
    assert_non_null(strstr(b.data, "ID  REASON\n1   Xid 79"));
    /* the columns asked for, in their order; an unknown one named */
    char why[200];
    assert_int_equal(medic_table_select(&t, "nope", why, sizeof(why)), MEDIC_E_INVALID);
    assert_string_equal(why, "no column 'nope'; the columns are id,reason");
    assert_int_equal(medic_table_select(&t, "reason,id,reason", why, sizeof(why)), 0);
    medic_buf_reset(&b);
    medic_table_render(&t, MEDIC_FORMAT_CSV, &b);
    assert_string_equal(b.data, "reason,id\r\n\"Xid 79, \"\"fell off\"\"\",1\r\n,2\r\n");
    assert_int_equal(medic_table_select(&t, "id", why, sizeof(why)), 0);
    assert_int_equal(t.ncols, 1);
    assert_int_equal(t.nrows, 2);
    medic_buf_release(&b);
    medic_table_release(&t);
}

static void test_alert_node(void **state)
{
    (void)state;
    struct medic_label items[] = {{"Hostname", "gpu-node-07"}, {"instance", "10.0.0.7:9400"}};
    struct medic_labels labels = {items, 2};
    const char *const by_instance[] = {"node", "instance"};
    const char *const by_hostname[] = {"node", "Hostname", "instance"};
    const char *const none[] = {"node"};
    char out[64];
    assert_int_equal(medic_alert_node(&labels, by_instance, 2, out, sizeof(out)), 0);
    assert_string_equal(out, "10.0.0.7");
    assert_int_equal(medic_alert_node(&labels, by_hostname, 3, out, sizeof(out)), 0);
    assert_string_equal(out, "gpu-node-07");
    assert_int_equal(medic_alert_node(&labels, none, 1, out, sizeof(out)), MEDIC_E_NOTFOUND);
    struct medic_label v6[] = {{"instance", "[fe80::1]:9400"}};
    struct medic_labels l6 = {v6, 1};
    assert_int_equal(medic_alert_node(&l6, by_instance, 2, out, sizeof(out)), 0);
    assert_string_equal(out, "fe80::1");
    struct medic_label bare6[] = {{"instance", "fe80::1"}};
    struct medic_labels lb = {bare6, 1};
    assert_int_equal(medic_alert_node(&lb, by_instance, 2, out, sizeof(out)), 0);
    assert_string_equal(out, "fe80::1");
    /* the bound: 127 bytes name a node, 128 name none (never cut to a
     * prefix that could be another node's name); the port is not counted */
    char name[160], port[170], big[MEDIC_NODE_NAME_MAX + 1];
    memset(name, 'n', MEDIC_NODE_NAME_MAX);
    name[MEDIC_NODE_NAME_MAX] = '\0';
    snprintf(port, sizeof(port), "%s:9400", name);
    struct medic_label longest[] = {{"instance", port}};
    struct medic_labels ll = {longest, 1};
    assert_int_equal(medic_alert_node(&ll, by_instance, 2, big, sizeof(big)), 0);
    assert_string_equal(big, name);
    strcat(name, "b");
    longest[0].value = name;
    assert_int_equal(medic_alert_node(&ll, by_instance, 2, big, sizeof(big)), MEDIC_E_LIMIT);
    assert_non_null(strstr(big, MEDIC_NODE_NAME_CUT));
    assert_true(strlen(big) <= MEDIC_NODE_NAME_MAX);
}

static void test_sha256(void **state)
{
    (void)state;
    char hex[65];
    medic_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_auth_compare(void **state)
{
    (void)state;
    assert_true(receiver_secure_equals("secret", 6, "secret"));
    assert_false(receiver_secure_equals("secreT", 6, "secret"));
    assert_false(receiver_secure_equals("secret1", 7, "secret"));
    assert_false(receiver_secure_equals("secre", 5, "secret"));
    assert_false(receiver_secure_equals("", 0, "secret"));
    struct receiver_auth none = {0};
    assert_true(receiver_auth_check(&none, NULL, NULL, NULL));
    struct receiver_auth bearer = {.bearer_token = "tok"};
    assert_true(receiver_auth_check(&bearer, "Bearer tok", NULL, NULL));
    assert_true(receiver_auth_check(&bearer, "bearer  tok ", NULL, NULL));
    assert_false(receiver_auth_check(&bearer, "Bearer tok2", NULL, NULL));
    assert_false(receiver_auth_check(&bearer, NULL, NULL, NULL));
    assert_false(receiver_auth_check(&bearer, "Basic dG9rOnRvaw==", "tok", "tok"));
    struct receiver_auth basic = {.basic_username = "am", .basic_password = "pw"};
    assert_true(receiver_auth_check(&basic, "Basic YW06cHc=", "am", "pw"));
    assert_false(receiver_auth_check(&basic, "Basic YW06cHg=", "am", "px"));
    assert_false(receiver_auth_check(&basic, "Bearer pw", NULL, NULL));
}

static void test_yaml_tree_positions(void **state)
{
    (void)state;
    struct yaml_tree tree;
    struct medic_error err = {0};
    const char *doc = "a: 1\nb:\n  - x\n  - 'y'\n";
    assert_int_equal(yaml_tree_parse("t.yaml", doc, strlen(doc), &tree, &err), 0);
    const struct yaml_tree_node *b = yaml_tree_get(tree.root, "b");
    assert_non_null(b);
    assert_int_equal(b->kind, YAML_TREE_SEQUENCE);
    assert_int_equal(b->items[1]->line, 4);
    assert_int_equal(b->items[1]->col, 5);
    assert_true(b->items[1]->quoted);
    yaml_tree_release(&tree);

    const char *bad = "a: 1\nb: [1, 2\n";
    assert_int_equal(yaml_tree_parse("t.yaml", bad, strlen(bad), &tree, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "t.yaml:3:1: invalid YAML"));
    const char *dup = "a: 1\na: 2\n";
    assert_int_equal(yaml_tree_parse("t.yaml", dup, strlen(dup), &tree, &err), MEDIC_E_INVALID);
    assert_string_equal(err.msg, "t.yaml:2:1: duplicate key 'a'");
    const char *alias = "a: &x [1]\nb: *x\n";
    assert_int_equal(yaml_tree_parse("t.yaml", alias, strlen(alias), &tree, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "anchors and aliases are not supported"));
}

static void test_map(void **state)
{
    (void)state;
    struct medic_map m;
    medic_map_init(&m);
    assert_null(medic_map_get(&m, "x"));
    static int values[1000];
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        assert_int_equal(medic_map_put(&m, key, &values[i]), 0);
    }
    assert_int_equal(m.used, 1000);
    for (int i = 0; i < 1000; i += 2) {
        snprintf(key, sizeof(key), "key-%d", i);
        medic_map_remove(&m, key);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        assert_ptr_equal(medic_map_get(&m, key), i % 2 ? &values[i] : NULL);
    }
    /* reinsert over tombstones, replace a value */
    for (int round = 0; round < 20; round++)
        for (int i = 0; i < 1000; i += 2) {
            snprintf(key, sizeof(key), "key-%d", i);
            assert_int_equal(medic_map_put(&m, key, &values[i]), 0);
            medic_map_remove(&m, key);
        }
    assert_int_equal(m.used, 500);
    assert_int_equal(medic_map_put(&m, "key-1", &values[7]), 0);
    assert_ptr_equal(medic_map_get(&m, "key-1"), &values[7]);
    assert_int_equal(m.used, 500);
    medic_map_release(&m);
}

static void test_html_escaping(void **state)
{
    (void)state;
    struct medic_buf b;
    medic_buf_init(&b, 0);
    assert_int_equal(medic_html_text(&b, "<img src=x onerror=\"a('1')\">&amp;"), 0);
    assert_int_equal(medic_buf_append(&b, "", 1), 0);
    assert_string_equal(b.data, "&lt;img src=x onerror=&quot;a(&#39;1&#39;)&quot;&gt;&amp;amp;");
    medic_buf_reset(&b);
    assert_int_equal(medic_html_text(&b, NULL), 0);
    assert_int_equal(b.len, 0);
    /* a path segment: nothing but unreserved bytes stays; UTF-8 is encoded */
    assert_int_equal(medic_html_path_segment(&b, "gpu-node_01.a~/../\"\xc3\xa9 ?#%"), 0);
    assert_int_equal(medic_buf_append(&b, "", 1), 0);
    assert_string_equal(b.data, "gpu-node_01.a~%2F..%2F%22%C3%A9%20%3F%23%25");
    medic_buf_release(&b);
}

/* A tree parsed into an arena: its nodes and strings are the arena's (no
 * malloc of their own), a large document grows the arena in few blocks,
 * invalid JSON says where it stopped, and cJSON elsewhere still allocates
 * and frees with malloc. */
static void test_json_in_arena(void **state)
{
    (void)state;
    struct medic_arena a;
    medic_arena_init(&a);
    const char *doc = "{\"data\":{\"result\":[{\"metric\":{\"gpu\":\"3\"},"
                      "\"values\":[[1700000000,\"41.5\"]]}]}}  ";
    cJSON *j = medic_json_parse_in(&a, doc, strlen(doc), NULL);
    assert_non_null(j);
    const cJSON *r =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "data"), "result");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(r, 0), "metric"), "gpu");
    assert_string_equal(g->valuestring, "3");
    assert_true(a.used > 0);
    /* every node lies inside the arena's blocks */
    size_t used = a.used;
    assert_true(medic_arena_owns(&a, g) && medic_arena_owns(&a, g->valuestring));
    /* a 200,000-element array: the arena's blocks double, so they are few */
    struct medic_buf big;
    medic_buf_init(&big, 0);
    assert_int_equal(medic_buf_puts(&big, "["), 0);
    for (int i = 0; i < 200000; i++)
        assert_int_equal(medic_buf_puts(&big, i ? ",1.5" : "1.5"), 0);
    assert_int_equal(medic_buf_puts(&big, "]"), 0);
    cJSON *arr = medic_json_parse_in(&a, big.data, big.len, NULL);
    assert_int_equal(cJSON_GetArraySize(arr), 200000);
    assert_true(a.used > used + 200000 * sizeof(cJSON));
    assert_true(medic_arena_blocks(&a) < 40);
    medic_buf_release(&big);
    /* invalid: NULL, and where it stopped */
    const char *end = NULL;
    const char *bad = "{\"a\": [1, 2,, 3]}";
    assert_null(medic_json_parse_in(&a, bad, strlen(bad), &end));
    assert_int_equal(end - bad, 12);
    medic_arena_release(&a);
    /* outside a parse in an arena, cJSON owns its nodes as before */
    cJSON *own = cJSON_Parse("{\"b\": \"x\"}");
    assert_non_null(own);
    char *text = cJSON_PrintUnformatted(own);
    assert_string_equal(text, "{\"b\":\"x\"}");
    cJSON_free(text);
    cJSON_Delete(own);
}

/* Locks are taken in increasing rank only: a checking build reports the
 * lock taken out of order and the one held, a condition wait keeps its
 * lock counted, and releasing in any order is fine. */
static enum medic_lock_rank seen_taking, seen_held;
static int violations;

static void note_violation(enum medic_lock_rank taking, enum medic_lock_rank held)
{
    seen_taking = taking;
    seen_held = held;
    violations++;
}

static void test_lock_order(void **state)
{
    (void)state;
    medic_lock_on_violation(note_violation);
    struct medic_mutex engine, handover;
    struct medic_rwlock role;
    medic_mutex_init(&engine, MEDIC_LOCK_ENGINE_STATE);
    medic_mutex_init(&handover, MEDIC_LOCK_HANDOVER);
    medic_rwlock_init(&role, MEDIC_LOCK_ROLE);
    /* in order: role, engine state, handover; released out of order */
    medic_rwlock_rdlock(&role);
    medic_mutex_lock(&engine);
    medic_mutex_lock(&handover);
    medic_rwlock_unlock(&role);
    medic_mutex_unlock(&engine);
    medic_mutex_unlock(&handover);
    assert_int_equal(violations, 0);
    /* a wait keeps the handover lock held: the engine's is then out of order */
    pthread_cond_t cond;
    pthread_cond_init(&cond, NULL);
    medic_mutex_lock(&handover);
    struct timespec past = {0, 0};
    medic_cond_timedwait(&cond, &handover, &past);
    medic_mutex_lock(&engine);
    medic_mutex_unlock(&engine);
    medic_mutex_unlock(&handover);
    if (medic_lock_order_checked()) {
        assert_int_equal(violations, 1);
        assert_int_equal(seen_taking, MEDIC_LOCK_ENGINE_STATE);
        assert_int_equal(seen_held, MEDIC_LOCK_HANDOVER);
        assert_string_equal(medic_lock_name(seen_held), "engine handover");
    } else {
        assert_int_equal(violations, 0); /* a release build does not check */
    }
    /* nothing is left held: the same order is fine again */
    medic_mutex_lock(&engine);
    medic_mutex_lock(&handover);
    medic_mutex_unlock(&handover);
    medic_mutex_unlock(&engine);
    assert_int_equal(violations, medic_lock_order_checked() ? 1 : 0);
    pthread_cond_destroy(&cond);
    medic_mutex_destroy(&engine);
    medic_mutex_destroy(&handover);
    medic_rwlock_destroy(&role);
    medic_lock_on_violation(NULL);
}

/* Slurm hostlists: ranges with and without zero padding, several per
 * bracket and per name, lists of names; what they must not match; and
 * what is refused, with a message. */
static void test_hostlists(void **state)
{
    (void)state;
    struct medic_hostlist *h = NULL;
    char why[200];
    assert_int_equal(medic_hostlist_parse("gpu-[0001-0100,0200],login01,rack[1-2]-gpu[1-8]", &h,
                                          why, sizeof(why)),
                     0);
    static const char *const in[] = {"gpu-0001", "gpu-0050",   "gpu-0100",  "gpu-0200",
                                     "login01",  "rack1-gpu1", "rack2-gpu8"};
    static const char *const out[] = {
        "gpu-0101",   "gpu-050",     "gpu-00050",  "gpu-0000", "gpu-0199", "login1",   "login011",
        "rack3-gpu1", "rack1-gpu01", "rack1-gpu9", "gpu-",     "",         "gpu-0050x"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
        if (!medic_hostlist_match(h, in[i]))
            fail_msg("%s should match", in[i]);
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
        if (medic_hostlist_match(h, out[i]))
            fail_msg("%s should not match", out[i]);
    medic_hostlist_free(h);
    /* the adopter's mistake: a regex-looking range is a hostlist too */
    assert_int_equal(medic_hostlist_parse("gpu-node-0[1-4]", &h, why, sizeof(why)), 0);
    assert_true(medic_hostlist_match(h, "gpu-node-03"));
    assert_false(medic_hostlist_match(h, "gpu-node-05"));
    medic_hostlist_free(h);
    /* a large range costs nothing */
    assert_int_equal(medic_hostlist_parse("n[1-999999999]", &h, why, sizeof(why)), 0);
    assert_true(medic_hostlist_match(h, "n123456789"));
    assert_false(medic_hostlist_match(h, "n0123"));
    medic_hostlist_free(h);
    static const struct {
        const char *text, *says;
    } bad[] = {{"gpu-[0001-100]", "zero-padded"},
               {"gpu-[10-1]", "backwards"},
               {"gpu-[1-", "without its ']'"},
               {"gpu-1]", "without its '['"},
               {"gpu-[[1]]", "do not nest"},
               {"gpu-.*", "~REGEX"},
               {"a,,b", "empty name"},
               {"", "empty hostlist"},
               {"gpu-[x-y]", "N or N-M"},
               {"gpu-[1234567890]", "at most 9 digits"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        if (medic_hostlist_parse(bad[i].text, &h, why, sizeof(why)) != -1 || h ||
            !strstr(why, bad[i].says))
            fail_msg("'%s': '%s', wanted '%s'", bad[i].text, why, bad[i].says);
    }
}

/* Time zones from the system's zoneinfo, against what `date` says: the
 * table's transitions (DST in Berlin and New York, to the second), the
 * POSIX rule past the table (2040), UTC, and names refused. */
static void test_time_zones(void **state)
{
    (void)state;
    char why[128];
    struct medic_tz *berlin, *ny, *utc, *bad;
    assert_int_equal(medic_tz_load("Europe/Berlin", &berlin, why, sizeof(why)), 0);
    assert_int_equal(medic_tz_load("America/New_York", &ny, why, sizeof(why)), 0);
    assert_int_equal(medic_tz_load("UTC", &utc, why, sizeof(why)), 0);
    static const struct {
        int64_t t;
        int berlin, ny;
    } at[] = {
        {1768478400, 3600, -18000}, /* 2026-01-15T12:00:00Z */
        {1784116800, 7200, -14400}, /* 2026-07-15T12:00:00Z */
        {1774745999, 3600, -14400}, /* a second before Berlin's clocks go forward */
        {1774746000, 7200, -14400}, /* 2026-03-29T01:00:00Z */
        {2224656000, 7200, -14400}, /* 2040-06-30: past the file's table, by its rule */
        {2208988800, 3600, -18000}, /* 2040-01-01 */
    };
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        assert_int_equal(medic_tz_offset(berlin, at[i].t), at[i].berlin);
        assert_int_equal(medic_tz_offset(ny, at[i].t), at[i].ny);
        assert_int_equal(medic_tz_offset(utc, at[i].t), 0);
    }
    assert_int_equal(medic_tz_load("../etc/passwd", &bad, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "not a time zone name"));
    assert_int_equal(medic_tz_load("Mars/Olympus", &bad, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "no such time zone"));
    medic_tz_free(berlin);
    medic_tz_free(ny);
    medic_tz_free(utc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_hostlists),
        cmocka_unit_test(test_time_zones),
        cmocka_unit_test(test_html_escaping),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_buf_cap_and_json),
        cmocka_unit_test(test_buf_fails_whole),
        cmocka_unit_test(test_utf8_cut),
        cmocka_unit_test(test_actions),
        cmocka_unit_test(test_table_formats),
        cmocka_unit_test(test_alert_node),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_auth_compare),
        cmocka_unit_test(test_yaml_tree_positions),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_json_in_arena),
        cmocka_unit_test(test_lock_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

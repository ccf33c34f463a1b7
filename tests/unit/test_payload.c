/* SPDX-License-Identifier: Apache-2.0 */
/* Webhook payload parser: real Alertmanager payloads and malformed ones. */
#include "payload.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static struct receiver_limits limits;

static int parse_text(const char *text, struct medic_notification *n, struct medic_error *err)
{
    medic_notification_init(n);
    return receiver_payload_parse(text, strlen(text), &limits, n, err);
}

static int parse_fixture(const char *name, struct medic_notification *n)
{
    char path[512], *text;
    size_t len;
    struct medic_error err = {0};
    snprintf(path, sizeof(path), "%s/alertmanager/%s", MEDIC_FIXTURES, name);
    assert_int_equal(medic_read_file(path, 1 << 20, &text, &len, &err), 0);
    medic_notification_init(n);
    int rc = receiver_payload_parse(text, len, &limits, n, &err);
    if (rc)
        fprintf(stderr, "%s: %s\n", name, err.msg);
    free(text);
    return rc;
}

static void test_real_payloads_parse(void **state)
{
    (void)state;
    static const char *const files[] = {"am-webhook-firing.json",
                                        "am-webhook-multi-alert.json",
                                        "am-webhook-partially-resolved.json",
                                        "am-webhook-resolved.json",
                                        "am-webhook-from-prometheus-firing.json",
                                        "am-webhook-from-prometheus-resolved.json",
                                        "am-webhook-ha-replica1.json",
                                        "am-webhook-ha-replica2.json",
                                        "am-webhook-retry-attempt.body.json"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        struct medic_notification n;
        assert_int_equal(parse_fixture(files[i], &n), 0);
        assert_string_equal(n.version, "4");
        assert_true(n.alert_count >= 1);
        for (size_t k = 0; k < n.alert_count; k++) {
            assert_non_null(n.alerts[k].fingerprint);
            assert_int_equal(strlen(n.alerts[k].fingerprint), 16);
            assert_true(n.alerts[k].starts_at != MEDIC_TIME_UNSET);
        }
        medic_notification_release(&n);
    }
}

static void test_multi_alert_fields(void **state)
{
    (void)state;
    struct medic_notification n;
    assert_int_equal(parse_fixture("am-webhook-multi-alert.json", &n), 0);
    assert_int_equal(n.alert_count, 3);
    assert_int_equal(n.status, MEDIC_STATUS_FIRING);
    assert_string_equal(n.receiver, "medic");
    assert_string_equal(n.group_key, "{}:{alertname=\"GPUXidError\", instance=\"gpu-node-02\"}");
    assert_string_equal(medic_labels_get(&n.group_labels, "instance"), "gpu-node-02");
    assert_null(medic_labels_get(&n.common_labels, "gpu")); /* differs between the alerts */
    assert_int_equal(n.common_annotations.count, 0);
    assert_string_equal(n.external_url, "http://127.0.0.1:19020");
    assert_int_equal(n.truncated_alerts, 0);
    assert_int_equal(n.alerts[0].ends_at, MEDIC_TIME_UNSET); /* 0001-01-01T00:00:00Z */
    assert_string_equal(medic_labels_get(&n.alerts[1].labels, "gpu"), "1");
    medic_notification_release(&n);
}

static void test_partially_resolved(void **state)
{
    (void)state;
    struct medic_notification n;
    assert_int_equal(parse_fixture("am-webhook-partially-resolved.json", &n), 0);
    size_t resolved = 0;
    for (size_t i = 0; i < n.alert_count; i++)
        if (n.alerts[i].status == MEDIC_STATUS_RESOLVED) {
            resolved++;
            assert_true(n.alerts[i].ends_at != MEDIC_TIME_UNSET);
        }
    assert_int_equal(n.status, MEDIC_STATUS_FIRING);
    assert_int_equal(resolved, 1);
    medic_notification_release(&n);
}

/* A fingerprint left out is computed the way Prometheus does; the real
 * payload's own fingerprint is the reference. */
static void test_fingerprint_computed_like_prometheus(void **state)
{
    (void)state;
    struct medic_notification real, computed;
    struct medic_error err;
    assert_int_equal(parse_fixture("am-webhook-firing.json", &real), 0);
    const char *text =
        "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\",\"alerts\":[{\"status\":"
        "\"firing\",\"labels\":{\"alertname\":\"GPUXidError\",\"gpu\":\"0\",\"instance\":"
        "\"gpu-node-01\",\"severity\":\"critical\",\"xid\":\"79\"},\"startsAt\":"
        "\"2026-11-22T07:54:16Z\"}]}";
    assert_int_equal(parse_text(text, &computed, &err), 0);
    assert_string_equal(computed.alerts[0].fingerprint, real.alerts[0].fingerprint);
    medic_notification_release(&real);
    medic_notification_release(&computed);
}

static void test_ha_copies_share_dedupe_key_only_with_same_times(void **state)
{
    (void)state;
    struct medic_notification a, b;
    char ka[65], kb[65];
    assert_int_equal(parse_fixture("am-webhook-ha-replica1.json", &a), 0);
    assert_int_equal(parse_fixture("am-webhook-ha-replica2.json", &b), 0);
    /* these replicas stamped startsAt themselves: not the same alert instance */
    medic_notification_dedupe_key(&a, ka);
    medic_notification_dedupe_key(&b, kb);
    assert_string_not_equal(ka, kb);
    /* same startsAt, different externalURL and receiver: same key */
    b.alerts[0].starts_at = a.alerts[0].starts_at;
    b.external_url = "http://elsewhere:9093";
    medic_notification_dedupe_key(&b, kb);
    assert_string_equal(ka, kb);
    /* a status change is a new notification */
    b.alerts[0].status = MEDIC_STATUS_RESOLVED;
    medic_notification_dedupe_key(&b, kb);
    assert_string_not_equal(ka, kb);
    medic_notification_release(&a);
    medic_notification_release(&b);
}

struct bad_case {
    const char *name;
    const char *body;
    int code;
    const char *message_part;
};

#define ALERT                                                                                      \
    "{\"status\":\"firing\",\"labels\":{\"a\":\"b\"},\"startsAt\":\"2026-01-01T00:00:00Z\"}"
#define WRAP(alerts)                                                                               \
    "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\",\"alerts\":[" alerts "]}"

static const struct bad_case bad_cases[] = {
    {"empty", "", MEDIC_E_INVALID, "empty body"},
    {"not json", "hello", MEDIC_E_INVALID, "invalid JSON at line 1, column 1"},
    {"truncated", "{\"version\":\"4\",\"alerts\":[{", MEDIC_E_INVALID, "truncated"},
    /* a bracket left open inside the body is where it breaks, not a cut */
    {"broken inside", "{\"alerts\":[}", MEDIC_E_INVALID,
     "invalid JSON at line 1, column 12 (byte 11): unexpected '}'"},
    {"trailing data", WRAP(ALERT) " x", MEDIC_E_INVALID, "unexpected data after the object"},
    {"array root", "[]", MEDIC_E_INVALID, "payload: expected an object, got array"},
    {"version number", "{\"version\":4}", MEDIC_E_INVALID,
     "version: expected a string, got number"},
    {"version 3", "{\"version\":\"3\"}", MEDIC_E_INVALID, "not supported"},
    {"no group key", "{\"version\":\"4\",\"status\":\"firing\",\"alerts\":[" ALERT "]}",
     MEDIC_E_INVALID, "groupKey: required field is missing"},
    {"bad status", "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"burning\",\"alerts\":[]}",
     MEDIC_E_INVALID, "status: expected \"firing\" or \"resolved\""},
    {"alerts object", "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\",\"alerts\":{}}",
     MEDIC_E_INVALID, "alerts: expected an array, got object"},
    {"no alerts", WRAP(""), MEDIC_E_INVALID, "a notification needs alerts"},
    {"label number",
     WRAP("{\"status\":\"firing\",\"labels\":{\"gpu\":1},\"startsAt\":\"2026-01-01T00:00:00Z\"}"),
     MEDIC_E_INVALID, "alerts[0].labels.gpu: expected a string, got number"},
    {"labels array", WRAP(ALERT ",{\"status\":\"firing\",\"labels\":[],\"startsAt\":\"x\"}"),
     MEDIC_E_INVALID, "alerts[1].labels: expected an object of strings, got array"},
    {"alert number", WRAP(ALERT ",7"), MEDIC_E_INVALID,
     "alerts[1]: expected an object, got number"},
    {"alert status", WRAP(ALERT "," ALERT ",{\"status\":\"x\"}"), MEDIC_E_INVALID,
     "alerts[2].status: expected \"firing\" or \"resolved\""},
    {"no labels",
     WRAP("{\"status\":\"firing\",\"labels\":{},\"startsAt\":\"2026-01-01T00:00:00Z\"}"),
     MEDIC_E_INVALID, "alerts[0].labels: an alert needs labels"},
    {"receiver number",
     "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\",\"receiver\":1,"
     "\"alerts\":[" ALERT "]}",
     MEDIC_E_INVALID, "receiver: expected a string, got number"},
    {"bad time",
     WRAP("{\"status\":\"firing\",\"labels\":{\"a\":\"b\"},\"startsAt\":\"yesterday\"}"),
     MEDIC_E_INVALID, "alerts[0].startsAt: not an RFC 3339 time"},
    {"february 30",
     WRAP("{\"status\":\"firing\",\"labels\":{\"a\":\"b\"},\"startsAt\":\"2026-02-30T00:00:00Z\"}"),
     MEDIC_E_INVALID, "not an RFC 3339 time"},
    {"truncated alerts negative",
     "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\",\"truncatedAlerts\":-1,"
     "\"alerts\":[" ALERT "]}",
     MEDIC_E_INVALID, "truncatedAlerts: expected a non-negative integer"},
    {"duplicate label",
     WRAP("{\"status\":\"firing\",\"labels\":{\"a\":\"b\",\"a\":\"c\"},\"startsAt\":\"2026-01-"
          "01T00:00:00Z\"}"),
     MEDIC_E_INVALID, "duplicate name 'a'"},
    {"invalid utf-8",
     WRAP("{\"status\":\"firing\",\"labels\":{\"a\":\"\xc3\x28\"},\"startsAt\":\"2026-01-01T00:00:"
          "00Z\"}"),
     MEDIC_E_INVALID, "invalid UTF-8 at line 1, column 93 (byte 92)"},
    {"overlong utf-8", "{\"x\":\"\xc0\xaf\"}", MEDIC_E_INVALID, "invalid UTF-8"},
    {"surrogate utf-8", "{\"x\":\"\xed\xa0\x80\"}", MEDIC_E_INVALID, "invalid UTF-8"},
};

static void test_bad_payloads(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        struct medic_notification n;
        struct medic_error err = {0};
        int rc = parse_text(c->body, &n, &err);
        if (rc != c->code || !strstr(err.msg, c->message_part))
            fail_msg("%s: rc %d, message '%s' (wanted %d with '%s')", c->name, rc, err.msg, c->code,
                     c->message_part);
        medic_notification_release(&n);
    }
}

static char *repeat(const char *unit, size_t times, const char *head, const char *tail)
{
    size_t ulen = strlen(unit);
    char *s = malloc(strlen(head) + ulen * times + strlen(tail) + 1);
    strcpy(s, head);
    char *p = s + strlen(head);
    for (size_t i = 0; i < times; i++, p += ulen)
        memcpy(p, unit, ulen);
    strcpy(p, tail);
    return s;
}

static void test_nesting_deeper_than_64(void **state)
{
    (void)state;
    struct medic_notification n;
    struct medic_error err = {0};
    char *deep = repeat("[", 65, "{\"version\":\"4\",\"x\":", "");
    assert_int_equal(parse_text(deep, &n, &err), MEDIC_E_LIMIT);
    assert_non_null(strstr(err.msg, "nested deeper than 64"));
    medic_notification_release(&n);
    free(deep);
    /* 63 levels under the root is fine for the depth check (then rejected
     * for what it is: not a valid payload) */
    char *ok = repeat("[", 63, "{\"x\":", "");
    assert_int_equal(parse_text(ok, &n, &err), MEDIC_E_INVALID);
    assert_null(strstr(err.msg, "nested"));
    medic_notification_release(&n);
    free(ok);
}

static void test_caps(void **state)
{
    (void)state;
    struct medic_notification n;
    struct medic_error err = {0};
    /* more alerts than the cap */
    struct receiver_limits saved = limits;
    limits.max_alerts = 3;
    char *many = repeat(ALERT ",", 4,
                        "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\",\"alerts\":[",
                        ALERT "]}");
    assert_int_equal(parse_text(many, &n, &err), MEDIC_E_LIMIT);
    assert_non_null(strstr(err.msg, "alerts: 5 alerts, over the limit of 3"));
    medic_notification_release(&n);
    free(many);
    limits = saved;
    /* an oversized label value */
    char *big = repeat("x", 5000,
                       "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"firing\","
                       "\"alerts\":[{\"status\":\"firing\",\"labels\":{\"a\":\"",
                       "\"},\"startsAt\":\"2026-01-01T00:00:00Z\"}]}");
    assert_int_equal(parse_text(big, &n, &err), MEDIC_E_LIMIT);
    assert_non_null(strstr(err.msg, "alerts[0].labels.a: 5000 bytes, over the limit of 4096"));
    medic_notification_release(&n);
    free(big);
    /* too many labels */
    char labels[4096] = "";
    for (int i = 0; i < 65; i++)
        snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels), "%s\"l%d\":\"v\"",
                 i ? "," : "", i);
    char body[8192];
    snprintf(body, sizeof(body),
             WRAP("{\"status\":\"firing\",\"labels\":{%s},\"startsAt\":\"2026-01-01T00:00:00Z\"}"),
             labels);
    assert_int_equal(parse_text(body, &n, &err), MEDIC_E_LIMIT);
    assert_non_null(strstr(err.msg, "65 entries, over the limit of 64"));
    medic_notification_release(&n);
    /* a body over the byte cap */
    limits.max_body_bytes = 16;
    assert_int_equal(parse_text(WRAP(ALERT), &n, &err), MEDIC_E_LIMIT);
    medic_notification_release(&n);
    limits = saved;
}

static void test_unknown_fields_ignored_and_times(void **state)
{
    (void)state;
    struct medic_notification n;
    struct medic_error err = {0};
    const char *text =
        "{\"version\":\"4\",\"groupKey\":\"g\",\"status\":\"resolved\",\"notification_reason\":"
        "\"x\",\"routeLabels\":{\"a\":1},\"alerts\":[{\"status\":\"resolved\",\"labels\":{\"a\":"
        "\"b\"},\"startsAt\":\"2026-11-22T09:54:16.5+02:00\",\"endsAt\":"
        "\"2026-11-22T07:55:00.000000001Z\",\"extra\":[1,2]}]}";
    if (parse_text(text, &n, &err))
        fail_msg("%s", err.msg);
    int64_t want;
    assert_int_equal(medic_time_parse_rfc3339("2026-11-22T07:54:16.5Z", 22, &want), 0);
    assert_true(n.alerts[0].starts_at == want);
    assert_true(n.alerts[0].ends_at % MEDIC_NS_PER_SEC == 1);
    medic_notification_release(&n);
}

int main(void)
{
    receiver_limits_default(&limits);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_payloads_parse),
        cmocka_unit_test(test_multi_alert_fields),
        cmocka_unit_test(test_partially_resolved),
        cmocka_unit_test(test_fingerprint_computed_like_prometheus),
        cmocka_unit_test(test_ha_copies_share_dedupe_key_only_with_same_times),
        cmocka_unit_test(test_bad_payloads),
        cmocka_unit_test(test_nesting_deeper_than_64),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_unknown_fields_ignored_and_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

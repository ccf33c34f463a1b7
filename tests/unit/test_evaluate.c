/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine fed from a configuration, as medic serve runs it: an
 * alert the engine cannot fully decide (its decisions' cap reached, the
 * same path as running out of memory) gets a decision with verdict error
 * that says so; no alert is dropped silently. */
#include "config.h"
#include "engine_evaluate.h"
#include "engine_requests.h"
#include "page.h"
#include "sha256.h"
#include "timeutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void test_undecided_alert_is_recorded(void **state)
{
    (void)state;
    static const char text[] = "policies:\n"
                               "  - name: drain-on-xid\n"
                               "    match: '{alertname=\"GPUXidError\"}'\n"
                               "    steps: [ { action: drain } ]\n";
    struct yaml_tree tree;
    struct medic_error err = {0};
    struct medic_config config;
    assert_int_equal(yaml_tree_parse("t.yaml", text, sizeof(text) - 1, &tree, &err), 0);
    if (medic_config_from_tree("t.yaml", tree.root, NULL, &config, &err))
        fail_msg("%s", err.msg);
    yaml_tree_release(&tree);
    struct policy_context ctx;
    engine_context_from_config(&config, &ctx);
    struct policy_state *st = policy_state_new();
    assert_non_null(st);

    struct medic_alert alerts[3];
    struct medic_label labels[3][2];
    static const char *const nodes[] = {"gpu-node-01", "gpu-node-02", "gpu-node-03"};
    static const char *const fingerprints[] = {"f1", "f2", "f3"};
    memset(alerts, 0, sizeof(alerts));
    for (int i = 0; i < 3; i++) {
        labels[i][0] = (struct medic_label){"alertname", "GPUXidError"};
        labels[i][1] = (struct medic_label){"instance", nodes[i]};
        alerts[i].status = MEDIC_STATUS_FIRING;
        alerts[i].fingerprint = fingerprints[i];
        alerts[i].labels = (struct medic_labels){labels[i], 2};
        alerts[i].starts_at = MEDIC_TIME_UNSET;
    }
    struct medic_notification n = {0};
    n.alerts = alerts;
    n.alert_count = 3;

    struct policy_decisions out;
    policy_decisions_init(&out);
    out.limit = 1;
    int64_t now = 1767225600 * MEDIC_NS_PER_SEC;
    assert_int_equal(engine_evaluate_notification(&ctx, st, &n, 0, NULL, NULL, NAN, now, &out), 0);
    assert_int_equal(out.count, 3); /* one decided, two recorded as undecided */
    assert_int_equal(out.items[0].verdict, VERDICT_SUPPRESSED); /* no inventory */
    assert_string_equal(out.items[0].node, "gpu-node-01");
    for (int i = 1; i < 3; i++) {
        const struct policy_decision *d = &out.items[i];
        assert_int_equal(d->verdict, VERDICT_ERROR);
        assert_string_equal(d->node, nodes[i]);
        assert_string_equal(d->fingerprint, fingerprints[i]);
        assert_string_equal(d->alertname, "GPUXidError");
        assert_non_null(strstr(d->reason, "over the cap of decisions in one round"));
        assert_non_null(strstr(d->reason, "check node"));
    }
    assert_string_equal(policy_verdict_name(VERDICT_ERROR), "error");
    policy_decisions_release(&out);
    policy_state_free(st);
    medic_config_release(&config);
}

/* A person's request bodies: the contract's {"approve": bool}, the forms'
 * {"decision": ...}; a pause's until must end it some time from now and
 * within 30 days, and says which bound a far date breaks. */
static void test_request_bodies(void **state)
{
    (void)state;
    struct engine_answer a;
    struct engine_pause p;
    char why[300];
    int64_t now = INT64_C(1795334400) * MEDIC_NS_PER_SEC;
#define ANSWER(body) engine_parse_answer(body, strlen(body), &a, why, sizeof(why))
#define PAUSE(body) engine_parse_pause(body, strlen(body), 1, now, &p, why, sizeof(why))
    assert_int_equal(ANSWER("{\"approve\": true, \"reason\": \"ok to drain\"}"), 0);
    assert_int_equal(a.approve, 1);
    assert_string_equal(a.reason, "ok to drain");
    assert_int_equal(ANSWER("{\"approve\": false, \"reason\": \"vendor on the phone\"}"), 0);
    assert_int_equal(a.approve, 0);
    assert_int_equal(ANSWER("{\"approve\": false}"), MEDIC_E_INVALID); /* a denial says why */
    assert_int_equal(ANSWER("{\"decision\": \"approve\"}"), 0);
    assert_int_equal(a.approve, 1);
    assert_int_equal(ANSWER("{\"approve\": \"yes\"}"), MEDIC_E_INVALID);
    assert_int_equal(ANSWER("{\"approve\": true, \"decision\": \"deny\"}"), MEDIC_E_INVALID);
    assert_int_equal(PAUSE("{\"reason\": \"r\", \"until\": \"2h\"}"), 0);
    assert_true(p.until == now + 2 * 3600 * MEDIC_NS_PER_SEC);
    assert_int_equal(PAUSE("{\"reason\": \"r\"}"), 0);
    assert_true(p.until == MEDIC_TIME_UNSET); /* until unpaused, as asked */
    assert_int_equal(PAUSE("{\"reason\": \"r\", \"until\": \"0s\"}"), MEDIC_E_INVALID);
    assert_non_null(strstr(why, "above zero"));
    assert_int_equal(PAUSE("{\"reason\": \"r\", \"until\": \"0001-01-01T00:00:00Z\"}"),
                     MEDIC_E_INVALID);
    assert_int_equal(PAUSE("{\"reason\": \"r\", \"until\": \"9999-12-31T23:59:59Z\"}"),
                     MEDIC_E_INVALID);
    assert_non_null(strstr(why, "at most 30 days ahead"));
    assert_int_equal(PAUSE("{\"reason\": \"r\", \"until\": \"31d\"}"), MEDIC_E_INVALID);
    assert_non_null(strstr(why, "at most 30 days ahead"));
#undef ANSWER
#undef PAUSE
    /* the forms' anti-forgery token: bound to the credential and the path,
     * keyed by the daemon's own secret, good for one to two hours */
    char token[33];
    int64_t hour = 3600 * MEDIC_NS_PER_SEC;
    page_form_token("Bearer alice-token", "/approvals/7", now, token);
    assert_int_equal(strlen(token), 32);
    assert_true(page_form_token_valid("Bearer alice-token", "/approvals/7", token, now));
    assert_true(page_form_token_valid("Bearer alice-token", "/approvals/7", token, now + hour));
    assert_false(
        page_form_token_valid("Bearer alice-token", "/approvals/7", token, now + 2 * hour + 1));
    assert_false(page_form_token_valid("Bearer bob-token", "/approvals/7", token, now));
    assert_false(page_form_token_valid("Bearer alice-token", "/approvals/8", token, now));
    assert_false(page_form_token_valid("Bearer alice-token", "/approvals/7", "", now));
    /* with no secret, the token was SHA-256 of the header and the path, and
     * anyone who saw it could try passwords offline: it is not that */
    struct medic_sha256 *h = medic_sha256_new();
    char bare[MEDIC_SHA256_HEX_LEN + 1];
    medic_sha256_field(h, "medic on-call page form");
    medic_sha256_field(h, "Bearer alice-token");
    medic_sha256_field(h, "/approvals/7");
    medic_sha256_finish(h, bare);
    assert_memory_not_equal(bare, token, 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_undecided_alert_is_recorded),
        cmocka_unit_test(test_request_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

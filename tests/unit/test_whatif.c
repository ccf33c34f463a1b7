/* SPDX-License-Identifier: Apache-2.0 */
/* The what-if: its trace and mapping parsers, the guard a reason names,
 * and a small trace played through a configuration whose every fault has
 * a known fate. */
#include "whatif.h"
#include "timeutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define DAY (86400 * MEDIC_NS_PER_SEC)

static const char trace_text[] =
    "[{\"node_id\":\"b\",\"event_time\":0.5,\"event_type\":\"fault_start\","
    "\"fault_type\":{\"Level\":\"Hardware Failure\",\"Class\":\"GPU\",\"Desc\":\"DBE\"}},"
    "{\"node_id\":\"a\",\"event_time\":0.25,\"event_type\":\"fault_start\","
    "\"fault_type\":{\"Level\":\"Hardware Failure\",\"Class\":\"GPU\",\"Desc\":\"DBE\"}},"
    "{\"node_id\":\"c\",\"event_time\":0.5,\"event_type\":\"fault_end\","
    "\"fault_type\":{\"Level\":\"Other Failure\",\"Class\":\"Test\",\"Desc\":\"x\"}}]";

static void test_trace_sorted_with_nodes_in_order_seen(void **state)
{
    (void)state;
    struct whatif_trace t;
    struct medic_error err = {0};
    assert_int_equal(whatif_trace_parse(trace_text, strlen(trace_text), &t, &err), 0);
    assert_int_equal(t.count, 3);
    assert_int_equal(t.node_count, 3);
    assert_string_equal(t.nodes[0], "b"); /* the file's order, not the time's */
    assert_string_equal(t.nodes[1], "a");
    /* by time, the file's order between equal times */
    assert_int_equal(t.events[0].at, DAY / 4);
    assert_int_equal(t.events[0].node, 1);
    assert_int_equal(t.events[1].node, 0);
    assert_int_equal(t.events[2].node, 2);
    assert_false(t.events[2].start);
    assert_string_equal(t.events[2].class_name, "Test");
    assert_int_equal(t.span, DAY / 2);
    whatif_trace_release(&t);
}

static void expect_trace_error(const char *text, const char *says)
{
    struct whatif_trace t;
    struct medic_error err = {0};
    assert_int_not_equal(whatif_trace_parse(text, strlen(text), &t, &err), 0);
    if (!strstr(err.msg, says))
        fail_msg("'%s' does not say '%s'", err.msg, says);
    assert_int_equal(t.count, 0);
}

static void test_trace_errors_name_the_event(void **state)
{
    (void)state;
    expect_trace_error("{}", "not a JSON array");
    expect_trace_error("[1,", "not a JSON array");
    expect_trace_error("[{\"node_id\":\"a\",\"event_time\":-1}]", "event 0: \"event_time\"");
    expect_trace_error("[{\"node_id\":\"a\",\"event_time\":1e300}]", "event 0: \"event_time\"");
    expect_trace_error("[{\"node_id\":\"\"}]", "event 0: \"node_id\"");
    const char *second = "[{\"node_id\":\"a\",\"event_time\":1,\"event_type\":\"fault_end\","
                         "\"fault_type\":{\"Level\":\"L\",\"Class\":\"C\",\"Desc\":\"D\"}},"
                         "{\"node_id\":\"a\",\"event_time\":1,\"event_type\":\"start\"}]";
    expect_trace_error(second, "event 1: \"event_type\" must be fault_start or fault_end");
    const char *no_desc = "[{\"node_id\":\"a\",\"event_time\":1,\"event_type\":\"fault_end\","
                          "\"fault_type\":{\"Level\":\"L\",\"Class\":\"C\"}}]";
    expect_trace_error(no_desc, "event 0: \"Desc\"");
    char *long_id = malloc(400);
    memset(long_id, 'x', 399);
    long_id[399] = '\0';
    char text[600];
    snprintf(text, sizeof(text), "[{\"node_id\":\"%s\"}]", long_id);
    expect_trace_error(text, "\"node_id\" is over 256 bytes");
    free(long_id);
}

static const char mapping_text[] =
    "group_wait: 10s\n"
    "rules:\n"
    "  - { desc: DBE, alertname: GPUDoubleBitECC, labels: { gpu: '0' } }\n"
    "  - { level: Hardware Failure, alertname: NodeHardwareFault }\n"
    "  - { alertname: NodeFault }\n";

static void test_mapping_first_rule_takes(void **state)
{
    (void)state;
    struct whatif_mapping m;
    struct medic_error err = {0};
    assert_int_equal(whatif_mapping_parse("m.yaml", mapping_text, strlen(mapping_text), &m, &err),
                     0);
    assert_int_equal(m.group_wait, 10 * MEDIC_NS_PER_SEC);
    assert_int_equal(m.repeat_interval, 4 * 3600 * MEDIC_NS_PER_SEC); /* Alertmanager's */
    assert_null(m.node_label);
    assert_string_equal(whatif_mapping_find(&m, "Hardware Failure", "GPU", "DBE")->alertname,
                        "GPUDoubleBitECC");
    assert_string_equal(whatif_mapping_find(&m, "Hardware Failure", "Fan", "Slow")->alertname,
                        "NodeHardwareFault");
    assert_string_equal(whatif_mapping_find(&m, "Other", "x", "y")->alertname, "NodeFault");
    assert_int_equal(m.rules[0].label_count, 1);
    assert_string_equal(m.rules[0].label_values[0], "0");
    whatif_mapping_release(&m);
}

static void expect_mapping_error(const char *text, const char *says)
{
    struct whatif_mapping m;
    struct medic_error err = {0};
    assert_int_not_equal(whatif_mapping_parse("m.yaml", text, strlen(text), &m, &err), 0);
    if (!strstr(err.msg, says))
        fail_msg("'%s' does not say '%s'", err.msg, says);
}

static void test_mapping_errors_say_where(void **state)
{
    (void)state;
    expect_mapping_error("", "it needs rules");
    expect_mapping_error("rules: []\n", "rules: 1 to 1000 rules");
    expect_mapping_error("rule: []\n", "m.yaml:1:1: unknown key 'rule'");
    expect_mapping_error("rules:\n  - { desc: x }\n", "m.yaml:2:5: a rule needs an alertname");
    expect_mapping_error("rules:\n  - { alertname: A, labels: { alertname: B } }\n",
                         "'alertname' is not a label name a rule may set");
    expect_mapping_error("rules:\n  - { alertname: A, labels: { 'a-b': c } }\n",
                         "'a-b' is not a label name");
    expect_mapping_error("repeat_interval: 5s\nrules: [ { alertname: A } ]\n",
                         "repeat_interval: at least 1m");
    expect_mapping_error("rules:\n  - { alertname: A, severity: x }\n",
                         "m.yaml:2:21: unknown key 'severity' in a rule");
}

static void test_guard_of_reason(void **state)
{
    (void)state;
    assert_int_equal(policy_guard_of("fleet cap: 2 nodes already disrupted by repairs in flight "
                                     "(max_disruptive_in_flight 2)"),
                     POLICY_GUARD_FLEET_CAP);
    assert_int_equal(policy_guard_of("held: group cap: 1 of the 16 nodes of rack=r01 already "
                                     "disrupted; step 1 is decided again when that clears"),
                     POLICY_GUARD_GROUP_CAP);
    /* a stopped ladder names the guard that stopped it */
    assert_int_equal(policy_guard_of("the ladder stopped: step 1 (drain) was suppressed: "
                                     "cooldown: policy p acted on node 'n' 1h ago (cooldown 6h)"),
                     POLICY_GUARD_COOLDOWN);
    assert_int_equal(policy_guard_of("node 'n' is in a maintenance window until x"),
                     POLICY_GUARD_MAINTENANCE);
    assert_int_equal(policy_guard_of("node 'n' is in a Slurm maintenance reservation"),
                     POLICY_GUARD_SLURM_MAINTENANCE);
    assert_int_equal(policy_guard_of("the alert started 2h ago, older than max_alert_age 1h"),
                     POLICY_GUARD_STALE);
    assert_int_equal(policy_guard_of("something else"), POLICY_GUARD_OTHER);
    assert_string_equal(policy_guard_name(POLICY_GUARD_FLEET_CAP), "fleet_cap");
}

/* Writes text to dir/name. */
static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The configuration text in dir/medic.yaml, loaded. */
static void load(const char *dir, const char *text, struct medic_config *config)
{
    char path[512];
    struct medic_error err = {0};
    put(dir, "medic.yaml", text);
    snprintf(path, sizeof(path), "%s/medic.yaml", dir);
    if (medic_config_load(path, config, &err))
        fail_msg("%s", err.msg);
}

static void remove_dir(const char *dir)
{
    char command[512];
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    assert_int_equal(system(command), 0);
}

static void event(char *out, size_t size, const char *node, double day, int start, const char *desc)
{
    size_t at = strlen(out);
    snprintf(out + at, size - at,
             "%s{\"node_id\":\"%s\",\"event_time\":%.9f,\"event_type\":\"%s\","
             "\"fault_type\":{\"Level\":\"Hardware Failure\",\"Class\":\"GPU\",\"Desc\":\"%s\"}}",
             at > 1 ? "," : "", node, day, start ? "fault_start" : "fault_end", desc);
}

/* Four nodes, one in flight at a time: n1's fault is acted on at its first
 * notification; n2's, a minute later, is held by the cap until its alert
 * is stale; n3's has no policy; n4's is over within group_wait. */
static void test_play_small_trace(void **state)
{
    (void)state;
    char dir[] = "/tmp/medic-whatif-XXXXXX";
    assert_non_null(mkdtemp(dir));
    put(dir, "inventory.yaml", "nodes: [ {name: n1}, {name: n2}, {name: n3}, {name: n4} ]\n");
    struct medic_config config;
    struct medic_error err = {0};
    load(dir,
         "mode: dry-run\n"
         "audit: { path: /nonexistent/medic.db }\n"
         "inventory: { file: inventory.yaml, node_labels: [instance] }\n"
         "safety: { max_disruptive_in_flight: 1, max_disrupted_fraction: 1 }\n"
         "policies:\n"
         "  - name: dbe\n"
         "    match: '{alertname=\"GPUDoubleBitECC\"}'\n"
         "    steps: [ { action: drain, reason: '{{ $labels.fault }}' } ]\n"
         "    on_resolved: [ { action: resume } ]\n",
         &config);
    char text[4096] = "[";
    double min = 1.0 / 1440;
    event(text, sizeof(text), "n1", 0, 1, "DBE");
    event(text, sizeof(text), "n2", min, 1, "DBE");
    event(text, sizeof(text), "n3", 2 * min, 1, "Fan");
    event(text, sizeof(text), "n4", 3 * min, 1, "DBE");
    event(text, sizeof(text), "n4", 3 * min + min / 6, 0, "DBE");
    event(text, sizeof(text), "n1", 1, 0, "DBE");
    event(text, sizeof(text), "n2", 2, 0, "DBE");
    strcat(text, "]");
    struct whatif_trace trace;
    assert_int_equal(whatif_trace_parse(text, strlen(text), &trace, &err), 0);
    const char *m = "rules:\n"
                    "  - { desc: DBE, alertname: GPUDoubleBitECC }\n"
                    "  - { alertname: NodeFault }\n";
    struct whatif_mapping map;
    assert_int_equal(whatif_mapping_parse("m.yaml", m, strlen(m), &map, &err), 0);
    struct whatif_options opt = {INT64_C(1795334400) * MEDIC_NS_PER_SEC, 60 * MEDIC_NS_PER_SEC, 0};
    struct whatif_report r;
    if (whatif_play(&config, &trace, &map, &opt, NULL, NULL, &r, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(r.faults, 4);
    assert_int_equal(r.all.fate[WHATIF_ACTED], 1);
    assert_int_equal(r.all.fate[WHATIF_HELD], 1);
    assert_int_equal(r.all.held[POLICY_GUARD_FLEET_CAP], 1);
    assert_int_equal(r.all.fate[WHATIF_NO_POLICY], 1);
    assert_int_equal(r.all.fate[WHATIF_UNSENT], 1);
    assert_int_equal(r.all.latency_count, 1);
    assert_int_equal(r.all.latency[0], 30 * MEDIC_NS_PER_SEC); /* Alertmanager's group_wait */
    assert_int_equal(r.actions[MEDIC_ACTION_DRAIN], 1);
    assert_int_equal(r.actions[MEDIC_ACTION_RESUME], 1);
    assert_int_equal(r.disruptions, 1);
    assert_int_equal(r.caps[0].limit, 1);
    assert_int_equal(r.caps[0].peak, 1); /* the cap held: n2 never joined n1 */
    /* the timeline: n1 drained at 30 s, resumed at day 1 */
    assert_int_equal(r.point_count, 2);
    assert_int_equal(r.timeline[0].at, 30 * MEDIC_NS_PER_SEC);
    assert_int_equal(r.timeline[0].disrupted, 1);
    assert_int_equal(r.timeline[1].at, DAY);
    assert_int_equal(r.timeline[1].disrupted, 0);
    struct medic_buf svg;
    medic_buf_init(&svg, 1 << 20);
    assert_int_equal(whatif_chart_svg(&r, &svg), 0);
    assert_non_null(strstr(svg.data, "max_disruptive_in_flight (repairs): 1"));
    medic_buf_release(&svg);
    /* more servers than the inventory has: refused, with what to do */
    map.trace_nodes = 5;
    whatif_report_release(&r);
    assert_int_not_equal(whatif_play(&config, &trace, &map, &opt, NULL, NULL, &r, &err), 0);
    assert_non_null(strstr(err.msg, "the inventory needs a node for each"));
    whatif_mapping_release(&map);
    whatif_trace_release(&trace);
    medic_config_release(&config);
    remove_dir(dir);
}

/* A step that waits for a person: nobody answers it (pending) unless
 * --approve answers each at once (acted). */
static void test_play_approvals(void **state)
{
    (void)state;
    char dir[] = "/tmp/medic-whatif-XXXXXX";
    assert_non_null(mkdtemp(dir));
    put(dir, "inventory.yaml", "nodes: [ {name: n1} ]\n");
    put(dir, "webhook.token", "a-token\n");
    char token[512];
    snprintf(token, sizeof(token), "%s/webhook.token", dir);
    assert_int_equal(chmod(token, 0600), 0);
    /* live: the step waits for a person (in dry-run nothing would) */
    struct medic_config config;
    struct medic_error err = {0};
    load(dir,
         "mode: live\n"
         "auth: { webhook_bearer_token_file: webhook.token }\n"
         "audit: { path: /nonexistent/medic.db }\n"
         "inventory: { file: inventory.yaml, node_labels: [instance] }\n"
         "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
         "safety: { max_disrupted_fraction: 1, storm: { notifier: oncall } }\n"
         "policies:\n"
         "  - name: dbe\n"
         "    match: '{alertname=\"GPUDoubleBitECC\"}'\n"
         "    steps: [ { action: drain, approval: required } ]\n",
         &config);
    char text[1024] = "[";
    event(text, sizeof(text), "n1", 0, 1, "DBE");
    event(text, sizeof(text), "n1", 2, 0, "DBE");
    strcat(text, "]");
    struct whatif_trace trace;
    assert_int_equal(whatif_trace_parse(text, strlen(text), &trace, &err), 0);
    const char *m = "rules: [ { alertname: GPUDoubleBitECC } ]\n";
    struct whatif_mapping map;
    assert_int_equal(whatif_mapping_parse("m.yaml", m, strlen(m), &map, &err), 0);
    for (int approve = 0; approve < 2; approve++) {
        struct whatif_options opt = {INT64_C(1795334400) * MEDIC_NS_PER_SEC, 60 * MEDIC_NS_PER_SEC,
                                     approve};
        struct whatif_report r;
        if (whatif_play(&config, &trace, &map, &opt, NULL, NULL, &r, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(r.faults, 1);
        assert_int_equal(r.all.fate[approve ? WHATIF_ACTED : WHATIF_PENDING], 1);
        assert_int_equal(r.actions[MEDIC_ACTION_DRAIN], (size_t)approve);
        whatif_report_release(&r);
    }
    whatif_mapping_release(&map);
    whatif_trace_release(&trace);
    medic_config_release(&config);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_sorted_with_nodes_in_order_seen),
        cmocka_unit_test(test_trace_errors_name_the_event),
        cmocka_unit_test(test_mapping_first_rule_takes),
        cmocka_unit_test(test_mapping_errors_say_where),
        cmocka_unit_test(test_guard_of_reason),
        cmocka_unit_test(test_play_small_trace),
        cmocka_unit_test(test_play_approvals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

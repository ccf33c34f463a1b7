/* SPDX-License-Identifier: Apache-2.0 */
/* Matchers, templates and policy files: what loads, what is refused and
 * where the error points. */
#include "matcher.h"
#include "policy.h"
#include "template.h"
#include "yaml_tree.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static int matches(const char *matchers, const struct medic_labels *labels)
{
    struct policy_matchers m;
    struct medic_error err = {0};
    int col;
    if (policy_matchers_parse(matchers, strlen(matchers), &m, &col, &err))
        fail_msg("%s: %s", matchers, err.msg);
    int hit = policy_matchers_match(&m, labels);
    policy_matchers_release(&m);
    return hit;
}

static void test_matchers(void **state)
{
    (void)state;
    struct medic_label items[] = {{"alertname", "GPUXidError"}, {"gpu", "3"}, {"xid", "79"}};
    struct medic_labels l = {items, 3};
    assert_true(matches("{alertname=\"GPUXidError\"}", &l));
    assert_true(matches("alertname=GPUXidError, xid=~\"79|48\"", &l));
    assert_false(matches("{xid=~\"7\"}", &l)); /* anchored: 7 does not match 79 */
    assert_true(matches("{xid=~\"7.\"}", &l));
    assert_true(matches("{xid!~\"48|13\", gpu!=\"0\"}", &l));
    assert_false(matches("{xid!=\"79\"}", &l));
    assert_true(matches("{node=\"\"}", &l)); /* a missing label is empty */
    assert_false(matches("{node=~\".+\"}", &l));
    assert_true(matches("{ \"alertname\" = \"GPUXidError\" , }", &l));
    assert_true(matches("{alertname=~\"GPU[A-Z][a-z]+Error\"}", &l));
}

static void expect_matcher_error(const char *text, const char *message, int want_col)
{
    struct policy_matchers m;
    struct medic_error err = {0};
    int col = 0;
    assert_int_equal(policy_matchers_parse(text, strlen(text), &m, &col, &err), MEDIC_E_INVALID);
    if (!strstr(err.msg, message))
        fail_msg("%s: got '%s', wanted '%s'", text, err.msg, message);
    if (want_col)
        assert_int_equal(col, want_col);
}

static void test_matcher_errors(void **state)
{
    (void)state;
    expect_matcher_error("{alertname=\"x\"", "missing '}'", 0);
    expect_matcher_error("{alertname}", "expected =, !=, =~ or !~", 11);
    expect_matcher_error("{=\"x\"}", "expected a label name", 2);
    expect_matcher_error("{a=\"x\" b=\"y\"}", "expected ',' between matchers", 0);
    expect_matcher_error("{a=\"unterminated}", "unterminated quoted value", 0);
    expect_matcher_error("{}", "no matchers", 0);
    expect_matcher_error("{a=~\"(\"}", "is invalid", 0);
    expect_matcher_error("{a=~\"\\\\d+\"}", "RE2 syntax", 0);
    expect_matcher_error("{a=~\"(?i)x\"}", "RE2 syntax", 0);
    expect_matcher_error("{a=~\"x++\"}", "stacks quantifiers", 0);
    expect_matcher_error("{a=~\"x{1000}\"}", "more than 100 times", 0);
}

static void test_regex_class_is_not_a_quantifier(void **state)
{
    (void)state;
    struct medic_label items[] = {{"a", "+*+"}};
    struct medic_labels l = {items, 1};
    assert_true(matches("{a=~\"[+*]+\"}", &l));
}

static void render(const char *tpl, const char *want)
{
    struct policy_template t;
    struct medic_error err = {0};
    int col;
    if (policy_template_parse(tpl, &t, &col, &err))
        fail_msg("%s: %s", tpl, err.msg);
    struct medic_label li[] = {{"gpu", "3"}, {"xid", "79"}};
    struct medic_label ai[] = {{"summary", "fell off the bus"}};
    struct medic_labels labels = {li, 2}, annotations = {ai, 1};
    struct template_vars vars = {&labels, &annotations, 0.934, "gpu-node-07", NULL};
    struct medic_buf b;
    medic_buf_init(&b, 0);
    assert_int_equal(policy_template_render(&t, &vars, &b), 0);
    assert_string_equal(b.data ? b.data : "", want);
    medic_buf_release(&b);
    policy_template_release(&t);
}

static void test_templates(void **state)
{
    (void)state;
    render("Xid {{ $labels.xid }} on GPU {{$labels.gpu}}", "Xid 79 on GPU 3");
    render("{{ $node }}: {{ $annotations.summary }} (risk {{ $risk }})",
           "gpu-node-07: fell off the bus (risk 0.93)");
    render("missing [{{ $labels.nope }}]", "missing []");
    render("$(reboot) `id` {{ $labels.xid }}", "$(reboot) `id` 79"); /* text, never a shell */
    render("", "");
    /* a calibrated risk is small: two significant digits below 0.01 */
    static const struct {
        double risk;
        const char *shown;
    } risks[] = {{0.934, "0.93"},    {0.1, "0.10"},         {0.01, "0.01"},
                 {0.0031, "0.0031"}, {0.000123, "0.00012"}, {0, "0.00"}};
    for (size_t i = 0; i < sizeof(risks) / sizeof(risks[0]); i++) {
        char shown[24];
        medic_risk_format(risks[i].risk, shown, sizeof(shown));
        assert_string_equal(shown, risks[i].shown);
    }
    struct policy_template t;
    struct medic_error err = {0};
    int col = 0;
    assert_int_equal(policy_template_parse("a {{ .Labels.x }}", &t, &col, &err), MEDIC_E_INVALID);
    assert_int_equal(col, 3);
    assert_non_null(strstr(err.msg, "is not one of"));
    assert_int_equal(policy_template_parse("a {{ $labels.x ", &t, &col, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "without '}}'"));
    assert_int_equal(policy_template_parse("{{ $labels.x-y }}", &t, &col, &err), MEDIC_E_INVALID);
}

static int policy_mismatches;

static void expect_policy_error(const char *doc, const char *message)
{
    struct yaml_tree tree;
    struct policy_set set;
    struct medic_error err = {0};
    static const char *const notifiers[] = {"oncall"};
    assert_int_equal(yaml_tree_parse("p.yaml", doc, strlen(doc), &tree, &err), 0);
    int rc = policy_set_parse("p.yaml", yaml_tree_get(tree.root, "policies"),
                              yaml_tree_get(tree.root, "safety"), notifiers, 1, &set, &err);
    yaml_tree_release(&tree);
    if (rc == 0) {
        policy_set_release(&set);
        fail_msg("accepted: %s", doc);
    }
    if (strncmp(err.msg, message, strlen(message)) != 0) {
        print_error("got '%s', wanted '%s'\n", err.msg, message);
        policy_mismatches++;
    }
}

#define P(rest) "policies:\n  - name: p\n    match: '{a=\"b\"}'\n" rest

static void test_policy_errors(void **state)
{
    (void)state;
    expect_policy_error(P(""), "p.yaml:2:5: policy 'p': needs steps");
    expect_policy_error(P("    steps: []\n"), "p.yaml:4:12: steps: expected 1 to 16 steps");
    expect_policy_error(P("    steps: [ { action: reboot } ]\n"),
                        "p.yaml:4:24: action: 'reboot' is not one of");
    expect_policy_error(P("    steps: [ { action: power_limit } ]\n"),
                        "p.yaml:4:14: power_limit: needs watts");
    expect_policy_error(P("    steps: [ { action: power_limit, watts: 9000 } ]\n"),
                        "p.yaml:4:44: watts: 9000 is outside 50..2000");
    expect_policy_error(P("    steps: [ { action: drain, watts: 300 } ]\n"),
                        "p.yaml:4:38: watts: not a parameter of drain");
    expect_policy_error(P("    steps: [ { action: notify, notifier: pager } ]\n"),
                        "p.yaml:4:42: notifier 'pager' is not defined under notifiers");
    expect_policy_error(P("    steps:\n      - { action: drain }\n      - { after: 5m, action: "
                          "notify, notifier: oncall }\n      - { after: 5m, action: drain }\n"),
                        "p.yaml:7:18: after: step 3 (drain) comes at 5m, no later than step 2 "
                        "(notify) at 5m; each step must come later than the one before: give it "
                        "`after: 6m` or more");
    /* a step with no after: points at it, and says it has none */
    expect_policy_error(
        P("    steps:\n      - { after: 1m, action: notify, notifier: oncall }\n"
          "      - { action: drain }\n"),
        "p.yaml:6:9: after: step 2 (drain) comes at 0s (it has no after:), no later "
        "than step 1 (notify) at 1m");
    expect_policy_error(
        P("    steps: [ { action: drain } ]\n    on_resolved: [ { action: drain } ]\n"),
        "p.yaml:5:30: action: on_resolved takes resume, restore_power_limit or "
        "notify");
    expect_policy_error(P("    steps: [ { action: drain, reason: 'x {{ $labels.a.b }}' } ]\n"),
                        "p.yaml:4:42: reason: template");
    expect_policy_error(P("    when: { risk_at_least: 1.5 }\n    steps: [ { action: drain } ]\n"),
                        "p.yaml:4:28: risk_at_least: 1.5 is outside 0..1");
    expect_policy_error(P("    cooldown: soon\n    steps: [ { action: drain } ]\n"),
                        "p.yaml:4:15: cooldown: 'soon' is not a duration");
    expect_policy_error(P("    stepz: [ { action: drain } ]\n"),
                        "p.yaml:4:5: unknown key 'stepz' in a policy");
    expect_policy_error("policies:\n  - name: p\n    match: '{a=~\"x++\"}'\n    steps: [ { action: "
                        "drain } ]\n",
                        "p.yaml:3:17: matcher: the regex of 'a' stacks quantifiers");
    expect_policy_error(P("    steps: [ { action: drain } ]\n  - name: p\n    match: '{a=\"c\"}'\n"
                          "    steps: [ { action: drain } ]\n"),
                        "p.yaml:5:11: name: policy 'p' is defined twice (first at line 2)");
    expect_policy_error("safety: { max_disrupted_fraction: 2 }\n",
                        "p.yaml:1:35: max_disrupted_fraction: 2 is outside 0..1");
    expect_policy_error("safety: { storm: { notifier: nobody } }\n",
                        "p.yaml:1:30: notifier 'nobody' is not defined");
    expect_policy_error("safety:\n  maintenance:\n    - { nodes: '~gpu-.*', start: "
                        "'2026-01-02T00:00:00Z', end: '2026-01-01T00:00:00Z' }\n",
                        "p.yaml:3:63: end: must come after start");
    /* nodes is a Slurm hostlist; a regex only as ~REGEX */
    expect_policy_error("safety:\n  maintenance:\n    - { nodes: 'gpu-.*', start: "
                        "'2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' }\n",
                        "p.yaml:3:16: nodes: a node name holds letters, digits, '-', '_', '.' "
                        "and ranges in brackets; for a regular expression write ~REGEX");
    expect_policy_error("safety:\n  maintenance:\n    - { nodes: 'gpu-[0001-100]', start: "
                        "'2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z' }\n",
                        "p.yaml:3:16: nodes: a zero-padded range has bounds of one width");
    assert_int_equal(policy_mismatches, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matchers),
        cmocka_unit_test(test_matcher_errors),
        cmocka_unit_test(test_regex_class_is_not_a_quantifier),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_policy_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration file: defaults, typed values, FILE:LINE:COL errors,
 * secret files, and the rule that live mode needs webhook auth. */
#include "audit.h"
#include "config.h"
#include "sha256.h"
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

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/medic-test-config-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
    static char path[4][160];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 160, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

static void expect_error(const char *text, const char *message)
{
    const char *path = write_file("medic.yaml", text, 0644);
    struct medic_config c;
    struct medic_error err = {0};
    assert_int_not_equal(medic_config_load(path, &c, &err), 0);
    char want[512];
    snprintf(want, sizeof(want), "%s:%s", path, message);
    if (strncmp(err.msg, want, strlen(want)) != 0)
        fail_msg("got '%s', wanted it to start with '%s'", err.msg, want);
}

static void test_defaults(void **state)
{
    (void)state;
    struct medic_config c;
    assert_int_equal(medic_config_defaults(&c), 0);
    assert_string_equal(c.listen, "127.0.0.1:9799");
    assert_string_equal(c.audit_path, "./medic.db");
    assert_int_equal(c.mode, MEDIC_MODE_DRY_RUN);
    assert_int_equal(c.node_label_count, 3);
    assert_string_equal(c.node_labels[0], "node");
    /* the directive table's defaults, applied; the libraries' own
     * defaults (for their users without a configuration) agree */
    assert_int_equal(c.audit_busy_timeout, AUDIT_DEFAULT_BUSY_TIMEOUT_MS * MEDIC_NS_PER_MS);
    assert_int_equal(c.audit_max_pending, AUDIT_DEFAULT_MAX_PENDING);
    struct receiver_limits lim;
    receiver_limits_default(&lim);
    assert_memory_equal(&c.limits, &lim, sizeof(lim));
    assert_int_equal(c.ha_lease, 5 * MEDIC_NS_PER_SEC);
    assert_int_equal(c.request_timeout, 10 * MEDIC_NS_PER_SEC);
    assert_int_equal(c.max_connections, 512);
    assert_int_equal(c.fleet_interval, 30 * MEDIC_NS_PER_SEC);
    assert_string_equal(c.scontrol, "scontrol");
    assert_null(c.ha_replica); /* computed at start: HOSTNAME-PID */
    assert_int_equal(c.mode_line, 0);
    medic_config_release(&c);
    /* an empty file is the defaults too */
    const char *path = write_file("empty.yaml", "", 0644);
    struct medic_error err = {0};
    assert_int_equal(medic_config_load(path, &c, &err), 0);
    assert_int_equal(c.mode, MEDIC_MODE_DRY_RUN);
    medic_config_release(&c);
}

static void test_full_config(void **state)
{
    (void)state;
    const char *token = write_file("webhook.token", "s3cret\n", 0600);
    const char *pw = write_file("admin.pw", "adminpw", 0400);
    char text[2048];
    snprintf(text, sizeof(text),
             "listen: 0.0.0.0:9800\n"
             "mode: live\n"
             "audit: { path: /var/lib/medic/medic.db, busy_timeout: 250ms, max_pending: 10 }\n"
             "auth:\n"
             "  webhook_bearer_token_file: %s\n"
             "  admin_basic_auth: { username: ops, password_file: %s }\n"
             "limits: { max_body_bytes: 2MiB, max_alerts: 50 }\n"
             "inventory: { node_labels: [Hostname, instance] }\n"
             "prometheus: { url: http://127.0.0.1:9090, timeout: 2s }\n"
             "policies: []\n",
             token, pw);
    const char *path = write_file("medic.yaml", text, 0644);
    struct medic_config c;
    struct medic_error err = {0};
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(c.listen, "0.0.0.0:9800");
    assert_int_equal(c.mode, MEDIC_MODE_LIVE);
    assert_true(c.audit_busy_timeout == 250 * MEDIC_NS_PER_MS);
    assert_int_equal(c.audit_max_pending, 10);
    assert_string_equal(c.webhook_auth.bearer_token, "s3cret");
    assert_string_equal(c.admin_auth.basic_username, "ops");
    assert_string_equal(c.admin_auth.basic_password, "adminpw");
    assert_int_equal(c.limits.max_body_bytes, 2 << 20);
    assert_int_equal(c.limits.max_alerts, 50);
    assert_int_equal(c.node_label_count, 2);
    assert_string_equal(c.node_labels[1], "instance");
    assert_int_equal(strlen(c.hash), 64);
    medic_config_release(&c);
}

static void test_errors_have_positions(void **state)
{
    (void)state;
    expect_error("listen: 127.0.0.1\n", "1:9: listen: expected HOST:PORT");
    expect_error("mode: yolo\n", "1:7: mode: expected 'dry-run', 'approve' or 'live'");
    expect_error("listen: a:1\nlisen: b:2\n", "2:1: unknown key 'lisen'");
    expect_error("audit:\n  path: x\n  busy_timeout: soon\n",
                 "3:17: busy_timeout: 'soon' is not a duration");
    expect_error("limits: { max_alerts: 0 }\n", "1:23: max_alerts: 0 is outside 1..100000");
    expect_error("limits: { max_alerts: many }\n", "1:23: max_alerts: 'many' is not a number");
    expect_error("audit: [1]\n", "1:8: audit: expected a mapping");
    expect_error("inventory: { node_labels: [] }\n",
                 "1:27: node_labels: expected a non-empty list");
    expect_error("tls: { cert_file: /nonexistent }\n",
                 "1:6: tls: needs both cert_file and key_file");
    expect_error("auth: { webhook_bearer_token_file: /nonexistent/token }\n",
                 "1:36: webhook_bearer_token_file: cannot read '/nonexistent/token'");
    expect_error("listen: [a\n", "2:1: invalid YAML");
}

#define LSTM_DIR MEDIC_FIXTURES "/../data/lstm/"

static void test_model_config(void **state)
{
    (void)state;
    expect_error("model: { path: " LSTM_DIR "dcgm-d8-w30.model.safetensors }\n",
                 "1:8: model: needs prometheus.url");
    expect_error("model: { path: " LSTM_DIR "v1_d8_h64_t60_b4.model.safetensors }\n"
                 "prometheus: { url: http://127.0.0.1:9090 }\n",
                 "1:16: path: the model file describes no features");
    expect_error("model: { path: /nonexistent.safetensors }\n", "1:16: path: ");
    expect_error("prometheus: { url: ftp://x }\n", "1:20: url: expected http:// or https://");
    expect_error("prometheus: { url: http://x, timeout: 5ms }\n",
                 "1:39: timeout: between 10ms and 1m");
    expect_error("model: { fleet_interval: 0s, path: " LSTM_DIR "dcgm-d8-w30.model.safetensors }\n"
                 "prometheus: { url: http://127.0.0.1:9090 }\n",
                 "1:26: fleet_interval: at least 1s, or off");
    const char *path = write_file("model.yaml",
                                  "model: { path: " LSTM_DIR "dcgm-d8-w30.model.safetensors, "
                                  "fleet_interval: 30s }\n"
                                  "prometheus: { url: http://127.0.0.1:9090, timeout: 1500ms }\n",
                                  0644);
    struct medic_config c;
    struct medic_error err = {0};
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(c.model.D, 8);
    assert_int_equal(c.features.count, 8);
    assert_int_equal(c.features.window, 30);
    assert_string_equal(c.features.items[0].name, "gpu_temp");
    assert_int_equal(strlen(c.model.hash), 64);
    assert_string_equal(c.prometheus_url, "http://127.0.0.1:9090");
    assert_int_equal(c.prometheus_timeout, 1500 * MEDIC_NS_PER_MS);
    assert_int_equal(c.fleet_interval, 30 * MEDIC_NS_PER_SEC);
    medic_config_release(&c);

    /* without a path, the built-in model (D=18) with its features */
    path = write_file("builtin.yaml", "prometheus: { url: http://127.0.0.1:9090 }\n", 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_null(c.model_path);
    assert_int_equal(c.model.D, 18);
    assert_int_equal(c.features.count, 18);
    assert_string_equal(c.features.items[17].name, "xid_hardware_held");
    assert_int_equal(c.fleet_interval, 30 * MEDIC_NS_PER_SEC); /* fleet scoring on by default */
    medic_config_release(&c);

    /* a policy that waits for the built-in model's risk is warned about
     * (the model has not met its ship condition); with a model of the
     * site's own, or without the gate, it is not */
    static const char gated[] =
        "policies:\n"
        "  - { name: hot, match: '{a=\"b\"}', cooldown: 1h, when: { risk_at_least: 0.25 },\n"
        "      steps: [ { action: power_limit, watts: 300 } ] }\n"
        "  - { name: shown, match: '{a=\"c\"}', cooldown: 1h,\n"
        "      steps: [ { action: power_limit, watts: 300 } ] }\n";
    static struct medic_config_warnings w;
    const char *const models[] = {"",
                                  "model: { path: " LSTM_DIR "dcgm-d8-w30.model.safetensors }\n"};
    for (size_t m = 0; m < 2; m++) {
        char text[600];
        snprintf(text, sizeof(text), "%sprometheus: { url: http://127.0.0.1:9090 }\n%s", models[m],
                 gated);
        path = write_file("gated.yaml", text, 0644);
        if (medic_config_load(path, &c, &err))
            fail_msg("%s", err.msg);
        medic_config_warn(&c, &w);
        int hot = 0, shown = 0;
        for (size_t i = 0; i < w.count; i++) {
            hot += strstr(w.items[i], "policy 'hot' acts only at when.risk_at_least 0.25 of the "
                                      "built-in model, which has not been shown") != NULL;
            shown += strstr(w.items[i], "'shown'") != NULL;
        }
        assert_int_equal(hot, m == 0);
        assert_int_equal(shown, 0);
        medic_config_release(&c);
    }
    path = write_file(
        "off.yaml", "prometheus: { url: http://127.0.0.1:9090 }\nmodel: { fleet_interval: off }\n",
        0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(c.fleet_interval, 0);
    medic_config_release(&c);
    /* and in the embedded defaults */
    assert_int_equal(medic_config_defaults(&c), 0);
    assert_int_equal(c.model.D, 18);
    medic_config_release(&c);
}

static void test_live_needs_auth(void **state)
{
    (void)state;
    const char *path = write_file("live.yaml", "listen: 127.0.0.1:1\nmode: live\n", 0644);
    struct medic_config c;
    struct medic_error err = {0};
    char want[512];
    assert_int_equal(medic_config_load(path, &c, &err), 0);                  /* valid... */
    assert_int_equal(medic_config_check_serving(&c, &err), MEDIC_E_INVALID); /* ...not servable */
    snprintf(want, sizeof(want), "%s:2:7: mode: live needs authentication on the webhook", path);
    assert_non_null(strstr(err.msg, want));
    medic_config_release(&c);
    char token[512];
    snprintf(token, sizeof(token), "%s", write_file("t.token", "x", 0600));
    char text[1024];
    snprintf(text, sizeof(text), "mode: live\nauth: { webhook_bearer_token_file: %s }\n", token);
    path = write_file("live2.yaml", text, 0644);
    assert_int_equal(medic_config_load(path, &c, &err), 0);
    assert_int_equal(medic_config_check_serving(&c, &err), 0); /* no policies: nothing to run */
    /* in live mode the read API and admin endpoints fall back to the
     * webhook's credentials; in dry-run they stay open unless set */
    assert_ptr_equal(medic_config_read_auth(&c), &c.webhook_auth);
    assert_ptr_equal(medic_config_admin_auth(&c), &c.webhook_auth);
    c.mode = MEDIC_MODE_DRY_RUN;
    assert_ptr_equal(medic_config_read_auth(&c), &c.read_auth);
    medic_config_release(&c);
    /* live mode with a drain policy and no storm notifier: a storm would
     * hold the drains back and tell nobody */
    snprintf(text, sizeof(text),
             "mode: live\nauth: { webhook_bearer_token_file: %s }\n"
             "policies: [ { name: d, match: '{a=\"b\"}', steps: [ { action: drain } ] } ]\n",
             token);
    path = write_file("live4.yaml", text, 0644);
    assert_int_equal(medic_config_load(path, &c, &err), 0);
    assert_int_equal(medic_config_check_serving(&c, &err), MEDIC_E_INVALID);
    snprintf(want, sizeof(want),
             "%s:1:7: mode: live with disruptive policies needs "
             "safety.storm.notifier",
             path);
    assert_non_null(strstr(err.msg, want));
    medic_config_release(&c);
    snprintf(text, sizeof(text),
             "mode: live\nauth: { webhook_bearer_token_file: %s }\n"
             "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
             "safety: { storm: { max_alerting_nodes: 5, notifier: oncall } }\n"
             "policies: [ { name: d, match: '{a=\"b\"}', steps: [ { action: drain } ] } ]\n",
             token);
    path = write_file("live5.yaml", text, 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(medic_config_check_serving(&c, &err), 0);
    medic_config_release(&c);
    /* a storm breaker written without anyone to tell is a config error */
    path = write_file("storm.yaml", "safety:\n  storm: { max_alerting_nodes: 5 }\n", 0644);
    assert_int_not_equal(medic_config_load(path, &c, &err), 0);
    snprintf(want, sizeof(want), "%s:2:10: storm: needs a notifier", path);
    assert_non_null(strstr(err.msg, want));
    snprintf(text, sizeof(text),
             "mode: live\nauth: { webhook_bearer_token_file: %s }\n"
             "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
             "policies: [ { name: tell, match: '{a=\"b\"}', steps: [ { action: notify, "
             "notifier: oncall } ] } ]\n",
             token);
    path = write_file("live3.yaml", text, 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(medic_config_check_serving(&c, &err), 0); /* notify only: no storm rule */
    medic_config_release(&c);
}

/* The directive table: it reads every key the reference names, refuses
 * what it does not, and check config warns about a dry-run that live mode
 * would refuse. */
static void test_directive_table(void **state)
{
    (void)state;
    struct medic_buf b;
    medic_buf_init(&b, 0);
    assert_int_equal(medic_config_reference(&b), 0);
    static const char *const keys[] = {"`listen`",
                                       "`audit.busy_timeout`",
                                       "`limits.max_alerts`",
                                       "`prometheus.timeout`",
                                       "`engine.tick_interval`",
                                       "`tls.key_file`",
                                       "`auth.admin_basic_auth`"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        assert_non_null(strstr(b.data, keys[i]));
    assert_non_null(strstr(b.data, "(10ms..1h)"));
    medic_buf_release(&b);
    expect_error("audit: { path: x, max_pendin: 3 }\n", "1:19: unknown key 'max_pendin' in audit");
    expect_error("engine: { tick_interval: 2h }\n", "1:26: tick_interval: between 10ms and 1h");
    /* a policy file that cannot be read is named at the line that names it */
    expect_error("policy_files: [ missing-policies.yaml ]\n", "1:17: policy_files: cannot open '");
    expect_error("policy_files: [ /dev/zero ]\n",
                 "1:17: policy_files: '/dev/zero' is not a regular file");
    /* a FIFO named by mistake (no writer) is refused at once, not waited on */
    char fifo[128], ftext[256], fwant[256];
    snprintf(fifo, sizeof(fifo), "%s/named-pipe", dir);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    static const char *const named[][3] = {
        {"policy_files: [ ", " ]\n", "1:17: policy_files"},
        {"credentials_file: ", "\n", "1:19: credentials_file"},
        {"auth: { webhook_bearer_token_file: ", " }\n", "1:36: webhook_bearer_token_file"}};
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        snprintf(ftext, sizeof(ftext), "%s%s%s", named[i][0], fifo, named[i][1]);
        snprintf(fwant, sizeof(fwant), "%s: '%s' is not a regular file", named[i][2], fifo);
        expect_error(ftext, fwant);
    }
    unlink(fifo);
    expect_error("model: { fleet_interval: 10ms }\n", "1:26: fleet_interval: at least 1s, or off");
    const char *path = write_file("warn.yaml",
                                  "policies: [ { name: d, match: '{a=\"b\"}', steps: [ { action: "
                                  "drain } ] } ]\n",
                                  0644);
    struct medic_config c;
    struct medic_error err = {0};
    static struct medic_config_warnings w;
    assert_int_equal(medic_config_load(path, &c, &err), 0);
    assert_int_equal(c.prometheus_timeout, 2 * MEDIC_NS_PER_SEC); /* the table's default */
    medic_config_warn(&c, &w);
    assert_int_equal(w.count, 2);
    assert_non_null(strstr(w.items[0], "safety.storm.notifier"));
    assert_non_null(strstr(w.items[1], "neither a cooldown nor max_actions_per_node"));
    medic_config_release(&c);
    /* what an operator in a hurry writes: a fraction that allows no node of
     * a small fleet, a step due only once the alert is stale */
    path = write_file("warn2.yaml",
                      "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                      "inventory: { nodes: [ { name: n1 }, { name: n2 }, { name: n3 } ] }\n"
                      "safety: { max_alert_age: 1h, alert_expiry: 30m, storm: { "
                      "max_alerting_nodes: 5, notifier: oncall } }\n"
                      "policies:\n  - name: slow\n    match: '{a=\"b\"}'\n    cooldown: 6h\n"
                      "    steps:\n      - { action: notify, notifier: oncall }\n"
                      "      - { after: 90m, action: ipmi_power_cycle }\n",
                      0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    assert_int_equal(w.count, 3);
    assert_non_null(strstr(w.items[0], "max_disrupted_fraction 0.05 of 3 inventory nodes allows "
                                       "no node at all"));
    assert_non_null(strstr(w.items[1], "safety.alert_expiry 30m is not above"));
    char want[256];
    snprintf(want, sizeof(want),
             "%s:10:9: policy 'slow' step 2 (ipmi_power_cycle) comes after "
             "90m",
             path);
    assert_non_null(strstr(w.items[2], want));
    assert_non_null(strstr(w.items[2], "it can never run"));
    medic_config_release(&c);
    /* a maintenance window that covers no inventory node (a typo in its
     * hostlist) is said; a hostlist and a ~REGEX that cover one are not */
    path = write_file("warn3.yaml",
                      "inventory: { nodes: [ { name: gpu-0050 }, { name: gpu-0300 } ] }\n"
                      "safety: { maintenance: [\n"
                      "  { nodes: 'gpu-1[001-100]', start: '2026-01-01T00:00:00Z',"
                      " end: '2026-01-02T00:00:00Z' },\n"
                      "  { nodes: 'gpu-[0001-0100,0200]', start: '2026-01-01T00:00:00Z',"
                      " end: '2026-01-02T00:00:00Z' },\n"
                      "  { nodes: '~gpu-03.*', start: '2026-01-01T00:00:00Z',"
                      " end: '2026-01-02T00:00:00Z' } ] }\n",
                      0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    int uncovered = 0;
    for (size_t i = 0; i < w.count; i++)
        if (strstr(w.items[i], "covers no inventory node")) {
            assert_non_null(strstr(w.items[i], "window 1 (nodes: gpu-1[001-100])"));
            uncovered++;
        }
    assert_int_equal(uncovered, 1);
    medic_config_release(&c);
    /* a BMC and an agent's credentials named with no credentials file to
     * read them from are said */
    path = write_file("warn_secrets.yaml",
                      "inventory: { nodes: [ { name: n1 }, { name: n2, bmc: { address: "
                      "10.0.0.2, credentials: bmc-lab }, agent: { url: 'http://n2:9800', "
                      "credentials: agent-lab } } ] }\n",
                      0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    int bmc_said = 0, agent_said = 0;
    for (size_t i = 0; i < w.count; i++) {
        bmc_said += strstr(w.items[i], "have a bmc (node 'n2' among them) and no "
                                       "credentials_file") != NULL;
        agent_said += strstr(w.items[i], "name agent credentials (node 'n2' among them)") != NULL;
    }
    assert_int_equal(bmc_said, 1);
    assert_int_equal(agent_said, 1);
    medic_config_release(&c);
    /* notification writers asked of an SQLite log are said (one writer
     * writes it); of PostgreSQL they are not; out of bounds, refused */
    path = write_file("warn_writers.yaml", "audit: { path: /tmp/medic.db, writers: 3 }\n", 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(c.audit_writers, 3);
    medic_config_warn(&c, &w);
    int writers_said = 0;
    for (size_t i = 0; i < w.count; i++)
        writers_said +=
            strstr(w.items[i], "audit.writers is 3 but the audit log is SQLite") != NULL;
    assert_int_equal(writers_said, 1);
    medic_config_release(&c);
    path = write_file("warn_writers.yaml",
                      "audit: { url: 'postgresql://medic@127.0.0.1/medic', writers: 3 }\n", 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    for (size_t i = 0; i < w.count; i++)
        assert_null(strstr(w.items[i], "audit.writers"));
    medic_config_release(&c);
    expect_error("audit: { writers: 0 }\n", "1:19: writers: 0 is outside 1..17");
    expect_error("audit: { writers: 18 }\n", "1:19: writers: 18 is outside 1..17");
    /* slurm.conf and scontrol that are not on this host are said; those
     * that are, are not */
    const char *slurm_conf = write_file("slurm.conf", "ClusterName=x\n", 0644);
    char text[600];
    snprintf(text, sizeof(text), "slurm: { conf: %s.gone, scontrol: /nonexistent/scontrol }\n",
             slurm_conf);
    path = write_file("warn_slurm.yaml", text, 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    int conf_said = 0, scontrol_said = 0;
    for (size_t i = 0; i < w.count; i++) {
        conf_said += strstr(w.items[i], ".gone' cannot be read on this host (No such file") != NULL;
        scontrol_said += strstr(w.items[i], "slurm.scontrol '/nonexistent/scontrol' cannot be "
                                            "run on this host") != NULL;
    }
    assert_int_equal(conf_said, 1);
    assert_int_equal(scontrol_said, 1);
    medic_config_release(&c);
    snprintf(text, sizeof(text), "slurm: { conf: %s, scontrol: /bin/true }\n", slurm_conf);
    path = write_file("warn_slurm.yaml", text, 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    for (size_t i = 0; i < w.count; i++)
        assert_null(strstr(w.items[i], "on this host"));
    medic_config_release(&c);
    /* a ladder that power-cycles and then disrupts again without looking
     * at the node, and one that resumes with its health check turned off,
     * are said; a reset-first ladder with a verify is not */
    path = write_file("warn4.yaml",
                      "policies:\n"
                      "  - { name: blind, match: '{a=\"b\"}', cooldown: 1h, steps: [ { action: "
                      "ipmi_power_cycle }, { after: 1m, action: drain } ] }\n"
                      "  - { name: trusting, match: '{a=\"c\"}', cooldown: 1h, "
                      "verify_before_resume: false, steps: [ { action: drain }, { after: 1m, "
                      "action: ipmi_power_cycle } ], on_resolved: [ { action: resume } ] }\n"
                      "  - { name: careful, match: '{a=\"d\"}', cooldown: 1h, steps: [ { action: "
                      "drain }, { after: 1m, action: gpu_reset }, { after: 2m, action: "
                      "ipmi_power_cycle, if_failed: true }, { after: 3m, action: verify } ], "
                      "on_resolved: [ { action: resume } ] }\n",
                      0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    int blind = 0, trusting = 0, careful = 0;
    for (size_t i = 0; i < w.count; i++) {
        blind += strstr(w.items[i], "policy 'blind' step 1 (ipmi_power_cycle) is followed by "
                                    "another disruptive step with no verify") != NULL;
        trusting += strstr(w.items[i], "policy 'trusting' step 2 (ipmi_power_cycle) and a resume "
                                       "with verify_before_resume: false") != NULL;
        careful += strstr(w.items[i], "'careful'") != NULL;
    }
    assert_int_equal(blind, 1);
    assert_int_equal(trusting, 1);
    assert_int_equal(careful, 0);
    medic_config_release(&c);
    /* if_failed needs a step before it whose outcome is awaited */
    expect_error("policies: [ { name: x, match: '{a=\"b\"}', steps: [ { action: notify, "
                 "notifier: n }, { after: 1m, action: drain, if_failed: true } ] } ]\n"
                 "notifiers: { n: { type: webhook, url: 'http://127.0.0.1:9/' } }\n",
                 "1:123: if_failed: the step before must be");
    expect_error("safety: { quarantine: { incidents: 1 } }\n",
                 "1:36: incidents: 1 is outside 2..1000");
    /* what a health check accepts: each key, its errors, and a warning for
     * each loosening */
    expect_error("safety: { health: { recovery_actions: [none, reboot] } }\n",
                 "1:46: recovery_actions: 'reboot' is not one of none, gpu_reset");
    expect_error("safety: { health: { missing_gpus: 65 } }\n",
                 "1:35: missing_gpus: 65 is outside 0..64");
    expect_error("safety: { health: { gpus: 8 } }\n", "1:21: unknown key 'gpus' in health");
    expect_error("safety: { health: { slurm: maybe } }\n",
                 "1:28: slurm: expected true or false, got 'maybe'");
    path = write_file("health.yaml",
                      "safety: { health: { missing_gpus: 1, recovery_actions: [none, drain_p2p],"
                      " allow_pending_remap: true, slurm: false } }\n",
                      0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    const struct medic_health_criteria *h = &c.policies.safety.health;
    assert_int_equal(h->missing_gpus, 1);
    assert_int_equal(h->recovery_ok, (1u << 0) | (1u << medic_recovery_parse("drain_p2p")));
    assert_true(h->remap_pending_ok && !h->retirement_pending_ok && !h->slurm && h->bmc);
    medic_config_warn(&c, &w);
    int loosened = 0;
    for (size_t i = 0; i < w.count; i++)
        loosened += strstr(w.items[i], "safety.health.missing_gpus 1") != NULL ||
                    strstr(w.items[i], "recovery_actions accepts drain_p2p") != NULL ||
                    strstr(w.items[i], "safety.health.slurm: false") != NULL;
    assert_int_equal(loosened, 3);
    medic_config_release(&c);
    /* caps per topology group: what each entry needs, and what check
     * config says of one that caps nothing or starves small groups */
    expect_error("safety: { group_caps: [ { label: rack } ] }\n",
                 "1:25: a group cap: set max_disrupted, max_disrupted_fraction or both");
    expect_error("safety: { group_caps: [ { label: rack, nodes: 'a[1-2]', max_disrupted: 1 } ] }\n",
                 "1:25: a group cap: name its groups by `label: rack`");
    expect_error("safety: { group_caps: [ { nodes: 'gpu-[0001-', max_disrupted: 1 } ] }\n",
                 "1:34: nodes: a '[' without its ']'");
    expect_error("inventory: { nodes: [ { name: a, labels: { 'rack-no': r1 } } ] }\n",
                 "1:55: labels: 'rack-no' is not a label name");
    path =
        write_file("groups.yaml",
                   "inventory: { nodes: [\n"
                   "  { name: gpu-01, labels: { rack: r1 } }, { name: gpu-02, labels: { rack: r1 } "
                   "},\n"
                   "  { name: gpu-03, labels: { rack: r2 } } ] }\n"
                   "safety: { group_caps: [ { label: racks, max_disrupted: 1 },\n"
                   "  { label: rack, max_disrupted_fraction: 0.4 },\n"
                   "  { nodes: 'gpu-0[1-3]', max_disrupted: 1 } ] }\n",
                   0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(c.policies.safety.group_cap_count, 3);
    assert_string_equal(inventory_node_label(&c.inventory.nodes[2], "rack"), "r2");
    assert_null(inventory_node_label(&c.inventory.nodes[2], "pdu"));
    medic_config_warn(&c, &w);
    int typo = 0, starved = 0, others = 0;
    for (size_t i = 0; i < w.count; i++) {
        typo += strstr(w.items[i], "group_caps entry 1 (label: racks) covers no inventory node") !=
                NULL;
        starved += strstr(w.items[i], "group_caps entry 2: max_disrupted_fraction 0.4 allows no "
                                      "node at all in the groups of 3 node(s) (rack=") != NULL;
        others += strstr(w.items[i], "group_caps entry 3") != NULL;
    }
    assert_int_equal(typo, 1);
    assert_int_equal(starved, 1);
    assert_int_equal(others, 0);
    medic_config_release(&c);
    /* an inventory entry named by a hostlist is a node per name, its
     * strings' {{ node }} filled in with each one's name */
    path = write_file("ranges.yaml",
                      "inventory: { nodes: [\n"
                      "  { name: 'gpu-[0001-0003]', aliases: ['{{ node }}.example.org'],\n"
                      "    bmc: { address: '{{ node }}-bmc:623', credentials: bmc }, slurm: { "
                      "node: '{{ node }}' },\n"
                      "    agent: { url: 'http://{{ node }}:9800' }, gpus: 8, labels: { rack: r1 } "
                      "},\n"
                      "  { name: login01 } ] }\n",
                      0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(c.inventory.count, 4);
    const struct inventory_node *n2 = inventory_find(&c.inventory, "gpu-0002.example.org");
    assert_non_null(n2);
    assert_string_equal(n2->name, "gpu-0002");
    assert_string_equal(n2->bmc.address, "gpu-0002-bmc:623");
    assert_string_equal(n2->slurm_node, "gpu-0002");
    assert_string_equal(n2->agent_url, "http://gpu-0002:9800");
    assert_string_equal(inventory_node_label(n2, "rack"), "r1");
    assert_int_equal(n2->gpus, 8);
    assert_string_equal(c.inventory.nodes[3].name, "login01");
    medic_config_release(&c);
    expect_error("inventory: { nodes: [ { name: 'gpu-000[1-2]' }, { name: gpu-0002 } ] }\n",
                 "1:49: 'gpu-0002' names two nodes");
    expect_error("inventory: { nodes: [ { name: 'n[1-200000]' } ] }\n",
                 "1:23: nodes: more than 100000");
    expect_error("inventory: { nodes: [ { name: 'gpu-[0001-' } ] }\n", "1:31: name: a '[' without");
    /* recurring maintenance windows: what every takes, a zone that is not one */
    expect_error("safety: { maintenance: [ { nodes: a, every: 'sundays 02:00-06:00' } ] }\n",
                 "1:45: every: DAYS HH:MM-HH:MM");
    expect_error("safety: { maintenance: [ { nodes: a, every: 'sun 02:00-02:00' } ] }\n",
                 "1:45: every: DAYS HH:MM-HH:MM");
    expect_error("safety: { maintenance: [ { nodes: a, every: 'sun 02:00-06:00',"
                 " timezone: Mars/Olympus } ] }\n",
                 "1:74: timezone: no such time zone");
    expect_error("safety: { maintenance: [ { nodes: a, start: '2026-01-01T00:00:00Z',"
                 " end: '2026-01-02T00:00:00Z', timezone: UTC } ] }\n",
                 "1:108: timezone: for a recurring window");
    /* a notifier's URL may stay secret in the credentials file; without
     * one anywhere the error says where it may go */
    expect_error("notifiers: { oncall: { type: slack } }\n",
                 "1:22: notifier 'oncall': needs a url (here, or as `url:` of its credentials");
    /* the defaults: nothing loosened, nothing said */
    path = write_file("health-default.yaml", "log_level: info\n", 0644);
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    medic_config_warn(&c, &w);
    for (size_t i = 0; i < w.count; i++)
        assert_null(strstr(w.items[i], "safety.health"));
    assert_int_equal(c.policies.safety.health.recovery_ok, 1u);
    medic_config_release(&c);
}

static void test_secret_file_mode(void **state)
{
    (void)state;
    const char *token = write_file("open.token", "tok", 0644);
    char text[512];
    snprintf(text, sizeof(text), "auth: { webhook_bearer_token_file: %s }\n", token);
    const char *path = write_file("medic.yaml", text, 0644);
    struct medic_config c;
    struct medic_error err = {0};
    assert_int_not_equal(medic_config_load(path, &c, &err), 0);
    assert_non_null(strstr(err.msg, "readable by group or others (mode 644); chmod 600 it"));
    /* the message names the file, never the secret */
    assert_null(strstr(err.msg, ": tok"));
    chmod(token, 0600);
    assert_int_equal(medic_config_load(path, &c, &err), 0);
    assert_string_equal(c.webhook_auth.bearer_token, "tok");
    medic_config_release(&c);
    /* one secret for the webhook and the admin: check config says so */
    static struct medic_config_warnings w;
    const char *same = write_file("same.token", "tok", 0600);
    snprintf(text, sizeof(text),
             "auth: { webhook_bearer_token_file: %s, admin_bearer_token_file: %s }\n", token, same);
    path = write_file("same.yaml", text, 0644);
    assert_int_equal(medic_config_load(path, &c, &err), 0);
    medic_config_warn(&c, &w);
    assert_int_equal(w.count, 2); /* and: no policy */
    assert_non_null(strstr(w.items[1], "the webhook's bearer token is also the admin's"));
    medic_config_release(&c);
}

/* The configuration's hash covers the files it names: a policy file or
 * an inventory file changed is a configuration changed (the hash is what
 * decisions record and what replicas compare); the same bytes give the
 * same hash, and a file naming no other keeps its own hash. */
static void config_hash_of(const char *path, char out[65])
{
    struct medic_config c;
    struct medic_error err = {0};
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    snprintf(out, 65, "%s", c.hash);
    medic_config_release(&c);
}

static void test_hash_covers_named_files(void **state)
{
    (void)state;
    static const char main_text[] = "policy_files: [gpu.yaml]\ninventory: { file: nodes.yaml }\n";
    static const char policy[] = "policies:\n"
                                 "  - name: xid\n"
                                 "    match: '{alertname=\"GPUXidError\"}'\n"
                                 "    steps: [{ action: notify, notifier: oncall }]\n";
    const char *path = write_file("medic.yaml", main_text, 0644);
    write_file("nodes.yaml", "nodes:\n  - { name: gpu-node-01 }\n", 0644);
    write_file("gpu.yaml", policy, 0644);
    char notifiers[] = "notifiers:\n  oncall: { type: webhook, url: 'http://127.0.0.1:1/' }\n";
    char text[512];
    snprintf(text, sizeof(text), "%s%s", main_text, notifiers);
    char main_path[160]; /* write_file's names are reused */
    snprintf(main_path, sizeof(main_path), "%s", write_file("medic.yaml", text, 0644));
    path = main_path;
    char first[65], again[65], policy_changed[65], nodes_changed[65], own[65];
    config_hash_of(path, first);
    config_hash_of(path, again);
    assert_string_equal(first, again);
    char self[65];
    medic_sha256_hex(text, strlen(text), self);
    assert_string_not_equal(first, self); /* not the main file's alone */
    write_file("gpu.yaml", "policies: []\n", 0644);
    config_hash_of(path, policy_changed);
    assert_string_not_equal(first, policy_changed);
    write_file("gpu.yaml", policy, 0644);
    write_file("nodes.yaml", "nodes:\n  - { name: gpu-node-02 }\n", 0644);
    config_hash_of(path, nodes_changed);
    assert_string_not_equal(first, nodes_changed);
    assert_string_not_equal(policy_changed, nodes_changed);
    write_file("nodes.yaml", "nodes:\n  - { name: gpu-node-01 }\n", 0644);
    config_hash_of(path, again);
    assert_string_equal(first, again);
    /* a file that names no other: its own hash, as before */
    path = write_file("alone.yaml", notifiers, 0644);
    config_hash_of(path, own);
    medic_sha256_hex(notifiers, strlen(notifiers), self);
    assert_string_equal(own, self);
}

/* What decides is hashed apart from what differs between replicas: two
 * replicas' files that differ only in listen and ha.replica decide alike;
 * a policy changed, or a policy file, does not. */
static void policy_hash_of(const char *text, char out[65])
{
    const char *path = write_file("replica.yaml", text, 0644);
    struct medic_config c;
    struct medic_error err = {0};
    if (medic_config_load(path, &c, &err))
        fail_msg("%s", err.msg);
    snprintf(out, 65, "%s", c.policy_hash);
    medic_config_release(&c);
}

static void test_policy_hash_ignores_what_differs_per_replica(void **state)
{
    (void)state;
    static const char notifiers[] =
        "notifiers:\n  oncall: { type: webhook, url: 'http://127.0.0.1:1/' }\n"
        "safety: { max_disruptive_in_flight: 2, max_alert_age: 1h }\n";
    char a[512], b[512], c[512], d[512];
    snprintf(a, sizeof(a), "listen: 127.0.0.1:9001\nha: { replica: a }\n%s", notifiers);
    snprintf(b, sizeof(b), "listen: 127.0.0.1:9002\nha: { replica: b }\n%s", notifiers);
    snprintf(c, sizeof(c), "%s", notifiers);
    snprintf(d, sizeof(d), "%s", notifiers);
    /* the same safety, its keys in another order */
    char *safety = strstr(d, "safety:");
    snprintf(safety, sizeof(d) - (size_t)(safety - d),
             "safety: { max_alert_age: 1h, max_disruptive_in_flight: 2 }\n");
    char ha[65], hb[65], hc[65], hd[65], he[65];
    policy_hash_of(a, ha);
    policy_hash_of(b, hb);
    policy_hash_of(c, hc);
    policy_hash_of(d, hd);
    assert_string_equal(ha, hb);
    assert_string_equal(ha, hc);
    assert_string_equal(ha, hd);
    snprintf(c, sizeof(c), "%smode: live\nauth: { webhook_bearer_token_file: %s/tok }\n", notifiers,
             dir);
    write_file("tok", "secret\n", 0600);
    policy_hash_of(c, he);
    assert_string_not_equal(ha, he); /* the mode decides */
    snprintf(c, sizeof(c), "%ssafety: { max_disruptive_in_flight: 3, max_alert_age: 1h }\n",
             "notifiers:\n  oncall: { type: webhook, url: 'http://127.0.0.1:1/' }\n");
    policy_hash_of(c, he);
    assert_string_not_equal(ha, he);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_have_positions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_file_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_needs_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directive_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hash_covers_named_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_hash_ignores_what_differs_per_replica, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

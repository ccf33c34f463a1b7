/* SPDX-License-Identifier: Apache-2.0 */
/* How fast the policy engine decides: 10,000 alerts against 200 policies
 * and a 400-node inventory, on one core, from a fresh state. Prints the
 * time per alert; run it a few times, the machines are noisy.
 *
 *   build/dev/bench/policy-bench [ALERTS] [POLICIES] */
#include "policy_engine.h"
#include "inventory.h"
#include "policy.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *build_policies(int count)
{
    size_t cap = (size_t)count * 512 + 64, len = 0;
    char *doc = malloc(cap);
    len +=
        (size_t)snprintf(doc + len, cap - len,
                         "safety: { max_disruptive_in_flight: 1000, max_disrupted_fraction: 1, "
                         "storm: { max_alerting_nodes: 100000, notifier: oncall } }\npolicies:\n");
    for (int i = 0; i < count; i++) {
        /* a mix of shapes: equality, regex on a second label, a risk condition */
        len += (size_t)snprintf(
            doc + len, cap - len,
            "  - name: policy-%d\n"
            "    match: '{alertname=\"Alert%d\", severity=~\"critical|page\", gpu!=\"\"}'\n"
            "    when: { risk_at_least: %.2f }\n"
            "    cooldown: 1h\n"
            "    max_actions_per_node: { count: 5, window: 24h }\n"
            "    steps:\n"
            "      - { action: drain, reason: 'Alert%d on GPU {{ $labels.gpu }}' }\n"
            "      - { after: 10m, action: ipmi_power_cycle }\n"
            "    on_resolved: [ { action: resume } ]\n",
            i, i, (i % 4) * 0.1, i);
    }
    return doc;
}

int main(int argc, char **argv)
{
    int alerts = argc > 1 ? atoi(argv[1]) : 10000;
    int policies = argc > 2 ? atoi(argv[2]) : 200;
    struct medic_error err = {0};
    struct yaml_tree tree;
    struct policy_set set;
    struct inventory inv;
    char *doc = build_policies(policies);
    if (yaml_tree_parse("bench.yaml", doc, strlen(doc), &tree, &err) ||
        policy_set_parse("bench.yaml", yaml_tree_get(tree.root, "policies"),
                         yaml_tree_get(tree.root, "safety"), NULL, 0, &set, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    yaml_tree_release(&tree);
    free(doc);
    char *inv_doc = malloc(400 * 64 + 16);
    size_t len = (size_t)sprintf(inv_doc, "nodes:\n");
    for (int i = 0; i < 400; i++)
        len += (size_t)sprintf(inv_doc + len, "  - { name: node-%03d }\n", i);
    if (yaml_tree_parse("inv.yaml", inv_doc, len, &tree, &err) ||
        inventory_parse("inv.yaml", tree.root, &inv, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    yaml_tree_release(&tree);
    free(inv_doc);

    /* the alerts: each its own instance, spread over nodes and policies */
    struct medic_label(*labels)[4] = calloc((size_t)alerts, sizeof(*labels));
    char(*names)[3][32] = calloc((size_t)alerts, sizeof(*names));
    char(*fps)[24] = calloc((size_t)alerts, sizeof(*fps));
    for (int i = 0; i < alerts; i++) {
        snprintf(names[i][0], 32, "Alert%d", (i * 7) % (policies + policies / 4 + 1));
        snprintf(names[i][1], 32, "%d", i % 8);
        snprintf(names[i][2], 32, "node-%03d:9400", (i * 13) % 400);
        labels[i][0] = (struct medic_label){"alertname", names[i][0]};
        labels[i][1] = (struct medic_label){"gpu", names[i][1]};
        labels[i][2] = (struct medic_label){"instance", names[i][2]};
        labels[i][3] = (struct medic_label){"severity", i % 3 ? "critical" : "warning"};
        snprintf(fps[i], sizeof(fps[i]), "%016x", (unsigned)i * 2654435761u);
    }
    static const char *const node_labels[] = {"node", "instance"};
    struct policy_context ctx = {&set, &inv, node_labels, 2, 1, NULL, 0, NULL, NULL, NULL, 0};
    struct policy_state *st = policy_state_new();
    struct policy_decisions out;
    policy_decisions_init(&out);
    struct medic_labels none = {NULL, 0};
    int64_t t0 = INT64_C(1795334400) * MEDIC_NS_PER_SEC;

    int64_t start = medic_time_monotonic();
    for (int i = 0; i < alerts; i++) {
        struct medic_labels l = {labels[i], 4};
        struct policy_alert a = {fps[i], MEDIC_STATUS_FIRING, &l, &none, t0, (i % 10) / 10.0, NULL};
        policy_evaluate(&ctx, st, &a, t0 + i * MEDIC_NS_PER_SEC / 100, &out);
        if (out.count > 4096)
            policy_decisions_clear(&out); /* the caller would record and drop them */
    }
    double firing = (double)(medic_time_monotonic() - start) / 1e3 / alerts;
    start = medic_time_monotonic();
    policy_tick(&ctx, st, t0 + 20 * 60 * MEDIC_NS_PER_SEC, &out);
    double tick_ms = (double)(medic_time_monotonic() - start) / 1e6;
    policy_decisions_clear(&out);
    start = medic_time_monotonic();
    for (int i = 0; i < alerts; i++) {
        struct medic_labels l = {labels[i], 4};
        struct policy_alert a = {fps[i], MEDIC_STATUS_RESOLVED, &l, &none, t0, NAN, NULL};
        policy_evaluate(&ctx, st, &a, t0 + 30 * 60 * MEDIC_NS_PER_SEC, &out);
        if (out.count > 4096)
            policy_decisions_clear(&out);
    }
    double resolved = (double)(medic_time_monotonic() - start) / 1e3 / alerts;
    printf("policy engine: %d alerts, %d policies, 400 inventory nodes, one core\n", alerts,
           policies);
    printf("  firing:   %.2f us per alert\n", firing);
    printf("  tick over every open instance: %.2f ms\n", tick_ms);
    printf("  resolved: %.2f us per alert\n", resolved);
    policy_decisions_release(&out);
    policy_state_free(st);
    policy_set_release(&set);
    inventory_release(&inv);
    free(labels);
    free(names);
    free(fps);
    return 0;
}

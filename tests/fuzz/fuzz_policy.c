/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a policy file (YAML, matchers, templates, durations)
 * must never crash or leak, whatever the bytes; when it loads, evaluating
 * an alert with it must not either. */
#include "policy_engine.h"
#include "policy.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct yaml_tree tree;
    struct medic_error err;
    if (size > 65536 || yaml_tree_parse("fuzz.yaml", (const char *)data, size, &tree, &err))
        return 0;
    struct policy_set set;
    if (tree.root &&
        policy_set_parse("fuzz.yaml", yaml_tree_get(tree.root, "policies"),
                         yaml_tree_get(tree.root, "safety"), NULL, 0, &set, &err) == 0) {
        static const char *const node_labels[] = {"instance"};
        struct medic_label labels[] = {
            {"alertname", "GPUXidError"}, {"gpu", "0"}, {"instance", "gpu-node-01"}, {"xid", "79"}};
        struct medic_labels set_labels = {labels, 4}, none = {NULL, 0};
        struct policy_context ctx = {&set, NULL, node_labels, 1, 1, NULL, 0, NULL, NULL, NULL, 0};
        struct policy_state *st = policy_state_new();
        struct policy_decisions out;
        policy_decisions_init(&out);
        struct policy_alert a = {"fp", MEDIC_STATUS_FIRING, &set_labels, &none, 0, 0.5, NULL};
        policy_evaluate(&ctx, st, &a, 3600 * MEDIC_NS_PER_SEC, &out);
        policy_tick(&ctx, st, 7200 * MEDIC_NS_PER_SEC, &out);
        a.status = MEDIC_STATUS_RESOLVED;
        policy_evaluate(&ctx, st, &a, 7300 * MEDIC_NS_PER_SEC, &out);
        policy_decisions_release(&out);
        policy_state_free(st);
        policy_set_release(&set);
    }
    yaml_tree_release(&tree);
    return 0;
}

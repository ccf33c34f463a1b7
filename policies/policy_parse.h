/* SPDX-License-Identifier: Apache-2.0 */
/* What the policy file's parsers share (policy.c: the policies; safety.c:
 * the safety settings). Private to policies/. */
#ifndef MEDIC_POLICIES_POLICY_PARSE_H
#define MEDIC_POLICIES_POLICY_PARSE_H

#include "policy.h"
#include "yaml_fields.h"

struct parser {
    struct yaml_fields f;
    const char *const *notifiers;
    size_t notifier_count;
};

/* 0 when name is one of the notifiers, else the error at n. */
int policy__known_notifier(struct parser *p, const struct yaml_tree_node *n, const char *name);
/* KEY: [gpu_reset, drain_and_reset]: names of NVML's recovery actions,
 * as bits by their code into *mask. */
int policy__parse_recovery(struct parser *p, const struct yaml_tree_node *v, const char *key,
                           unsigned *mask);
/* The `safety` mapping into s (its defaults set before). */
int policy__parse_safety(struct parser *p, const struct yaml_tree_node *n, struct policy_safety *s);
void policy__safety_release(struct policy_safety *s);

#endif

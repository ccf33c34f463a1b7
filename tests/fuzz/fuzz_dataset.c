/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a dataset file for `medic model check --dataset`
 * (safetensors, its feature metadata, labels, the samples that group its
 * windows into faults) must be refused or read, never crash; one read is
 * scored by the rule and judged. */
#include "deploy_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    struct deploy_dataset d;
    struct medic_error err;
    if (deploy_dataset_parse(copy, size, &d, &err) == 0) {
        double *rule = malloc((d.count ? d.count : 1) * sizeof(double));
        if (rule) {
            char used[512], why[512];
            struct deploy_report r;
            deploy_rule_scores(&d, rule, used, sizeof(used));
            if (deploy_compare(&d, rule, rule, rule, 10, 1, &r) == 0)
                deploy_verdict(&d, &r, why, sizeof(why));
            free(rule);
        }
        deploy_dataset_release(&d);
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a model file (safetensors header, tensors, shapes,
 * offsets) must be refused or loaded, never crash; a loaded model must
 * predict without faults, and its metadata (features, the blend with the
 * rule score) be read or refused, a blend giving a risk in [0, 1]. */
#include "feature_spec.h"
#include "lstm.h"
#include "rule_score.h"

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
    struct model m;
    struct medic_error err;
    if (model_load_bytes(copy, size, &m, &err) == 0) {
        struct model_workspace w;
        if (m.D <= 64 && m.H <= 256 && model_workspace_init(&w, &m, 2, 3) == 0) {
            float x[2 * 3 * 64] = {0}, y[2];
            model_predict(&m, &w, x, 2, 3, y, NULL);
            model_workspace_release(&w);
        }
        static struct feature_spec spec;
        if (features_from_metadata(&m.file, m.D, &spec, &err) == 0 && spec.blend.on) {
            static float window[3 * FEATURES_MAX];
            struct rule_inputs in;
            rule_inputs_find(&spec, &in);
            float risk =
                rule_blend(&spec.blend, 0.5f, rule_score(&in, window, 3, spec.count, NULL));
            if (!(risk >= 0 && risk <= 1))
                abort();
        }
        model_release(&m);
    }
    return 0;
}

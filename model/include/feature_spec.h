/* SPDX-License-Identifier: Apache-2.0 */
/* What the model's input means, from the model file's metadata: the window
 * (steps and the step between them), and per feature its name, a PromQL
 * template with {{node}} and {{gpu}}, and the robust scaler's center and
 * scale ((raw - center) / scale). Metadata values are strings; "features"
 * holds a JSON array:
 *
 *   "window": "60", "step": "60s",
 *   "features": "[{\"name\":\"temp\",\"query\":\"DCGM_FI_DEV_GPU_TEMP{Hostname=\\\"{{node}}\\\",
 *                 gpu=\\\"{{gpu}}\\\"}\",\"center\":55.0,\"scale\":12.5}, ...]"
 */
#ifndef MEDIC_MODEL_FEATURE_SPEC_H
#define MEDIC_MODEL_FEATURE_SPEC_H

#include "buf.h"
#include "error.h"
#include "safetensors.h"

#include <stddef.h>
#include <stdint.h>

#define FEATURES_MAX 64

struct feature {
    char name[64];
    char query[512]; /* PromQL with {{node}} and {{gpu}} */
    double center, scale;
};

/* How the model's risk is joined with the rule score (rule_score.h), from
 * the metadata's "blend": {"logit_weight": ..., "rule_weight": ...,
 * "bias": ...}; off when the file has none. */
struct risk_blend {
    int on;
    double logit_weight, rule_weight, bias;
};

struct feature_spec {
    size_t window; /* steps */
    int64_t step;  /* ns */
    struct feature items[FEATURES_MAX];
    size_t count;
    struct risk_blend blend;
};

/* Reads the spec (and the blend) from a model file's metadata.
 * MEDIC_E_NOTFOUND when the file has none (a model made for tests),
 * MEDIC_E_INVALID when it is
 * malformed or its feature count differs from the model's input size D. */
int features_from_metadata(const struct safetensors *st, size_t input_dim, struct feature_spec *out,
                           struct medic_error *err);

/* Renders a feature's query for a node and a GPU; label values are escaped
 * for a PromQL string. With gpu NULL, `gpu="{{gpu}}"` becomes
 * `gpu=~".+"`: every GPU of the node; with node NULL, `="{{node}}"` (or
 * `=~"{{node}}"`) becomes `=~".+"`: every node. Returns 0 or MEDIC_E_LIMIT. */
int features_query(const struct feature *f, const char *node, const char *gpu, char *out,
                   size_t size);
/* The same for the nodes node_regex (an RE2 regex, as features_nodes_regex
 * makes) matches and every GPU of them: `="{{node}}"` becomes
 * `=~"node_regex"`. */
int features_query_match(const struct feature *f, const char *node_regex, char *out, size_t size);
/* Appends a regex matching exactly the count node names to out
 * (metacharacters escaped, alternatives joined by |); out->error on failure. */
int features_nodes_regex(const char *const *nodes, size_t count, struct medic_buf *out);

/* Scales raw values in place: (raw - center) / scale, per feature. */
/* The label whose value {{node}} stands for in f's query (the name before
 * ="{{node}}" or =~"{{node}}"), into out; MEDIC_E_NOTFOUND when there is none. */
int features_node_label(const struct feature *f, char *out, size_t size);

void features_scale(const struct feature_spec *spec, float *rows, size_t steps);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "rule_score.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const input_names[RULE_INPUTS] = {
    [RULE_IN_XID_CHANGES] = "xid_changes_30m",
    [RULE_IN_XID_HELD] = "xid_hardware_held",
    [RULE_IN_ECC_SBE] = "ecc_sbe_log_increase_15m",
    [RULE_IN_ECC_DBE] = "ecc_dbe_increase_1h",
    [RULE_IN_REMAP] = "remapped_rows_increase_1h",
    [RULE_IN_PCIE] = "pcie_replay_log_increase_15m",
    [RULE_IN_TEMP] = "gpu_temp",
    [RULE_IN_TEMP_RISE] = "temp_rise_1h",
    [RULE_IN_THROTTLE] = "hw_throttle",
    [RULE_IN_POWER_JITTER] = "power_jitter_10m",
    [RULE_IN_CLOCK_JITTER] = "sm_clock_jitter_10m",
};

static const char *const term_names[RULE_TERMS] = {
    [RULE_XID] = "hardware_xid",          [RULE_ECC_SBE] = "ecc_sbe",
    [RULE_ECC_DBE] = "ecc_dbe",           [RULE_REMAP] = "remapped_rows",
    [RULE_PCIE] = "pcie_replay",          [RULE_HOT] = "hot",
    [RULE_TEMP_RISE] = "temp_rise",       [RULE_THROTTLE] = "hw_throttle",
    [RULE_POWER_JITTER] = "power_jitter", [RULE_CLOCK_JITTER] = "sm_clock_jitter",
};

/* The terms read from the latest value alone: clip((f(v) - offset) / scale). */
static const struct {
    enum rule_term term;
    enum rule_input input;
    double offset, scale;
    int log1p; /* the input is ln(1 + count): the count is expm1(v) */
} latest[] = {
    {RULE_ECC_SBE, RULE_IN_ECC_SBE, 0, 10, 1},
    {RULE_ECC_DBE, RULE_IN_ECC_DBE, 0, 1, 0},
    {RULE_REMAP, RULE_IN_REMAP, 0, 1, 0},
    {RULE_PCIE, RULE_IN_PCIE, 0, 20, 1},
    {RULE_HOT, RULE_IN_TEMP, 80, 10, 0},
    {RULE_TEMP_RISE, RULE_IN_TEMP_RISE, 0, 15, 0},
    {RULE_POWER_JITTER, RULE_IN_POWER_JITTER, 0, 0.15, 0},
    {RULE_CLOCK_JITTER, RULE_IN_CLOCK_JITTER, 0, 0.05, 0},
};

void rule_inputs_find(const struct feature_spec *spec, struct rule_inputs *in)
{
    for (size_t i = 0; i < RULE_INPUTS; i++) {
        in->at[i] = -1;
        for (size_t f = 0; f < spec->count && in->at[i] < 0; f++)
            if (strcmp(spec->items[f].name, input_names[i]) == 0)
                in->at[i] = (int)f;
    }
}

const char *rule_input_name(enum rule_input i)
{
    return i < RULE_INPUTS ? input_names[i] : "";
}

void rule_inputs_used(const struct rule_inputs *in, char *used, size_t size)
{
    size_t len = 0;
    if (size)
        used[0] = 0;
    for (size_t i = 0; i < RULE_INPUTS && len < size; i++)
        if (in->at[i] >= 0)
            len +=
                (size_t)snprintf(used + len, size - len, "%s%s", len ? ", " : "", input_names[i]);
}

static double clip01(double v)
{
    return v > 0 ? (v < 1 ? v : 1) : 0; /* NaN: 0 */
}

double rule_score(const struct rule_inputs *in, const float *window, size_t steps, size_t D,
                  unsigned *fired)
{
    const float *last = window + (steps - 1) * D;
    double s = 0;
    unsigned on = 0;
    const int xid = in->at[RULE_IN_XID_CHANGES], held = in->at[RULE_IN_XID_HELD];
    if (xid >= 0 && held >= 0 && last[xid] > 0 && last[held] > 0) { /* a hardware Xid just came */
        s += 1;
        on |= 1u << RULE_XID;
    }
    for (size_t t = 0; t < sizeof(latest) / sizeof(latest[0]); t++) {
        const int at = in->at[latest[t].input];
        if (at < 0)
            continue;
        double v = last[at];
        if (latest[t].log1p)
            v = expm1(v);
        double term = clip01((v - latest[t].offset) / latest[t].scale);
        s += term;
        if (term > 0)
            on |= 1u << latest[t].term;
    }
    const int throttle = in->at[RULE_IN_THROTTLE];
    if (throttle >= 0) { /* the share of the window spent throttled */
        size_t n = 0;
        for (size_t k = 0; k < steps; k++)
            n += window[k * D + (size_t)throttle] > 0;
        s += (double)n / (double)steps;
        if (n)
            on |= 1u << RULE_THROTTLE;
    }
    if (fired)
        *fired = on;
    return s;
}

void rule_fired_describe(unsigned fired, char *out, size_t size)
{
    size_t len = 0;
    if (size)
        out[0] = 0;
    for (size_t t = 0; t < RULE_TERMS && len < size; t++)
        if (fired & (1u << t))
            len += (size_t)snprintf(out + len, size - len, "%s%s", len ? ", " : "", term_names[t]);
}

static int number(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 1e6)
        return -1;
    *out = v->valuedouble;
    return 0;
}

int rule_blend_from_metadata(const struct safetensors *st, struct feature_spec *spec,
                             struct medic_error *err)
{
    memset(&spec->blend, 0, sizeof(spec->blend));
    const char *text = safetensors_meta(st, "blend");
    if (!text)
        return 0;
    struct risk_blend b = {.on = 1};
    cJSON *o = cJSON_Parse(text);
    int bad = !cJSON_IsObject(o) || number(o, "logit_weight", &b.logit_weight) ||
              number(o, "rule_weight", &b.rule_weight) || number(o, "bias", &b.bias) ||
              b.rule_weight < 0 || b.logit_weight < 0;
    cJSON_Delete(o);
    if (bad)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "metadata blend: expected a JSON object of finite numbers "
                               "logit_weight and rule_weight (neither below 0) and bias");
    struct rule_inputs in;
    rule_inputs_find(spec, &in);
    for (size_t i = 0; i < RULE_INPUTS; i++)
        if (in.at[i] < 0)
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "metadata blend: the rule score reads %s, which is not among "
                                   "the model's features",
                                   input_names[i]);
    spec->blend = b;
    return 0;
}

float rule_blend(const struct risk_blend *b, float p, double rule)
{
    if (!b->on)
        return p;
    /* the model's logit back from its probability, within what a float holds */
    double q = p < 1e-30f ? 1e-30 : p > 1 - 1e-7f ? 1 - 1e-7 : (double)p;
    double z = b->logit_weight * log(q / (1 - q)) + b->rule_weight * rule + b->bias;
    return (float)(1 / (1 + exp(-z)));
}

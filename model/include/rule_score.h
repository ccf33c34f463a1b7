/* SPDX-License-Identifier: Apache-2.0 */
/* The rule score: what an operator would write over the model's inputs,
 * ten terms each in [0, 1], added (model/train/evaluate.py's rule_score,
 * term for term): a hardware Xid that just came, correctable ECC errors
 * (per 10 in 15 min), a double-bit error, a remapped row, PCIe replays
 * (per 20 in 15 min), heat above 80 C (per 10 C), a rise in the last hour
 * (per 15 C), the share of the window spent HW-throttled, power jitter
 * (per 0.15) and SM clock jitter (per 0.05). A term whose input the model
 * lacks, or whose value is missing, adds nothing.
 *
 * It is the bar a retrained model must beat (`medic model check`) and,
 * where the model file's metadata holds a blend, a part of medic's risk:
 *
 *   risk = sigmoid(logit_weight * logit(model) + rule_weight * rule + bias)
 *
 * (model/train/blend.py fits the three numbers). rule_weight is never
 * negative, so the risk rises with every term whatever the LSTM does. */
#ifndef MEDIC_MODEL_RULE_SCORE_H
#define MEDIC_MODEL_RULE_SCORE_H

#include "error.h"
#include "feature_spec.h"

#include <stddef.h>

enum rule_term {
    RULE_XID,
    RULE_ECC_SBE,
    RULE_ECC_DBE,
    RULE_REMAP,
    RULE_PCIE,
    RULE_HOT,
    RULE_TEMP_RISE,
    RULE_THROTTLE,
    RULE_POWER_JITTER,
    RULE_CLOCK_JITTER,
    RULE_TERMS
};

/* Where each input the rule reads is among a model's features (-1: absent). */
enum rule_input {
    RULE_IN_XID_CHANGES,
    RULE_IN_XID_HELD,
    RULE_IN_ECC_SBE,
    RULE_IN_ECC_DBE,
    RULE_IN_REMAP,
    RULE_IN_PCIE,
    RULE_IN_TEMP,
    RULE_IN_TEMP_RISE,
    RULE_IN_THROTTLE,
    RULE_IN_POWER_JITTER,
    RULE_IN_CLOCK_JITTER,
    RULE_INPUTS
};

struct rule_inputs {
    int at[RULE_INPUTS];
};

void rule_inputs_find(const struct feature_spec *spec, struct rule_inputs *in);
/* The feature name of input i ("xid_changes_30m", ...). */
const char *rule_input_name(enum rule_input i);
/* The names of the inputs found, joined by ", ", into used. */
void rule_inputs_used(const struct rule_inputs *in, char *used, size_t size);

/* The score of one raw window (steps rows of D features, the latest
 * last); fired, when not NULL, gets a bit (1 << term) per term above 0. */
double rule_score(const struct rule_inputs *in, const float *window, size_t steps, size_t D,
                  unsigned *fired);

/* "ecc_sbe, pcie_replay": the names of the terms in fired, into out. */
void rule_fired_describe(unsigned fired, char *out, size_t size);

/* Reads a model file's `blend` metadata into spec->blend (none: off); the
 * rule's inputs must all be among spec's features. MEDIC_E_INVALID naming
 * what is wrong. */
int rule_blend_from_metadata(const struct safetensors *st, struct feature_spec *spec,
                             struct medic_error *err);

/* The model's risk p joined with the window's rule score, as spec->blend
 * says (p itself when the model has no blend). */
float rule_blend(const struct risk_blend *b, float p, double rule);

#endif

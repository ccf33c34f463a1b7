/* SPDX-License-Identifier: Apache-2.0 */
/* A node's failure risk: its window fetched from Prometheus, scaled as the
 * model's metadata says, scored by the LSTM (joined with the rule score
 * where the metadata holds a blend, rule_score.h); the node's risk is its
 * worst GPU's. A scorer owns the buffers one scoring needs, so a caller that
 * scores many nodes allocates once. */
#ifndef MEDIC_MODEL_RISK_H
#define MEDIC_MODEL_RISK_H

#include "error.h"
#include "feature_spec.h"
#include "lstm.h"
#include "prometheus.h"
#include "prometheus_fleet.h"

#include <stddef.h>
#include <stdint.h>

struct risk_scorer {
    const struct model *model;
    const struct feature_spec *spec;
    struct model_workspace w;
    float *rows; /* [PROMETHEUS_MAX_SERIES][window][features] */
};

struct risk_score {
    double risk; /* the worst GPU's */
    size_t worst;
    size_t count;
    char gpu[PROMETHEUS_MAX_SERIES][32];
    float gpu_risk[PROMETHEUS_MAX_SERIES];
    double rule[PROMETHEUS_MAX_SERIES];    /* the rule score (rule_score.h; 0: lost) */
    unsigned fired[PROMETHEUS_MAX_SERIES]; /* its terms above 0 */
    /* with steps: the GPU is lost, its risk PROMETHEUS_LOST_RISK */
    struct prometheus_silence lost[PROMETHEUS_MAX_SERIES];
    float last[FEATURES_MAX]; /* the worst GPU's latest raw values (NAN: lost) */
};

int risk_scorer_init(struct risk_scorer *s, const struct model *m, const struct feature_spec *spec);
void risk_scorer_release(struct risk_scorer *s);

/* Scores count raw sequences of steps rows already in s->rows. */
int risk_score_rows(struct risk_scorer *s, size_t count, size_t steps, struct risk_score *out);

/* Scores node (and gpu; NULL: every GPU) from the window ending at now; a
 * lost GPU (silent while another of the node reported) at
 * PROMETHEUS_LOST_RISK, the node's other GPUs fetched too when gpu is
 * asked for (or, when another GPU's gap keeps the node from being read,
 * gpu's alone: then a gap of its own is an error). Errors are
 * prometheus_fetch_window's. */
int risk_score_prometheus(struct risk_scorer *s, const char *url, long timeout_ms, const char *node,
                          const char *gpu, int64_t now, struct risk_score *out,
                          struct medic_error *err);

/* Scores every usable window of fleet through the LSTM, RISK_FLEET_BATCH
 * at a time: risk[i] for series i (PROMETHEUS_LOST_RISK for a lost GPU,
 * NAN for one kept out) and, when fired is not NULL, fired[i] the rule's
 * terms above 0 (none for a GPU not scored). The windows are
 * left as they were (raw values). MEDIC_E_NOMEM, or MEDIC_E_INVALID when
 * the model cannot run them. */
#define RISK_FLEET_BATCH 64
int risk_score_fleet(const struct model *m, const struct feature_spec *spec,
                     const struct prometheus_fleet *fleet, float *risk, unsigned *fired);

#endif

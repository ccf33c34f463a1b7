/* SPDX-License-Identifier: Apache-2.0 */
/* Whether a retrained model may replace the one in use: both, and a rule
 * written by hand, score the same labelled windows of the fleet's later
 * weeks (a `medic model dataset` file the new model never trained on);
 * the new model must rank the failing GPUs better than each, by more
 * than chance, with the faults (not the windows, of which each fault
 * gives many) as the unit that is resampled. */
#ifndef MEDIC_MODEL_DEPLOY_CHECK_H
#define MEDIC_MODEL_DEPLOY_CHECK_H

#include "error.h"
#include "feature_spec.h"
#include "lstm.h"

#include <stddef.h>
#include <stdint.h>

/* Fewest faults among the positives for a verdict: below it, no lead can
 * be told from chance. */
#define DEPLOY_MIN_FAULTS 10
/* The false-positive rate recall is read at. */
#define DEPLOY_FPR 0.01
/* The monotone probe raises an evidence input by one over a window's last
 * DEPLOY_PROBE_STEPS steps; a model whose risk then falls in more than
 * DEPLOY_MONOTONE_LIMIT of the windows is refused. */
#define DEPLOY_PROBE_STEPS 5
#define DEPLOY_MONOTONE_LIMIT 0.01
#define DEPLOY_EVIDENCE_MAX 8
/* The inputs that count evidence of a failing GPU (model/train/features.py's
 * EVIDENCE): more of any must never lower a risk. */
extern const char *const deploy_evidence[DEPLOY_EVIDENCE_MAX];

/* The caps on a dataset file: its header lists every window (about 100
 * bytes each), its windows are the model's window x features floats each;
 * `medic model dataset` writes no file they refuse. */
#define DEPLOY_DATASET_MAX_FILE ((size_t)1 << 30)
#define DEPLOY_DATASET_MAX_HEADER ((size_t)64 << 20)

struct deploy_dataset {
    struct feature_spec spec; /* the features the windows hold, raw */
    size_t count;             /* windows */
    float *windows;           /* [count][spec.window][spec.count] */
    float *labels;            /* [count]: 1 a fault followed, 0 not */
    size_t *group;            /* [count]: the fault (positives) or the draw (negatives) */
    size_t groups, positives, faults;
    int grouped; /* 0: the file names no samples, each window is its own group */
    char horizon[32];
};

/* Reads a `medic model dataset` file. MEDIC_E_INVALID naming what is
 * wrong (not a dataset, shapes, labels other than 0 and 1). */
int deploy_dataset_load(const char *path, struct deploy_dataset *d, struct medic_error *err);
/* The same from a file's bytes in memory (taken over, as safetensors_parse). */
int deploy_dataset_parse(unsigned char *bytes, size_t size, struct deploy_dataset *d,
                         struct medic_error *err);
void deploy_dataset_release(struct deploy_dataset *d);

/* m's risk of every window (scaled as m's metadata says). MEDIC_E_INVALID
 * when m's features, window or step are not the dataset's. */
int deploy_model_scores(const struct model *m, const struct deploy_dataset *d, double *out,
                        struct medic_error *err);

/* The rule score (rule_score.h) of every window; a term whose feature the
 * dataset lacks is left out. The names of the features used go into used. */
void deploy_rule_scores(const struct deploy_dataset *d, double *out, char *used, size_t size);

struct deploy_stats {
    double ap;     /* average precision (PR-AUC) */
    double recall; /* recall at DEPLOY_FPR */
};

struct deploy_lead {
    double mean;  /* the new model's PR-AUC less the other's */
    double lower; /* its one-sided 95% lower bound over the draws */
};

struct deploy_monotone {
    char name[64];
    double falls;  /* the share of windows whose risk falls when it is raised */
    double lowest; /* the lowest new/old risk */
};

struct deploy_report {
    struct deploy_stats model, against, rule;
    struct deploy_lead over_against, over_rule;
    size_t draws;
    struct deploy_monotone monotone[DEPLOY_EVIDENCE_MAX]; /* deploy_monotone_probe's */
    size_t monotone_count;
};

/* Compares the new model's scores with the model in use's and the rule's:
 * the statistics of each, and the leads with their lower bounds from
 * draws resamplings of the groups (Poisson weights, seeded). */
int deploy_compare(const struct deploy_dataset *d, const double *model, const double *against,
                   const double *rule, size_t draws, uint64_t seed, struct deploy_report *r);

/* The monotone probe of m (the new model) into r, after deploy_compare: for each evidence input
 * it reads (counts of ECC errors, remapped rows, PCIe replays, Xids, time
 * throttled), raised by one over the last DEPLOY_PROBE_STEPS steps of every
 * window, the share of windows whose risk falls against base (m's risk of
 * the windows as they are, deploy_model_scores'). */
int deploy_monotone_probe(const struct model *m, const struct deploy_dataset *d, const double *base,
                          struct deploy_report *r, struct medic_error *err);

/* 1 when the new model may be deployed (monotone in the evidence, ahead of
 * both by more than chance, recall at least the rule's); 0 with the first reason it may
 * not in why. */
int deploy_verdict(const struct deploy_dataset *d, const struct deploy_report *r, char *why,
                   size_t size);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Fetching a model's input window from Prometheus: one query_range per
 * feature over the window, on the model's step grid, with libcurl (one
 * connection for all of them, a timeout per request). Short gaps are
 * filled with the last value. A GPU that sent nothing at all for longer
 * while another GPU of its node reported throughout is lost (fallen off
 * the bus): evidence, kept apart from the windows the model scores. Any
 * other long gap makes the window unusable, said in the error, so that
 * the risk is "unknown" rather than made up. */
#ifndef MEDIC_MODEL_PROMETHEUS_H
#define MEDIC_MODEL_PROMETHEUS_H

#include "error.h"
#include "feature_spec.h"

#include <stddef.h>
#include <stdint.h>

#define PROMETHEUS_MAX_SERIES 16 /* GPUs of one node */
#define PROMETHEUS_MAX_GAP 5     /* steps filled with the previous value */

/* A GPU's telemetry lost: the longest run of steps in its window without
 * a value of the first feature (the one that says which GPUs there are),
 * and the steps since that run ended (0: it
 * reaches the window's end). steps 0: not lost. */
struct prometheus_silence {
    unsigned short steps;
    unsigned short ago;
};

/* The risk a lost GPU is given (prometheus_silence): a GPU that stops
 * reporting while its node's others go on has failed (NVIDIA's Xid 79,
 * "GPU has fallen off the bus"; the InfiniteHBD trace's "GPU Lost"), not
 * shown a sign that it may. */
#define PROMETHEUS_LOST_RISK 1.0f

/* "telemetry lost: nothing for the last 7 min while the node's other GPUs
 * reported" (step: the window's step, ns). */
void prometheus_silence_describe(const struct prometheus_silence *s, int64_t step, char *out,
                                 size_t size);

struct prometheus_window {
    size_t count;                        /* sequences: one per GPU */
    char gpu[PROMETHEUS_MAX_SERIES][32]; /* the gpu label of each */
    float *rows[PROMETHEUS_MAX_SERIES];  /* [window][features], raw values */
    /* lost GPUs (their rows not filled): only with every GPU of the node */
    struct prometheus_silence lost[PROMETHEUS_MAX_SERIES];
    size_t filled; /* points forward-filled */
};

/* The window ending at now (aligned down to the step) for node and gpu
 * (NULL: every GPU the first feature shows, and a lost one is marked in
 * out->lost), within timeout_ms in all. Errors: MEDIC_E_IO
 * (Prometheus unreachable, slow or failing: err says which),
 * MEDIC_E_NOTFOUND (no series), MEDIC_E_INVALID (a gap longer than
 * PROMETHEUS_MAX_GAP steps that is not a lost GPU, or a malformed answer). */
int prometheus_fetch_window(const char *url, long timeout_ms, const struct feature_spec *spec,
                            const char *node, const char *gpu, int64_t now,
                            struct prometheus_window *out, struct medic_error *err);
void prometheus_window_release(struct prometheus_window *w);

/* Places one query_range answer (body) for feature d into out on the grid
 * that starts at start; with d == 0 it creates a row per GPU it sees (at
 * most PROMETHEUS_MAX_SERIES; gpu not NULL: one, named gpu). Points off
 * the grid, non-finite values and malformed entries are ignored; an answer
 * without data.result is MEDIC_E_INVALID. out must start zeroed. */
int prometheus_parse_range(const char *body, size_t len, const struct feature_spec *spec, size_t d,
                           const char *gpu, int64_t start, struct prometheus_window *out,
                           struct medic_error *err);

/* The values label takes in Prometheus (at most max_values of them), in
 * *values (each and the array to be freed by the caller). */
int prometheus_label_values(const char *url, long timeout_ms, const char *label, size_t max_values,
                            char ***values, size_t *count, struct medic_error *err);

#endif

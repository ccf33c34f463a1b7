/* SPDX-License-Identifier: Apache-2.0 */
/* What model/prometheus.c shares with the whole-fleet fetch: building a
 * query_range form, a request's setup and its outcome, placing one series'
 * points on the window's grid, and filling its short gaps. */
#ifndef MEDIC_MODEL_PROMETHEUS_INTERNAL_H
#define MEDIC_MODEL_PROMETHEUS_INTERNAL_H

#include "buf.h"
#include "error.h"
#include "feature_spec.h"
#include "prometheus.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

/* The query_range form to POST for query over [start, end] (ns), in
 * *form (to be freed); MEDIC_E_NOMEM. */
int prometheus__range_form(CURL *c, const char *query, int64_t start, int64_t end, int64_t step,
                           char **form);
/* Sets c up to GET full into out (reset first) within timeout_ms. */
void prometheus__easy_setup(CURL *c, const char *full, long timeout_ms, struct medic_buf *out);
/* 0 when the transfer that ended with rc got a 200, else MEDIC_E_IO with why. */
int prometheus__result(CURL *c, CURLcode rc, const char *url, const char *full,
                       struct medic_error *err);
/* Puts the [time, "value"] pairs of values that fall on the grid starting
 * at start into column d of row ([window][features]). */
void prometheus__place(const cJSON *values, const struct feature_spec *spec, size_t d,
                       int64_t start, float *row);
/* Forward-fills gaps of at most PROMETHEUS_MAX_GAP steps in row (adding to
 * *filled); a longer one, or no data at the start, is MEDIC_E_INVALID with
 * the feature in *bad_feature and *at_start set for the latter. */
int prometheus__fill(const struct feature_spec *spec, float *row, size_t *filled,
                     size_t *bad_feature, int *at_start);
/* The longest run of steps of row (raw: gaps not filled) without the first
 * feature, the one that says which GPUs there are (a GPU's temperature in
 * the built-in model: there whenever the GPU is scraped, where features
 * over a range go on for a while after), as a silence (steps 0 when no
 * run is longer than PROMETHEUS_MAX_GAP). */
struct prometheus_silence prometheus__silence(const struct feature_spec *spec, const float *row);
/* The lost-GPU rule, for both the node's and the fleet's fetch: a GPU
 * whose window could not be filled is lost when another GPU of its node has
 * a usable window (node_reports) and its own first feature is silent
 * (silence: prometheus__silence of its raw row). Otherwise {0, 0}: its gap
 * is an error, as a gap shared by the whole node says nothing of one GPU. */
struct prometheus_silence prometheus__lost(struct prometheus_silence silence, int node_reports);
/* The error for such a window: "feature F of gpu G: a gap in the window (...)". */
int prometheus__gap_error(const struct feature_spec *spec, size_t d, int at_start, const char *gpu,
                          struct medic_error *err);

#endif

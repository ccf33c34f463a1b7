/* What model/prometheus.c shares with the whole-fleet fetch: building a
 * query_range URL, a request's setup and its outcome, placing one series'
 * points on the window's grid, and filling its short gaps. */
#ifndef MEDIC_MODEL_PROMETHEUS_INTERNAL_H
#define MEDIC_MODEL_PROMETHEUS_INTERNAL_H

#include "buf.h"
#include "error.h"
#include "feature_spec.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

/* The query_range URL for query over [start, end] (ns) into full;
 * MEDIC_E_NOMEM or MEDIC_E_LIMIT. */
int prometheus__range_url(CURL *c, const char *url, const char *query, int64_t start, int64_t end,
                          int64_t step, char *full, size_t size);
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
 * *filled); a longer one, or no data at the start, is MEDIC_E_INVALID. */
int prometheus__fill(const struct feature_spec *spec, float *row, const char *gpu, size_t *filled,
                     struct medic_error *err);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Fleet scoring: every model.fleet_interval, every GPU Prometheus has
 * telemetry for is scored, its window fetched with the whole fleet's in one
 * query_range per feature (model/prometheus_fleet.h) and the windows run
 * through the LSTM in batches, and the risks are exported on /metrics as
 * medic_gpu_failure_risk{node,gpu}, so that a Prometheus rule on them can
 * raise the alert medic then acts on. It runs on its own thread with its
 * reference to the configuration snapshot for each cycle (so a reload's
 * model is used from the next cycle), and holds no lock while it talks to
 * Prometheus. */
#ifndef MEDIC_ENGINE_FLEET_H
#define MEDIC_ENGINE_FLEET_H

#include "buf.h"
#include "config.h"
#include "prometheus_fleet.h"

#define ENGINE_FLEET_MAX_GPUS 32768 /* (node, gpu) windows per cycle */
#define ENGINE_FLEET_PARALLEL 4     /* query_range requests in flight */
/* a whole-window fetch at least this often; the cycles between ask for the
 * steps since the last one */
#define ENGINE_FLEET_FULL_EVERY (10 * 60 * MEDIC_NS_PER_SEC)
/* a cycle ahead of a step starts this long before it, beyond the last
 * cycle's duration and a quarter of it */
#define ENGINE_FLEET_AHEAD_MARGIN (500 * MEDIC_NS_PER_MS)

struct engine_fleet;

/* Starts the thread (it idles while the configuration has no model,
 * Prometheus URL or fleet_interval). */
int engine_fleet_start(struct config_slot *configs, struct engine_fleet **out);
/* Stops the thread; NULL is a no-op. */
void engine_fleet_stop(struct engine_fleet *f);
/* A GPU's risk from the last cycle: gpu "" is the node's worst GPU. */
struct engine_fleet_score {
    float risk;
    char gpu[32];
    struct prometheus_silence lost; /* with steps: the GPU is lost */
    float last[FEATURES_MAX];       /* the window's latest raw values */
    unsigned fired;                 /* the rule's terms above 0 (rule_score.h) */
};

/* The last cycle's risk of node's gpu ("": its worst GPU) when that cycle
 * scored, with the model model_hash, the window that ends at window_end
 * (aligned to the model's step), or the last risk for the window a step
 * earlier (a cycle run ahead of a step scores the window ending at it
 * while alerts still ask for the one before): then the alert's own fetch
 * would read the same window. 0, or MEDIC_E_NOTFOUND; f NULL finds nothing. */
int engine_fleet_lookup(struct engine_fleet *f, const char *model_hash, int64_t window_end,
                        const char *node, const char *gpu, struct engine_fleet_score *out);
/* The last cycle's windows of the n nodes (prometheus_fleet_subset), when
 * it fetched them with the model model_hash from the Prometheus at url: an
 * alert's own fetch then asks only for the steps since. 0, or
 * MEDIC_E_NOTFOUND (no such cycle, or a node it did not have),
 * MEDIC_E_NOMEM; f NULL finds nothing. */
int engine_fleet_carry(struct engine_fleet *f, const char *model_hash, const char *url,
                       const struct feature_spec *spec, const char *const *nodes, size_t n,
                       struct prometheus_fleet *out);
/* Counts n query_range requests an alert's round made itself (f NULL: none). */
void engine_fleet_count_alert_requests(struct engine_fleet *f, size_t n);
/* Appends the fleet scoring metrics and medic_gpu_failure_risk. */
void engine_fleet_metrics(struct engine_fleet *f, struct medic_buf *b);
/* Appends s as a Prometheus label value: backslash, quote and newline
 * escaped. */
void engine_prometheus_label(struct medic_buf *b, const char *s);

#endif

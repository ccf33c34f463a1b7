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

#define ENGINE_FLEET_MAX_GPUS 32768 /* (node, gpu) windows per cycle */
#define ENGINE_FLEET_PARALLEL 4     /* query_range requests in flight */
#define ENGINE_FLEET_BATCH 64       /* windows per LSTM call */

struct engine_fleet;

/* Starts the thread (it idles while the configuration has no model,
 * Prometheus URL or fleet_interval). */
int engine_fleet_start(struct config_slot *configs, struct engine_fleet **out);
/* Stops the thread; NULL is a no-op. */
void engine_fleet_stop(struct engine_fleet *f);
/* Appends the fleet scoring metrics and medic_gpu_failure_risk. */
void engine_fleet_metrics(struct engine_fleet *f, struct medic_buf *b);

#endif

/* Fleet scoring: every model.fleet_interval, every node Prometheus knows
 * (the values of the label the first feature's query puts {{node}} in) is
 * scored, each of its GPUs, and the risks are exported on /metrics as
 * medic_gpu_failure_risk{node,gpu}, so that a Prometheus rule on them can
 * raise the alert medic then acts on. It runs on its own thread with its
 * own copy of the model (read again each cycle, so a reload's new model is
 * used), and never holds the configuration lock while it talks to
 * Prometheus. */
#ifndef MEDIC_SERVE_FLEET_H
#define MEDIC_SERVE_FLEET_H

#include "buf.h"
#include "config.h"

#include <pthread.h>

#define SERVE_FLEET_MAX_NODES 4096

struct serve_fleet;

/* Starts the thread (it idles while the configuration has no model,
 * Prometheus URL or fleet_interval). */
int serve_fleet_start(pthread_mutex_t *config_lock, const struct medic_config *config,
                      struct serve_fleet **out);
void serve_fleet_stop(struct serve_fleet *f);
void serve_fleet_metrics(struct serve_fleet *f, struct medic_buf *b);

#endif

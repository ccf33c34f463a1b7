/* SPDX-License-Identifier: Apache-2.0 */
/* engine: the medic daemon as a library. `medic serve` parses its argv and
 * calls engine_serve(); everything the daemon is lives behind it:
 *   serve.c     start, stop, signals, configuration reloads
 *   pipeline.c  receiver -> store -> decide -> act (the engine thread)
 *   risk.c      an alert's risk from Prometheus and the model
 *   fleet.c     whole-fleet scoring for medic_gpu_failure_risk
 *   dispatch.c  decided actions to the executor, recovery after a crash
 *   metrics.c   /metrics
 *   api.c       the read API and the dry-run endpoint
 *   config.c    the configuration and its snapshots
 * docs/architecture.md tells which thread owns what. */
#ifndef MEDIC_ENGINE_H
#define MEDIC_ENGINE_H

struct engine_serve_options {
    const char *config_path;     /* NULL: the embedded defaults */
    const char *listen_override; /* --listen */
    const char *db_override;     /* --db */
    const char *log_level;       /* --log-level; NULL: the configuration's */
};

/* Runs the daemon until SIGTERM or SIGINT (SIGHUP reloads). Returns the
 * process exit status: 0 after a clean stop, 1 when it could not start. */
int engine_serve(const struct engine_serve_options *options);

#endif

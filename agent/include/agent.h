/* SPDX-License-Identifier: Apache-2.0 */
/* `medic agent`: a small HTTP(S) daemon on each GPU node that lists the
 * GPUs, reports what the driver says of their health, and sets power limits within their bounds
 * through NVML, for medic's power_limit and restore_power_limit actions, and resets one GPU
 * (gpu_reset). It remembers, in a state
 * file, the limit it replaced on each GPU, so a restore puts that back,
 * also after the agent restarts. Bearer token, compared in constant time. */
#ifndef MEDIC_AGENT_H
#define MEDIC_AGENT_H

#include "error.h"

/* The port medic agent listens on unless told otherwise: its unit's, the
 * inventory examples' and the docs' (a test reads them all). */
#define MEDIC_AGENT_PORT "9800"

struct agent_options {
    const char *listen;                     /* host:port */
    const char *token;                      /* the bearer token (required) */
    const char *state_file;                 /* remembered limits */
    const char *nvml_library;               /* NULL: libnvidia-ml.so.1 */
    const char *tls_cert_pem, *tls_key_pem; /* both NULL for plain HTTP */
    const char *nvidia_smi;                 /* run for a GPU reset; NULL: nvidia-smi from PATH */
};

struct agent;

int agent_start(const struct agent_options *o, struct agent **out, struct medic_error *err);
int agent_port(struct agent *a);
void agent_stop(struct agent *a);

#endif

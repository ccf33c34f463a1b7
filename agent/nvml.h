/* SPDX-License-Identifier: Apache-2.0 */
/* The few NVML calls the agent needs, loaded with dlopen so that medic
 * builds and runs on machines without NVIDIA software. Power values are in
 * watts here (NVML speaks milliwatts). */
#ifndef MEDIC_AGENT_NVML_H
#define MEDIC_AGENT_NVML_H

#include "error.h"

#include <stddef.h>
#include <stdint.h>

struct nvml;

struct nvml_gpu {
    unsigned int index;
    char uuid[96];
    char name[96];
    double limit_w, min_w, max_w, default_w, draw_w;
};

/* What the driver says of one GPU's health. Each reading is -1 where the
 * driver does not offer it (an older driver, a GPU without that feature):
 * `unavailable` then names it with NVML's reason. */
enum nvml_recovery {
    NVML_RECOVERY_NONE = 0,
    NVML_RECOVERY_GPU_RESET = 1,
    NVML_RECOVERY_NODE_REBOOT = 2,
    NVML_RECOVERY_DRAIN_P2P = 3,
    NVML_RECOVERY_DRAIN_AND_RESET = 4,
    NVML_RECOVERY_BUS_RESET = 5,
};

struct nvml_health {
    int persistence; /* 1 enabled, 0 disabled */
    int remap_known; /* the four remapped-row readings below */
    unsigned int remap_correctable, remap_uncorrectable;
    int remap_pending, remap_failure;
    int retired_pending;    /* page retirement (GPUs before row remapping) */
    long long dbe_volatile; /* double-bit ECC errors since the driver loaded */
    int recovery;           /* enum nvml_recovery, or another number a newer driver adds */
    int processes;          /* compute processes running on it */
    char unavailable[512];  /* "name: reason; ..." */
};

/* The recovery action's name ("none", "gpu_reset", ...), "unknown" past the table. */
const char *nvml_recovery_name(int action);

/* Loads library (NULL: "libnvidia-ml.so.1") and initialises NVML. */
int nvml_open(const char *library, struct nvml **out, struct medic_error *err);
void nvml_close(struct nvml *n);
int nvml_count(struct nvml *n, unsigned int *count, struct medic_error *err);
int nvml_read(struct nvml *n, unsigned int index, struct nvml_gpu *out, struct medic_error *err);
int nvml_health(struct nvml *n, unsigned int index, struct nvml_health *out,
                struct medic_error *err);
/* The driver's version ("580.159.04"), or "" where it cannot say. */
void nvml_driver_version(struct nvml *n, char *out, size_t size);
int nvml_set_limit(struct nvml *n, unsigned int index, double watts, struct medic_error *err);
/* Persistence mode on or off (root only, as nvidia-smi -pm). */
int nvml_set_persistence(struct nvml *n, unsigned int index, int on, struct medic_error *err);
/* Closes NVML for a GPU reset (nvidia-smi asks that no monitoring
 * application hold the device): every call fails with MEDIC_E_BUSY until
 * nvml_resume opens it again. */
void nvml_suspend(struct nvml *n);
int nvml_resume(struct nvml *n, struct medic_error *err);
/* When NVML last initialised (medic_time_now's clock): every GPU it reads
 * was enumerated by the driver at or before this, and found by it since. */
int64_t nvml_opened_at(struct nvml *n);

#endif

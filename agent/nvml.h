/* The few NVML calls the agent needs, loaded with dlopen so that medic
 * builds and runs on machines without NVIDIA software. Power values are in
 * watts here (NVML speaks milliwatts). */
#ifndef MEDIC_AGENT_NVML_H
#define MEDIC_AGENT_NVML_H

#include "error.h"

#include <stddef.h>

struct nvml;

struct nvml_gpu {
    unsigned int index;
    char uuid[96];
    char name[96];
    double limit_w, min_w, max_w, default_w, draw_w;
};

/* Loads library (NULL: "libnvidia-ml.so.1") and initialises NVML. */
int nvml_open(const char *library, struct nvml **out, struct medic_error *err);
void nvml_close(struct nvml *n);
int nvml_count(struct nvml *n, unsigned int *count, struct medic_error *err);
int nvml_read(struct nvml *n, unsigned int index, struct nvml_gpu *out, struct medic_error *err);
int nvml_set_limit(struct nvml *n, unsigned int index, double watts, struct medic_error *err);

#endif

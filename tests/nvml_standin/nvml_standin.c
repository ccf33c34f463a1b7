/* SPDX-License-Identifier: Apache-2.0 */
/* A STAND-IN for NVIDIA's libnvidia-ml.so.1, for tests on machines without
 * a GPU: it implements the dozen NVML functions `medic agent` calls, for
 * MEDIC_NVML_STANDIN_GPUS GPUs (default 8) whose power limits persist in the
 * file MEDIC_NVML_STANDIN_STATE (one "index limit_mw" line per GPU), so a
 * test can read what the agent set. Limits are 100-400 W, default 350 W.
 * Health readings are those of a sound GPU with row remapping (page
 * retirement "not supported", as on an H100), except where the faults
 * (faults.h: MEDIC_NVML_STANDIN_FAULTS, MEDIC_NVML_STANDIN_FAULTS_FILE)
 * say otherwise ("3:recovery=1 3:dbe=2"); a GPU marked missing is not
 * enumerated. Setting persistence mode writes it to the faults file. It is
 * not NVML and must never be installed as libnvidia-ml.so.1. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define MAX_GPUS 64

static unsigned int gpus = 8;
static unsigned int limits[MAX_GPUS];
static const unsigned int min_mw = 100000, max_mw = 400000, default_mw = 350000;

static void load(void)
{
    gpus = standin_gpus();
    for (unsigned int i = 0; i < MAX_GPUS; i++)
        limits[i] = default_mw;
    const char *path = getenv("MEDIC_NVML_STANDIN_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    unsigned int i, mw;
    while (f && fscanf(f, "%u %u", &i, &mw) == 2)
        if (i < MAX_GPUS)
            limits[i] = mw;
    if (f)
        fclose(f);
}

static void save(void)
{
    const char *path = getenv("MEDIC_NVML_STANDIN_STATE");
    FILE *f = path ? fopen(path, "w") : NULL;
    for (unsigned int i = 0; f && i < gpus; i++)
        fprintf(f, "%u %u\n", i, limits[i]);
    if (f)
        fclose(f);
}

typedef void *nvmlDevice_t;

static int handle_index(nvmlDevice_t dev, unsigned int *index)
{
    unsigned long v = (unsigned long)dev;
    if (v == 0 || v > gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)(v - 1);
    return NVML_SUCCESS;
}

int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int r);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev);
int nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int size);
int nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int size);
int nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned int *mw);
int nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned int *lo,
                                                 unsigned int *hi);
int nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t dev, unsigned int *mw);
int nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw);
int nvmlDeviceSetPowerManagementLimit(nvmlDevice_t dev, unsigned int mw);

/* The real library runs a thread of its own from nvmlInit on (seen on an
 * H100: "cuda00001800007"); so does this one, so that the agent's signal
 * handling is tested with a thread it did not start. */
static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void start_idle_thread(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, idle_thread, NULL) == 0)
        pthread_detach(t);
}

int nvmlInit_v2(void)
{
    load();
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start_idle_thread);
    return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

const char *nvmlErrorString(int r)
{
    return r == NVML_ERROR_INVALID_ARGUMENT ? "Invalid Argument (stand-in)"
           : r == NVML_ERROR_NOT_FOUND      ? "Not Found (stand-in)"
                                            : "Unknown Error (stand-in)";
}

/* The physical GPU enumerated as index (missing ones skipped), or -1. */
static int physical(unsigned int index)
{
    for (unsigned int p = 0; p < gpus; p++)
        if (!standin_fault(p, "missing", 0) && index-- == 0)
            return (int)p;
    return -1;
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
    *count = 0;
    for (unsigned int p = 0; p < gpus; p++)
        *count += !standin_fault(p, "missing", 0);
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
    int p = physical(index);
    if (p < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (nvmlDevice_t)(unsigned long)(p + 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int size)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(uuid, size, "GPU-5ta0d1n0-0000-0000-0000-%012u", i);
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int size)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(name, size, "NVML stand-in GPU");
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned int *mw)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    load();
    *mw = limits[i];
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned int *lo,
                                                 unsigned int *hi)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    *lo = min_mw;
    *hi = max_mw;
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t dev, unsigned int *mw)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    *mw = default_mw;
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    *mw = limits[i] * 3 / 4;
    return NVML_SUCCESS;
}

int nvmlDeviceSetPowerManagementLimit(nvmlDevice_t dev, unsigned int mw)
{
    unsigned int i;
    if (handle_index(dev, &i) || mw < min_mw || mw > max_mw)
        return NVML_ERROR_INVALID_ARGUMENT;
    load();
    limits[i] = mw;
    save();
    return NVML_SUCCESS;
}

int nvmlSystemGetDriverVersion(char *out, unsigned int size)
{
    snprintf(out, size, "stand-in");
    return NVML_SUCCESS;
}

int nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, int *mode)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = (int)standin_fault(i, "persistence", 1);
    return NVML_SUCCESS;
}

int nvmlDeviceSetPersistenceMode(nvmlDevice_t dev, int mode)
{
    unsigned int i;
    if (handle_index(dev, &i) || (mode != 0 && mode != 1))
        return NVML_ERROR_INVALID_ARGUMENT;
    return standin_set_fault(i, "persistence", (unsigned int)mode) ? NVML_ERROR_NOT_SUPPORTED
                                                                   : NVML_SUCCESS;
}

int nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                              unsigned int *pending, unsigned int *failure)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    *corr = 0;
    *unc = standin_fault(i, "remap_pending", 0) ? 1 : 0;
    *pending = standin_fault(i, "remap_pending", 0);
    *failure = standin_fault(i, "remap_failure", 0);
    return NVML_SUCCESS;
}

int nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending)
{
    (void)dev;
    (void)pending;
    return NVML_ERROR_NOT_SUPPORTED;
}

int nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter, unsigned long long *n)
{
    unsigned int i;
    if (handle_index(dev, &i) || type != 1 || counter != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = standin_fault(i, "dbe", 0);
    return NVML_SUCCESS;
}

struct field_value {
    unsigned int field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type, ret;
    union {
        double d;
        unsigned int ui;
        unsigned long long ull;
    } value;
};

int nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, struct field_value *values)
{
    unsigned int i;
    if (handle_index(dev, &i) || count < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int k = 0; k < count; k++) {
        values[k].ret = values[k].field_id == 230 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
        values[k].value_type = 1; /* unsigned int */
        values[k].value.ui = standin_fault(i, "recovery", 0);
    }
    return NVML_SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count, void *infos)
{
    unsigned int i;
    if (handle_index(dev, &i))
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int running = standin_fault(i, "processes", 0);
    int enough = *count >= running;
    (void)infos; /* the agent only counts them */
    *count = running;
    return enough ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

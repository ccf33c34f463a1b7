/* SPDX-License-Identifier: Apache-2.0 */
#include "nvml.h"
#include "timeutil.h"
#include "action.h"
#include "lock.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVML's ABI, as declared in nvml.h (not needed to build). */
typedef int nvml_return;
typedef void *nvml_device;

#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0

struct nvml_field_value {
    unsigned int field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type;
    nvml_return ret;
    union {
        double d;
        unsigned int ui;
        unsigned long ul;
        unsigned long long ull;
        long long sll;
        int si;
    } value;
};

struct nvml {
    void *lib;
    struct medic_mutex lock; /* NVML is thread-safe, but one call at a time keeps it simple */
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*count)(unsigned int *);
    nvml_return (*handle)(unsigned int, nvml_device *);
    nvml_return (*uuid)(nvml_device, char *, unsigned int);
    nvml_return (*name)(nvml_device, char *, unsigned int);
    nvml_return (*limit)(nvml_device, unsigned int *);
    nvml_return (*constraints)(nvml_device, unsigned int *, unsigned int *);
    nvml_return (*default_limit)(nvml_device, unsigned int *);
    nvml_return (*usage)(nvml_device, unsigned int *);
    nvml_return (*set_limit)(nvml_device, unsigned int);
    /* health readings: optional, an older driver may lack some */
    nvml_return (*driver_version)(char *, unsigned int);
    nvml_return (*persistence)(nvml_device, int *);
    nvml_return (*remapped_rows)(nvml_device, unsigned int *, unsigned int *, unsigned int *,
                                 unsigned int *);
    nvml_return (*retired_pending)(nvml_device, int *);
    nvml_return (*ecc_total)(nvml_device, int, int, unsigned long long *);
    nvml_return (*field_values)(nvml_device, int, struct nvml_field_value *);
    nvml_return (*processes)(nvml_device, unsigned int *, void *);
    nvml_return (*set_persistence)(nvml_device, int);
    int suspended;     /* closed for a GPU reset (nvml_suspend): every call refused */
    int64_t opened_at; /* wall clock of the last nvmlInit that succeeded */
};

static int fail(struct nvml *n, nvml_return r, const char *what, struct medic_error *err)
{
    return medic_error_set(err, MEDIC_E_IO, "%s: %s", what,
                           n->error_string ? n->error_string(r) : "NVML error");
}

int nvml_open(const char *library, struct nvml **out, struct medic_error *err)
{
    struct nvml *n = calloc(1, sizeof(*n));
    if (!n)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    const char *path = library ? library : "libnvidia-ml.so.1";
    n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        medic_error_set(err, MEDIC_E_NOTFOUND, "cannot load NVML (%s): %s", path, dlerror());
        free(n);
        return MEDIC_E_NOTFOUND;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&n->init, "nvmlInit_v2"},
        {(void **)&n->shutdown, "nvmlShutdown"},
        {(void **)&n->error_string, "nvmlErrorString"},
        {(void **)&n->count, "nvmlDeviceGetCount_v2"},
        {(void **)&n->handle, "nvmlDeviceGetHandleByIndex_v2"},
        {(void **)&n->uuid, "nvmlDeviceGetUUID"},
        {(void **)&n->name, "nvmlDeviceGetName"},
        {(void **)&n->limit, "nvmlDeviceGetPowerManagementLimit"},
        {(void **)&n->constraints, "nvmlDeviceGetPowerManagementLimitConstraints"},
        {(void **)&n->default_limit, "nvmlDeviceGetPowerManagementDefaultLimit"},
        {(void **)&n->usage, "nvmlDeviceGetPowerUsage"},
        {(void **)&n->set_limit, "nvmlDeviceSetPowerManagementLimit"},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].fn = dlsym(n->lib, syms[i].name);
        if (!*syms[i].fn) {
            medic_error_set(err, MEDIC_E_NOTFOUND, "NVML library %s lacks %s", path, syms[i].name);
            dlclose(n->lib);
            free(n);
            return MEDIC_E_NOTFOUND;
        }
    }
    struct {
        void **fn;
        const char *name;
    } optional[] = {
        {(void **)&n->driver_version, "nvmlSystemGetDriverVersion"},
        {(void **)&n->persistence, "nvmlDeviceGetPersistenceMode"},
        {(void **)&n->remapped_rows, "nvmlDeviceGetRemappedRows"},
        {(void **)&n->retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus"},
        {(void **)&n->ecc_total, "nvmlDeviceGetTotalEccErrors"},
        {(void **)&n->field_values, "nvmlDeviceGetFieldValues"},
        {(void **)&n->processes, "nvmlDeviceGetComputeRunningProcesses_v3"},
        {(void **)&n->set_persistence, "nvmlDeviceSetPersistenceMode"},
    };
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
        *optional[i].fn = dlsym(n->lib, optional[i].name);
    nvml_return r = n->init();
    if (r != 0) {
        fail(n, r, "nvmlInit", err);
        dlclose(n->lib);
        free(n);
        return MEDIC_E_IO;
    }
    n->opened_at = medic_time_now();
    medic_mutex_init(&n->lock, MEDIC_LOCK_NVML);
    *out = n;
    return 0;
}

void nvml_close(struct nvml *n)
{
    if (!n)
        return;
    if (!n->suspended)
        n->shutdown();
    dlclose(n->lib);
    medic_mutex_destroy(&n->lock);
    free(n);
}

/* Takes the lock; refuses (and releases it) while NVML is closed for a reset. */
static int begin(struct nvml *n, struct medic_error *err)
{
    medic_mutex_lock(&n->lock);
    if (!n->suspended)
        return 0;
    medic_mutex_unlock(&n->lock);
    return medic_error_set(err, MEDIC_E_BUSY, "NVML is closed while a GPU reset runs");
}

int nvml_count(struct nvml *n, unsigned int *count, struct medic_error *err)
{
    if (begin(n, err))
        return MEDIC_E_BUSY;
    nvml_return r = n->count(count);
    medic_mutex_unlock(&n->lock);
    return r ? fail(n, r, "nvmlDeviceGetCount", err) : 0;
}

int nvml_read(struct nvml *n, unsigned int index, struct nvml_gpu *out, struct medic_error *err)
{
    nvml_device dev;
    unsigned int mw = 0, lo = 0, hi = 0, def = 0, use = 0;
    int rc = 0;
    memset(out, 0, sizeof(*out));
    out->index = index;
    if (begin(n, err))
        return MEDIC_E_BUSY;
    nvml_return r = n->handle(index, &dev);
    if (r)
        rc = fail(n, r, "nvmlDeviceGetHandleByIndex", err);
    else if ((r = n->uuid(dev, out->uuid, sizeof(out->uuid))) ||
             (r = n->name(dev, out->name, sizeof(out->name))))
        rc = fail(n, r, "nvmlDeviceGetUUID/Name", err);
    else if ((r = n->limit(dev, &mw)) || (r = n->constraints(dev, &lo, &hi)) ||
             (r = n->default_limit(dev, &def)))
        rc = fail(n, r, "nvmlDeviceGetPowerManagementLimit", err);
    else if ((r = n->usage(dev, &use)))
        rc = fail(n, r, "nvmlDeviceGetPowerUsage", err);
    medic_mutex_unlock(&n->lock);
    out->limit_w = mw / 1000.0;
    out->min_w = lo / 1000.0;
    out->max_w = hi / 1000.0;
    out->default_w = def / 1000.0;
    out->draw_w = use / 1000.0;
    return rc;
}

int nvml_set_limit(struct nvml *n, unsigned int index, double watts, struct medic_error *err)
{
    nvml_device dev;
    if (begin(n, err))
        return MEDIC_E_BUSY;
    nvml_return r = n->handle(index, &dev);
    if (r == 0)
        r = n->set_limit(dev, (unsigned int)(watts * 1000.0 + 0.5));
    medic_mutex_unlock(&n->lock);
    return r ? fail(n, r, "nvmlDeviceSetPowerManagementLimit", err) : 0;
}

const char *nvml_recovery_name(int action)
{
    return action >= 0 && action < MEDIC_RECOVERY_COUNT ? medic_recovery_names[action] : "unknown";
}

/* Notes a reading the driver did not give, with its reason. */
static void unavailable(struct nvml *n, struct nvml_health *h, const char *what, nvml_return r)
{
    size_t used = strlen(h->unavailable);
    const char *why = r < 0                           ? "not in this driver's NVML"
                      : r == NVML_ERROR_NOT_SUPPORTED ? "not supported on this GPU"
                                                      : n->error_string(r);
    snprintf(h->unavailable + used, sizeof(h->unavailable) - used, "%s%s: %s", used ? "; " : "",
             what, why);
}

int nvml_health(struct nvml *n, unsigned int index, struct nvml_health *out,
                struct medic_error *err)
{
    nvml_device dev;
    memset(out, 0, sizeof(*out));
    out->persistence = out->retired_pending = out->recovery = out->processes = -1;
    out->dbe_volatile = -1;
    if (begin(n, err))
        return MEDIC_E_BUSY;
    nvml_return r = n->handle(index, &dev);
    if (r) {
        medic_mutex_unlock(&n->lock);
        return fail(n, r, "nvmlDeviceGetHandleByIndex", err);
    }
    int mode = 0;
    r = n->persistence ? n->persistence(dev, &mode) : -1;
    if (r == 0)
        out->persistence = mode != 0;
    else
        unavailable(n, out, "persistence_mode", r);

    unsigned int corr = 0, unc = 0, pending = 0, failed = 0;
    r = n->remapped_rows ? n->remapped_rows(dev, &corr, &unc, &pending, &failed) : -1;
    if (r == 0) {
        out->remap_known = 1;
        out->remap_correctable = corr;
        out->remap_uncorrectable = unc;
        out->remap_pending = pending != 0;
        out->remap_failure = failed != 0;
    } else
        unavailable(n, out, "remapped_rows", r);

    int retired = 0;
    r = n->retired_pending ? n->retired_pending(dev, &retired) : -1;
    if (r == 0)
        out->retired_pending = retired != 0;
    else
        unavailable(n, out, "retired_pages_pending", r);

    unsigned long long dbe = 0;
    r = n->ecc_total
            ? n->ecc_total(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &dbe)
            : -1;
    if (r == 0)
        out->dbe_volatile = (long long)dbe;
    else
        unavailable(n, out, "volatile_dbe", r);

    struct nvml_field_value fv = {.field_id = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION};
    r = n->field_values ? n->field_values(dev, 1, &fv) : -1;
    if (r == 0)
        r = fv.ret;
    if (r == 0)
        out->recovery = (int)fv.value.ui;
    else
        unavailable(n, out, "recovery_action", r);

    unsigned int count = 0;
    r = n->processes ? n->processes(dev, &count, NULL) : -1;
    if (r == 0 || r == NVML_ERROR_INSUFFICIENT_SIZE)
        out->processes = (int)count;
    else
        unavailable(n, out, "compute_processes", r);
    medic_mutex_unlock(&n->lock);
    return 0;
}

void nvml_driver_version(struct nvml *n, char *out, size_t size)
{
    struct medic_error err = {0};
    out[0] = 0;
    if (begin(n, &err))
        return;
    if (n->driver_version && n->driver_version(out, (unsigned int)size) != 0)
        out[0] = 0;
    medic_mutex_unlock(&n->lock);
}

int nvml_set_persistence(struct nvml *n, unsigned int index, int on, struct medic_error *err)
{
    nvml_device dev;
    if (!n->set_persistence)
        return medic_error_set(err, MEDIC_E_NOTFOUND,
                               "this driver's NVML lacks nvmlDeviceSetPersistenceMode");
    if (begin(n, err))
        return MEDIC_E_BUSY;
    nvml_return r = n->handle(index, &dev);
    if (r == 0)
        r = n->set_persistence(dev, on ? 1 : 0);
    medic_mutex_unlock(&n->lock);
    return r ? fail(n, r, "nvmlDeviceSetPersistenceMode", err) : 0;
}

void nvml_suspend(struct nvml *n)
{
    medic_mutex_lock(&n->lock);
    if (!n->suspended) {
        n->shutdown();
        n->suspended = 1;
    }
    medic_mutex_unlock(&n->lock);
}

int nvml_resume(struct nvml *n, struct medic_error *err)
{
    medic_mutex_lock(&n->lock);
    nvml_return r = n->suspended ? n->init() : 0;
    if (r == 0 && n->suspended)
        n->opened_at = medic_time_now();
    if (r == 0)
        n->suspended = 0;
    medic_mutex_unlock(&n->lock);
    return r ? fail(n, r, "nvmlInit after the reset", err) : 0;
}

int64_t nvml_opened_at(struct nvml *n)
{
    medic_mutex_lock(&n->lock);
    int64_t t = n->opened_at;
    medic_mutex_unlock(&n->lock);
    return t;
}

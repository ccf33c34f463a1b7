#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVML's ABI, as declared in nvml.h (not needed to build). */
typedef int nvml_return;
typedef void *nvml_device;

struct nvml {
    void *lib;
    pthread_mutex_t lock; /* NVML is thread-safe, but one call at a time keeps it simple */
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
    nvml_return r = n->init();
    if (r != 0) {
        fail(n, r, "nvmlInit", err);
        dlclose(n->lib);
        free(n);
        return MEDIC_E_IO;
    }
    pthread_mutex_init(&n->lock, NULL);
    *out = n;
    return 0;
}

void nvml_close(struct nvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

int nvml_count(struct nvml *n, unsigned int *count, struct medic_error *err)
{
    pthread_mutex_lock(&n->lock);
    nvml_return r = n->count(count);
    pthread_mutex_unlock(&n->lock);
    return r ? fail(n, r, "nvmlDeviceGetCount", err) : 0;
}

int nvml_read(struct nvml *n, unsigned int index, struct nvml_gpu *out, struct medic_error *err)
{
    nvml_device dev;
    unsigned int mw = 0, lo = 0, hi = 0, def = 0, use = 0;
    int rc = 0;
    memset(out, 0, sizeof(*out));
    out->index = index;
    pthread_mutex_lock(&n->lock);
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
    pthread_mutex_unlock(&n->lock);
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
    pthread_mutex_lock(&n->lock);
    nvml_return r = n->handle(index, &dev);
    if (r == 0)
        r = n->set_limit(dev, (unsigned int)(watts * 1000.0 + 0.5));
    pthread_mutex_unlock(&n->lock);
    return r ? fail(n, r, "nvmlDeviceSetPowerManagementLimit", err) : 0;
}

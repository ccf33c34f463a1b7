/* SPDX-License-Identifier: Apache-2.0 */
#include "reset.h"
#include "log.h"
#include "run.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static unsigned int refuse(struct medic_buf *out, unsigned int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static unsigned int refuse(struct medic_buf *out, unsigned int code, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    medic_buf_puts(out, "{\"status\":\"error\",\"error\":");
    medic_buf_json_string(out, msg);
    medic_buf_puts(out, "}\n");
    return code;
}

/* The index under which uuid is enumerated now, or -1. */
static int find_uuid(struct nvml *n, const char *uuid, struct medic_error *err)
{
    unsigned int count = 0;
    if (nvml_count(n, &count, err))
        return -2;
    for (unsigned int i = 0; i < count; i++) {
        struct nvml_gpu g;
        if (nvml_read(n, i, &g, err) == 0 && strcmp(g.uuid, uuid) == 0)
            return (int)i;
    }
    return -1;
}

static void command_json(struct medic_buf *out, const char *const *argv)
{
    medic_buf_puts(out, "[");
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            medic_buf_puts(out, ",");
        medic_buf_json_string(out, argv[i]);
    }
    medic_buf_puts(out, "]");
}

/* After the command: NVML open again, the GPU enumerated under its UUID
 * and its recovery action none (or not offered by the driver). */
static unsigned int confirm(struct nvml *n, const char *uuid, int persistence_was_on,
                            const char *command_output, struct medic_buf *out)
{
    struct medic_error err = {0};
    if (nvml_resume(n, &err))
        return refuse(out, 500, "the reset ran (%s) but NVML does not open again: %s",
                      command_output, err.msg);
    int index = find_uuid(n, uuid, &err);
    if (index < 0)
        return refuse(out, 500,
                      "%s is not enumerated after the reset (%s): the GPU did not come back", uuid,
                      index == -2 ? err.msg : command_output);
    char restored[200] = "";
    if (persistence_was_on && nvml_set_persistence(n, (unsigned int)index, 1, &err))
        snprintf(restored, sizeof(restored), "persistence mode not turned back on: %.150s",
                 err.msg);
    struct nvml_health h;
    if (nvml_health(n, (unsigned int)index, &h, &err))
        return refuse(out, 500, "%s is back but its health cannot be read: %s", uuid, err.msg);
    if (h.recovery > 0)
        return refuse(out, 500, "%s is back but the driver still recommends %s", uuid,
                      nvml_recovery_name(h.recovery));
    medic_buf_printf(out, "{\"status\":\"success\",\"index\":%d,\"uuid\":", index);
    medic_buf_json_string(out, uuid);
    medic_buf_puts(out, ",\"recovery_action\":");
    if (h.recovery < 0)
        medic_buf_puts(out, "null");
    else
        medic_buf_json_string(out, nvml_recovery_name(h.recovery));
    medic_buf_printf(out, ",\"persistence_mode\":%s,\"output\":",
                     h.persistence < 0 ? "null"
                     : h.persistence   ? "true"
                                       : "false");
    medic_buf_json_string(out, command_output);
    if (restored[0]) {
        medic_buf_puts(out, ",\"warning\":");
        medic_buf_json_string(out, restored);
    }
    medic_buf_puts(out, "}\n");
    return 200;
}

unsigned int gpu_reset(struct nvml *n, const struct gpu_reset_options *o,
                       const struct gpu_reset_request *r, struct medic_buf *out)
{
    struct medic_error err = {0};
    unsigned int count = 0;
    if (nvml_count(n, &count, &err))
        return refuse(out, 500, "%s", err.msg);
    if (r->uuid && find_uuid(n, r->uuid, &err) < 0)
        return refuse(out, 404,
                      "%s is not enumerated on this node (fallen off the bus?): a GPU reset "
                      "cannot reach it, the node needs a reboot",
                      r->uuid);
    if (r->index >= count)
        return refuse(out, 404, "no GPU %u on this node: it has %u", r->index, count);
    struct nvml_gpu g;
    struct nvml_health h;
    if (nvml_read(n, r->index, &g, &err) || nvml_health(n, r->index, &h, &err))
        return refuse(out, 500, "%s", err.msg);
    if (r->uuid && strcmp(g.uuid, r->uuid) != 0)
        return refuse(out, 409,
                      "GPU %u is %s, not %s: the GPUs were numbered anew (one fell off the "
                      "bus?); not reset",
                      r->index, g.uuid, r->uuid);
    if (h.processes < 0)
        return refuse(out, 409,
                      "cannot tell whether compute processes run on GPU %u (%s): not reset",
                      r->index, h.unavailable);
    if (h.processes > 0)
        return refuse(out, 409,
                      "%d compute process%s run%s on GPU %u: not reset (drain the node and let "
                      "its jobs end first)",
                      h.processes, h.processes == 1 ? "" : "es", h.processes == 1 ? "s" : "",
                      r->index);
    const char *argv[] = {o->nvidia_smi, "--gpu-reset", "-i", g.uuid, NULL};
    int persistence_on = h.persistence == 1;
    if (r->check_only) {
        medic_buf_printf(
            out, "{\"status\":\"success\",\"check_only\":true,\"index\":%u,\"uuid\":", r->index);
        medic_buf_json_string(out, g.uuid);
        medic_buf_printf(out,
                         ",\"compute_processes\":0,\"persistence_mode\":%s,"
                         "\"persistence_off_first\":%s,\"command\":",
                         h.persistence < 0 ? "null"
                         : persistence_on  ? "true"
                                           : "false",
                         persistence_on ? "true" : "false");
        command_json(out, argv);
        medic_buf_puts(out, "}\n");
        return 200;
    }
    if (persistence_on && nvml_set_persistence(n, r->index, 0, &err))
        return refuse(out, 500, "cannot turn persistence mode off before the reset: %s", err.msg);
    medic_log_info("GPU reset starting", "gpu", g.uuid, NULL);
    nvml_suspend(n);
    char output[1024];
    int rc = medic_run(argv, NULL, o->timeout_ms, output, sizeof(output));
    if (rc != 0) {
        /* NVML back, persistence mode as it was, then the failure */
        struct medic_error again = {0};
        int reopened = nvml_resume(n, &again) == 0;
        int index = reopened ? find_uuid(n, g.uuid, &again) : -1;
        if (persistence_on && index >= 0)
            nvml_set_persistence(n, (unsigned int)index, 1, &again);
        medic_log_error("GPU reset failed", "gpu", g.uuid, "output", output, NULL);
        if (rc == -2)
            return refuse(out, 500, "%s --gpu-reset -i %s ran past %ld s and was killed",
                          o->nvidia_smi, g.uuid, o->timeout_ms / 1000);
        return refuse(out, 500, "%s --gpu-reset -i %s failed (exit status %d): %s", o->nvidia_smi,
                      g.uuid, rc, output);
    }
    unsigned int code = confirm(n, g.uuid, persistence_on, output, out);
    medic_log_info(code == 200 ? "GPU reset done" : "GPU reset not confirmed", "gpu", g.uuid, NULL);
    return code;
}

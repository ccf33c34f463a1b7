/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU reset, the agent's part of medic's gpu_reset action: refused while
 * compute processes run on the GPU or when it is no longer the GPU medic
 * named (its UUID), persistence mode turned off first and back on after,
 * NVML closed while `nvidia-smi --gpu-reset -i UUID` runs (an argv array,
 * no shell), and the GPU confirmed back (enumerated, recovery action none)
 * before it is reported done. */
#ifndef MEDIC_AGENT_RESET_H
#define MEDIC_AGENT_RESET_H

#include "buf.h"
#include "nvml.h"

struct gpu_reset_options {
    const char *nvidia_smi; /* the program run for the reset ("nvidia-smi": from PATH) */
    long timeout_ms;        /* for the reset command */
};

struct gpu_reset_request {
    unsigned int index;
    const char *uuid; /* NULL: whatever GPU index is now */
    int check_only;   /* say what would be done, change nothing */
};

/* Carries out r on n; the answer's JSON body into out. Returns the HTTP
 * status: 200 done (or, check_only, possible), 404 no such GPU, 409
 * refused (processes, another GPU under that index), 500 the reset or its
 * confirmation failed (the body says which, with the command's output). */
unsigned int gpu_reset(struct nvml *n, const struct gpu_reset_options *o,
                       const struct gpu_reset_request *r, struct medic_buf *out);

#endif

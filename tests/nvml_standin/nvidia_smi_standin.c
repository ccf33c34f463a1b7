/* SPDX-License-Identifier: Apache-2.0 */
/* A STAND-IN for nvidia-smi's GPU reset, for tests without a GPU: run as
 * `nvidia-smi-standin --gpu-reset -i UUID`, it appends its arguments (one
 * line, tab-separated) to MEDIC_NVML_STANDIN_LOG, refuses as the real
 * program would a GPU whose persistence mode is on, one it cannot find or
 * one marked reset_fails, and otherwise clears the GPU's faults in the
 * faults file (faults.h): its recovery action, volatile DBE and pending
 * row remapping. Tests only; never installed. */
#include "faults.h"

#include <stdio.h>
#include <string.h>

static const char uuid_prefix[] = "GPU-5ta0d1n0-0000-0000-0000-";

int main(int argc, char **argv)
{
    const char *log = getenv("MEDIC_NVML_STANDIN_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    for (int i = 1; f && i < argc; i++)
        fprintf(f, "%s%s", i > 1 ? "\t" : "", argv[i]);
    if (f) {
        fputc('\n', f);
        fclose(f);
    }
    if (argc != 4 || strcmp(argv[1], "--gpu-reset") != 0 || strcmp(argv[2], "-i") != 0) {
        fprintf(stderr, "nvidia-smi stand-in: only --gpu-reset -i UUID\n");
        return 2;
    }
    const char *uuid = argv[3];
    unsigned int gpu = 0;
    if (strncmp(uuid, uuid_prefix, sizeof(uuid_prefix) - 1) != 0 ||
        sscanf(uuid + sizeof(uuid_prefix) - 1, "%u", &gpu) != 1 || gpu >= standin_gpus() ||
        standin_fault(gpu, "missing", 0)) {
        printf("No devices were found matching %s\n", uuid);
        return 6;
    }
    if (standin_fault(gpu, "persistence", 1)) {
        printf("Unable to reset GPU %s: persistence mode is enabled (stand-in)\n", uuid);
        return 255;
    }
    if (standin_fault(gpu, "reset_fails", 0)) {
        printf("GPU %s is currently in use by another process (stand-in)\n", uuid);
        return 255;
    }
    if (standin_set_fault(gpu, "recovery", 0) || standin_set_fault(gpu, "dbe", 0) ||
        standin_set_fault(gpu, "remap_pending", 0)) {
        printf("nvidia-smi stand-in: cannot write MEDIC_NVML_STANDIN_FAULTS_FILE\n");
        return 3;
    }
    printf("GPU %s was successfully reset.\n", uuid);
    return 0;
}

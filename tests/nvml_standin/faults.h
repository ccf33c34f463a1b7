/* SPDX-License-Identifier: Apache-2.0 */
/* The STAND-IN GPUs' faults, shared by the NVML stand-in library and the
 * nvidia-smi stand-in: space-separated GPU:NAME=VALUE words (GPU: the
 * physical GPU, 0 to MEDIC_NVML_STANDIN_GPUS - 1), from the environment
 * MEDIC_NVML_STANDIN_FAULTS and, read again at every call so that a test
 * or a stand-in reset can change them, the file
 * MEDIC_NVML_STANDIN_FAULTS_FILE (its words win). NAME: recovery, dbe,
 * remap_pending, remap_failure, processes, persistence, missing (the GPU
 * is not enumerated: the GPUs after it move down an index, as when one
 * falls off the bus), reset_fails. Tests only. */
#ifndef MEDIC_NVML_STANDIN_FAULTS_H
#define MEDIC_NVML_STANDIN_FAULTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STANDIN_FAULTS_MAX 8192

static unsigned int standin_find(const char *s, unsigned int gpu, const char *name, int *found)
{
    size_t len = strlen(name);
    unsigned int value = 0;
    while (s && *s) {
        s += strspn(s, " \n");
        char *end;
        unsigned long g = strtoul(s, &end, 10);
        if (end != s && *end == ':' && g == gpu && strncmp(end + 1, name, len) == 0 &&
            end[1 + len] == '=') {
            value = (unsigned int)strtoul(end + 2 + len, NULL, 10);
            *found = 1; /* the last word wins */
        }
        s += strcspn(s, " \n");
    }
    return value;
}

static void standin_read_file(char *buf, size_t size)
{
    const char *path = getenv("MEDIC_NVML_STANDIN_FAULTS_FILE");
    FILE *f = path ? fopen(path, "r") : NULL;
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* The value of fault NAME on physical GPU gpu, or fallback. */
static unsigned int standin_fault(unsigned int gpu, const char *name, unsigned int fallback)
{
    char file[STANDIN_FAULTS_MAX];
    standin_read_file(file, sizeof(file));
    int found = 0;
    unsigned int v = standin_find(file, gpu, name, &found);
    if (found)
        return v;
    v = standin_find(getenv("MEDIC_NVML_STANDIN_FAULTS"), gpu, name, &found);
    return found ? v : fallback;
}

/* Appends GPU:NAME=VALUE to the faults file (a later word wins). */
static int standin_set_fault(unsigned int gpu, const char *name, unsigned int value)
{
    const char *path = getenv("MEDIC_NVML_STANDIN_FAULTS_FILE");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return -1;
    fprintf(f, " %u:%s=%u", gpu, name, value);
    return fclose(f);
}

static unsigned int standin_gpus(void)
{
    const char *n = getenv("MEDIC_NVML_STANDIN_GPUS");
    unsigned int gpus = n ? (unsigned int)atoi(n) : 8;
    return gpus > 64 ? 64 : gpus;
}

#endif

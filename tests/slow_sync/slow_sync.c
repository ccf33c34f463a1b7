/* SPDX-License-Identifier: Apache-2.0 */
/* A TEST STAND-IN for a disk that stops answering, not part of medic:
 * preloaded into `medic serve` (LD_PRELOAD), it holds every fsync and
 * fdatasync for as long as the file named by MEDIC_TEST_SLOW_SYNC_FILE
 * exists, after creating that name with ".held" appended (so that a test
 * knows a sync is being held). Without the variable, or while the file is
 * absent, syncs go straight to the disk. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void hold(void)
{
    const char *path = getenv("MEDIC_TEST_SLOW_SYNC_FILE");
    if (!path || access(path, F_OK) != 0)
        return;
    char held[4096];
    snprintf(held, sizeof(held), "%s.held", path);
    int fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    while (access(path, F_OK) == 0)
        usleep(50 * 1000);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    hold();
    return real(fd);
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    hold();
    return real(fd);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* A TEST STAND-IN for a machine that has just booted, not part of medic:
 * preloaded into a slurmd (LD_PRELOAD) that a test's Slurm RebootProgram
 * starts again, it makes sysinfo() say the host came up at
 * MEDIC_TEST_BOOTED_AT (seconds since the epoch), so that slurmd reports
 * a new BootTime as after a real reboot. slurmctld finishes a `scontrol
 * reboot` only when the node's boot time is after the request; no host
 * can be rebooted in a test. Without the variable, sysinfo is the real
 * one. */
#include <stdlib.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int sysinfo(struct sysinfo *info)
{
    long rc = syscall(SYS_sysinfo, info);
    const char *booted = getenv("MEDIC_TEST_BOOTED_AT");
    if (rc == 0 && booted && *booted) {
        long at = strtol(booted, NULL, 10), now = (long)time(NULL);
        if (at > 0 && at <= now)
            info->uptime = now - at;
    }
    return (int)rc;
}

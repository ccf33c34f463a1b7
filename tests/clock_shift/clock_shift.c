/* SPDX-License-Identifier: Apache-2.0 */
/* A TEST STAND-IN for a wall clock that steps (NTP correcting a drifted
 * host, a VM resumed), not part of medic: preloaded into `medic serve`
 * (LD_PRELOAD), it adds to every reading of the wall clock
 * (clock_gettime's CLOCK_REALTIME and CLOCK_REALTIME_COARSE,
 * gettimeofday, time) the offset in seconds written in the file named by
 * MEDIC_TEST_CLOCK_OFFSET_FILE, read again at every reading, so that the
 * test steps the clock while medic runs. The monotonic clock stays real.
 *
 * Debian's libfaketime (0.9.10) cannot serve here: with
 * DONT_FAKE_MONOTONIC=1 every timed wait on a condition variable that uses
 * the monotonic clock returns at once, which turns each of medic's waits
 * into a busy loop. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t offset_ns(void)
{
    const char *path = getenv("MEDIC_TEST_CLOCK_OFFSET_FILE");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return 0;
    char text[64];
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return (int64_t)(strtod(text, NULL) * 1e9);
}

static int real_clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    return real(id, ts);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = real_clock_gettime(id, ts);
    if (rc != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE))
        return rc;
    int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset_ns();
    ts->tv_sec = (time_t)(t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
    return 0;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

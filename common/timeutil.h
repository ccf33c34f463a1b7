/* SPDX-License-Identifier: Apache-2.0 */
/* Time as signed nanoseconds since the Unix epoch (UTC). Alertmanager's
 * zero time, 0001-01-01T00:00:00Z, means "unset" and maps to
 * MEDIC_TIME_UNSET; other times outside 1678..2261 are rejected. */
#ifndef MEDIC_TIMEUTIL_H
#define MEDIC_TIMEUTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define MEDIC_TIME_UNSET INT64_MIN
#define MEDIC_NS_PER_MS INT64_C(1000000)
#define MEDIC_NS_PER_SEC INT64_C(1000000000)

int64_t medic_time_now(void);
/* Monotonic clock in nanoseconds, for measuring durations. */
int64_t medic_time_monotonic(void);
/* The engine's clock: the wall clock as read when it was started,
 * advanced since by the time the host has been up (CLOCK_BOOTTIME: the
 * monotonic clock, counting a suspend). A step of the wall clock (NTP
 * correcting a drifted host) does not move it; every interval the policy
 * engine measures (after:, cooldowns, expiry, storms) is on it. */
struct medic_steady_clock {
    int64_t wall0, boot0;
};
void medic_steady_clock_start(struct medic_steady_clock *c);
int64_t medic_steady_clock_now(const struct medic_steady_clock *c);
/* Initialises a condition variable whose timed waits are measured on the
 * monotonic clock: a step of the wall clock (NTP correcting a drifted
 * host, a VM resumed) neither stalls nor rushes them. Every condition
 * variable medic waits on with a deadline is made here. */
void medic_cond_init(pthread_cond_t *cond);
/* The monotonic instant ns nanoseconds from now (ns < 0: now), as
 * pthread_cond_timedwait takes it for a condition variable from
 * medic_cond_init. */
struct timespec medic_time_deadline_in(int64_t ns);

/* Parses RFC 3339 (`2026-11-05T08:46:41.118624551Z`, `...+02:00`, a
 * lowercase t/z, up to 9 fraction digits) of exactly len bytes. Returns 0 or
 * MEDIC_E_INVALID. */
/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t medic_days_from_civil(int64_t y, int m, int d);
void medic_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
int medic_time_parse_rfc3339(const char *s, size_t len, int64_t *out);

/* Writes `2026-11-05T08:46:41.118Z` (UTC, milliseconds) into out; an unset
 * time is written as `0001-01-01T00:00:00Z`. Returns out. */
char *medic_time_format(int64_t t, char *out, size_t size);

/* Writes a duration as medic.yaml would (2d, 6h, 90m, 45s; whole
 * milliseconds below a second's multiple: 10ms, 1500ms) into out; returns
 * out. */
char *medic_duration_format(int64_t ns, char *out, size_t size);

/* Parses a duration like `90m`, `2h`, `7d`, `1h30m`, `500ms`, `10s`, `2w`
 * into nanoseconds. Returns 0 or MEDIC_E_INVALID. */
int medic_duration_parse(const char *s, int64_t *out);

/* Parses a query bound: RFC 3339, or a duration meaning that long before
 * now. Returns 0 or MEDIC_E_INVALID. */
int medic_time_parse_bound(const char *s, int64_t now, int64_t *out);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "timeutil.h"
#include "error.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t medic_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * MEDIC_NS_PER_SEC + ts.tv_nsec;
}

int64_t medic_time_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * MEDIC_NS_PER_SEC + ts.tv_nsec;
}

static int64_t boottime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * MEDIC_NS_PER_SEC + ts.tv_nsec;
}

void medic_steady_clock_start(struct medic_steady_clock *c)
{
    c->boot0 = boottime();
    c->wall0 = medic_time_now();
}

int64_t medic_steady_clock_now(const struct medic_steady_clock *c)
{
    return c->wall0 + (boottime() - c->boot0);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant). */
int64_t medic_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void medic_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int read_digits(const char *s, size_t len, size_t *pos, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (*pos >= len || s[*pos] < '0' || s[*pos] > '9')
            return -1;
        v = v * 10 + (s[*pos] - '0');
        (*pos)++;
    }
    *out = v;
    return 0;
}

static int expect_char(const char *s, size_t len, size_t *pos, char c1, char c2)
{
    if (*pos >= len || (s[*pos] != c1 && s[*pos] != c2))
        return -1;
    (*pos)++;
    return 0;
}

static int is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int medic_time_parse_rfc3339(const char *s, size_t len, int64_t *out)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    size_t pos = 0;
    int year, mon, day, hour, min, sec, nsec = 0;
    if (read_digits(s, len, &pos, 4, &year) || expect_char(s, len, &pos, '-', '-') ||
        read_digits(s, len, &pos, 2, &mon) || expect_char(s, len, &pos, '-', '-') ||
        read_digits(s, len, &pos, 2, &day) || expect_char(s, len, &pos, 'T', 't') ||
        read_digits(s, len, &pos, 2, &hour) || expect_char(s, len, &pos, ':', ':') ||
        read_digits(s, len, &pos, 2, &min) || expect_char(s, len, &pos, ':', ':') ||
        read_digits(s, len, &pos, 2, &sec))
        return MEDIC_E_INVALID;
    if (mon < 1 || mon > 12 || day < 1 || hour > 23 || min > 59 || sec > 60)
        return MEDIC_E_INVALID;
    int maxday = mdays[mon - 1] + (mon == 2 && is_leap(year));
    if (day > maxday)
        return MEDIC_E_INVALID;
    if (pos < len && s[pos] == '.') {
        pos++;
        int digits = 0;
        while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            if (digits < 9) {
                nsec = nsec * 10 + (s[pos] - '0');
                digits++;
            } else if (digits >= 18) {
                return MEDIC_E_INVALID;
            } else {
                digits++;
            }
            pos++;
        }
        if (digits == 0)
            return MEDIC_E_INVALID;
        for (int i = digits; i < 9; i++)
            nsec *= 10;
    }
    int offset_min = 0;
    if (pos < len && (s[pos] == 'Z' || s[pos] == 'z')) {
        pos++;
    } else if (pos < len && (s[pos] == '+' || s[pos] == '-')) {
        int sign = s[pos] == '-' ? -1 : 1;
        int oh, om;
        pos++;
        if (read_digits(s, len, &pos, 2, &oh) || expect_char(s, len, &pos, ':', ':') ||
            read_digits(s, len, &pos, 2, &om) || oh > 23 || om > 59)
            return MEDIC_E_INVALID;
        offset_min = sign * (oh * 60 + om);
    } else {
        return MEDIC_E_INVALID;
    }
    if (pos != len)
        return MEDIC_E_INVALID;
    if (year == 1 && mon == 1 && day == 1 && hour == 0 && min == 0 && sec == 0 && nsec == 0 &&
        offset_min == 0) {
        *out = MEDIC_TIME_UNSET;
        return 0;
    }
    if (year < 1678 || year > 2261)
        return MEDIC_E_INVALID;
    int64_t secs = medic_days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec -
                   (int64_t)offset_min * 60;
    *out = secs * MEDIC_NS_PER_SEC + nsec;
    return 0;
}

char *medic_time_format(int64_t t, char *out, size_t size)
{
    if (t == MEDIC_TIME_UNSET) {
        snprintf(out, size, "0001-01-01T00:00:00Z");
        return out;
    }
    int64_t secs = t / MEDIC_NS_PER_SEC;
    int64_t rem = t % MEDIC_NS_PER_SEC;
    if (rem < 0) {
        rem += MEDIC_NS_PER_SEC;
        secs--;
    }
    int64_t days = secs / 86400;
    int64_t sod = secs % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    int64_t y;
    int m, d;
    medic_civil_from_days(days, &y, &m, &d);
    snprintf(out, size, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
             (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60),
             (int)(rem / MEDIC_NS_PER_MS));
    return out;
}

int medic_duration_parse(const char *s, int64_t *out)
{
    int64_t total = 0;
    const char *p = s;
    if (!*p)
        return MEDIC_E_INVALID;
    while (*p) {
        if (*p < '0' || *p > '9')
            return MEDIC_E_INVALID;
        int64_t n = 0;
        while (*p >= '0' && *p <= '9') {
            if (n > INT64_C(1000000000))
                return MEDIC_E_INVALID;
            n = n * 10 + (*p - '0');
            p++;
        }
        int64_t unit;
        if (strncmp(p, "ms", 2) == 0) {
            unit = MEDIC_NS_PER_MS;
            p += 2;
        } else if (*p == 's') {
            unit = MEDIC_NS_PER_SEC;
            p++;
        } else if (*p == 'm') {
            unit = 60 * MEDIC_NS_PER_SEC;
            p++;
        } else if (*p == 'h') {
            unit = 3600 * MEDIC_NS_PER_SEC;
            p++;
        } else if (*p == 'd') {
            unit = 86400 * MEDIC_NS_PER_SEC;
            p++;
        } else if (*p == 'w') {
            unit = 7 * 86400 * MEDIC_NS_PER_SEC;
            p++;
        } else {
            return MEDIC_E_INVALID;
        }
        if (n > INT64_MAX / unit || total > INT64_MAX - n * unit)
            return MEDIC_E_INVALID;
        total += n * unit;
    }
    *out = total;
    return 0;
}

int medic_time_parse_bound(const char *s, int64_t now, int64_t *out)
{
    int64_t d;
    if (medic_duration_parse(s, &d) == 0) {
        *out = now - d;
        return 0;
    }
    if (medic_time_parse_rfc3339(s, strlen(s), out) == 0 && *out != MEDIC_TIME_UNSET)
        return 0;
    return MEDIC_E_INVALID;
}

char *medic_duration_format(int64_t ns, char *out, size_t size)
{
    int64_t s = ns / MEDIC_NS_PER_SEC;
    if (ns % MEDIC_NS_PER_SEC != 0 && ns % MEDIC_NS_PER_MS == 0)
        snprintf(out, size, "%lldms", (long long)(ns / MEDIC_NS_PER_MS));
    else if (s % 86400 == 0 && s >= 86400)
        snprintf(out, size, "%lldd", (long long)(s / 86400));
    else if (s % 3600 == 0 && s >= 3600)
        snprintf(out, size, "%lldh", (long long)(s / 3600));
    else if (s % 60 == 0 && s >= 60)
        snprintf(out, size, "%lldm", (long long)(s / 60));
    else
        snprintf(out, size, "%llds", (long long)s);
    return out;
}

void medic_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0)
        MEDIC_BUG("the monotonic clock is refused for condition variables");
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

struct timespec medic_time_deadline_in(int64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t at = (int64_t)t.tv_sec * MEDIC_NS_PER_SEC + t.tv_nsec + (ns > 0 ? ns : 0);
    t.tv_sec = (time_t)(at / MEDIC_NS_PER_SEC);
    t.tv_nsec = (long)(at % MEDIC_NS_PER_SEC);
    return t;
}

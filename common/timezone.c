/* SPDX-License-Identifier: Apache-2.0 */
#include "timezone.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TZIF_MAX ((size_t)1 << 20)

/* A POSIX TZ rule (the footer of a TZif file, for instants past its
 * table): std offset, and a DST offset between two Mm.w.d dates. */
struct rule {
    int std, dst; /* offsets, seconds east */
    int has_dst;
    int month[2], week[2], day[2], at[2]; /* start, end; at: seconds after local midnight */
};

struct medic_tz {
    int64_t *times; /* transitions, ascending */
    int *offsets;   /* the offset from each on */
    size_t count;
    int before; /* the offset before the first */
    struct rule rule;
    int has_rule;
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* [+-]hh[:mm[:ss]] into seconds; the text after it in *end. */
static int hms(const char *s, const char **end, int *out)
{
    int sign = 1, h = 0, m = 0, sec = 0;
    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    if (*s < '0' || *s > '9')
        return -1;
    h = (int)strtol(s, (char **)&s, 10);
    if (*s == ':')
        m = (int)strtol(s + 1, (char **)&s, 10);
    if (*s == ':')
        sec = (int)strtol(s + 1, (char **)&s, 10);
    *out = sign * (h * 3600 + m * 60 + sec);
    *end = s;
    return h > 167 ? -1 : 0;
}

static const char *zone_name(const char *s)
{
    if (*s == '<') {
        const char *e = strchr(s, '>');
        return e ? e + 1 : NULL;
    }
    while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))
        s++;
    return s;
}

/* ",Mm.w.d[/time]" into the k-th date of r. */
static int mdate(const char *s, const char **end, struct rule *r, int k)
{
    if (*s++ != ',' || *s++ != 'M')
        return -1;
    r->month[k] = (int)strtol(s, (char **)&s, 10);
    if (*s++ != '.')
        return -1;
    r->week[k] = (int)strtol(s, (char **)&s, 10);
    if (*s++ != '.')
        return -1;
    r->day[k] = (int)strtol(s, (char **)&s, 10);
    r->at[k] = 7200;
    if (*s == '/' && hms(s + 1, &s, &r->at[k]))
        return -1;
    *end = s;
    return r->month[k] < 1 || r->month[k] > 12 || r->week[k] < 1 || r->week[k] > 5 ||
                   r->day[k] < 0 || r->day[k] > 6
               ? -1
               : 0;
}

static int parse_rule(const char *s, struct rule *r)
{
    int off;
    if (!(s = zone_name(s)) || hms(s, &s, &off))
        return -1;
    r->std = -off; /* POSIX counts west */
    if (!*s)
        return 0;
    if (!(s = zone_name(s)))
        return -1;
    r->has_dst = 1;
    r->dst = r->std + 3600;
    if (*s && *s != ',') {
        if (hms(s, &s, &off))
            return -1;
        r->dst = -off;
    }
    return mdate(s, &s, r, 0) || mdate(s, &s, r, 1) || *s ? -1 : 0;
}

/* Local midnight (as days since the epoch) of the w-th weekday d of month
 * m of year y (w 5: the last). */
static int64_t nth_weekday(int64_t y, int m, int w, int d)
{
    int64_t first = medic_days_from_civil(y, m, 1);
    int wday = (int)(((first % 7) + 11) % 7); /* 1970-01-01 was a Thursday (4) */
    int64_t day = first + (d - wday + 7) % 7 + (int64_t)(w - 1) * 7;
    int next_month_len =
        (int)(medic_days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) - first);
    while (day - first >= next_month_len)
        day -= 7;
    return day;
}

static int rule_offset(const struct rule *r, int64_t t)
{
    if (!r->has_dst)
        return r->std;
    int64_t local = t + r->std;
    int64_t days = local >= 0 ? local / 86400 : (local - 86399) / 86400;
    int64_t y;
    int month, day;
    medic_civil_from_days(days, &y, &month, &day);
    /* the instants DST starts (std time) and ends (dst time), in UTC */
    int64_t start = nth_weekday(y, r->month[0], r->week[0], r->day[0]) * 86400 + r->at[0] - r->std;
    int64_t end = nth_weekday(y, r->month[1], r->week[1], r->day[1]) * 86400 + r->at[1] - r->dst;
    int in = start < end ? t >= start && t < end : !(t >= end && t < start);
    return in ? r->dst : r->std;
}

static int fail(char *why, size_t size, const char *what)
{
    snprintf(why, size, "%s", what);
    return -1;
}

int medic_tz_load(const char *name, struct medic_tz **out, char *why, size_t size)
{
    *out = NULL;
    struct medic_tz *tz = calloc(1, sizeof(*tz));
    if (!tz)
        return fail(why, size, "out of memory");
    if (strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0) {
        *out = tz;
        return 0;
    }
    size_t n = strlen(name);
    if (n == 0 || n > 64 || strstr(name, "..") || name[0] == '/' ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/_+-") != n) {
        free(tz);
        return fail(why, size, "not a time zone name (Europe/Berlin, America/New_York, UTC)");
    }
    const char *dir = getenv("MEDIC_ZONEINFO");
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "/usr/share/zoneinfo", name);
    FILE *f = fopen(path, "rb");
    unsigned char *b = malloc(TZIF_MAX);
    size_t len = f && b ? fread(b, 1, TZIF_MAX, f) : 0;
    if (f)
        fclose(f);
    int rc = 0;
    if (!f || !b) {
        rc = fail(why, size, !b ? "out of memory" : "no such time zone (in /usr/share/zoneinfo)");
    } else if (len < 44 || memcmp(b, "TZif", 4) != 0 || b[4] < '2') {
        rc = fail(why, size, "not a TZif version 2 file");
    } else {
        /* skip the 32-bit block to the 64-bit one */
        const unsigned char *h = b;
        size_t v1 = be32(h + 32) * 5 + be32(h + 36) * 6 + be32(h + 40) + be32(h + 28) * 8 +
                    be32(h + 24) + be32(h + 20);
        h = b + 44 + v1;
        if ((size_t)(h - b) + 44 > len || memcmp(h, "TZif", 4) != 0) {
            rc = fail(why, size, "a TZif file cut short");
        } else {
            uint32_t isut = be32(h + 20), isstd = be32(h + 24), leap = be32(h + 28),
                     timecnt = be32(h + 32), typecnt = be32(h + 36), charcnt = be32(h + 40);
            const unsigned char *d = h + 44;
            size_t need = (size_t)timecnt * 9 + (size_t)typecnt * 6 + charcnt + (size_t)leap * 12 +
                          isstd + isut;
            if (typecnt == 0 || typecnt > 256 || timecnt > 100000 || (size_t)(d - b) + need > len) {
                rc = fail(why, size, "a TZif file cut short");
            } else {
                const unsigned char *idx = d + (size_t)timecnt * 8;
                const unsigned char *types = idx + timecnt;
                tz->times = calloc(timecnt ? timecnt : 1, sizeof(*tz->times));
                tz->offsets = calloc(timecnt ? timecnt : 1, sizeof(*tz->offsets));
                if (!tz->times || !tz->offsets)
                    rc = fail(why, size, "out of memory");
                for (uint32_t i = 0; rc == 0 && i < timecnt; i++) {
                    if (idx[i] >= typecnt) {
                        rc = fail(why, size, "a TZif file with a bad type");
                        break;
                    }
                    tz->times[i] = be64(d + (size_t)i * 8);
                    tz->offsets[i] = (int32_t)be32(types + (size_t)idx[i] * 6);
                }
                tz->count = rc == 0 ? timecnt : 0;
                tz->before = (int32_t)be32(types);
                /* the footer: the rule past the table */
                const unsigned char *foot = d + need;
                if (rc == 0 && (size_t)(foot - b) + 2 < len && foot[0] == '\n') {
                    const unsigned char *e = memchr(foot + 1, '\n', len - (size_t)(foot - b) - 1);
                    char text[128];
                    size_t fl = e ? (size_t)(e - foot - 1) : 0;
                    if (e && fl > 0 && fl < sizeof(text)) {
                        memcpy(text, foot + 1, fl);
                        text[fl] = '\0';
                        tz->has_rule = parse_rule(text, &tz->rule) == 0;
                    }
                }
            }
        }
    }
    free(b);
    if (rc) {
        medic_tz_free(tz);
        return rc;
    }
    *out = tz;
    return 0;
}

int medic_tz_offset(const struct medic_tz *tz, int64_t t)
{
    if (!tz->count)
        return tz->has_rule ? rule_offset(&tz->rule, t) : tz->before;
    if (t < tz->times[0])
        return tz->before;
    if (t >= tz->times[tz->count - 1] && tz->has_rule)
        return rule_offset(&tz->rule, t);
    size_t lo = 0, hi = tz->count; /* the last transition at or before t */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (tz->times[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return tz->offsets[lo];
}

void medic_tz_free(struct medic_tz *tz)
{
    if (!tz)
        return;
    free(tz->times);
    free(tz->offsets);
    free(tz);
}

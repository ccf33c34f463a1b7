/* SPDX-License-Identifier: Apache-2.0 */
#include "hostlist.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 256
#define MAX_PARTS 8   /* literal and bracket parts of one entry */
#define MAX_RANGES 32 /* ranges in one bracket */
#define MAX_DIGITS 9

struct range {
    long lo, hi;
    int width; /* digits exactly (zero-padded), or 0: as written */
};

struct part {
    const char *literal; /* into the copy of the text; NULL for a bracket */
    size_t len;
    struct range ranges[MAX_RANGES];
    size_t range_count;
};

struct entry {
    struct part parts[MAX_PARTS];
    size_t part_count;
};

struct medic_hostlist {
    char *text;
    struct entry *entries;
    size_t entry_count;
};

static int fail(char *why, size_t size, const char *message)
{
    snprintf(why, size, "%s", message);
    return -1;
}

static int digits(const char *s, size_t len)
{
    if (len == 0 || len > MAX_DIGITS)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

static long number(const char *s, size_t len)
{
    long v = 0;
    for (size_t i = 0; i < len; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

/* One bracket's content, "0001-0100,0200", into p. */
static int parse_bracket(const char *s, size_t len, struct part *p, char *why, size_t size)
{
    for (size_t at = 0; at <= len;) {
        size_t end = at;
        while (end < len && s[end] != ',')
            end++;
        const char *dash = memchr(s + at, '-', end - at);
        size_t lo_len = dash ? (size_t)(dash - (s + at)) : end - at;
        const char *hi = dash ? dash + 1 : s + at;
        size_t hi_len = dash ? (size_t)(s + end - hi) : lo_len;
        if (!digits(s + at, lo_len) || !digits(hi, hi_len))
            return fail(why, size,
                        "a range in brackets is N or N-M, numbers of at most 9 digits "
                        "(gpu-[0001-0100,0200])");
        if (p->range_count == MAX_RANGES)
            return fail(why, size, "at most 32 ranges in one pair of brackets");
        struct range *r = &p->ranges[p->range_count++];
        r->lo = number(s + at, lo_len);
        r->hi = number(hi, hi_len);
        r->width = lo_len > 1 && s[at] == '0' ? (int)lo_len : 0;
        if (r->hi < r->lo)
            return fail(why, size, "a range runs backwards ([10-1]): write [1-10]");
        if (r->width && hi_len != lo_len)
            return fail(why, size,
                        "a zero-padded range has bounds of one width ([0001-0100], not "
                        "[0001-100])");
        at = end + 1;
    }
    return 0;
}

static int parse_entry(char *s, size_t len, struct entry *e, char *why, size_t size)
{
    if (len == 0)
        return fail(why, size, "an empty name (two commas, or one at an end)");
    for (size_t at = 0; at < len;) {
        if (e->part_count == MAX_PARTS)
            return fail(why, size, "at most 8 parts in one name");
        struct part *p = &e->parts[e->part_count++];
        if (s[at] == '[') {
            const char *close = memchr(s + at, ']', len - at);
            if (!close)
                return fail(why, size, "a '[' without its ']'");
            size_t inner = (size_t)(close - (s + at + 1));
            if (memchr(s + at + 1, '[', inner))
                return fail(why, size, "brackets do not nest");
            if (parse_bracket(s + at + 1, inner, p, why, size))
                return -1;
            at += inner + 2;
            continue;
        }
        size_t end = at;
        while (end < len && s[end] != '[') {
            if (s[end] == ']')
                return fail(why, size, "a ']' without its '['");
            unsigned char c = (unsigned char)s[end];
            if (c <= ' ' || c == 0x7f || c == '*' || c == '?' || c == '^' || c == '$' || c == '(' ||
                c == ')' || c == '|' || c == '\\' || c == '{' || c == '}')
                return fail(why, size,
                            "a node name holds letters, digits, '-', '_', '.' and ranges in "
                            "brackets; for a regular expression write ~REGEX");
            end++;
        }
        p->literal = s + at;
        p->len = end - at;
        at = end;
    }
    return 0;
}

int medic_hostlist_parse(const char *text, struct medic_hostlist **out, char *why, size_t size)
{
    *out = NULL;
    size_t len = strlen(text);
    if (len == 0)
        return fail(why, size, "an empty hostlist");
    if (len > MEDIC_HOSTLIST_MAX_BYTES)
        return fail(why, size, "a hostlist of more than 4096 characters");
    size_t entries = 1;
    int level = 0;
    for (size_t i = 0; i < len; i++) {
        level += text[i] == '[' ? 1 : text[i] == ']' ? -1 : 0;
        entries += text[i] == ',' && level == 0;
    }
    if (entries > MAX_ENTRIES)
        return fail(why, size, "at most 256 names in one hostlist");
    struct medic_hostlist *h = calloc(1, sizeof(*h));
    if (h)
        h->text = strdup(text);
    if (h)
        h->entries = calloc(entries, sizeof(*h->entries));
    if (!h || !h->text || !h->entries) {
        medic_hostlist_free(h);
        return fail(why, size, "out of memory");
    }
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = h->text[i];
        depth += c == '[' ? 1 : c == ']' ? -1 : 0;
        if ((c == ',' && depth == 0) || c == '\0') {
            if (parse_entry(h->text + start, i - start, &h->entries[h->entry_count++], why, size)) {
                medic_hostlist_free(h);
                return -1;
            }
            start = i + 1;
        }
    }
    *out = h;
    return 0;
}

static int in_ranges(const struct part *p, const char *s, size_t n)
{
    long v = number(s, n);
    for (size_t i = 0; i < p->range_count; i++) {
        const struct range *r = &p->ranges[i];
        if (v < r->lo || v > r->hi)
            continue;
        if (r->width ? (int)n == r->width : n == 1 || s[0] != '0')
            return 1;
    }
    return 0;
}

/* Whether name matches parts [k, count) of e. */
static int match_parts(const struct entry *e, size_t k, const char *name)
{
    if (k == e->part_count)
        return *name == '\0';
    const struct part *p = &e->parts[k];
    if (p->literal)
        return strncmp(name, p->literal, p->len) == 0 && match_parts(e, k + 1, name + p->len);
    for (size_t n = 1; n <= MAX_DIGITS && name[n - 1] >= '0' && name[n - 1] <= '9'; n++)
        if (in_ranges(p, name, n) && match_parts(e, k + 1, name + n))
            return 1;
    return 0;
}

int medic_hostlist_match(const struct medic_hostlist *h, const char *name)
{
    for (size_t i = 0; h && i < h->entry_count; i++)
        if (match_parts(&h->entries[i], 0, name))
            return 1;
    return 0;
}

/* The names of parts [k, count) of e after the len bytes in buf: counted
 * (fn NULL) or passed to fn. */
static int expand_parts(const struct entry *e, size_t k, char *buf, size_t len, size_t *count,
                        int (*fn)(void *arg, const char *name), void *arg)
{
    if (k == e->part_count) {
        buf[len] = '\0';
        ++*count;
        return fn ? fn(arg, buf) : 0;
    }
    const struct part *p = &e->parts[k];
    if (p->literal) {
        if (len + p->len >= MEDIC_HOSTLIST_MAX_BYTES)
            return -1;
        memcpy(buf + len, p->literal, p->len);
        return expand_parts(e, k + 1, buf, len + p->len, count, fn, arg);
    }
    for (size_t i = 0; i < p->range_count; i++)
        for (long v = p->ranges[i].lo; v <= p->ranges[i].hi; v++) {
            if (len + MAX_DIGITS + 1 >= MEDIC_HOSTLIST_MAX_BYTES)
                return -1;
            int n = snprintf(buf + len, MAX_DIGITS + 1, "%0*ld", p->ranges[i].width, v);
            int rc = expand_parts(e, k + 1, buf, len + (size_t)n, count, fn, arg);
            if (rc)
                return rc;
        }
    return 0;
}

/* The names of h: how many (fn NULL, stopping past max), or each to fn. */
static int expand(const struct medic_hostlist *h, size_t max, size_t *count,
                  int (*fn)(void *arg, const char *name), void *arg)
{
    char buf[MEDIC_HOSTLIST_MAX_BYTES + 1];
    for (size_t i = 0; i < h->entry_count; i++) {
        /* a range's size first, so that a huge one is not walked */
        size_t names = 1;
        for (size_t k = 0; k < h->entries[i].part_count && names <= max; k++) {
            const struct part *p = &h->entries[i].parts[k];
            size_t in = 0;
            for (size_t r = 0; !p->literal && r < p->range_count; r++)
                in += (size_t)(p->ranges[r].hi - p->ranges[r].lo + 1);
            if (!p->literal)
                names *= in;
        }
        if (names > max || *count + names > max)
            return -1;
        int rc = expand_parts(&h->entries[i], 0, buf, 0, count, fn, arg);
        if (rc)
            return rc;
    }
    return 0;
}

int medic_hostlist_expand(const struct medic_hostlist *h, size_t max,
                          int (*fn)(void *arg, const char *name), void *arg)
{
    size_t count = 0;
    if (expand(h, max, &count, NULL, NULL))
        return -1;
    count = 0;
    return expand(h, max, &count, fn, arg);
}

void medic_hostlist_free(struct medic_hostlist *h)
{
    if (!h)
        return;
    free(h->text);
    free(h->entries);
    free(h);
}

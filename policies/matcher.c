/* SPDX-License-Identifier: Apache-2.0 */
#include "matcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cursor {
    const char *s;
    size_t len, pos;
};

static void skip_space(struct cursor *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\n'))
        c->pos++;
}

static int fail(struct cursor *c, int *col, struct medic_error *err, const char *what)
{
    if (col)
        *col = (int)c->pos + 1;
    return medic_error_set(err, MEDIC_E_INVALID, "matcher: %s at column %zu", what, c->pos + 1);
}

static int is_name_char(char ch, int first)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (!first && ch >= '0' && ch <= '9');
}

/* A quoted string with Go's escapes \" \\ \n \t, or a bare word. */
static int read_value(struct cursor *c, char **out, int *col, struct medic_error *err)
{
    char *buf = malloc(c->len + 1);
    size_t n = 0;
    if (!buf)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (c->pos < c->len && c->s[c->pos] == '"') {
        c->pos++;
        for (;;) {
            if (c->pos >= c->len) {
                free(buf);
                return fail(c, col, err, "unterminated quoted value");
            }
            char ch = c->s[c->pos++];
            if (ch == '"')
                break;
            if (ch == '\\') {
                if (c->pos >= c->len) {
                    free(buf);
                    return fail(c, col, err, "unterminated quoted value");
                }
                char e = c->s[c->pos++];
                ch = e == 'n' ? '\n' : e == 't' ? '\t' : e;
                if (e != 'n' && e != 't' && e != '"' && e != '\\') {
                    /* keep other escapes for the regex engine (\. \| ...) */
                    buf[n++] = '\\';
                }
            }
            buf[n++] = ch;
        }
    } else {
        while (c->pos < c->len && c->s[c->pos] != ',' && c->s[c->pos] != '}' && c->s[c->pos] != ' ')
            buf[n++] = c->s[c->pos++];
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

/* Refuses what POSIX would read differently from RE2, and what makes
 * glibc's regcomp blow up in time or memory: stacked quantifiers (a++),
 * large bounded repeats (a{1000}), very long patterns. */
static const char *regex_problem(const char *pattern)
{
    static const char *const unsupported[] = {"\\d", "\\D", "\\w", "\\W", "\\s", "\\S",
                                              "(?",  "*?",  "+?",  "??",  "\\b"};
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (strstr(pattern, unsupported[i]))
            return "uses RE2 syntax that POSIX extended regexes do not support (\\d, \\w, "
                   "\\s, \\b, (?...), lazy quantifiers)";
    if (strlen(pattern) > POLICY_REGEX_MAX_BYTES)
        return "is longer than 512 bytes";
    int quantified = 0, in_class = 0;
    for (const char *p = pattern; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            quantified = 0;
            continue;
        }
        if (in_class) {
            in_class = *p != ']';
            continue;
        }
        if (*p == '[') {
            in_class = 1;
            if (p[1] == '^')
                p++;
            if (p[1] == ']')
                p++;
            quantified = 0;
            continue;
        }
        int quantifier = *p == '*' || *p == '+' || *p == '?' || *p == '{';
        if (quantifier && quantified)
            return "stacks quantifiers (such as a++ or a*{2}), which POSIX reads as nested "
                   "repetition";
        if (*p == '{') {
            char *end;
            long lo = strtol(p + 1, &end, 10), hi = lo;
            if (*end == ',')
                hi = end[1] == '}' ? lo : strtol(end + 1, &end, 10);
            if (lo > 100 || hi > 100)
                return "repeats more than 100 times ({n,m} with n or m over 100)";
        }
        quantified = quantifier;
        if (*p == '{')
            while (p[1] && p[1] != '}')
                p++;
    }
    return NULL;
}

int policy_regex_compile(const char *pattern, regex_t *out, char *why, size_t size)
{
    const char *problem = regex_problem(pattern);
    if (problem) {
        snprintf(why, size, "%s", problem);
        return MEDIC_E_INVALID;
    }
    size_t len = strlen(pattern);
    char *anchored = malloc(len + 5);
    if (!anchored) {
        snprintf(why, size, "out of memory");
        return MEDIC_E_NOMEM;
    }
    snprintf(anchored, len + 5, "^(%s)$", pattern);
    int rc = regcomp(out, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (rc != 0) {
        regerror(rc, out, why, size);
        return MEDIC_E_INVALID;
    }
    return 0;
}

static int compile(struct policy_matcher *m, struct cursor *c, int *col, struct medic_error *err)
{
    char why[192], what[320];
    int rc = policy_regex_compile(m->value, &m->re, why, sizeof(why));
    if (rc == MEDIC_E_NOMEM)
        return medic_error_set(err, rc, "out of memory");
    if (rc) {
        snprintf(what, sizeof(what), "the regex of '%.64s' %s%s", m->name,
                 strncmp(why, "uses", 4) == 0 || strncmp(why, "is ", 3) == 0 ||
                         strncmp(why, "stacks", 6) == 0 || strncmp(why, "repeats", 7) == 0
                     ? ""
                     : "is invalid: ",
                 why);
        return fail(c, col, err, what);
    }
    return 0;
}

static void matcher_release(struct policy_matcher *m)
{
    if (m->op == MATCHER_RE || m->op == MATCHER_NRE)
        regfree(&m->re);
    free(m->name);
    free(m->value);
}

int policy_matchers_parse(const char *text, size_t len, struct policy_matchers *out, int *col,
                          struct medic_error *err)
{
    struct cursor c = {text, len, 0};
    memset(out, 0, sizeof(*out));
    if (len > POLICY_MATCHER_TEXT_MAX)
        return fail(&c, col, err, "longer than 4096 bytes");
    out->items = calloc(POLICY_MATCHERS_MAX, sizeof(*out->items));
    if (!out->items)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = 0;
    skip_space(&c);
    int braces = c.pos < len && text[c.pos] == '{';
    if (braces)
        c.pos++;
    for (;;) {
        skip_space(&c);
        if (c.pos >= len || (braces && text[c.pos] == '}'))
            break;
        if (out->count == POLICY_MATCHERS_MAX) {
            rc = fail(&c, col, err, "more than 32 matchers");
            goto out;
        }
        struct policy_matcher *m = &out->items[out->count];
        size_t start = c.pos;
        if (c.pos < len && text[c.pos] == '"') {
            if ((rc = read_value(&c, &m->name, col, err)))
                goto out;
        } else {
            while (c.pos < len && is_name_char(text[c.pos], c.pos == start))
                c.pos++;
            if (c.pos == start) {
                rc = fail(&c, col, err, "expected a label name");
                goto out;
            }
            m->name = strndup(text + start, c.pos - start);
        }
        skip_space(&c);
        if (c.pos + 1 < len && text[c.pos] == '=' && text[c.pos + 1] == '~') {
            m->op = MATCHER_RE;
            c.pos += 2;
        } else if (c.pos + 1 < len && text[c.pos] == '!' && text[c.pos + 1] == '~') {
            m->op = MATCHER_NRE;
            c.pos += 2;
        } else if (c.pos + 1 < len && text[c.pos] == '!' && text[c.pos + 1] == '=') {
            m->op = MATCHER_NE;
            c.pos += 2;
        } else if (c.pos < len && text[c.pos] == '=') {
            m->op = MATCHER_EQ;
            c.pos++;
        } else {
            free(m->name);
            m->name = NULL;
            rc = fail(&c, col, err, "expected =, !=, =~ or !~");
            goto out;
        }
        skip_space(&c);
        size_t value_start = c.pos;
        if ((rc = read_value(&c, &m->value, col, err))) {
            free(m->name);
            m->name = NULL;
            goto out;
        }
        if ((m->op == MATCHER_RE || m->op == MATCHER_NRE) &&
            (c.pos = value_start, rc = compile(m, &c, col, err))) {
            m->op = MATCHER_EQ; /* nothing compiled to free */
            out->count++;
            goto out;
        }
        if (m->op == MATCHER_RE || m->op == MATCHER_NRE) {
            /* back past the value compile() was pointed at */
            struct cursor skip = {text, len, value_start};
            char *again = NULL;
            if (read_value(&skip, &again, col, err) == 0) {
                free(again);
                c.pos = skip.pos;
            }
        }
        out->count++;
        skip_space(&c);
        if (c.pos < len && text[c.pos] == ',') {
            c.pos++;
            continue;
        }
        if (c.pos >= len || (braces && text[c.pos] == '}'))
            break;
        rc = fail(&c, col, err, "expected ',' between matchers");
        goto out;
    }
    if (braces) {
        if (c.pos >= len || text[c.pos] != '}') {
            rc = fail(&c, col, err, "missing '}'");
            goto out;
        }
        c.pos++;
        skip_space(&c);
    }
    if (c.pos != len)
        rc = fail(&c, col, err, "unexpected text after the matchers");
    else if (out->count == 0)
        rc = fail(&c, col, err, "no matchers (match every alert with {alertname=~\".+\"})");
out:
    if (rc)
        policy_matchers_release(out);
    return rc;
}

void policy_matchers_release(struct policy_matchers *m)
{
    for (size_t i = 0; m->items && i < m->count; i++)
        matcher_release(&m->items[i]);
    free(m->items);
    memset(m, 0, sizeof(*m));
}

static int one_matches(const struct policy_matcher *x, const struct medic_labels *labels)
{
    const char *v = medic_labels_get(labels, x->name);
    if (!v)
        v = "";
    switch (x->op) {
    case MATCHER_EQ:
        return strcmp(v, x->value) == 0;
    case MATCHER_NE:
        return strcmp(v, x->value) != 0;
    case MATCHER_RE:
        return regexec(&x->re, v, 0, NULL, 0) == 0;
    default:
        return regexec(&x->re, v, 0, NULL, 0) != 0;
    }
}

int policy_matchers_match(const struct policy_matchers *m, const struct medic_labels *labels)
{
    for (size_t i = 0; i < m->count; i++)
        if (!one_matches(&m->items[i], labels))
            return 0;
    return 1;
}

const struct policy_matcher *policy_matchers_first_miss(const struct policy_matchers *m,
                                                        const struct medic_labels *labels,
                                                        size_t *hits)
{
    const struct policy_matcher *miss = NULL;
    *hits = 0;
    for (size_t i = 0; i < m->count; i++) {
        if (one_matches(&m->items[i], labels))
            ++*hits;
        else if (!miss)
            miss = &m->items[i];
    }
    return miss;
}

void policy_matcher_explain(const struct policy_matcher *x, const struct medic_labels *labels,
                            char *out, size_t size)
{
    static const char *const ops[] = {"=", "!=", "=~", "!~"};
    const char *v = medic_labels_get(labels, x->name);
    int n = snprintf(out, size, "matcher %.60s%s\"%.80s\" fails: ", x->name, ops[x->op], x->value);
    if (n < 0 || (size_t)n >= size)
        return;
    if (v)
        snprintf(out + n, size - (size_t)n, "its %.60s is \"%.80s\"", x->name, v);
    else
        snprintf(out + n, size - (size_t)n, "the alert has no label %.60s", x->name);
}

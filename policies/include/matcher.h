/* SPDX-License-Identifier: Apache-2.0 */
/* Alertmanager's label matchers: `{alertname="GPUXidError", xid=~"79|48"}`
 * with =, !=, =~ and !~. Regexes are anchored at both ends, as in
 * Alertmanager, and use POSIX extended syntax (glibc regcomp): alternation,
 * groups, classes and repetition work as in RE2; RE2-only syntax such as
 * \d, (?i) or non-greedy repetition is refused when the policy is loaded. */
#ifndef MEDIC_POLICIES_MATCHER_H
#define MEDIC_POLICIES_MATCHER_H

#include "alert.h"
#include "error.h"

#include <regex.h>
#include <stddef.h>

enum matcher_op { MATCHER_EQ, MATCHER_NE, MATCHER_RE, MATCHER_NRE };

struct policy_matcher {
    char *name;
    enum matcher_op op;
    char *value;
    regex_t re; /* compiled for MATCHER_RE and MATCHER_NRE */
};

struct policy_matchers {
    struct policy_matcher *items;
    size_t count;
};

#define POLICY_MATCHERS_MAX 32
#define POLICY_REGEX_MAX_BYTES 512
#define POLICY_MATCHER_TEXT_MAX 4096

/* Parses text (len bytes) into out. On failure returns MEDIC_E_INVALID and
 * err says what, with the 1-based column in *col (when col is not NULL). */
int policy_matchers_parse(const char *text, size_t len, struct policy_matchers *out, int *col,
                          struct medic_error *err);
void policy_matchers_release(struct policy_matchers *m);

/* Compiles pattern anchored at both ends, after refusing RE2-only syntax
 * and patterns that make regcomp explode (stacked quantifiers, repeats
 * over 100, over 512 bytes). On failure why says what is wrong. */
int policy_regex_compile(const char *pattern, regex_t *out, char *why, size_t size);

/* 1 when every matcher matches labels. A missing label matches as the
 * empty string (Alertmanager's rule: {gpu=""} matches alerts without gpu). */
int policy_matchers_match(const struct policy_matchers *m, const struct medic_labels *labels);
/* The first matcher labels fail (NULL when all pass); *hits the matchers
 * they pass. */
const struct policy_matcher *policy_matchers_first_miss(const struct policy_matchers *m,
                                                        const struct medic_labels *labels,
                                                        size_t *hits);
/* Why labels fail x, for a person: `matcher xid=~"79|48" fails: the alert
 * has no label xid` (or `: its xid is "13"`). */
void policy_matcher_explain(const struct policy_matcher *x, const struct medic_labels *labels,
                            char *out, size_t size);

#endif

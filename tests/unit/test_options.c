/* SPDX-License-Identifier: Apache-2.0 */
/* The commands' options table (common/options.c): every kind of value read,
 * bounds and bad values refused with exit status 2 and nothing taken,
 * --help, and where the arguments after the options begin. */
#include "options.h"
#include "table.h"
#include "timeutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

struct values {
    const char *name;
    long count;
    double ratio;
    int64_t wait, at, since;
    int format;
    uint64_t seed;
    const char *even;
};

static int only_even(const char *arg, void *value)
{
    if (strlen(arg) % 2)
        return -1;
    *(const char **)value = arg;
    return 0;
}

static int parse(struct values *v, int argc, char **argv, int *rest)
{
    const struct cli_option options[] = {
        CLI_OPT_STRING("name", &v->name),
        CLI_OPT_INT("count", &v->count, 1, 10),
        CLI_OPT_REAL("ratio", &v->ratio, 0, 1),
        CLI_OPT_DURATION("wait", &v->wait, 1),
        CLI_OPT_TIME("at", &v->at),
        CLI_OPT_TIME_BOUND("since", &v->since),
        CLI_OPT_FORMAT("format", &v->format, 1),
        CLI_OPT_UINT64("seed", &v->seed),
        CLI_OPT_CALLBACK("even", &v->even, only_even, "an even number of letters"),
        CLI_OPT_END,
    };
    return cli_parse("test", "usage: test\n", argc, argv, 1, options, rest);
}

static void test_every_kind(void **state)
{
    (void)state;
    struct values v = {.count = 3};
    char *argv[] = {"test",
                    "--name",
                    "n1",
                    "--count",
                    "7",
                    "--ratio",
                    "0.25",
                    "--wait",
                    "90s",
                    "--at",
                    "2026-11-21T22:00:00Z",
                    "--since",
                    "2h",
                    "--format",
                    "csv",
                    "--seed",
                    "18446744073709551615",
                    "--even",
                    "ab",
                    "file1",
                    "file2",
                    NULL};
    int rest = 0;
    int64_t before = medic_time_now();
    assert_int_equal(parse(&v, 21, argv, &rest), 0);
    assert_int_equal(rest, 19);
    assert_string_equal(argv[rest], "file1");
    assert_string_equal(v.name, "n1");
    assert_int_equal(v.count, 7);
    assert_true(v.ratio == 0.25);
    assert_int_equal(v.wait, 90 * MEDIC_NS_PER_SEC);
    int64_t at = 0;
    medic_time_parse_rfc3339("2026-11-21T22:00:00Z", 20, &at);
    assert_int_equal(v.at, at);
    assert_true(v.since <= before - 2 * 3600 * MEDIC_NS_PER_SEC + MEDIC_NS_PER_SEC &&
                v.since >= before - 2 * 3600 * MEDIC_NS_PER_SEC - 60 * MEDIC_NS_PER_SEC);
    assert_int_equal(v.format, MEDIC_FORMAT_CSV);
    assert_true(v.seed == UINT64_MAX);
    assert_string_equal(v.even, "ab");
}

static void test_bad_values_refused(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"--count", "0"},       {"--count", "11"},   {"--count", "3x"},  {"--ratio", "1.5"},
        {"--ratio", ""},        {"--wait", "500ms"}, {"--wait", "soon"}, {"--at", "yesterday"},
        {"--since", "a while"}, {"--format", "xml"}, {"--seed", "-1"},   {"--even", "abc"},
        {"--nope", "1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct values v = {.count = 3, .ratio = 0.5};
        char *argv[] = {"test", (char *)bad[i][0], (char *)bad[i][1], NULL};
        int rest = -1;
        assert_int_equal(parse(&v, 3, argv, &rest), 2);
        assert_int_equal(rest, -1);
        assert_int_equal(v.count, 3); /* nothing taken */
        assert_true(v.ratio == 0.5);
        assert_null(v.even);
    }
    /* an option without its value */
    struct values v = {0};
    char *argv[] = {"test", "--name", NULL};
    int rest;
    assert_int_equal(parse(&v, 2, argv, &rest), 2);
}

static void test_help(void **state)
{
    (void)state;
    struct values v = {0};
    char *argv[] = {"test", "--count", "2", "--help", NULL};
    int rest;
    assert_int_equal(parse(&v, 4, argv, &rest), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_bad_values_refused),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

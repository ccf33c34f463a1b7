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
#include <stdlib.h>
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
        CLI_OPT_STRING("name", &v->name, "NAME", "a name"),
        CLI_OPT_INT("count", &v->count, 1, 10, "N", "how many"),
        CLI_OPT_REAL("ratio", &v->ratio, 0, 1, "R", "a share"),
        CLI_OPT_DURATION("wait", &v->wait, 1, "D", "how long"),
        CLI_OPT_TIME("at", &v->at, "TIME", "when"),
        CLI_OPT_TIME_BOUND("since", &v->since, "T", "from when"),
        CLI_OPT_FORMAT("format", &v->format, 1, "table, json or csv"),
        CLI_OPT_UINT64("seed", &v->seed, "N", "a seed"),
        CLI_OPT_CALLBACK("even", &v->even, only_even, "an even number of letters", "W", "a word"),
        CLI_OPT_END,
    };
    static const struct cli_help help = {"usage: test\n\n", NULL};
    return cli_parse("test", &help, argc, argv, 1, options, rest);
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

/* --help is written from the table: each option with its value's name
 * and help, headings, flags without a value, long help wrapped within 79
 * columns under its column, head and tail around them. */
static void test_usage_from_table(void **state)
{
    (void)state;
    int flag = 0;
    const char *name = NULL;
    long n = 0;
    const struct cli_option options[] = {
        CLI_OPT_STRING("name", &name, "NAME", "a name"),
        CLI_OPT_GROUP("More:"),
        CLI_OPT_FLAG("quiet", &flag, "say less"),
        CLI_OPT_INT("a-rather-long-option", &n, 0, 9, "COUNT",
                    "a help line long enough that it has to be wrapped onto a second line, "
                    "and then onto a third one, under the column the others start at"),
        CLI_OPT_END,
    };
    static const struct cli_help help = {"usage: test [--name NAME]\n\n", "After.\n"};
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    cli_usage(out, &help, options);
    fclose(out);
    assert_string_equal(
        text, "usage: test [--name NAME]\n"
              "\n"
              "Options:\n"
              "  --name NAME   a name\n"
              "\n"
              "More:\n"
              "  --quiet       say less\n"
              "  --a-rather-long-option COUNT  a help line long enough that it has to be\n"
              "                wrapped onto a second line, and then onto a third one, under\n"
              "                the column the others start at\n"
              "\n"
              "After.\n");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(strlen(line) <= 79);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_bad_values_refused),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_usage_from_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

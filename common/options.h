/* SPDX-License-Identifier: Apache-2.0 */
/* One options table for medic's commands (as git's parse-options), used
 * by cli/: each option's long name, what its value is, where it goes and
 * its help line. cli_parse reads argv with getopt_long, checks every
 * value, says in one line what a bad one should have been ("medic
 * dry-run: --risk wants a number from 0 to 1"), and writes --help from the
 * table, between the command's own head and tail (cli_usage). */
#ifndef MEDIC_CLI_OPTIONS_H
#define MEDIC_CLI_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

enum cli_option_type {
    CLI_STRING,     /* const char *: the argument as given */
    CLI_INT,        /* long within min..max */
    CLI_UINT64,     /* uint64_t */
    CLI_REAL,       /* double within min..max */
    CLI_DURATION,   /* int64_t ns (90s, 5m, 1h), at least min seconds */
    CLI_TIME,       /* int64_t ns: RFC 3339 */
    CLI_TIME_BOUND, /* int64_t ns: RFC 3339, or a duration ago (90m, 2h, 7d) */
    CLI_FORMAT,     /* int: MEDIC_FORMAT_TABLE or _JSON; _CSV too when max is 1 */
    CLI_CALLBACK,   /* parse(arg, value): 0, or non-zero when arg is not what it wants */
    CLI_FLAG,       /* int: set to 1 when given; takes no argument */
    CLI_GROUP,      /* not an option: a heading in --help */
};

struct cli_option {
    const char *name; /* --name; for CLI_GROUP, the heading ("Filters:") */
    enum cli_option_type type;
    void *value;
    double min, max;   /* CLI_INT, CLI_REAL, CLI_DURATION (min only), CLI_FORMAT (max) */
    const char *wants; /* what a value must be, for the message; NULL: said by type */
    int (*parse)(const char *arg, void *value);
    const char *arg;  /* the value's name in the help (FILE, N); NULL for a flag */
    const char *help; /* what it does, one paragraph: the help wraps it */
};

/* The table's rows: each says its value's name and its help line, from
 * which --help is written (cli_usage). */
#define CLI_OPT_STRING(name, value, arg, help)                                                     \
    {                                                                                              \
        (name), CLI_STRING, (value), 0, 0, NULL, NULL, (arg), (help)                               \
    }
#define CLI_OPT_INT(name, value, lo, hi, arg, help)                                                \
    {                                                                                              \
        (name), CLI_INT, (value), (lo), (hi), NULL, NULL, (arg), (help)                            \
    }
#define CLI_OPT_UINT64(name, value, arg, help)                                                     \
    {                                                                                              \
        (name), CLI_UINT64, (value), 0, 0, NULL, NULL, (arg), (help)                               \
    }
#define CLI_OPT_REAL(name, value, lo, hi, arg, help)                                               \
    {                                                                                              \
        (name), CLI_REAL, (value), (lo), (hi), NULL, NULL, (arg), (help)                           \
    }
#define CLI_OPT_DURATION(name, value, least_s, arg, help)                                          \
    {                                                                                              \
        (name), CLI_DURATION, (value), (least_s), 0, NULL, NULL, (arg), (help)                     \
    }
#define CLI_OPT_TIME(name, value, arg, help)                                                       \
    {                                                                                              \
        (name), CLI_TIME, (value), 0, 0, NULL, NULL, (arg), (help)                                 \
    }
#define CLI_OPT_TIME_BOUND(name, value, arg, help)                                                 \
    {                                                                                              \
        (name), CLI_TIME_BOUND, (value), 0, 0, NULL, NULL, (arg), (help)                           \
    }
#define CLI_OPT_FORMAT(name, value, csv, help)                                                     \
    {                                                                                              \
        (name), CLI_FORMAT, (value), 0, (csv), NULL, NULL, "F", (help)                             \
    }
#define CLI_OPT_CALLBACK(name, value, fn, wants, arg, help)                                        \
    {                                                                                              \
        (name), CLI_CALLBACK, (value), 0, 0, (wants), (fn), (arg), (help)                          \
    }
#define CLI_OPT_FLAG(name, value, help)                                                            \
    {                                                                                              \
        (name), CLI_FLAG, (value), 0, 0, NULL, NULL, NULL, (help)                                  \
    }
/* A heading above the rows after it in --help; the rows before the first
 * heading go under "Options:". */
#define CLI_OPT_GROUP(heading)                                                                     \
    {                                                                                              \
        (heading), CLI_GROUP, NULL, 0, 0, NULL, NULL, NULL, NULL                                   \
    }
#define CLI_OPT_END                                                                                \
    {                                                                                              \
        NULL, CLI_STRING, NULL, 0, 0, NULL, NULL, NULL, NULL                                       \
    }

/* A command's --help around its options: head (the usage lines and what
 * the command does, each paragraph ending in a blank line) before them,
 * tail (may be NULL) after. */
struct cli_help {
    const char *head;
    const char *tail;
};

/* Writes the help: head, the options table's rows under their headings
 * (each option with its value's name and its help wrapped to 79 columns),
 * tail. */
void cli_usage(FILE *out, const struct cli_help *help, const struct cli_option *options);

/* Says "medic COMMAND: " and the printf-style why on stderr, then the
 * help; returns 2, the exit status of bad usage. */
int cli_usage_error(const char *command, const struct cli_help *help,
                    const struct cli_option *options, const char *why, ...)
    __attribute__((format(printf, 4, 5)));

/* Parses a --format value for command: table or json, and csv when
 * allow_csv. Prints the error and returns -1 when the value is not one. */
int medic_cli_format(const char *command, const char *value, int allow_csv);

/* Parses argv from argv[first] on (first is 1 for a command, 2 for a
 * command's subcommand); options end at the first NULL name. Returns 0
 * with *rest the index of the first argument that is not an option; 1 when
 * --help printed the usage (exit 0); 2 when the line was wrong, said on
 * stderr with the usage (exit 2). */
int cli_parse(const char *command, const struct cli_help *help, int argc, char **argv, int first,
              const struct cli_option *options, int *rest);

#endif

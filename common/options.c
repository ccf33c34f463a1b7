/* SPDX-License-Identifier: Apache-2.0 */
#include "options.h"
#include "table.h"
#include "timeutil.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_MAX_OPTIONS 32

int medic_cli_format(const char *command, const char *value, int allow_csv)
{
    int format = medic_table_parse_format(value);
    if (format == MEDIC_FORMAT_CSV && !allow_csv)
        format = -1;
    if (format < 0)
        fprintf(stderr, "medic %s: --format is table%s or json\n", command,
                allow_csv ? ", csv" : "");
    return format;
}

/* One value into its option; 0, or non-zero when it is not what the
 * option wants (said then, on stderr). */
static int take(const char *command, const struct cli_option *o, const char *arg, int64_t now)
{
    char *end = NULL;
    int bad = 0;
    char wants[160];
    snprintf(wants, sizeof(wants), "%s", o->wants ? o->wants : "");
    switch (o->type) {
    case CLI_STRING:
        *(const char **)o->value = arg;
        return 0;
    case CLI_INT: {
        long v = strtol(arg, &end, 10);
        bad = !*arg || *end || v < (long)o->min || v > (long)o->max;
        if (!o->wants)
            snprintf(wants, sizeof(wants), "a number from %.0f to %.0f", o->min, o->max);
        if (!bad)
            *(long *)o->value = v;
        break;
    }
    case CLI_UINT64: {
        unsigned long long v = strtoull(arg, &end, 10);
        _Static_assert(sizeof(v) == sizeof(uint64_t), "a 64-bit unsigned long long");
        bad = !*arg || *end || arg[0] == '-';
        if (!o->wants)
            snprintf(wants, sizeof(wants), "a whole number");
        if (!bad)
            *(uint64_t *)o->value = (uint64_t)v;
        break;
    }
    case CLI_REAL: {
        double v = strtod(arg, &end);
        bad = !*arg || *end || !(v >= o->min && v <= o->max);
        if (!o->wants)
            snprintf(wants, sizeof(wants), "a number from %g to %g", o->min, o->max);
        if (!bad)
            *(double *)o->value = v;
        break;
    }
    case CLI_DURATION: {
        int64_t v = 0;
        bad = medic_duration_parse(arg, &v) || v < (int64_t)(o->min * 1e9);
        if (!o->wants)
            snprintf(wants, sizeof(wants), "a duration (90s, 5m, 1h)");
        if (!bad)
            *(int64_t *)o->value = v;
        break;
    }
    case CLI_TIME: {
        int64_t v = 0;
        bad = medic_time_parse_rfc3339(arg, strlen(arg), &v) || v == MEDIC_TIME_UNSET;
        if (!o->wants)
            snprintf(wants, sizeof(wants), "an RFC 3339 time (2026-11-21T22:00:00Z)");
        if (!bad)
            *(int64_t *)o->value = v;
        break;
    }
    case CLI_TIME_BOUND:
        bad = medic_time_parse_bound(arg, now, (int64_t *)o->value) != 0;
        if (!o->wants)
            snprintf(wants, sizeof(wants),
                     "a time: RFC 3339 (2026-11-21T22:00:00Z) or a duration ago (90m, 2h, 7d)");
        break;
    case CLI_FORMAT: {
        int v = medic_cli_format(command, arg, o->max > 0);
        if (v < 0)
            return 1; /* medic_cli_format said why */
        *(int *)o->value = v;
        return 0;
    }
    case CLI_CALLBACK:
        bad = o->parse(arg, o->value) != 0;
        break;
    case CLI_FLAG:
        *(int *)o->value = 1;
        return 0;
    case CLI_GROUP: /* never given to getopt */
        return 1;
    }
    if (bad)
        fprintf(stderr, "medic %s: --%s wants %s, not '%s'\n", command, o->name,
                wants[0] ? wants : "another value", arg);
    return bad;
}

#define HELP_WIDTH 79
#define HELP_COLUMN_MIN 16
#define HELP_COLUMN_MAX 24

/* "--name ARG" as the help shows it. */
static int option_spec(const struct cli_option *o, char *out, size_t size)
{
    return snprintf(out, size, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* Writes text from column at (the cursor is there), wrapped at word ends
 * to HELP_WIDTH, the lines after the first starting at column indent. */
static void wrap(FILE *out, const char *text, int at, int indent)
{
    int col = at;
    int first = 1;
    while (*text) {
        while (*text == ' ')
            text++;
        size_t word = strcspn(text, " ");
        if (!word)
            break;
        if (!first && col + 1 + (int)word > HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
            first = 1;
        }
        if (!first) {
            fputc(' ', out);
            col++;
        }
        fwrite(text, 1, word, out);
        col += (int)word;
        text += word;
        first = 0;
    }
    fputc('\n', out);
}

void cli_usage(FILE *out, const struct cli_help *help, const struct cli_option *options)
{
    char spec[128];
    int column = HELP_COLUMN_MIN;
    for (const struct cli_option *o = options; o->name; o++)
        if (o->type != CLI_GROUP) {
            int w = 2 + option_spec(o, spec, sizeof(spec)) + 2;
            if (w > column && w <= HELP_COLUMN_MAX)
                column = w;
        }
    fputs(help->head, out);
    if (options[0].name && options[0].type != CLI_GROUP)
        fputs("Options:\n", out);
    for (const struct cli_option *o = options; o->name; o++) {
        if (o->type == CLI_GROUP) {
            fprintf(out, "%s%s\n", o == options ? "" : "\n", o->name);
            continue;
        }
        int w = 2 + option_spec(o, spec, sizeof(spec));
        fprintf(out, "  %s", spec);
        if (w + 2 <= column) {
            fprintf(out, "%*s", column - w, "");
            w = column;
        } else {
            fputs("  ", out);
            w += 2;
        }
        wrap(out, o->help ? o->help : "", w, column);
    }
    if (help->tail) {
        fputc('\n', out);
        fputs(help->tail, out);
    }
}

int cli_usage_error(const char *command, const struct cli_help *help,
                    const struct cli_option *options, const char *why, ...)
{
    va_list ap;
    va_start(ap, why);
    fprintf(stderr, "medic %s: ", command);
    vfprintf(stderr, why, ap);
    va_end(ap);
    fputs("\n\n", stderr);
    cli_usage(stderr, help, options);
    return 2;
}

int cli_parse(const char *command, const struct cli_help *help, int argc, char **argv, int first,
              const struct cli_option *options, int *rest)
{
    struct option longs[CLI_MAX_OPTIONS + 2];
    size_t n = 0;
    for (size_t i = 0; options[i].name && n < CLI_MAX_OPTIONS; i++)
        if (options[i].type != CLI_GROUP)
            longs[n++] = (struct option){
                options[i].name, options[i].type == CLI_FLAG ? no_argument : required_argument,
                NULL, (int)(i + 1000)};
    longs[n++] = (struct option){"help", no_argument, NULL, 'h'};
    longs[n] = (struct option){NULL, 0, NULL, 0};
    int64_t now = medic_time_now();
    int opt;
    optind = first;
    while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (opt == 'h') {
            cli_usage(stdout, help, options);
            return 1;
        }
        if (opt < 1000) { /* getopt said what was wrong */
            cli_usage(stderr, help, options);
            return 2;
        }
        if (take(command, &options[opt - 1000], optarg, now))
            return 2;
    }
    *rest = optind;
    return 0;
}

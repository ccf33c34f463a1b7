/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "config.h"
#include "options.h"
#include "table.h"
#include "timeutil.h"
#include "whatif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_help help = {
    "usage: medic what-if --config FILE --trace FILE --mapping FILE [--start T]\n"
    "                     [--tick D] [--approve] [--chart FILE.svg]\n"
    "                     [--format table|json]\n"
    "\n"
    "What a configuration would have done over a fault trace, before it goes\n"
    "live. Each fault of the trace becomes an Alertmanager alert by the mapping\n"
    "file; the alerts are sent as Alertmanager would (after group_wait, again\n"
    "every repeat_interval, resolved at the fault's end) and go through the\n"
    "configuration's policies, inventory and every safety guard, on medic's\n"
    "clock, in a moment: nothing runs and every awaited action succeeds.\n"
    "\n"
    "The report counts, per fault class and overall: faults, faults acted on\n"
    "(a disruptive step on the node while the fault was open), covered (the\n"
    "node already out of service), held and by which guard (caps, storm,\n"
    "cooldown, maintenance windows...), waiting for a person, notify only, no\n"
    "policy; the time from a fault to the first action; the peak of disrupted\n"
    "nodes against each cap; quarantined nodes; disruptions per 1,000 node-days.\n"
    "\n",
    NULL,
};

static void progress(void *arg, double done)
{
    (void)arg;
    fprintf(stderr, "\rmedic what-if: %3.0f%% of the trace played", done * 100);
    if (done >= 1)
        fputc('\n', stderr);
}

static int write_chart(const char *path, const struct whatif_report *r)
{
    struct medic_buf svg;
    medic_buf_init(&svg, (size_t)64 << 20);
    int rc = whatif_chart_svg(r, &svg);
    FILE *f = rc ? NULL : fopen(path, "w");
    if (!f || fwrite(svg.data, 1, svg.len, f) != svg.len || fclose(f) != 0) {
        fprintf(stderr, "medic what-if: cannot write the chart to %s\n", path);
        rc = 1;
    }
    medic_buf_release(&svg);
    return rc;
}

int medic_cmd_what_if(int argc, char **argv)
{
    const char *config_path = NULL, *trace_path = NULL, *mapping_path = NULL, *chart = NULL;
    int64_t start = MEDIC_TIME_UNSET, tick = 60 * MEDIC_NS_PER_SEC;
    int format = MEDIC_FORMAT_TABLE, approve = 0;
    const struct cli_option options[] = {
        CLI_OPT_STRING("config", &config_path, "FILE",
                       "the configuration to judge; its inventory gives the trace's nodes "
                       "their names, in order of first appearance"),
        CLI_OPT_STRING("trace", &trace_path, "FILE",
                       "the faults: JSON, the InfiniteHBD trace's format"),
        CLI_OPT_STRING("mapping", &mapping_path, "FILE",
                       "which alert each fault becomes (docs/what-if.md)"),
        CLI_OPT_TIME("start", &start, "T",
                     "the trace's day 0 on medic's clock (RFC 3339); default: the trace ends "
                     "now"),
        CLI_OPT_DURATION("tick", &tick, 1, "D",
                         "the scheduler runs this often while an incident is open (default "
                         "1m): ladder steps come due to within it"),
        CLI_OPT_FLAG("approve", &approve,
                     "every step that waits for a person is approved at once (default: nobody "
                     "answers, and it expires)"),
        CLI_OPT_STRING("chart", &chart, "FILE",
                       "write the disrupted nodes over time, caps drawn, as SVG"),
        CLI_OPT_FORMAT("format", &format, 0, "table (default) or json"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("what-if", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!config_path || !trace_path || !mapping_path || rest != argc)
        return cli_usage_error("what-if", &help, options,
                               "--config, --trace and --mapping are required");
    struct medic_config config;
    struct whatif_trace trace;
    struct whatif_mapping mapping;
    struct whatif_report report = {0};
    struct medic_error err = {0};
    int loaded = 0, status = 1;
    if (medic_config_load(config_path, &config, &err))
        goto out;
    loaded |= 1;
    if (whatif_trace_load(trace_path, &trace, &err))
        goto out;
    loaded |= 2;
    if (whatif_mapping_load(mapping_path, &mapping, &err))
        goto out;
    loaded |= 4;
    struct whatif_options opt = {start, tick, approve};
    if (opt.start == MEDIC_TIME_UNSET)
        opt.start = medic_time_now() - trace.span;
    if (whatif_play(&config, &trace, &mapping, &opt, isatty(2) ? progress : NULL, NULL, &report,
                    &err))
        goto out;
    struct medic_buf buf;
    medic_buf_init(&buf, (size_t)256 << 20);
    if (whatif_report_render(&report, format, &buf) == 0 && buf.len)
        fwrite(buf.data, 1, buf.len, stdout);
    medic_buf_release(&buf);
    status = chart && write_chart(chart, &report) ? 1 : 0;
out:
    if (status && err.msg[0])
        fprintf(stderr, "medic what-if: %s\n", err.msg);
    whatif_report_release(&report);
    if (loaded & 4)
        whatif_mapping_release(&mapping);
    if (loaded & 2)
        whatif_trace_release(&trace);
    if (loaded & 1)
        medic_config_release(&config);
    return status;
}

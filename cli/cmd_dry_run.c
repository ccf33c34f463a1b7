/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "commands.h"
#include "options.h"
#include "config.h"
#include "engine_evaluate.h"
#include "payload.h"
#include "table.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic dry-run [--config FILE] [--db PATH|URL] [--at TIME] [--risk R]\n"
    "                     [--format table|json] PAYLOAD.json...\n"
    "\n"
    "Prints the decisions that Alertmanager webhook payloads would produce, in\n"
    "order, without acting and without writing anything. The payloads are read\n"
    "as medic serve reads them; their alerts go through the policies, the\n"
    "inventory and every safety guard of the configuration (the built-in\n"
    "policies without --config), starting from an empty state, or from the\n"
    "state medic serve keeps in the audit database given with --db (steps\n"
    "already taken, nodes drained, cooldowns). The database is only read.\n"
    "\n",
    "The verdicts are those of the configuration's mode: dry_run in dry-run mode,\n"
    "execute in live mode (nothing is executed here either way).\n",
};

int medic_cmd_dry_run(int argc, char **argv)
{
    const char *config_path = NULL, *db = NULL;
    int64_t now = medic_time_now();
    double risk = NAN;
    int format = MEDIC_FORMAT_TABLE;
    const struct cli_option options[] = {
        CLI_OPT_STRING("config", &config_path, "FILE", "the configuration to test"),
        CLI_OPT_STRING("db", &db, "PATH|URL",
                       "start from the state medic serve keeps in this audit database"),
        CLI_OPT_TIME("at", &now, "TIME",
                     "evaluate as if now were TIME (RFC 3339); default: now. Steps whose "
                     "`after` has passed since the alert's startsAt are due, and "
                     "max_alert_age counts from startsAt."),
        CLI_OPT_REAL("risk", &risk, 0, 1, "R",
                     "the risk score of every alert (0..1); default: unknown"),
        CLI_OPT_FORMAT("format", &format, 0, "table (default) or json"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("dry-run", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (rest >= argc)
        return cli_usage_error("dry-run", &help, options, "name at least one payload file");
    struct medic_config config;
    struct medic_error err = {0};
    int rc = config_path ? medic_config_load(config_path, &config, &err)
                         : medic_config_defaults(&config);
    if (rc) {
        fprintf(stderr, "medic dry-run: %s\n", err.msg[0] ? err.msg : medic_strerror(rc));
        return 1;
    }
    struct policy_context ctx;
    engine_context_from_config(&config, &ctx);
    struct policy_state *st = NULL;
    if (db) {
        struct audit_reader *reader = NULL;
        int legacy;
        rc = audit_reader_open(db, &reader, &err);
        if (rc == 0)
            rc = engine_state_read(reader, &st, &legacy, &err);
        audit_reader_free(reader);
        if (rc) {
            fprintf(stderr, "medic dry-run: %s\n", err.msg);
            medic_config_release(&config);
            return 1;
        }
    }
    if (!st)
        st = policy_state_new();
    struct policy_decisions out;
    policy_decisions_init(&out);
    struct receiver_limits limits = config.limits;
    int status = st ? 0 : 1;
    for (int i = rest; i < argc && status == 0; i++) {
        char *text;
        size_t len;
        struct medic_notification n;
        medic_notification_init(&n);
        if (medic_read_file(argv[i], limits.max_body_bytes, &text, &len, &err) == 0) {
            if (receiver_payload_parse(text, len, &limits, &n, &err) != 0)
                rc = MEDIC_E_INVALID;
            else if ((rc = engine_evaluate_notification(&ctx, st, &n, 0, NULL, NULL, risk, now,
                                                        &out)) ==
                     0) /* nothing runs: each awaited action is taken to succeed */
                rc = policy_assume_success(&ctx, st, now, &out);
            free(text);
        } else {
            rc = MEDIC_E_IO;
        }
        if (rc) {
            fprintf(stderr, "medic dry-run: %s: %s\n", argv[i], err.msg);
            status = 1;
        }
        medic_notification_release(&n);
    }
    if (status == 0) {
        struct medic_table table;
        struct medic_buf buf;
        medic_buf_init(&buf, (size_t)1 << 30);
        if (policy_decisions_table(&out, &table) == 0 &&
            medic_table_render(&table, (enum medic_table_format)format, &buf) == 0 && buf.len)
            fwrite(buf.data, 1, buf.len, stdout);
        medic_table_release(&table);
        medic_buf_release(&buf);
    }
    policy_decisions_release(&out);
    policy_state_free(st);
    medic_config_release(&config);
    return status;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "options.h"
#include "engine.h"
#include "log.h"

#include <stdio.h>

static const struct cli_help help = {
    "usage: medic serve [--config FILE] [--listen ADDR:PORT] [--db PATH|URL]\n"
    "                   [--log-level debug|info|warn|error]\n"
    "\n"
    "Runs the daemon: accepts Alertmanager webhook notifications on POST /webhook,\n"
    "commits each one to the audit log before answering, and serves /metrics,\n"
    "/-/healthy, /-/ready, POST /-/reload, GET /api/v1/decisions (also\n"
    "/api/v1/notifications, /api/v1/alerts, /api/v1/actions, incidents, changes)\n"
    "and the on-call page: GET / and GET /nodes/NAME.\n"
    "\n"
    "With prometheus.url in the configuration, each firing alert gets a failure\n"
    "risk from its GPU's telemetry before the policies see it, from the model\n"
    "file in model.path or the model built into medic (docs/model.md).\n"
    "\n"
    "Without --config it runs on embedded defaults: listen 127.0.0.1:9799, audit\n"
    "database ./medic.db, mode dry-run, no authentication (loopback only), the\n"
    "built-in policies and model.\n"
    "\n",
    "Signals: SIGTERM and SIGINT drain requests in flight and close the audit log;\n"
    "SIGHUP reloads the configuration (an invalid file keeps the running one).\n"
    "\n"
    "It refuses to start, and a reload refuses a configuration, in mode: live\n"
    "without webhook authentication, or with disruptive policies and no\n"
    "safety.storm.notifier. In live mode the read API and /-/reload need\n"
    "credentials too: their own (auth.read_*, auth.admin_*) or the webhook's.\n",
};

int medic_cmd_serve(int argc, char **argv)
{
    struct engine_serve_options o = {0};
    const struct cli_option options[] = {
        CLI_OPT_STRING("config", &o.config_path, "FILE",
                       "the configuration (default: the embedded defaults)"),
        CLI_OPT_STRING("listen", &o.listen_override, "ADDR:PORT",
                       "overrides the configuration's listen"),
        CLI_OPT_STRING("db", &o.db_override, "PATH|URL",
                       "overrides the configuration's audit log. A postgresql:// URL (or "
                       "audit.url): several replicas then share the log, and the one holding "
                       "the lease (ha.lease) decides and acts (docs/ha.md)."),
        CLI_OPT_STRING("log-level", &o.log_level, "L", "debug, info (default), warn or error"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("serve", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (rest != argc)
        return cli_usage_error("serve", &help, options, "unexpected argument '%s'", argv[rest]);
    if (o.log_level && medic_log_parse_level(o.log_level) < 0) {
        fprintf(stderr, "medic serve: --log-level is debug, info, warn or error\n");
        return 2;
    }
    return engine_serve(&o);
}

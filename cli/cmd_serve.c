#include "commands.h"
#include "engine.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>

static const char usage[] =
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
    "--listen and --db override the configuration file. --db (or audit.url) may\n"
    "be a postgresql:// URL: several replicas then share the log, and the one\n"
    "holding the lease (ha.lease) decides and acts (docs/ha.md).\n"
    "\n"
    "Signals: SIGTERM and SIGINT drain requests in flight and close the audit log;\n"
    "SIGHUP reloads the configuration (an invalid file keeps the running one).\n"
    "\n"
    "It refuses to start, and a reload refuses a configuration, in mode: live\n"
    "without webhook authentication, or with disruptive policies and no\n"
    "safety.storm.notifier. In live mode the read API and /-/reload need\n"
    "credentials too: their own (auth.read_*, auth.admin_*) or the webhook's.\n";

int medic_cmd_serve(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'}, {"listen", required_argument, NULL, 'l'},
        {"db", required_argument, NULL, 'd'},     {"log-level", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    struct engine_serve_options o = {0};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            o.config_path = optarg;
            break;
        case 'l':
            o.listen_override = optarg;
            break;
        case 'd':
            o.db_override = optarg;
            break;
        case 'L':
            o.log_level = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "medic serve: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    if (o.log_level && medic_log_parse_level(o.log_level) < 0) {
        fprintf(stderr, "medic serve: --log-level is debug, info, warn or error\n");
        return 2;
    }
    return engine_serve(&o);
}

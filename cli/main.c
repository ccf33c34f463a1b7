/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "commands.h"
#include "json.h"
#include "table.h"

#include <stdio.h>
#include <string.h>

#ifndef MEDIC_VERSION
#define MEDIC_VERSION "0.0.0-dev"
#endif

const char medic_version[] = MEDIC_VERSION;

static const char usage[] =
    "usage: medic COMMAND [ARGS]\n"
    "\n"
    "Closes the loop on GPU-cluster failures: an Alertmanager webhook target that\n"
    "records every notification in an audit log and acts on it.\n"
    "\n"
    "Commands:\n"
    "  serve      run the daemon (webhook receiver, audit log, /metrics)\n"
    "  audit      query the audit log: notifications, alerts, decisions, actions,\n"
    "             verify\n"
    "  check      validate a configuration or policy file: check config|policy FILE;\n"
    "             try the nodes before going live: check live FILE\n"
    "  dry-run    the decisions webhook payloads would produce, without acting\n"
    "  policy     run policy unit tests, list the actions: policy test FILE |\n"
    "             policy actions\n"
    "  replay     what another configuration would have decided on recorded\n"
    "             notifications\n"
    "  what-if    what a configuration would have done over a fault trace\n"
    "  agent      the node agent for GPU power limits, health and resets (NVML)\n"
    "  model      the failure-risk LSTM: info (the built-in one without FILE), check\n"
    "             against PyTorch, bench, dataset (training windows for retraining)\n"
    "  predict    the failure risk of one window of telemetry (CSV or Prometheus)\n"
    "  approve    approve a step waiting for a person (mode approve): approve ID\n"
    "  deny       deny it, with a reason: deny ID --reason TEXT\n"
    "  pause      hold every disruptive step fleet-wide: pause --reason TEXT\n"
    "             [--until T]\n"
    "  unpause    end the pause\n"
    "  node       give a quarantined node back after its repair:\n"
    "             node release NODE --reason TEXT\n"
    "  inventory  an inventory from Slurm's nodes, or one checked against Slurm:\n"
    "             inventory import --slurm | inventory check --config FILE\n"
    "  version    print the version and build information\n"
    "\n"
    "Run 'medic COMMAND --help' for a command's options.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    audit_library_init(); /* before any thread starts */
    medic_json_init();    /* cJSON's allocation hooks, before any thread starts */
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0)
        return medic_cmd_version(argc - 1, argv + 1);
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {
        {"serve", medic_cmd_serve},         {"audit", medic_cmd_audit},
        {"check", medic_cmd_check},         {"version", medic_cmd_version},
        {"dry-run", medic_cmd_dry_run},     {"policy", medic_cmd_policy},
        {"replay", medic_cmd_replay},       {"what-if", medic_cmd_what_if},
        {"agent", medic_cmd_agent},         {"model", medic_cmd_model},
        {"predict", medic_cmd_predict},     {"approve", medic_cmd_approve},
        {"deny", medic_cmd_deny},           {"pause", medic_cmd_pause},
        {"unpause", medic_cmd_unpause},     {"node", medic_cmd_node},
        {"inventory", medic_cmd_inventory},
    };
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "medic: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}

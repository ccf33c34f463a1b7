/* SPDX-License-Identifier: Apache-2.0 */
/* medic check live: the preflight before going live, per node. */
#include "commands.h"
#include "config.h"
#include "engine_preflight.h"
#include "options.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_help help = {
    "usage: medic check live FILE [--nodes A,B,...] [--sample N] [--jobs N]\n"
    "                             [--time-limit DURATION]\n"
    "\n"
    "Tries, before medic goes live, what its actions will need, changing\n"
    "nothing, and prints one line per inventory node: its BMC (an IPMI session\n"
    "and the chassis status, with the inventory's credentials and\n"
    "workarounds), its agent (the health report, with its token: the GPUs it\n"
    "sees against the inventory's gpus) and its Slurm node (its state). Once,\n"
    "it asks Slurm whether the user running this command may update nodes\n"
    "(the rights every drain and resume need) by resuming a node that does not\n"
    "exist: run it as the user medic serve runs as (the packaged unit's\n"
    "`medic`), for example `runuser -u medic -- medic check live FILE`.\n"
    "When a policy has a slurm_reboot step, it asks Slurm for its\n"
    "RebootProgram, without which Slurm reboots nothing.\n"
    "\n",
    "Exit status: 0 when every node checked passed, none was left unchecked and\n"
    "Slurm takes the updates (and has a RebootProgram, when asked); 1 otherwise\n"
    "(the lines say what failed); 2 bad usage or a configuration that does not\n"
    "load.\n",
};

static const char *result_name(enum preflight_result r)
{
    return r == PREFLIGHT_OK ? "ok" : r == PREFLIGHT_FAILED ? "FAIL" : "UNCHECKED";
}

static void print_report(const struct preflight_report *r, int64_t time_limit)
{
    size_t failed = 0, unchecked = 0;
    for (size_t i = 0; i < r->count; i++) {
        const struct preflight_node *p = &r->nodes[i];
        failed += p->result == PREFLIGHT_FAILED;
        unchecked += p->result == PREFLIGHT_UNCHECKED;
        printf("%s %s:", result_name(p->result), p->node->name);
        if (p->result == PREFLIGHT_UNCHECKED)
            printf(" not checked: the time limit (%llds) passed first",
                   (long long)(time_limit / 1000000000));
        else if (!p->bmc[0] && !p->agent[0] && !p->slurm[0])
            printf(" nothing to try: the inventory gives it no bmc, agent or slurm node");
        const char *sep = " ";
        if (p->bmc[0])
            printf("%sbmc %s", sep, p->bmc), sep = "; ";
        if (p->agent[0])
            printf("%sagent %s", sep, p->agent), sep = "; ";
        if (p->slurm[0])
            printf("%sslurm %s", sep, p->slurm);
        printf("\n");
    }
    struct passwd *pw = getpwuid(geteuid());
    const char *user = pw ? pw->pw_name : "?";
    if (r->slurm_update == 1)
        printf("ok slurm updates: allowed for user %s (%s)\n", user, r->slurm_why);
    else if (r->slurm_update == 0)
        printf("FAIL slurm updates: refused for user %s (%s): medic cannot drain or resume. "
               "Give the user AdminLevel=Admin in Slurm's accounting (sacctmgr modify user %s set "
               "adminlevel=Admin), or point `scontrol:` at a sudo wrapper (docs/actions.md, "
               "\"Slurm rights\")\n",
               user, r->slurm_why, user);
    else if (r->slurm_update == -1)
        printf("FAIL slurm updates: unknown for user %s (%s)\n", user, r->slurm_why);
    if (r->slurm_reboot == 1)
        printf("ok slurm reboots: %s\n", r->reboot_why);
    else if (r->slurm_reboot == 0)
        printf("FAIL slurm reboots: %s: a policy has a slurm_reboot step, and Slurm reboots "
               "nothing without a RebootProgram; set one in slurm.conf (for example "
               "RebootProgram=/usr/sbin/reboot) with a ResumeTimeout longer than a boot\n",
               r->reboot_why);
    else if (r->slurm_reboot == -1)
        printf("FAIL slurm reboots: unknown (%s)\n", r->reboot_why);
    printf("%zu node(s) checked in %.1f s: %zu passed, %zu failed, %zu unchecked\n",
           r->count - unchecked, (double)r->took / 1e9, r->count - failed - unchecked, failed,
           unchecked);
}

int medic_cmd_check_live(int argc, char **argv)
{
    const char *nodes = NULL;
    long sample = 0, jobs = 8;
    int64_t time_limit = (int64_t)120 * 1000000000;
    const struct cli_option options[] = {
        CLI_OPT_STRING("nodes", &nodes, "A,B,...", "only these inventory nodes"),
        CLI_OPT_INT("sample", &sample, 1, 1000000, "N",
                    "N nodes spread over the inventory (a large fleet)"),
        CLI_OPT_INT("jobs", &jobs, 1, 64, "N", "nodes checked at once (default 8, at most 64)"),
        CLI_OPT_DURATION("time-limit", &time_limit, 1, "DURATION",
                         "nodes not started by then are reported unchecked (default 2m)"),
        CLI_OPT_END,
    };
    int rest = 0;
    int rc = cli_parse("check live", &help, argc, argv, 1, options, &rest);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (rest != argc - 1)
        return cli_usage_error("check live", &help, options, "give one configuration FILE");
    struct medic_config config;
    struct medic_error err = {0};
    if (medic_config_load(argv[rest], &config, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    char *list = nodes ? strdup(nodes) : NULL;
    const char *names[1024];
    size_t count = 0;
    for (char *save = NULL, *t = list ? strtok_r(list, ",", &save) : NULL; t && count < 1024;
         t = strtok_r(NULL, ",", &save))
        names[count++] = t;
    struct preflight_options o = {.nodes = nodes ? names : NULL,
                                  .node_count = count,
                                  .sample = (size_t)sample,
                                  .jobs = (int)jobs,
                                  .time_limit = time_limit};
    struct preflight_report report;
    int status = 1;
    if (engine_preflight(&config, &o, &report, &err)) {
        fprintf(stderr, "medic check live: %s\n", err.msg);
        status = 2;
    } else {
        print_report(&report, time_limit);
        status = engine_preflight_passed(&report) ? 0 : 1;
    }
    engine_preflight_release(&report);
    free(list);
    medic_config_release(&config);
    return status;
}

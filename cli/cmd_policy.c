/* SPDX-License-Identifier: Apache-2.0 */
#include "action.h"
#include "commands.h"
#include "engine_policy_tests.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: medic policy test FILE...\n"
    "       medic policy actions\n"
    "\n"
    "`medic policy actions` prints the actions a step may take, their\n"
    "parameters and whether they pass the safety guards, as the Markdown table\n"
    "in docs/policies.md (made from the same table medic parses policies with).\n"
    "\n"
    "Runs policy unit tests: each test plays a timeline of alerts through the\n"
    "policy engine (a fresh state, times as offsets from the test's start) and\n"
    "compares every decision with the expected ones. A test file names its\n"
    "configuration (`config: ../medic.yaml`, relative to the test file) or holds\n"
    "it inline (policies, safety, inventory, notifiers, mode). See\n"
    "docs/policies.md for the format.\n"
    "\n"
    "An alert starts at its first firing event, or `started` before it\n"
    "(`started: 2h` replays an alert that began two hours earlier). `risk:`\n"
    "gives its failure risk (0..1), `recovery:` the recovery action the GPU's\n"
    "driver recommends (none, gpu_reset, node_reboot, drain_p2p,\n"
    "drain_and_reset, bus_reset) for policies with when.recovery_action.\n"
    "At each alert's time the scheduler runs first, then the alert is\n"
    "evaluated. Decisions with verdict no_match need no expectation; every\n"
    "other decision must be expected (or its action listed in the test's\n"
    "`ignore:`, such as [notify]), and every expectation met.\n"
    "\n"
    "A test runs in the configuration's mode, shown beside its name; a file\n"
    "that names its configuration may set `mode:` (dry-run, live, approve)\n"
    "and `start:` (an RFC 3339 time the offsets count from; default\n"
    "2026-01-01T00:00:00Z, for dated maintenance windows) beside `config:`.\n"
    "\n"
    "Actions succeed at once unless an `outcome` event says otherwise (live\n"
    "or approve only: a dry-run test with one fails, since no action runs):\n"
    "`{t: 2m, outcome: failed, node: gpu-node-01, action: drain}` ends that\n"
    "node's awaited drain as failed at 2m (succeeded, failed, timed_out,\n"
    "refused, interrupted; an operator who resumed a drained node makes the\n"
    "power cycle after it `refused`). Until then the action is in flight.\n"
    "\n"
    "A step waiting for approval (mode approve, or a policy's approval:\n"
    "required) is answered by `{t: 5m, approve: gpu-node-01, by: alice}` or\n"
    "`{t: 5m, deny: gpu-node-01, by: bob, reason: ...}` at that time; an\n"
    "answer that finds no step pending on the node fails the test.\n"
    "\n"
    "Exit status: 0 when every test passes, 1 when one fails, 2 on bad usage.\n";

/* Tests start at this instant (2026-01-01T00:00:00Z unless the file says
 * `start:`); `t` is an offset. */
/* The action reference, from the table that drives the policy parser. */
static int print_actions(void)
{
    printf("| action | what it does | parameters | disruptive |\n|---|---|---|---|\n");
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++) {
        enum medic_action_kind kind = (enum medic_action_kind)k;
        printf("| `%s` | %s | ", medic_action_name(kind), medic_action_doc(kind));
        int first = 1;
        for (size_t i = 0; i < medic_action_param_count; i++) {
            const struct medic_action_param *p = &medic_action_params[i];
            if (p->kind != kind)
                continue;
            printf("%s`%s`%s: %s", first ? "" : "; ", p->key, p->required ? " (required)" : "",
                   p->doc);
            first = 0;
        }
        printf("%s | %s |\n", first ? "none" : "",
               medic_action_disruptive(kind) ? "yes: passes the safety guards" : "no");
    }
    return 0;
}

int medic_cmd_policy(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "actions") == 0)
        return print_actions();
    if (argc < 3 || strcmp(argv[1], "test") != 0) {
        fputs(usage, stderr);
        return 2;
    }
    int passed = 0, failed = 0, broken = 0;
    for (int i = 2; i < argc; i++)
        if (medic_policy_test_file(argv[i], &passed, &failed))
            broken++;
    printf("%d passed, %d failed\n", passed, failed);
    if (broken)
        fprintf(stderr, "medic policy test: %d file(s) could not be run\n", broken);
    return failed || broken ? 1 : 0;
}

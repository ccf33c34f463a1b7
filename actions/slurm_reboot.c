/* SPDX-License-Identifier: Apache-2.0 */
/* A reboot through Slurm: `scontrol reboot` of a drained node (Slurm's
 * RebootProgram does it, no BMC needed), confirmed by the node's new boot
 * as Slurm reads it. */
#include "slurm.h"
#include "timeutil.h"

#include <stdio.h>
#include <string.h>

#define REBOOT_LOOK_MS 2000

/* Refused (or timed_out) with why, when the node is not drained with no
 * job left: a node Slurm reboots undrained goes back to service before a
 * verify decides. */
static enum medic_outcome drained_first(const struct slurm_options *o, const char *node,
                                        char *detail, size_t size)
{
    enum medic_outcome check = slurm_check_drained(o, node, detail, size);
    if (check == MEDIC_OUTCOME_SUCCEEDED)
        return check;
    size_t at = strlen(detail);
    snprintf(detail + at, size - at,
             "; the reboot is not sent: Slurm returns a node it reboots undrained to service "
             "(drain it in a step before)");
    return check == MEDIC_OUTCOME_TIMED_OUT ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_REFUSED;
}

/* 1 once the node shows a boot after before (and not before sent, to the
 * second Slurm prints), its reboot done; seen says what it shows. Its
 * boot times are read only once Slurm no longer shows the reboot pending
 * (one scontrol a look while it runs). */
static int booted(const struct slurm_options *o, const char *node, int64_t before, int64_t sent,
                  char *state, size_t state_size, char *reason, size_t reason_size, char *seen,
                  size_t size)
{
    int64_t started = 0;
    char boot[200];
    if (slurm_read_node(o, node, state, state_size, reason, reason_size, seen, size))
        return 0;
    if (strstr(state, "REBOOT")) {
        snprintf(seen, size, "State=%s", state);
        return 0;
    }
    if (slurm_node_started(o, node, &started, boot, sizeof(boot))) {
        snprintf(seen, size, "%s", boot);
        return 0;
    }
    snprintf(seen, size, "%s State=%s", boot, state);
    return started > before && started + MEDIC_NS_PER_SEC > sent;
}

enum medic_outcome slurm_reboot(const struct slurm_options *o, const char *node, int within_s,
                                int (*stop)(void *arg, int64_t ms), void *arg, char *detail,
                                size_t size)
{
    enum medic_outcome ready = drained_first(o, node, detail, size);
    if (ready != MEDIC_OUTCOME_SUCCEEDED)
        return ready;
    int64_t before = 0;
    if (slurm_node_started(o, node, &before, detail, size))
        return strstr(detail, "timed out") ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    char out[2048];
    const char *args[] = {"reboot", node, NULL};
    if (action_fenced(o->fence, detail, size))
        return MEDIC_OUTCOME_REFUSED;
    int64_t sent = medic_time_now(), start = medic_time_monotonic();
    int rc = slurm_scontrol(o, args, out, sizeof(out));
    if (rc != 0) {
        snprintf(detail, size, "scontrol reboot %s: %s", node,
                 rc == -2 ? "timed out" : (out[0] ? out : "failed"));
        return rc == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    }
    for (;;) {
        char state[256], reason[1024], seen[600];
        if (booted(o, node, before, sent, state, sizeof(state), reason, sizeof(reason), seen,
                   sizeof(seen))) {
            long long took = (long long)((medic_time_monotonic() - start) / MEDIC_NS_PER_SEC);
            if (!strstr(state, "DRAIN")) {
                snprintf(detail, size,
                         "rebooted after %llds (%s), but Slurm returned it to service: someone "
                         "resumed it meanwhile",
                         took, seen);
                return MEDIC_OUTCOME_FAILED;
            }
            /* Slurm's reason now ends with ": reboot issued" and a new
             * stamp: what a resume of medic's drain must find */
            snprintf(detail, size,
                     "rebooted after %llds (%s); " MEDIC_DRAIN_DETAIL_PREFIX
                     "State=%s" MEDIC_DRAIN_DETAIL_REASON "%s\"",
                     took, seen, state, reason);
            return MEDIC_OUTCOME_SUCCEEDED;
        }
        int64_t spent = (medic_time_monotonic() - start) / MEDIC_NS_PER_MS;
        if (spent + REBOOT_LOOK_MS > (int64_t)within_s * 1000) {
            snprintf(detail, size, "no new boot within %ds of scontrol reboot; last: %s", within_s,
                     seen);
            return MEDIC_OUTCOME_TIMED_OUT;
        }
        if (stop && stop(arg, REBOOT_LOOK_MS)) {
            snprintf(detail, size, "medic stopped before the node came back; last: %s", seen);
            return MEDIC_OUTCOME_INTERRUPTED;
        }
    }
}

int slurm_reboot_program(const struct slurm_options *o, char *detail, size_t size)
{
    char out[65536];
    const char *args[] = {"show", "config", NULL};
    int rc = slurm_scontrol(o, args, out, sizeof(out));
    if (rc != 0) {
        snprintf(detail, size, "scontrol show config: %s",
                 rc == -2 ? "timed out" : (out[0] ? out : "failed"));
        return -1;
    }
    /* "RebootProgram           = /usr/sbin/reboot", or "(null)" unset */
    for (const char *line = out; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "RebootProgram", 13) != 0 || (line[13] != ' ' && line[13] != '='))
            continue;
        const char *v = strchr(line, '=');
        v = v ? v + 1 : line + 13;
        while (*v == ' ')
            v++;
        size_t len = strcspn(v, "\n");
        snprintf(detail, size, "RebootProgram = %.*s", (int)len, v);
        return len > 0 && strncmp(v, "(null)", 6) != 0;
    }
    snprintf(detail, size, "scontrol show config names no RebootProgram");
    return 0;
}

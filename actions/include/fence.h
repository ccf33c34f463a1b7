/* SPDX-License-Identifier: Apache-2.0 */
/* The fence asked right before a command that disrupts a node is sent (a
 * BMC's power command, scontrol's drain, an agent's power limit): with
 * several replicas, one that lost its lease while the action ran (paused,
 * partitioned, slow) must not send it. The wiring layer provides the check
 * (the lease row, through the audit store). */
#ifndef MEDIC_ACTIONS_FENCE_H
#define MEDIC_ACTIONS_FENCE_H

#include "action.h"

#include <stddef.h>
#include <stdio.h>

struct action_fence {
    /* 0 when the command may be sent now; else nonzero, with why */
    int (*check)(void *ctx, char *why, size_t size);
    void *ctx;
};

/* 1 when fence (NULL: none) forbids the command: detail then says that it
 * was not sent, and why. */
static inline int action_fenced(const struct action_fence *fence, char *detail, size_t size)
{
    char why[256] = "";
    if (!fence || !fence->check || fence->check(fence->ctx, why, sizeof(why)) == 0)
        return 0;
    snprintf(detail, size, MEDIC_FENCED_PREFIX "%s", why);
    return 1;
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* `medic check live`: before medic goes live, try what its actions need,
 * changing nothing: per inventory node (all, the ones named, or an even
 * sample), a BMC session (chassis status only), the agent's health report
 * with its token, and the node as Slurm shows it; once, whether Slurm takes
 * node updates from the user medic runs as. Nodes are checked a few at a
 * time, within a bound on the whole run. */
#ifndef MEDIC_ENGINE_PREFLIGHT_H
#define MEDIC_ENGINE_PREFLIGHT_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

struct preflight_options {
    const char *const *nodes; /* only these (inventory names); NULL: every node */
    size_t node_count;
    size_t sample;      /* 0: all; else this many, spread evenly over the inventory */
    int jobs;           /* nodes checked at once (1 to 64) */
    int64_t time_limit; /* ns: nodes not started by then are reported unchecked */
};

enum preflight_result { PREFLIGHT_UNCHECKED, PREFLIGHT_OK, PREFLIGHT_FAILED };

struct preflight_node {
    const struct inventory_node *node;
    enum preflight_result result;
    char bmc[400], agent[400], slurm[400]; /* "" where the inventory has none */
};

struct preflight_report {
    struct preflight_node *nodes;
    size_t count;
    size_t slurm_nodes;  /* checked nodes with a Slurm node */
    int slurm_update;    /* 1 allowed, 0 refused, -1 unknown, -2 not asked (no Slurm node) */
    char slurm_why[600]; /* what scontrol said */
    /* Slurm's RebootProgram, asked when a policy has a slurm_reboot step:
     * 1 set, 0 not set, -1 unknown, -2 not asked */
    int slurm_reboot;
    char reboot_why[600];
    int64_t took; /* ns */
};

/* Runs the checks. 0 (the findings in out, even when they fail), or an
 * error when the options name a node the inventory lacks. */
int engine_preflight(const struct medic_config *c, const struct preflight_options *o,
                     struct preflight_report *out, struct medic_error *err);
/* 1 when every node was checked and passed and Slurm takes updates (where
 * the inventory has Slurm nodes). */
int engine_preflight_passed(const struct preflight_report *r);
void engine_preflight_release(struct preflight_report *r);

#endif

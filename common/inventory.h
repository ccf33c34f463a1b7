/* SPDX-License-Identifier: Apache-2.0 */
/* The inventory: the nodes medic may act on, how to reach each one's BMC,
 * Slurm node and agent, and the aliases alerts may name it by. A node that
 * is not here never gets a disruptive action. Secrets are not here: the
 * inventory names credentials kept in the credentials file. */
#ifndef MEDIC_INVENTORY_H
#define MEDIC_INVENTORY_H

#include "error.h"
#include "yaml_tree.h"

#include <stddef.h>

#define INVENTORY_MAX_NODES 100000
#define INVENTORY_MAX_ALIASES 16
#define INVENTORY_MAX_WORKAROUNDS 8
#define INVENTORY_MAX_LABELS 8

struct inventory_bmc {
    char *address;     /* host:port */
    char *credentials; /* a name in the credentials file */
    char *driver;      /* lan_2_0 (default) or lan */
    int cipher_suite;  /* default 3 */
    char *workarounds[INVENTORY_MAX_WORKAROUNDS];
    size_t workaround_count;
};

struct inventory_node {
    char *name;
    char *aliases[INVENTORY_MAX_ALIASES];
    size_t alias_count;
    int has_bmc;
    struct inventory_bmc bmc;
    char *slurm_node; /* NULL: no Slurm */
    char *agent_url;  /* NULL: no medic agent */
    char *agent_credentials;
    int gpus;
    /* where the node sits (rack, pdu, partition, ...): the groups that
     * safety.group_caps cap */
    char *label_keys[INVENTORY_MAX_LABELS], *label_values[INVENTORY_MAX_LABELS];
    size_t label_count;
    int line, col; /* of its entry (one entry names many nodes with a hostlist) */
};

struct inventory_index;

struct inventory {
    struct inventory_node *nodes;
    size_t count;
    struct inventory_index *index; /* name and alias lookup */
};

/* Parses the `nodes` list of an inventory document. Names and aliases must
 * be unique across the whole inventory. Errors are FILE:LINE:COL. */
int inventory_parse(const char *file, const struct yaml_tree_node *root, struct inventory *out,
                    struct medic_error *err);
/* Parses a `nodes` list on its own (an inventory given inline). */
int inventory_parse_nodes(const char *file, const struct yaml_tree_node *list,
                          struct inventory *out, struct medic_error *err);
/* Reads and parses an inventory file. */
int inventory_load(const char *path, struct inventory *out, struct medic_error *err);
void inventory_release(struct inventory *inv);

/* The value of the node's label key, or NULL when it has none. */
const char *inventory_node_label(const struct inventory_node *n, const char *key);

/* The node named name or aliased by it, or NULL. */
const struct inventory_node *inventory_find(const struct inventory *inv, const char *name);

#endif

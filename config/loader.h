/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration loader's pieces shared by load.c (the root and the
 * policies), sections.c (auth, notifiers, secret files) and
 * directives.c (the table of directives). Private to config/. */
#ifndef MEDIC_CONFIG_LOADER_H
#define MEDIC_CONFIG_LOADER_H

#include "config.h"
#include "buf.h"
#include "yaml_fields.h"
#include "yaml_tree.h"

struct loader {
    struct yaml_fields f; /* first: the helpers take it */
    struct medic_config *config;
    /* the hashes of the other files the configuration names (policy files,
     * the inventory file), "HEX\n" each in the order read: the
     * configuration's hash covers them */
    struct medic_buf *files;
};

/* Reads and parses a file the configuration names, adding its hash to
 * l->files. */
int config__load_yaml(struct loader *l, const char *path, struct yaml_tree *out,
                      struct medic_error *err);

int config__read_secret(struct loader *l, const struct yaml_tree_node *n, const char *key,
                        char **out);
int config__load_pem(struct loader *l, const struct yaml_tree_node *n, const char *key, char **out);
int config__load_basic(struct loader *l, const struct yaml_tree_node *n, const char *key,
                       struct medic_credentials *c);
int config__load_auth(struct loader *l, const struct yaml_tree_node *n);
char *config__resolve_path(const char *config_file, const char *path);
int config__load_notifiers(struct loader *l, const struct yaml_tree_node *n);
/* config.c: the inventory section (file or nodes, node_labels). */
int config__load_inventory(struct loader *l, const struct yaml_tree_node *n);
/* directives.c: every default the table states, set in its field (the
 * modules' own defaults, set before, it leaves as they are). */
int config__apply_defaults(struct medic_config *config);
/* directives.c: every directive of the table present in root, in
 * the table's order; keys neither in the table nor in extra_keys are
 * refused. */
int config__load_directives(struct loader *l, const struct yaml_tree_node *root,
                            const char *const *extra_keys);

#endif

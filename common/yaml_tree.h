/* SPDX-License-Identifier: Apache-2.0 */
/* A YAML document as a small tree with source positions, built with
 * libyaml, so that config validators can report FILE:LINE:COL. Anchors and
 * aliases are refused (they make billion-laughs documents possible), as are
 * documents over the byte and node caps. */
#ifndef MEDIC_YAML_TREE_H
#define MEDIC_YAML_TREE_H

#include "error.h"

#include <stddef.h>

enum yaml_node_kind { YAML_TREE_SCALAR, YAML_TREE_MAPPING, YAML_TREE_SEQUENCE };

struct yaml_tree_node {
    enum yaml_node_kind kind;
    int line, col; /* 1-based */
    char *value;   /* scalars */
    int quoted;    /* scalar was quoted: never null/bool */
    size_t count;  /* mapping pairs or sequence items */
    char **keys;   /* mapping keys */
    int *key_lines, *key_cols;
    struct yaml_tree_node **items;
};

struct yaml_tree {
    char *file;
    struct yaml_tree_node *root; /* NULL for an empty document */
};

#define YAML_TREE_MAX_BYTES ((size_t)4 << 20)
#define YAML_TREE_MAX_NODES 200000
#define YAML_TREE_MAX_DEPTH 64

/* Parses text (len bytes); file names the source in messages. Errors:
 * MEDIC_E_INVALID or MEDIC_E_LIMIT with "FILE:LINE:COL: message" in err. */
int yaml_tree_parse(const char *file, const char *text, size_t len, struct yaml_tree *out,
                    struct medic_error *err);
/* Reads and parses a regular file (capped at YAML_TREE_MAX_BYTES). */
int yaml_tree_load(const char *path, struct yaml_tree *out, struct medic_error *err);
void yaml_tree_release(struct yaml_tree *tree);

/* Value of key in a mapping, or NULL. */
const struct yaml_tree_node *yaml_tree_get(const struct yaml_tree_node *map, const char *key);

/* Reads a whole file of at most max bytes into a NUL-terminated buffer
 * (caller frees). */
int medic_read_file(const char *path, size_t max, char **out, size_t *len, struct medic_error *err);

/* The same for a file a configuration names (a policy file, a secret, a
 * certificate, a model): refused unless it is a regular file, so that a
 * FIFO or a device named by mistake cannot hold a load or a reload. */
int medic_read_config_file(const char *path, size_t max, char **out, size_t *len,
                           struct medic_error *err);

#endif

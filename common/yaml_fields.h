/* SPDX-License-Identifier: Apache-2.0 */
/* Typed reading of YAML tree values for configuration loaders, every error
 * as "FILE:LINE:COL: message" naming the key. */
#ifndef MEDIC_YAML_FIELDS_H
#define MEDIC_YAML_FIELDS_H

#include "error.h"
#include "yaml_tree.h"

#include <stddef.h>
#include <stdint.h>

struct yaml_fields {
    const char *file;
    struct medic_error *err;
};

/* Sets the error at node n (line 1, column 1 when n is NULL); returns
 * MEDIC_E_INVALID. */
int yaml_fields_fail(struct yaml_fields *f, const struct yaml_tree_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int yaml_fields_scalar(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key);
int yaml_fields_mapping(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key);
int yaml_fields_sequence(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key);

/* Every key of map must be in allowed (NULL-terminated). */
int yaml_fields_known_keys(struct yaml_fields *f, const struct yaml_tree_node *map,
                           const char *section, const char *const *allowed);

/* A non-empty string, copied into *out (the old value is freed). */
int yaml_fields_string(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                       char **out);
/* A duration such as 500ms, 2s, 5m, 6h, 7d. */
int yaml_fields_duration(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                         int64_t *out);
/* A whole number (suffixes KiB, MiB) within min..max. */
int yaml_fields_size(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                     size_t min, size_t max, size_t *out);
/* A number within min..max. */
int yaml_fields_number(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                       double min, double max, double *out);
/* true or false. */
int yaml_fields_bool(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                     int *out);

#endif

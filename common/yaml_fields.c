/* SPDX-License-Identifier: Apache-2.0 */
#include "yaml_fields.h"
#include "timeutil.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int yaml_fields_fail(struct yaml_fields *f, const struct yaml_tree_node *n, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return medic_error_set(f->err, MEDIC_E_INVALID, "%s:%d:%d: %s", f->file, n ? n->line : 1,
                           n ? n->col : 1, msg);
}

int yaml_fields_scalar(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key)
{
    return n->kind == YAML_TREE_SCALAR ? 0
                                       : yaml_fields_fail(f, n, "%s: expected a single value", key);
}

int yaml_fields_mapping(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key)
{
    return n->kind == YAML_TREE_MAPPING ? 0 : yaml_fields_fail(f, n, "%s: expected a mapping", key);
}

int yaml_fields_sequence(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key)
{
    return n->kind == YAML_TREE_SEQUENCE ? 0 : yaml_fields_fail(f, n, "%s: expected a list", key);
}

int yaml_fields_known_keys(struct yaml_fields *f, const struct yaml_tree_node *map,
                           const char *section, const char *const *allowed)
{
    for (size_t i = 0; i < map->count; i++) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(map->keys[i], *a) == 0;
        if (!ok) {
            struct yaml_tree_node at = {.line = map->key_lines[i], .col = map->key_cols[i]};
            return yaml_fields_fail(f, &at, "unknown key '%s'%s%s", map->keys[i],
                                    section ? " in " : "", section ? section : "");
        }
    }
    return 0;
}

int yaml_fields_string(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                       char **out)
{
    int rc = yaml_fields_scalar(f, n, key);
    if (rc)
        return rc;
    if (!*n->value)
        return yaml_fields_fail(f, n, "%s: must not be empty", key);
    char *copy = strdup(n->value);
    if (!copy)
        return medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory");
    free(*out);
    *out = copy;
    return 0;
}

int yaml_fields_duration(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                         int64_t *out)
{
    int rc = yaml_fields_scalar(f, n, key);
    if (rc)
        return rc;
    if (medic_duration_parse(n->value, out))
        return yaml_fields_fail(f, n, "%s: '%s' is not a duration (examples: 500ms, 2s, 5m, 1h)",
                                key, n->value);
    return 0;
}

int yaml_fields_size(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                     size_t min, size_t max, size_t *out)
{
    int rc = yaml_fields_scalar(f, n, key);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(n->value, &end, 10);
    if (end == n->value || errno || n->value[0] == '-')
        return yaml_fields_fail(f, n, "%s: '%s' is not a number", key, n->value);
    if (strcmp(end, "KiB") == 0 && v <= (1ULL << 40))
        v <<= 10;
    else if (strcmp(end, "MiB") == 0 && v <= (1ULL << 30))
        v <<= 20;
    else if (*end)
        return yaml_fields_fail(f, n, "%s: '%s' is not a number (suffixes: KiB, MiB)", key,
                                n->value);
    if (v < min || v > max)
        return yaml_fields_fail(f, n, "%s: %llu is outside %zu..%zu", key, v, min, max);
    *out = (size_t)v;
    return 0;
}

int yaml_fields_number(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                       double min, double max, double *out)
{
    int rc = yaml_fields_scalar(f, n, key);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    double v = strtod(n->value, &end);
    if (end == n->value || *end || errno || !isfinite(v))
        return yaml_fields_fail(f, n, "%s: '%s' is not a number", key, n->value);
    if (v < min || v > max)
        return yaml_fields_fail(f, n, "%s: %g is outside %g..%g", key, v, min, max);
    *out = v;
    return 0;
}

int yaml_fields_bool(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                     int *out)
{
    int rc = yaml_fields_scalar(f, n, key);
    if (rc)
        return rc;
    if (strcmp(n->value, "true") == 0)
        *out = 1;
    else if (strcmp(n->value, "false") == 0)
        *out = 0;
    else
        return yaml_fields_fail(f, n, "%s: expected true or false, got '%s'", key, n->value);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The directive table as config/'s files share it: directives.c holds the
 * table and reads a file by it, defaults.c sets, prints and compares the
 * values it describes. Private to config/. */
#ifndef MEDIC_CONFIG_DIRECTIVES_H
#define MEDIC_CONFIG_DIRECTIVES_H

#include "loader.h"

#include <stddef.h>
#include <stdint.h>

enum directive_type {
    D_NONE,      /* no one value: a mapping, a list, a section */
    D_STRING,    /* char * */
    D_PATH,      /* char *: relative to the configuration file */
    D_HTTP_URL,  /* char *: http:// or https:// */
    D_DURATION,  /* int64_t ns within min..max (max 0: none) */
    D_COUNT,     /* size_t within min..max */
    D_BYTES,     /* size_t within min..max; KiB and MiB suffixes */
    D_REAL,      /* double */
    D_BOOL,      /* int */
    D_MODE,      /* enum medic_mode */
    D_LOG_LEVEL, /* int */
};

enum directive_read {
    READ_TABLE,   /* by its type, here */
    READ_FN,      /* by the row's load() */
    READ_SECTION, /* by its section's loader; the row documents it */
};

struct directive {
    const char *section; /* NULL: top level */
    const char *key;
    enum directive_type type;
    enum directive_read read;
    size_t at;        /* the value's place in struct medic_config (with a type) */
    int64_t min, max; /* D_DURATION (ns), D_COUNT, D_BYTES; max 0: no upper bound */
    /* the default: the table's own (number or text, by type); else the
     * value its module's *_default() set, for a typed row (the receiver's
     * limits, the audit store's options, the safety settings); or said by
     * show() or in words (a rule, not one value) */
    int has_default;
    int64_t number;
    const char *text;
    int (*show)(const struct medic_config *c, char *out, size_t size);
    const char *words;
    int at_restart; /* a reload leaves it as it was started */
    const char *doc;
    int (*load)(struct loader *l, const struct yaml_tree_node *n);
};

extern const struct directive config__directives[];
extern const size_t config__directive_count;

/* Where d's value is in c. */
const void *config__field(const struct medic_config *c, const struct directive *d);
/* A number of d's type as medic.yaml writes it (5s, 1MiB, 64); out. */
char *config__number_text(const struct directive *d, int64_t v, char *out, size_t size);

/* The defaults said by one value of several fields (defaults.c). */
int config__show_quarantine(const struct medic_config *c, char *out, size_t size);
int config__show_health(const struct medic_config *c, char *out, size_t size);
int config__show_node_labels(const struct medic_config *c, char *out, size_t size);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The mapping file: which alert each fault of a trace becomes, and how
 * Alertmanager would send it. */
#include "whatif.h"
#include "yaml_fields.h"

#include <stdlib.h>
#include <string.h>

static const char *const top_keys[] = {"group_wait",  "repeat_interval", "node_label",
                                       "trace_nodes", "rules",           NULL};
static const char *const rule_keys[] = {"level", "class", "desc", "alertname", "labels", NULL};

/* A label name as Prometheus allows it: [a-zA-Z_][a-zA-Z0-9_]*. */
static int label_name_ok(const char *s)
{
    if (!s[0] || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static int read_labels(struct yaml_fields *f, const struct yaml_tree_node *n, struct whatif_rule *r)
{
    int rc = yaml_fields_mapping(f, n, "labels");
    if (rc)
        return rc;
    if (n->count > WHATIF_MAPPING_MAX_LABELS)
        return yaml_fields_fail(f, n, "labels: at most %d labels", WHATIF_MAPPING_MAX_LABELS);
    r->label_names = calloc(n->count + 1, sizeof(char *));
    r->label_values = calloc(n->count + 1, sizeof(char *));
    if (!r->label_names || !r->label_values)
        return medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n->count; i++) {
        const char *name = n->keys[i];
        if (!label_name_ok(name) || strcmp(name, "alertname") == 0 || strcmp(name, "fault") == 0)
            return yaml_fields_fail(f, n->items[i],
                                    "labels: '%s' is not a label name a rule may set (letters, "
                                    "digits and _; alertname, fault and the node's label are "
                                    "set by medic)",
                                    name);
        r->label_names[i] = strdup(name);
        r->label_count = i + 1;
        if (!r->label_names[i] ||
            (rc = yaml_fields_string(f, n->items[i], name, &r->label_values[i])))
            return rc ? rc : medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory");
    }
    return 0;
}

static int read_rule(struct yaml_fields *f, const struct yaml_tree_node *n, struct whatif_rule *r)
{
    int rc = yaml_fields_mapping(f, n, "rules");
    if (!rc)
        rc = yaml_fields_known_keys(f, n, "a rule", rule_keys);
    r->line = n->line;
    static const char *const keys[] = {"level", "class", "desc"};
    char **fields[] = {&r->level, &r->class_name, &r->desc};
    for (size_t k = 0; k < 3 && !rc; k++) {
        const struct yaml_tree_node *v = yaml_tree_get(n, keys[k]);
        if (v)
            rc = yaml_fields_string(f, v, keys[k], fields[k]);
    }
    const struct yaml_tree_node *name = rc ? NULL : yaml_tree_get(n, "alertname");
    if (!rc && !name)
        rc = yaml_fields_fail(f, n, "a rule needs an alertname");
    if (!rc)
        rc = yaml_fields_string(f, name, "alertname", &r->alertname);
    const struct yaml_tree_node *labels = rc ? NULL : yaml_tree_get(n, "labels");
    if (labels)
        rc = read_labels(f, labels, r);
    return rc;
}

int whatif_mapping_parse(const char *file, const char *text, size_t len, struct whatif_mapping *out,
                         struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    out->group_wait = 30 * (int64_t)1000000000;
    out->repeat_interval = 4 * 3600 * (int64_t)1000000000;
    struct yaml_tree tree;
    int rc = yaml_tree_parse(file, text, len, &tree, err);
    if (rc)
        return rc;
    struct yaml_fields f = {file, err};
    const struct yaml_tree_node *root = tree.root, *v;
    if (!root) {
        rc = yaml_fields_fail(&f, NULL, "the mapping is empty: it needs rules");
        goto out;
    }
    if ((rc = yaml_fields_mapping(&f, root, "the mapping")) ||
        (rc = yaml_fields_known_keys(&f, root, NULL, top_keys)))
        goto out;
    if ((v = yaml_tree_get(root, "group_wait")) &&
        (rc = yaml_fields_duration(&f, v, "group_wait", &out->group_wait)))
        goto out;
    if ((v = yaml_tree_get(root, "repeat_interval")) &&
        (rc = yaml_fields_duration(&f, v, "repeat_interval", &out->repeat_interval)))
        goto out;
    if (out->repeat_interval < 60 * (int64_t)1000000000) {
        rc = yaml_fields_fail(&f, v, "repeat_interval: at least 1m");
        goto out;
    }
    if ((v = yaml_tree_get(root, "node_label")) &&
        (rc = yaml_fields_string(&f, v, "node_label", &out->node_label)))
        goto out;
    if (out->node_label && !label_name_ok(out->node_label)) {
        rc = yaml_fields_fail(&f, v, "node_label: '%s' is not a label name", out->node_label);
        goto out;
    }
    if ((v = yaml_tree_get(root, "trace_nodes")) &&
        (rc = yaml_fields_size(&f, v, "trace_nodes", 1, 10000000, &out->trace_nodes)))
        goto out;
    const struct yaml_tree_node *rules = yaml_tree_get(root, "rules");
    if (!rules) {
        rc = yaml_fields_fail(&f, root, "the mapping needs rules: which alert each fault becomes");
        goto out;
    }
    if ((rc = yaml_fields_sequence(&f, rules, "rules")))
        goto out;
    if (rules->count == 0 || rules->count > WHATIF_MAPPING_MAX_RULES) {
        rc = yaml_fields_fail(&f, rules, "rules: 1 to %d rules", WHATIF_MAPPING_MAX_RULES);
        goto out;
    }
    out->rules = calloc(rules->count, sizeof(*out->rules));
    if (!out->rules) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rules->count && !rc; i++) {
        out->count = i + 1;
        rc = read_rule(&f, rules->items[i], &out->rules[i]);
    }
out:
    yaml_tree_release(&tree);
    if (rc)
        whatif_mapping_release(out);
    return rc;
}

int whatif_mapping_load(const char *path, struct whatif_mapping *out, struct medic_error *err)
{
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof(*out));
    int rc = medic_read_config_file(path, YAML_TREE_MAX_BYTES, &text, &len, err);
    if (rc == 0)
        rc = whatif_mapping_parse(path, text, len, out, err);
    free(text);
    return rc;
}

void whatif_mapping_release(struct whatif_mapping *m)
{
    for (size_t i = 0; i < m->count; i++) {
        struct whatif_rule *r = &m->rules[i];
        free(r->level);
        free(r->class_name);
        free(r->desc);
        free(r->alertname);
        for (size_t k = 0; k < r->label_count; k++) {
            free(r->label_names[k]);
            free(r->label_values[k]);
        }
        free(r->label_names);
        free(r->label_values);
    }
    free(m->rules);
    free(m->node_label);
    memset(m, 0, sizeof(*m));
}

static int takes(const char *want, const char *have)
{
    return !want || strcmp(want, have) == 0;
}

const struct whatif_rule *whatif_mapping_find(const struct whatif_mapping *m, const char *level,
                                              const char *class_name, const char *desc)
{
    for (size_t i = 0; i < m->count; i++) {
        const struct whatif_rule *r = &m->rules[i];
        if (takes(r->level, level) && takes(r->class_name, class_name) && takes(r->desc, desc))
            return r;
    }
    return NULL;
}

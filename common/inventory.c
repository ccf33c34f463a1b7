/* SPDX-License-Identifier: Apache-2.0 */
#include "inventory.h"
#include "alert.h"
#include "hostlist.h"
#include "yaml_fields.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A sorted array of (name, node) for names and aliases, searched with
 * bsearch. */
struct inventory_entry {
    const char *name;
    size_t node;
};

struct inventory_index {
    struct inventory_entry *entries;
    size_t count;
};

static void node_release(struct inventory_node *n)
{
    free(n->name);
    for (size_t i = 0; i < n->alias_count; i++)
        free(n->aliases[i]);
    free(n->bmc.address);
    free(n->bmc.credentials);
    free(n->bmc.driver);
    for (size_t i = 0; i < n->bmc.workaround_count; i++)
        free(n->bmc.workarounds[i]);
    free(n->slurm_node);
    free(n->agent_url);
    free(n->agent_credentials);
    for (size_t i = 0; i < n->label_count; i++) {
        free(n->label_keys[i]);
        free(n->label_values[i]);
    }
}

const char *inventory_node_label(const struct inventory_node *n, const char *key)
{
    for (size_t i = 0; i < n->label_count; i++)
        if (strcmp(n->label_keys[i], key) == 0)
            return n->label_values[i];
    return NULL;
}

/* labels: { rack: r12, pdu: p3 }: names of letters, digits and '_', values
 * up to 63 bytes. */
static int parse_labels(struct yaml_fields *f, const struct yaml_tree_node *v,
                        struct inventory_node *node)
{
    int rc = yaml_fields_mapping(f, v, "labels");
    if (rc)
        return rc;
    if (v->count > INVENTORY_MAX_LABELS)
        return yaml_fields_fail(f, v, "labels: at most %d", INVENTORY_MAX_LABELS);
    for (size_t i = 0; i < v->count; i++) {
        const char *k = v->keys[i];
        size_t len = strlen(k);
        if (len == 0 || len > 31 ||
            strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != len)
            return yaml_fields_fail(f, v->items[i],
                                    "labels: '%s' is not a label name (up to 31 letters, digits "
                                    "or '_')",
                                    k);
        char *value = NULL;
        if ((rc = yaml_fields_string(f, v->items[i], k, &value)))
            return rc;
        if (strlen(value) > 63 || !*value) {
            free(value);
            return yaml_fields_fail(f, v->items[i], "%s: a label value of 1 to 63 bytes", k);
        }
        node->label_values[node->label_count] = value;
        if (!(node->label_keys[node->label_count++] = strdup(k)))
            return medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory");
    }
    return 0;
}

void inventory_release(struct inventory *inv)
{
    for (size_t i = 0; i < inv->count; i++)
        node_release(&inv->nodes[i]);
    free(inv->nodes);
    if (inv->index)
        free(inv->index->entries);
    free(inv->index);
    memset(inv, 0, sizeof(*inv));
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const struct inventory_entry *)a)->name,
                  ((const struct inventory_entry *)b)->name);
}

static int string_list(struct yaml_fields *f, const struct yaml_tree_node *n, const char *key,
                       char **out, size_t max, size_t *count)
{
    int rc = yaml_fields_sequence(f, n, key);
    if (rc)
        return rc;
    if (n->count > max)
        return yaml_fields_fail(f, n, "%s: at most %zu entries", key, max);
    for (size_t i = 0; i < n->count; i++) {
        out[i] = NULL;
        if ((rc = yaml_fields_string(f, n->items[i], key, &out[i])))
            return rc;
        (*count)++;
    }
    return 0;
}

static int parse_bmc(struct yaml_fields *f, const struct yaml_tree_node *n, struct inventory_bmc *b)
{
    static const char *const keys[] = {"address",      "credentials", "driver",
                                       "cipher_suite", "workarounds", NULL};
    int rc = yaml_fields_mapping(f, n, "bmc");
    if (rc == 0)
        rc = yaml_fields_known_keys(f, n, "bmc", keys);
    if (rc)
        return rc;
    const struct yaml_tree_node *v;
    if (!(v = yaml_tree_get(n, "address")))
        return yaml_fields_fail(f, n, "bmc: needs an address (host:port)");
    if ((rc = yaml_fields_string(f, v, "address", &b->address)))
        return rc;
    if (!(v = yaml_tree_get(n, "credentials")))
        return yaml_fields_fail(f, n, "bmc: needs credentials (a name in the credentials file)");
    if ((rc = yaml_fields_string(f, v, "credentials", &b->credentials)))
        return rc;
    b->cipher_suite = 3;
    if ((v = yaml_tree_get(n, "driver"))) {
        if ((rc = yaml_fields_string(f, v, "driver", &b->driver)))
            return rc;
        if (strcmp(b->driver, "lan_2_0") != 0 && strcmp(b->driver, "lan") != 0)
            return yaml_fields_fail(f, v, "driver: expected lan_2_0 or lan, got '%s'", b->driver);
    } else if (!(b->driver = strdup("lan_2_0"))) {
        return medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory");
    }
    if ((v = yaml_tree_get(n, "cipher_suite"))) {
        size_t cs;
        if ((rc = yaml_fields_size(f, v, "cipher_suite", 0, 17, &cs)))
            return rc;
        b->cipher_suite = (int)cs;
    }
    if ((v = yaml_tree_get(n, "workarounds")))
        rc = string_list(f, v, "workarounds", b->workarounds, INVENTORY_MAX_WORKAROUNDS,
                         &b->workaround_count);
    return rc;
}

static int parse_node(struct yaml_fields *f, const struct yaml_tree_node *n,
                      struct inventory_node *node)
{
    static const char *const keys[] = {"name",  "aliases", "bmc",    "slurm",
                                       "agent", "gpus",    "labels", NULL};
    int rc = yaml_fields_mapping(f, n, "node");
    if (rc == 0)
        rc = yaml_fields_known_keys(f, n, "a node", keys);
    if (rc)
        return rc;
    const struct yaml_tree_node *v;
    if (!(v = yaml_tree_get(n, "name")))
        return yaml_fields_fail(f, n, "node: needs a name");
    if ((rc = yaml_fields_string(f, v, "name", &node->name)))
        return rc;
    if ((v = yaml_tree_get(n, "aliases")) &&
        (rc = string_list(f, v, "aliases", node->aliases, INVENTORY_MAX_ALIASES,
                          &node->alias_count)))
        return rc;
    if ((v = yaml_tree_get(n, "bmc"))) {
        node->has_bmc = 1;
        if ((rc = parse_bmc(f, v, &node->bmc)))
            return rc;
    }
    if ((v = yaml_tree_get(n, "slurm"))) {
        static const char *const slurm_keys[] = {"node", NULL};
        const struct yaml_tree_node *x;
        if ((rc = yaml_fields_mapping(f, v, "slurm")) ||
            (rc = yaml_fields_known_keys(f, v, "slurm", slurm_keys)))
            return rc;
        if (!(x = yaml_tree_get(v, "node")))
            return yaml_fields_fail(f, v, "slurm: needs node (the Slurm node name)");
        if ((rc = yaml_fields_string(f, x, "node", &node->slurm_node)))
            return rc;
    }
    if ((v = yaml_tree_get(n, "agent"))) {
        static const char *const agent_keys[] = {"url", "credentials", NULL};
        const struct yaml_tree_node *x;
        if ((rc = yaml_fields_mapping(f, v, "agent")) ||
            (rc = yaml_fields_known_keys(f, v, "agent", agent_keys)))
            return rc;
        if (!(x = yaml_tree_get(v, "url")))
            return yaml_fields_fail(f, v, "agent: needs a url");
        if ((rc = yaml_fields_string(f, x, "url", &node->agent_url)))
            return rc;
        if (strncmp(node->agent_url, "http://", 7) != 0 &&
            strncmp(node->agent_url, "https://", 8) != 0)
            return yaml_fields_fail(f, x, "url: expected http:// or https://");
        if ((x = yaml_tree_get(v, "credentials")) &&
            (rc = yaml_fields_string(f, x, "credentials", &node->agent_credentials)))
            return rc;
    }
    if ((v = yaml_tree_get(n, "gpus"))) {
        size_t gpus;
        if ((rc = yaml_fields_size(f, v, "gpus", 0, 64, &gpus)))
            return rc;
        node->gpus = (int)gpus;
    }
    if ((v = yaml_tree_get(n, "labels")))
        return parse_labels(f, v, node);
    return 0;
}

static int build_index(struct yaml_fields *f, struct inventory *inv)
{
    size_t total = 0;
    for (size_t i = 0; i < inv->count; i++)
        total += 1 + inv->nodes[i].alias_count;
    inv->index = calloc(1, sizeof(*inv->index));
    if (!inv->index ||
        !(inv->index->entries = calloc(total ? total : 1, sizeof(struct inventory_entry))))
        return medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory");
    struct inventory_entry *e = inv->index->entries;
    size_t k = 0;
    for (size_t i = 0; i < inv->count; i++) {
        e[k++] = (struct inventory_entry){inv->nodes[i].name, i};
        for (size_t a = 0; a < inv->nodes[i].alias_count; a++)
            e[k++] = (struct inventory_entry){inv->nodes[i].aliases[a], i};
    }
    /* one bound for names and aliases, the alert's lookup's too: a longer
     * label is never cut to match another node */
    for (size_t i = 0; i < k; i++)
        if (strlen(e[i].name) > MEDIC_NODE_NAME_MAX) {
            struct yaml_tree_node at = {.line = inv->nodes[e[i].node].line,
                                        .col = inv->nodes[e[i].node].col};
            return yaml_fields_fail(f, &at,
                                    "'%.40s...' is %zu bytes: node names and aliases are at most "
                                    "%d bytes",
                                    e[i].name, strlen(e[i].name), MEDIC_NODE_NAME_MAX);
        }
    qsort(e, total, sizeof(*e), compare_entries);
    inv->index->count = total;
    for (size_t i = 1; i < total; i++)
        if (strcmp(e[i - 1].name, e[i].name) == 0) {
            size_t later = e[i - 1].node > e[i].node ? e[i - 1].node : e[i].node;
            {
                struct yaml_tree_node at = {.line = inv->nodes[later].line,
                                            .col = inv->nodes[later].col};
                return yaml_fields_fail(f, &at, "'%s' names two nodes (as a name or an alias)",
                                        e[i].name);
            }
        }
    return 0;
}

/* "{{ node }}" in *s replaced by name (each node of a hostlist entry its
 * own); NULL stays NULL. */
static int subst(char **s, const char *name)
{
    static const char mark[] = "{{ node }}";
    if (!*s || !strstr(*s, mark))
        return 0;
    size_t n = 0;
    for (const char *p = strstr(*s, mark); p; p = strstr(p + sizeof(mark) - 1, mark))
        n++;
    size_t len = strlen(*s) + n * strlen(name) + 1;
    char *out = malloc(len), *o = out;
    if (!out)
        return -1;
    for (const char *p = *s, *m; *p; p = m + sizeof(mark) - 1) {
        if (!(m = strstr(p, mark))) {
            strcpy(o, p);
            o += strlen(p);
            break;
        }
        memcpy(o, p, (size_t)(m - p));
        o += m - p;
        strcpy(o, name);
        o += strlen(name);
    }
    *o = '\0';
    free(*s);
    *s = out;
    return 0;
}

/* The templates of node's strings filled in with its name. */
static int fill(struct yaml_fields *f, struct inventory_node *node)
{
    int rc = subst(&node->bmc.address, node->name) || subst(&node->bmc.credentials, node->name) ||
             subst(&node->slurm_node, node->name) || subst(&node->agent_url, node->name) ||
             subst(&node->agent_credentials, node->name);
    for (size_t i = 0; rc == 0 && i < node->alias_count; i++)
        rc = subst(&node->aliases[i], node->name);
    for (size_t i = 0; rc == 0 && i < node->label_count; i++)
        rc = subst(&node->label_values[i], node->name);
    return rc ? medic_error_set(f->err, MEDIC_E_NOMEM, "out of memory") : 0;
}

struct expansion {
    struct yaml_fields *f;
    const struct yaml_tree_node *item;
    struct inventory *out;
    size_t count;
};

static int count_name(void *arg, const char *name)
{
    (void)name;
    ((struct expansion *)arg)->count++;
    return 0;
}

/* One node of a hostlist entry: the entry's fields, its own name. */
static int add_name(void *arg, const char *name)
{
    struct expansion *x = arg;
    struct inventory_node *node = &x->out->nodes[x->out->count++];
    int rc = parse_node(x->f, x->item, node);
    if (rc == 0) {
        free(node->name);
        if (!(node->name = strdup(name)))
            return medic_error_set(x->f->err, MEDIC_E_NOMEM, "out of memory");
        rc = fill(x->f, node);
    }
    return rc;
}

/* The hostlist an entry's name is (NULL when it names one node), its error
 * at the name when it is not one. */
static int entry_hosts(struct yaml_fields *f, const struct yaml_tree_node *item,
                       struct medic_hostlist **hosts)
{
    *hosts = NULL;
    const struct yaml_tree_node *name = item ? yaml_tree_get(item, "name") : NULL;
    if (!name || name->kind != YAML_TREE_SCALAR || !strchr(name->value, '['))
        return 0;
    char why[200];
    if (medic_hostlist_parse(name->value, hosts, why, sizeof(why)))
        return yaml_fields_fail(f, name, "name: %s (a Slurm hostlist: gpu-[0001-1200])", why);
    return 0;
}

int inventory_parse_nodes(const char *file, const struct yaml_tree_node *list,
                          struct inventory *out, struct medic_error *err)
{
    struct yaml_fields f = {file, err};
    memset(out, 0, sizeof(*out));
    int rc = yaml_fields_sequence(&f, list, "nodes");
    if (rc)
        return rc;
    /* an entry named by a hostlist is a node per name: count them first */
    size_t total = 0;
    for (size_t i = 0; rc == 0 && i < list->count; i++) {
        struct medic_hostlist *hosts;
        struct expansion x = {&f, list->items[i], out, 0};
        if ((rc = entry_hosts(&f, list->items[i], &hosts)))
            break;
        if (hosts && medic_hostlist_expand(hosts, INVENTORY_MAX_NODES, count_name, &x))
            x.count = INVENTORY_MAX_NODES + 1;
        medic_hostlist_free(hosts);
        total += hosts ? x.count : 1;
        if (total > INVENTORY_MAX_NODES)
            rc = yaml_fields_fail(&f, list->items[i], "nodes: more than %d", INVENTORY_MAX_NODES);
    }
    if (rc)
        return rc;
    out->nodes = calloc(total ? total : 1, sizeof(*out->nodes));
    if (!out->nodes)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < list->count; i++) {
        const struct yaml_tree_node *item = list->items[i];
        size_t first = out->count;
        struct medic_hostlist *hosts;
        if ((rc = entry_hosts(&f, item, &hosts)))
            break;
        if (hosts) {
            struct expansion x = {&f, item, out, 0};
            rc = medic_hostlist_expand(hosts, INVENTORY_MAX_NODES, add_name, &x);
            medic_hostlist_free(hosts);
        } else {
            out->count++;
            rc = parse_node(&f, item, &out->nodes[first]);
            if (rc == 0)
                rc = fill(&f, &out->nodes[first]);
        }
        for (size_t k = first; k < out->count; k++) {
            out->nodes[k].line = item->line;
            out->nodes[k].col = item->col;
        }
    }
    if (rc == 0)
        rc = build_index(&f, out);
    if (rc)
        inventory_release(out);
    return rc;
}

int inventory_parse(const char *file, const struct yaml_tree_node *root, struct inventory *out,
                    struct medic_error *err)
{
    static const char *const keys[] = {"nodes", NULL};
    struct yaml_fields f = {file, err};
    memset(out, 0, sizeof(*out));
    int rc;
    if (!root)
        return yaml_fields_fail(&f, root, "inventory: expected a mapping with nodes");
    if ((rc = yaml_fields_mapping(&f, root, "inventory")) ||
        (rc = yaml_fields_known_keys(&f, root, "the inventory", keys)))
        return rc;
    const struct yaml_tree_node *list = yaml_tree_get(root, "nodes");
    if (!list)
        return yaml_fields_fail(&f, root, "inventory: needs nodes");
    return inventory_parse_nodes(file, list, out, err);
}

int inventory_load(const char *path, struct inventory *out, struct medic_error *err)
{
    struct yaml_tree tree;
    int rc = yaml_tree_load(path, &tree, err);
    if (rc)
        return rc;
    rc = inventory_parse(path, tree.root, out, err);
    yaml_tree_release(&tree);
    return rc;
}

const struct inventory_node *inventory_find(const struct inventory *inv, const char *name)
{
    if (!inv || !inv->index || !name)
        return NULL;
    struct inventory_entry key = {name, 0};
    const struct inventory_entry *e =
        bsearch(&key, inv->index->entries, inv->index->count, sizeof(key), compare_entries);
    return e ? &inv->nodes[e->node] : NULL;
}

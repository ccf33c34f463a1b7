/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"
#include "loader.h"
#include "audit.h"
#include "default_model.h"
#include "ipmi.h"
#include "log.h"
#include "sha256.h"
#include "timeutil.h"
#include "yaml_fields.h"
#include "yaml_tree.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The policies `medic serve` runs with when it has no configuration file.
 * In dry-run mode and without an inventory nothing can be disrupted: every
 * decision shows what the policy would do. */
static const char builtin_policies[] =
    "policies:\n"
    "  - name: gpu-fell-off-bus\n"
    "    match: '{alertname=~\"GPUXidError|DCGMXidError\", xid=~\"79|48|63|64|94|95\"}'\n"
    "    cooldown: 6h\n"
    "    max_actions_per_node: { count: 3, window: 24h }\n"
    "    steps:\n"
    "      - action: drain\n"
    "        reason: 'Xid {{ $labels.xid }} on GPU {{ $labels.gpu }}'\n"
    "      - after: 10m\n"
    "        action: ipmi_power_cycle\n"
    "    on_resolved:\n"
    "      - action: resume\n"
    "  - name: double-bit-ecc\n"
    "    match: '{alertname=~\"GPUDoubleBitECC|GPURowRemapFailure\"}'\n"
    "    cooldown: 6h\n"
    "    steps:\n"
    "      - action: drain\n"
    "        reason: '{{ $labels.alertname }} on GPU {{ $labels.gpu }}'\n"
    "    on_resolved:\n"
    "      - action: resume\n";

static int builtin_policy_set(struct policy_set *out)
{
    struct yaml_tree tree;
    struct medic_error err = {0};
    int rc = yaml_tree_parse("(built-in policies)", builtin_policies, sizeof(builtin_policies) - 1,
                             &tree, &err);
    if (rc == 0)
        rc = policy_set_parse("(built-in policies)", yaml_tree_get(tree.root, "policies"), NULL,
                              NULL, 0, out, &err);
    yaml_tree_release(&tree);
    if (rc && rc != MEDIC_E_NOMEM)
        MEDIC_BUG("the built-in policies do not parse");
    return rc;
}

/* Everything but the model: a file may name one. */
static int set_defaults(struct medic_config *config)
{
    static const char *const labels[] = {"node", "Hostname", "instance"};
    memset(config, 0, sizeof(*config));
    config->source = strdup("(built-in defaults)");
    /* the modules' own defaults, then the directive table's */
    receiver_limits_default(&config->limits);
    struct audit_options audit;
    audit_options_default(&audit);
    config->audit_busy_timeout = (int64_t)audit.busy_timeout_ms * MEDIC_NS_PER_MS;
    config->audit_max_pending = audit.max_pending;
    if (config__apply_defaults(config))
        return MEDIC_E_NOMEM;
    for (size_t i = 0; i < 3; i++)
        config->node_labels[i] = strdup(labels[i]);
    config->node_label_count = 3;
    for (size_t i = 0; i < 3; i++)
        if (!config->node_labels[i])
            return MEDIC_E_NOMEM;
    if (builtin_policy_set(&config->policies))
        return MEDIC_E_NOMEM;
    return config->source && config->listen && config->audit_path ? 0 : MEDIC_E_NOMEM;
}

static int builtin_model(struct medic_config *config, struct medic_error *err)
{
    return model_load_builtin(&config->model, err) ||
                   features_from_metadata(&config->model.file, config->model.D, &config->features,
                                          err)
               ? (err->code ? err->code : MEDIC_E_INVALID)
               : 0;
}

int medic_config_defaults(struct medic_config *config)
{
    struct medic_error err = {0};
    int rc = set_defaults(config);
    return rc ? rc : builtin_model(config, &err);
}

static void auth_credentials_release(struct medic_credentials *c)
{
    free(c->bearer_token);
    free(c->basic_username);
    free(c->basic_password);
    memset(c, 0, sizeof(*c));
}

void medic_config_release(struct medic_config *config)
{
    free(config->source);
    free(config->listen);
    free(config->audit_path);
    free(config->ha_replica);
    auth_credentials_release(&config->webhook_auth);
    auth_credentials_release(&config->read_auth);
    auth_credentials_release(&config->admin_auth);
    for (size_t i = 0; i < config->approver_count; i++) {
        free((char *)config->approvers[i].name);
        free((char *)config->approvers[i].token);
    }
    free(config->tls_cert_pem);
    free(config->tls_key_pem);
    for (size_t i = 0; i < config->node_label_count; i++)
        free(config->node_labels[i]);
    free(config->inventory_file);
    inventory_release(&config->inventory);
    for (size_t i = 0; i < config->notifier_count; i++) {
        struct medic_notifier *n = &config->notifiers[i];
        free(n->name);
        free(n->url);
        free(n->from);
        for (size_t k = 0; k < n->to_count; k++)
            free(n->to[k]);
        free(n->routing_key);
        free(n->credentials);
    }
    free(config->credentials_file);
    credentials_release(&config->credentials);
    free(config->slurm_conf);
    free(config->scontrol);
    free(config->model_path);
    if (config->model.w)
        model_release(&config->model);
    free(config->prometheus_url);
    free(config->external_url);
    policy_set_release(&config->policies);
    memset(config, 0, sizeof(*config));
}

/* Policies come inline (`policies`) and from `policy_files`, each a YAML
 * file with a `policies` list; names must be unique across all of them. */
static int load_policies(struct loader *l, const struct yaml_tree_node *root)
{
    struct medic_config *c = l->config;
    const char *names[MEDIC_MAX_NOTIFIERS];
    for (size_t i = 0; i < c->notifier_count; i++)
        names[i] = c->notifiers[i].name;
    policy_set_release(&c->policies); /* a file replaces the built-in policies */
    int rc =
        policy_set_parse(l->f.file, yaml_tree_get(root, "policies"), yaml_tree_get(root, "safety"),
                         names, c->notifier_count, &c->policies, l->f.err);
    const struct yaml_tree_node *files = yaml_tree_get(root, "policy_files");
    if (rc || !files)
        return rc;
    if ((rc = yaml_fields_sequence(&l->f, files, "policy_files")))
        return rc;
    if (files->count > MEDIC_MAX_POLICY_FILES)
        return yaml_fields_fail(&l->f, files, "policy_files: at most %d", MEDIC_MAX_POLICY_FILES);
    for (size_t i = 0; i < files->count && rc == 0; i++) {
        char *name = NULL, *path = NULL;
        struct yaml_tree tree = {0};
        struct policy_set more = {0};
        rc = yaml_fields_string(&l->f, files->items[i], "policy_files", &name);
        if (rc == 0 && !(path = config__resolve_path(l->f.file, name)))
            rc = medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
        struct medic_error read_err = {0};
        if (rc == 0 && config__load_yaml(l, path, &tree, &read_err))
            rc = yaml_fields_fail(&l->f, files->items[i], "policy_files: %s", read_err.msg);
        if (rc == 0 && tree.root && tree.root->kind != YAML_TREE_MAPPING)
            rc = medic_error_set(l->f.err, MEDIC_E_INVALID,
                                 "%s:1:1: a policy file is a mapping with a policies list", path);
        if (rc == 0) {
            static const char *const keys[] = {"policies", NULL};
            struct yaml_fields pf = {path, l->f.err};
            if (tree.root)
                rc = yaml_fields_known_keys(&pf, tree.root, "a policy file", keys);
        }
        if (rc == 0)
            rc = policy_set_parse(path, yaml_tree_get(tree.root, "policies"), NULL, names,
                                  c->notifier_count, &more, l->f.err);
        if (rc == 0) {
            for (size_t k = 0; k < more.count && rc == 0; k++)
                for (size_t j = 0; j < c->policies.count && rc == 0; j++)
                    if (strcmp(more.items[k].name, c->policies.items[j].name) == 0)
                        rc = medic_error_set(
                            l->f.err, MEDIC_E_INVALID, "%s:%d:%d: policy '%s' is defined twice",
                            path, more.items[k].line, more.items[k].col, more.items[k].name);
        }
        if (rc == 0 && more.count) {
            struct policy *all =
                realloc(c->policies.items, (c->policies.count + more.count) * sizeof(*all));
            if (!all) {
                rc = medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
            } else {
                memcpy(all + c->policies.count, more.items, more.count * sizeof(*all));
                c->policies.items = all;
                c->policies.count += more.count;
                free(more.items);
                more.items = NULL;
                more.count = 0;
            }
        }
        policy_set_release(&more);
        yaml_tree_release(&tree);
        free(name);
        free(path);
    }
    return rc;
}

int config__load_yaml(struct loader *l, const char *path, struct yaml_tree *out,
                      struct medic_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = medic_read_config_file(path, YAML_TREE_MAX_BYTES, &text, &len, err);
    if (rc == 0)
        rc = yaml_tree_parse(path, text, len, out, err);
    if (rc == 0 && l->files) {
        char hex[MEDIC_SHA256_HEX_LEN + 1];
        medic_sha256_hex(text, len, hex);
        medic_buf_printf(l->files, "%s\n", hex);
    }
    free(text);
    return rc;
}

int config__load_inventory(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"file", "nodes", "node_labels", NULL};
    int rc = yaml_fields_mapping(&l->f, n, "inventory");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, "inventory", keys);
    const struct yaml_tree_node *v = yaml_tree_get(n, "file");
    if (rc == 0 && v) {
        char *file = NULL;
        struct medic_error ierr = {0};
        rc = yaml_fields_string(&l->f, v, "file", &file);
        if (rc == 0 && !(l->config->inventory_file = config__resolve_path(l->f.file, file)))
            rc = medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
        free(file);
        struct yaml_tree tree = {0};
        if (rc == 0 &&
            (config__load_yaml(l, l->config->inventory_file, &tree, &ierr) ||
             inventory_parse(l->config->inventory_file, tree.root, &l->config->inventory, &ierr)))
            rc = yaml_fields_fail(&l->f, v, "file: %s", ierr.msg);
        yaml_tree_release(&tree);
    }
    if (rc == 0 && (v = yaml_tree_get(n, "nodes"))) {
        if (l->config->inventory_file)
            rc = yaml_fields_fail(&l->f, v,
                                  "nodes: give the inventory inline or as a file, not both");
        else
            rc = inventory_parse_nodes(l->f.file, v, &l->config->inventory, l->f.err);
    }
    v = yaml_tree_get(n, "node_labels");
    if (rc || !v)
        return rc;
    if (v->kind != YAML_TREE_SEQUENCE || v->count == 0)
        return yaml_fields_fail(&l->f, v, "node_labels: expected a non-empty list of label names");
    if (v->count > MEDIC_MAX_NODE_LABELS)
        return yaml_fields_fail(&l->f, v, "node_labels: at most %d labels", MEDIC_MAX_NODE_LABELS);
    struct medic_config *c = l->config;
    for (size_t i = 0; i < c->node_label_count; i++)
        free(c->node_labels[i]);
    c->node_label_count = 0;
    for (size_t i = 0; i < v->count && rc == 0; i++) {
        char *name = NULL;
        rc = yaml_fields_string(&l->f, v->items[i], "node_labels", &name);
        if (rc == 0)
            c->node_labels[c->node_label_count++] = name;
    }
    return rc;
}

/* Each BMC's workarounds are known to FreeIPMI, and its credentials are in
 * the credentials file when one is given. */
static int check_bmcs(struct loader *l, const struct yaml_tree_node *at)
{
    const struct medic_config *c = l->config;
    for (size_t i = 0; i < c->inventory.count; i++) {
        const struct inventory_node *n = &c->inventory.nodes[i];
        if (!n->has_bmc)
            continue;
        unsigned int flags;
        struct medic_error werr = {0};
        if (ipmi_workaround_flags((const char *const *)n->bmc.workarounds, n->bmc.workaround_count,
                                  strcmp(n->bmc.driver, "lan") != 0, &flags, &werr))
            return yaml_fields_fail(&l->f, at, "inventory node '%s': %s", n->name, werr.msg);
        if (c->credentials_file && !credentials_find(&c->credentials, n->bmc.credentials))
            return yaml_fields_fail(&l->f, at,
                                    "inventory node '%s': bmc credentials '%s' are not in %s",
                                    n->name, n->bmc.credentials, c->credentials_file);
    }
    return 0;
}

/* The directives (directives.c), then what spans several of
 * them: the BMCs against the credentials, the model against Prometheus,
 * and the policies against the notifiers. */
static int load_root(struct loader *l, const struct yaml_tree_node *root,
                     const char *const *extra_keys)
{
    struct medic_config *c = l->config;
    const struct yaml_tree_node *v;
    if (!root)
        return builtin_model(c, l->f.err); /* an empty file: the defaults */
    int rc = config__load_directives(l, root, extra_keys);
    if (rc == 0 && (v = yaml_tree_get(root, "inventory")))
        rc = check_bmcs(l, v);
    if (rc == 0 && c->model_path && !c->prometheus_url)
        rc = yaml_fields_fail(&l->f, yaml_tree_get(root, "model"),
                              "model: needs prometheus.url, where its telemetry is read");
    if (rc == 0 && !c->model_path)
        rc = builtin_model(c, l->f.err);
    if (rc == 0 && (v = yaml_tree_get(root, "safety"))) {
        c->storm_line = v->line;
        c->storm_col = v->col;
    }
    if (rc == 0)
        rc = load_policies(l, root);
    return rc;
}

/* A YAML subtree into h, the same for the same content: mapping keys in
 * sorted order, scalars with whether they were quoted. */
static int by_key(const void *a, const void *b, void *keys)
{
    char **k = keys;
    return strcmp(k[*(const size_t *)a], k[*(const size_t *)b]);
}

static void hash_node(struct medic_sha256 *h, const struct yaml_tree_node *n)
{
    if (!n) {
        medic_sha256_field(h, "~");
        return;
    }
    switch (n->kind) {
    case YAML_TREE_SCALAR:
        medic_sha256_field(h, n->quoted ? "s'" : "s");
        medic_sha256_field(h, n->value ? n->value : "");
        break;
    case YAML_TREE_SEQUENCE:
        medic_sha256_field(h, "[");
        for (size_t i = 0; i < n->count; i++)
            hash_node(h, n->items[i]);
        medic_sha256_field(h, "]");
        break;
    case YAML_TREE_MAPPING: {
        size_t *order = malloc((n->count + 1) * sizeof(*order));
        medic_sha256_field(h, "{");
        for (size_t i = 0; order && i < n->count; i++)
            order[i] = i;
        if (order)
            qsort_r(order, n->count, sizeof(*order), by_key, n->keys);
        for (size_t i = 0; i < n->count; i++) {
            size_t k = order ? order[i] : i;
            medic_sha256_field(h, n->keys[k]);
            hash_node(h, n->items[k]);
        }
        medic_sha256_field(h, "}");
        free(order);
        break;
    }
    }
}

/* config->policy_hash: what decides, from root and the named files' hashes. */
static int hash_what_decides(struct medic_config *config, const struct yaml_tree_node *root,
                             const struct medic_buf *files, struct medic_error *err)
{
    static const char *const deciding[] = {"engine",   "inventory",  "mode",   "model", "notifiers",
                                           "policies", "prometheus", "safety", NULL};
    struct medic_sha256 *h = medic_sha256_new();
    if (!h)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; deciding[i]; i++) {
        medic_sha256_field(h, deciding[i]);
        hash_node(h, root ? yaml_tree_get(root, deciding[i]) : NULL);
    }
    medic_sha256_update(h, files->data ? files->data : "", files->len);
    medic_sha256_finish(h, config->policy_hash);
    return 0;
}

int medic_config_load(const char *path, struct medic_config *config, struct medic_error *err)
{
    char *text = NULL;
    size_t len;
    struct yaml_tree tree = {0};
    int rc = set_defaults(config);
    if (rc) {
        medic_config_release(config);
        return medic_error_set(err, rc, "out of memory");
    }
    rc = medic_read_file(path, YAML_TREE_MAX_BYTES, &text, &len, err);
    if (rc == 0)
        rc = yaml_tree_parse(path, text, len, &tree, err);
    struct medic_buf files;
    medic_buf_init(&files, 0);
    if (rc == 0) {
        struct loader l = {{path, err}, config, &files};
        rc = load_root(&l, tree.root, NULL);
    }
    if (rc == 0 && files.error)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (rc == 0) {
        /* the file's own hash, or, when it names others, the hash of every
         * file's hash in the order read: a policy file or an inventory file
         * changed is a configuration changed */
        medic_sha256_hex(text, len, config->hash);
        if (files.len) {
            struct medic_sha256 *h = medic_sha256_new();
            if (!h)
                rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            else {
                medic_sha256_update(h, config->hash, strlen(config->hash));
                medic_sha256_update(h, "\n", 1);
                medic_sha256_update(h, files.data, files.len);
                medic_sha256_finish(h, config->hash);
            }
        }
    }
    if (rc == 0)
        rc = hash_what_decides(config, tree.root, &files, err);
    medic_buf_release(&files);
    if (rc == 0) {
        free(config->source);
        config->source = strdup(path);
        if (!config->source)
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    yaml_tree_release(&tree);
    free(text);
    if (rc)
        medic_config_release(config);
    return rc;
}

int medic_config_from_tree(const char *file, const struct yaml_tree_node *root,
                           const char *const *extra_keys, struct medic_config *config,
                           struct medic_error *err)
{
    int rc = set_defaults(config);
    if (rc) {
        medic_config_release(config);
        return medic_error_set(err, rc, "out of memory");
    }
    struct loader l = {{file, err}, config, NULL};
    rc = load_root(&l, root, extra_keys);
    if (rc == 0) {
        free(config->source);
        config->source = strdup(file);
        if (!config->source)
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    if (rc)
        medic_config_release(config);
    return rc;
}

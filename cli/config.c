#include "config.h"
#include "log.h"
#include "sha256.h"
#include "timeutil.h"
#include "yaml_fields.h"
#include "yaml_tree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Secrets and certificates are small; refuse anything larger. */
#define CONFIG_MAX_SECRET_BYTES 4096
#define CONFIG_MAX_PEM_BYTES (256 * 1024)

int medic_config_defaults(struct medic_config *config)
{
    static const char *const labels[] = {"node", "Hostname", "instance"};
    memset(config, 0, sizeof(*config));
    config->source = strdup("(built-in defaults)");
    config->listen = strdup("127.0.0.1:9799");
    config->audit_path = strdup("./medic.db");
    config->mode = MEDIC_MODE_DRY_RUN;
    config->audit_busy_timeout = 5 * MEDIC_NS_PER_SEC;
    config->audit_max_pending = 4096;
    config->max_connections = 512;
    config->log_level = 1;
    receiver_limits_default(&config->limits);
    for (size_t i = 0; i < 3; i++)
        config->node_labels[i] = strdup(labels[i]);
    config->node_label_count = 3;
    for (size_t i = 0; i < 3; i++)
        if (!config->node_labels[i])
            return MEDIC_E_NOMEM;
    return config->source && config->listen && config->audit_path ? 0 : MEDIC_E_NOMEM;
}

static void credentials_release(struct medic_credentials *c)
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
    credentials_release(&config->webhook_auth);
    credentials_release(&config->read_auth);
    credentials_release(&config->admin_auth);
    free(config->tls_cert_pem);
    free(config->tls_key_pem);
    for (size_t i = 0; i < config->node_label_count; i++)
        free(config->node_labels[i]);
    memset(config, 0, sizeof(*config));
}

struct loader {
    struct yaml_fields f; /* first: the helpers take it */
    struct medic_config *config;
};

/* Reads a secret file: refused when group- or world-readable (a secret
 * readable by anyone is not a secret); one trailing newline is dropped. */
static int read_secret(struct loader *l, const struct yaml_tree_node *n, const char *key,
                       char **out)
{
    int rc = yaml_fields_scalar(&l->f, n, key);
    if (rc)
        return rc;
    struct stat st;
    if (stat(n->value, &st) != 0)
        return yaml_fields_fail(&l->f, n, "%s: cannot read '%s': %s", key, n->value,
                                strerror(errno));
    if (st.st_mode & 077)
        return yaml_fields_fail(&l->f, n,
                                "%s: '%s' is readable by group or others (mode %03o); chmod 600 it",
                                key, n->value, (unsigned)(st.st_mode & 0777));
    struct medic_error ferr;
    char *data;
    size_t len;
    if (medic_read_file(n->value, CONFIG_MAX_SECRET_BYTES, &data, &len, &ferr))
        return yaml_fields_fail(&l->f, n, "%s: %s", key, ferr.msg);
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        data[--len] = '\0';
    if (len == 0 || strlen(data) != len) {
        free(data);
        return yaml_fields_fail(&l->f, n, "%s: '%s' is empty or holds a NUL byte", key, n->value);
    }
    free(*out);
    *out = data;
    return 0;
}

static int load_pem(struct loader *l, const struct yaml_tree_node *n, const char *key, char **out)
{
    int rc = yaml_fields_scalar(&l->f, n, key);
    if (rc)
        return rc;
    struct medic_error ferr;
    char *data;
    size_t len;
    if (medic_read_file(n->value, CONFIG_MAX_PEM_BYTES, &data, &len, &ferr))
        return yaml_fields_fail(&l->f, n, "%s: %s", key, ferr.msg);
    if (!strstr(data, "-----BEGIN ")) {
        free(data);
        return yaml_fields_fail(&l->f, n, "%s: '%s' is not a PEM file", key, n->value);
    }
    *out = data;
    return 0;
}

static int load_basic(struct loader *l, const struct yaml_tree_node *n, const char *key,
                      struct medic_credentials *c)
{
    static const char *const keys[] = {"username", "password_file", NULL};
    int rc = yaml_fields_mapping(&l->f, n, key);
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, key, keys);
    const struct yaml_tree_node *user = yaml_tree_get(n, "username");
    const struct yaml_tree_node *pass = yaml_tree_get(n, "password_file");
    if (rc == 0 && (!user || !pass))
        rc = yaml_fields_fail(&l->f, n, "%s: needs both username and password_file", key);
    if (rc == 0)
        rc = yaml_fields_string(&l->f, user, "username", &c->basic_username);
    if (rc == 0 && strchr(c->basic_username, ':'))
        rc = yaml_fields_fail(&l->f, user, "username: must not contain ':'");
    if (rc == 0)
        rc = read_secret(l, pass, "password_file", &c->basic_password);
    return rc;
}

static int load_auth(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"webhook_bearer_token_file",
                                       "webhook_basic_auth",
                                       "read_bearer_token_file",
                                       "read_basic_auth",
                                       "admin_bearer_token_file",
                                       "admin_basic_auth",
                                       NULL};
    static const char *const classes[] = {"webhook", "read", "admin"};
    struct medic_credentials *targets[] = {&l->config->webhook_auth, &l->config->read_auth,
                                           &l->config->admin_auth};
    int rc = yaml_fields_mapping(&l->f, n, "auth");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, "auth", keys);
    for (int i = 0; i < 3 && rc == 0; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%s_bearer_token_file", classes[i]);
        const struct yaml_tree_node *v = yaml_tree_get(n, key);
        if (v)
            rc = read_secret(l, v, key, &targets[i]->bearer_token);
        snprintf(key, sizeof(key), "%s_basic_auth", classes[i]);
        v = yaml_tree_get(n, key);
        if (v && rc == 0)
            rc = load_basic(l, v, key, targets[i]);
    }
    return rc;
}

static int load_limits(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"max_body_bytes",
                                       "max_alerts",
                                       "max_labels",
                                       "max_label_value_bytes",
                                       "max_annotation_value_bytes",
                                       "max_connections",
                                       NULL};
    struct receiver_limits *lim = &l->config->limits;
    int rc = yaml_fields_mapping(&l->f, n, "limits");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, "limits", keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(n, "max_body_bytes")))
        rc = yaml_fields_size(&l->f, v, "max_body_bytes", 1024, (size_t)64 << 20,
                              &lim->max_body_bytes);
    if (rc == 0 && (v = yaml_tree_get(n, "max_alerts")))
        rc = yaml_fields_size(&l->f, v, "max_alerts", 1, 100000, &lim->max_alerts);
    if (rc == 0 && (v = yaml_tree_get(n, "max_labels")))
        rc = yaml_fields_size(&l->f, v, "max_labels", 1, 1024, &lim->max_labels);
    if (rc == 0 && (v = yaml_tree_get(n, "max_label_value_bytes")))
        rc = yaml_fields_size(&l->f, v, "max_label_value_bytes", 16, (size_t)1 << 20,
                              &lim->max_label_value_bytes);
    if (rc == 0 && (v = yaml_tree_get(n, "max_annotation_value_bytes")))
        rc = yaml_fields_size(&l->f, v, "max_annotation_value_bytes", 16, (size_t)1 << 20,
                              &lim->max_annotation_value_bytes);
    if (rc == 0 && (v = yaml_tree_get(n, "max_connections")))
        rc = yaml_fields_size(&l->f, v, "max_connections", 1, 65536, &l->config->max_connections);
    return rc;
}

static int load_audit(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"path", "busy_timeout", "max_pending", NULL};
    int rc = yaml_fields_mapping(&l->f, n, "audit");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, "audit", keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(n, "path")))
        rc = yaml_fields_string(&l->f, v, "path", &l->config->audit_path);
    if (rc == 0 && (v = yaml_tree_get(n, "busy_timeout")))
        rc = yaml_fields_duration(&l->f, v, "busy_timeout", &l->config->audit_busy_timeout);
    if (rc == 0 && (v = yaml_tree_get(n, "max_pending")))
        rc = yaml_fields_size(&l->f, v, "max_pending", 1, 1000000, &l->config->audit_max_pending);
    return rc;
}

static int load_inventory(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"file", "node_labels", NULL};
    int rc = yaml_fields_mapping(&l->f, n, "inventory");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, "inventory", keys);
    const struct yaml_tree_node *v = yaml_tree_get(n, "node_labels");
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

static int load_listen(struct loader *l, const struct yaml_tree_node *n)
{
    int rc = yaml_fields_string(&l->f, n, "listen", &l->config->listen);
    const char *colon = rc ? NULL : strrchr(l->config->listen, ':');
    if (rc == 0 && (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
                    atoi(colon + 1) > 65535))
        rc = yaml_fields_fail(&l->f, n, "listen: expected HOST:PORT, got '%s'", l->config->listen);
    return rc;
}

static int load_root(struct loader *l, const struct yaml_tree_node *root)
{
    /* sections read by other parts of medic are accepted here so that one
     * file serves every command */
    static const char *const keys[] = {"listen",     "mode",   "log_level",        "audit",
                                       "auth",       "tls",    "limits",           "inventory",
                                       "prometheus", "model",  "credentials_file", "slurm",
                                       "notifiers",  "safety", "policies",         "policy_files",
                                       NULL};
    struct medic_config *c = l->config;
    if (!root)
        return 0; /* an empty file: the defaults */
    int rc = yaml_fields_mapping(&l->f, root, "the configuration");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, root, NULL, keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(root, "listen")))
        rc = load_listen(l, v);
    if (rc == 0 && (v = yaml_tree_get(root, "mode"))) {
        rc = yaml_fields_scalar(&l->f, v, "mode");
        if (rc == 0 && strcmp(v->value, "dry-run") == 0)
            c->mode = MEDIC_MODE_DRY_RUN;
        else if (rc == 0 && strcmp(v->value, "live") == 0)
            c->mode = MEDIC_MODE_LIVE;
        else if (rc == 0)
            rc = yaml_fields_fail(&l->f, v, "mode: expected 'dry-run' or 'live', got '%s'",
                                  v->value);
    }
    if (rc == 0 && (v = yaml_tree_get(root, "log_level"))) {
        rc = yaml_fields_scalar(&l->f, v, "log_level");
        if (rc == 0 && (c->log_level = medic_log_parse_level(v->value)) < 0)
            rc = yaml_fields_fail(&l->f, v, "log_level: expected debug, info, warn or error");
    }
    if (rc == 0 && (v = yaml_tree_get(root, "audit")))
        rc = load_audit(l, v);
    if (rc == 0 && (v = yaml_tree_get(root, "auth")))
        rc = load_auth(l, v);
    if (rc == 0 && (v = yaml_tree_get(root, "limits")))
        rc = load_limits(l, v);
    if (rc == 0 && (v = yaml_tree_get(root, "inventory")))
        rc = load_inventory(l, v);
    if (rc == 0 && (v = yaml_tree_get(root, "tls"))) {
        static const char *const tls_keys[] = {"cert_file", "key_file", NULL};
        const struct yaml_tree_node *cert, *key;
        rc = yaml_fields_mapping(&l->f, v, "tls");
        if (rc == 0)
            rc = yaml_fields_known_keys(&l->f, v, "tls", tls_keys);
        cert = yaml_tree_get(v, "cert_file");
        key = yaml_tree_get(v, "key_file");
        if (rc == 0 && (!cert || !key))
            rc = yaml_fields_fail(&l->f, v, "tls: needs both cert_file and key_file");
        if (rc == 0)
            rc = load_pem(l, cert, "cert_file", &c->tls_cert_pem);
        if (rc == 0)
            rc = read_secret(l, key, "key_file", &c->tls_key_pem);
    }
    if (rc == 0 && c->mode == MEDIC_MODE_LIVE && !c->webhook_auth.bearer_token &&
        !c->webhook_auth.basic_username)
        rc = yaml_fields_fail(&l->f, yaml_tree_get(root, "mode"),
                              "mode: live needs authentication on the webhook (auth: "
                              "webhook_bearer_token_file or webhook_basic_auth)");
    return rc;
}

int medic_config_load(const char *path, struct medic_config *config, struct medic_error *err)
{
    char *text = NULL;
    size_t len;
    struct yaml_tree tree = {0};
    int rc = medic_config_defaults(config);
    if (rc) {
        medic_config_release(config);
        return medic_error_set(err, rc, "out of memory");
    }
    rc = medic_read_file(path, YAML_TREE_MAX_BYTES, &text, &len, err);
    if (rc == 0)
        rc = yaml_tree_parse(path, text, len, &tree, err);
    if (rc == 0) {
        struct loader l = {{path, err}, config};
        rc = load_root(&l, tree.root);
    }
    if (rc == 0) {
        medic_sha256_hex(text, len, config->hash);
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

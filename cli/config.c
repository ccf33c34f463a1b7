#include "config.h"
#include "log.h"
#include "sha256.h"
#include "timeutil.h"
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
    const char *file;
    struct medic_config *config;
    struct medic_error *err;
};

static int fail(struct loader *l, const struct yaml_tree_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct loader *l, const struct yaml_tree_node *n, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return medic_error_set(l->err, MEDIC_E_INVALID, "%s:%d:%d: %s", l->file, n ? n->line : 1,
                           n ? n->col : 1, msg);
}

static int want_scalar(struct loader *l, const struct yaml_tree_node *n, const char *key)
{
    if (n->kind != YAML_TREE_SCALAR)
        return fail(l, n, "%s: expected a single value", key);
    return 0;
}

static int want_mapping(struct loader *l, const struct yaml_tree_node *n, const char *key)
{
    if (n->kind != YAML_TREE_MAPPING)
        return fail(l, n, "%s: expected a mapping", key);
    return 0;
}

/* Checks that every key of map is one of allowed (a NULL-terminated list). */
static int known_keys(struct loader *l, const struct yaml_tree_node *map, const char *section,
                      const char *const *allowed)
{
    for (size_t i = 0; i < map->count; i++) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(map->keys[i], *a) == 0;
        if (!ok) {
            struct yaml_tree_node at = {.line = map->key_lines[i], .col = map->key_cols[i]};
            return fail(l, &at, "unknown key '%s'%s%s", map->keys[i], section ? " in " : "",
                        section ? section : "");
        }
    }
    return 0;
}

static int set_string(struct loader *l, const struct yaml_tree_node *n, const char *key, char **out)
{
    int rc = want_scalar(l, n, key);
    if (rc)
        return rc;
    if (!*n->value)
        return fail(l, n, "%s: must not be empty", key);
    char *copy = strdup(n->value);
    if (!copy)
        return medic_error_set(l->err, MEDIC_E_NOMEM, "out of memory");
    free(*out);
    *out = copy;
    return 0;
}

static int set_duration(struct loader *l, const struct yaml_tree_node *n, const char *key,
                        int64_t *out)
{
    int rc = want_scalar(l, n, key);
    if (rc)
        return rc;
    if (medic_duration_parse(n->value, out))
        return fail(l, n, "%s: '%s' is not a duration (examples: 500ms, 2s, 5m, 1h)", key,
                    n->value);
    return 0;
}

static int set_size(struct loader *l, const struct yaml_tree_node *n, const char *key, size_t min,
                    size_t max, size_t *out)
{
    int rc = want_scalar(l, n, key);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(n->value, &end, 10);
    if (end == n->value || errno || n->value[0] == '-')
        return fail(l, n, "%s: '%s' is not a number", key, n->value);
    if (strcmp(end, "KiB") == 0 && v <= (1ULL << 40))
        v <<= 10;
    else if (strcmp(end, "MiB") == 0 && v <= (1ULL << 30))
        v <<= 20;
    else if (*end)
        return fail(l, n, "%s: '%s' is not a number (suffixes: KiB, MiB)", key, n->value);
    if (v < min || v > max)
        return fail(l, n, "%s: %llu is outside %zu..%zu", key, v, min, max);
    *out = (size_t)v;
    return 0;
}

/* Reads a secret file: refused when group- or world-readable (a secret
 * readable by anyone is not a secret); one trailing newline is dropped. */
static int read_secret(struct loader *l, const struct yaml_tree_node *n, const char *key,
                       char **out)
{
    int rc = want_scalar(l, n, key);
    if (rc)
        return rc;
    struct stat st;
    if (stat(n->value, &st) != 0)
        return fail(l, n, "%s: cannot read '%s': %s", key, n->value, strerror(errno));
    if (st.st_mode & 077)
        return fail(l, n, "%s: '%s' is readable by group or others (mode %03o); chmod 600 it", key,
                    n->value, (unsigned)(st.st_mode & 0777));
    struct medic_error ferr;
    char *data;
    size_t len;
    if (medic_read_file(n->value, CONFIG_MAX_SECRET_BYTES, &data, &len, &ferr))
        return fail(l, n, "%s: %s", key, ferr.msg);
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        data[--len] = '\0';
    if (len == 0 || strlen(data) != len) {
        free(data);
        return fail(l, n, "%s: '%s' is empty or holds a NUL byte", key, n->value);
    }
    free(*out);
    *out = data;
    return 0;
}

static int load_pem(struct loader *l, const struct yaml_tree_node *n, const char *key, char **out)
{
    int rc = want_scalar(l, n, key);
    if (rc)
        return rc;
    struct medic_error ferr;
    char *data;
    size_t len;
    if (medic_read_file(n->value, CONFIG_MAX_PEM_BYTES, &data, &len, &ferr))
        return fail(l, n, "%s: %s", key, ferr.msg);
    if (!strstr(data, "-----BEGIN ")) {
        free(data);
        return fail(l, n, "%s: '%s' is not a PEM file", key, n->value);
    }
    *out = data;
    return 0;
}

static int load_basic(struct loader *l, const struct yaml_tree_node *n, const char *key,
                      struct medic_credentials *c)
{
    static const char *const keys[] = {"username", "password_file", NULL};
    int rc = want_mapping(l, n, key);
    if (rc == 0)
        rc = known_keys(l, n, key, keys);
    const struct yaml_tree_node *user = yaml_tree_get(n, "username");
    const struct yaml_tree_node *pass = yaml_tree_get(n, "password_file");
    if (rc == 0 && (!user || !pass))
        rc = fail(l, n, "%s: needs both username and password_file", key);
    if (rc == 0)
        rc = set_string(l, user, "username", &c->basic_username);
    if (rc == 0 && strchr(c->basic_username, ':'))
        rc = fail(l, user, "username: must not contain ':'");
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
    int rc = want_mapping(l, n, "auth");
    if (rc == 0)
        rc = known_keys(l, n, "auth", keys);
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
    int rc = want_mapping(l, n, "limits");
    if (rc == 0)
        rc = known_keys(l, n, "limits", keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(n, "max_body_bytes")))
        rc = set_size(l, v, "max_body_bytes", 1024, (size_t)64 << 20, &lim->max_body_bytes);
    if (rc == 0 && (v = yaml_tree_get(n, "max_alerts")))
        rc = set_size(l, v, "max_alerts", 1, 100000, &lim->max_alerts);
    if (rc == 0 && (v = yaml_tree_get(n, "max_labels")))
        rc = set_size(l, v, "max_labels", 1, 1024, &lim->max_labels);
    if (rc == 0 && (v = yaml_tree_get(n, "max_label_value_bytes")))
        rc = set_size(l, v, "max_label_value_bytes", 16, (size_t)1 << 20,
                      &lim->max_label_value_bytes);
    if (rc == 0 && (v = yaml_tree_get(n, "max_annotation_value_bytes")))
        rc = set_size(l, v, "max_annotation_value_bytes", 16, (size_t)1 << 20,
                      &lim->max_annotation_value_bytes);
    if (rc == 0 && (v = yaml_tree_get(n, "max_connections")))
        rc = set_size(l, v, "max_connections", 1, 65536, &l->config->max_connections);
    return rc;
}

static int load_audit(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"path", "busy_timeout", "max_pending", NULL};
    int rc = want_mapping(l, n, "audit");
    if (rc == 0)
        rc = known_keys(l, n, "audit", keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(n, "path")))
        rc = set_string(l, v, "path", &l->config->audit_path);
    if (rc == 0 && (v = yaml_tree_get(n, "busy_timeout")))
        rc = set_duration(l, v, "busy_timeout", &l->config->audit_busy_timeout);
    if (rc == 0 && (v = yaml_tree_get(n, "max_pending")))
        rc = set_size(l, v, "max_pending", 1, 1000000, &l->config->audit_max_pending);
    return rc;
}

static int load_inventory(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"file", "node_labels", NULL};
    int rc = want_mapping(l, n, "inventory");
    if (rc == 0)
        rc = known_keys(l, n, "inventory", keys);
    const struct yaml_tree_node *v = yaml_tree_get(n, "node_labels");
    if (rc || !v)
        return rc;
    if (v->kind != YAML_TREE_SEQUENCE || v->count == 0)
        return fail(l, v, "node_labels: expected a non-empty list of label names");
    if (v->count > MEDIC_MAX_NODE_LABELS)
        return fail(l, v, "node_labels: at most %d labels", MEDIC_MAX_NODE_LABELS);
    struct medic_config *c = l->config;
    for (size_t i = 0; i < c->node_label_count; i++)
        free(c->node_labels[i]);
    c->node_label_count = 0;
    for (size_t i = 0; i < v->count && rc == 0; i++) {
        char *name = NULL;
        rc = set_string(l, v->items[i], "node_labels", &name);
        if (rc == 0)
            c->node_labels[c->node_label_count++] = name;
    }
    return rc;
}

static int load_listen(struct loader *l, const struct yaml_tree_node *n)
{
    int rc = set_string(l, n, "listen", &l->config->listen);
    const char *colon = rc ? NULL : strrchr(l->config->listen, ':');
    if (rc == 0 && (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
                    atoi(colon + 1) > 65535))
        rc = fail(l, n, "listen: expected HOST:PORT, got '%s'", l->config->listen);
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
    int rc = want_mapping(l, root, "the configuration");
    if (rc == 0)
        rc = known_keys(l, root, NULL, keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(root, "listen")))
        rc = load_listen(l, v);
    if (rc == 0 && (v = yaml_tree_get(root, "mode"))) {
        rc = want_scalar(l, v, "mode");
        if (rc == 0 && strcmp(v->value, "dry-run") == 0)
            c->mode = MEDIC_MODE_DRY_RUN;
        else if (rc == 0 && strcmp(v->value, "live") == 0)
            c->mode = MEDIC_MODE_LIVE;
        else if (rc == 0)
            rc = fail(l, v, "mode: expected 'dry-run' or 'live', got '%s'", v->value);
    }
    if (rc == 0 && (v = yaml_tree_get(root, "log_level"))) {
        rc = want_scalar(l, v, "log_level");
        if (rc == 0 && (c->log_level = medic_log_parse_level(v->value)) < 0)
            rc = fail(l, v, "log_level: expected debug, info, warn or error");
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
        rc = want_mapping(l, v, "tls");
        if (rc == 0)
            rc = known_keys(l, v, "tls", tls_keys);
        cert = yaml_tree_get(v, "cert_file");
        key = yaml_tree_get(v, "key_file");
        if (rc == 0 && (!cert || !key))
            rc = fail(l, v, "tls: needs both cert_file and key_file");
        if (rc == 0)
            rc = load_pem(l, cert, "cert_file", &c->tls_cert_pem);
        if (rc == 0)
            rc = read_secret(l, key, "key_file", &c->tls_key_pem);
    }
    if (rc == 0 && c->mode == MEDIC_MODE_LIVE && !c->webhook_auth.bearer_token &&
        !c->webhook_auth.basic_username)
        rc = fail(l, yaml_tree_get(root, "mode"),
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
        struct loader l = {path, config, err};
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

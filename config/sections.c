/* SPDX-License-Identifier: Apache-2.0 */
#include "loader.h"
#include "log.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Secrets and certificates are small; refuse anything larger. */
#define CONFIG_MAX_SECRET_BYTES 4096
#define CONFIG_MAX_PEM_BYTES (256 * 1024)

/* Reads a secret file: refused when group- or world-readable (a secret
 * readable by anyone is not a secret); one trailing newline is dropped. */
static int read_secret_at(struct loader *l, const struct yaml_tree_node *n, const char *key,
                          const char *path, char **out);

int config__read_secret(struct loader *l, const struct yaml_tree_node *n, const char *key,
                        char **out)
{
    int rc = yaml_fields_scalar(&l->f, n, key);
    if (rc)
        return rc;
    /* relative to the configuration file, as its other paths */
    char *path = config__resolve_path(l->f.file, n->value);
    if (!path)
        return medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
    rc = read_secret_at(l, n, key, path, out);
    free(path);
    return rc;
}

static int read_secret_at(struct loader *l, const struct yaml_tree_node *n, const char *key,
                          const char *path, char **out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return yaml_fields_fail(&l->f, n, "%s: cannot read '%s': %s", key, path, strerror(errno));
    if (st.st_mode & 077)
        return yaml_fields_fail(&l->f, n,
                                "%s: '%s' is readable by group or others (mode %03o); chmod 600 it",
                                key, path, (unsigned)(st.st_mode & 0777));
    struct medic_error ferr;
    char *data;
    size_t len;
    if (medic_read_config_file(path, CONFIG_MAX_SECRET_BYTES, &data, &len, &ferr))
        return yaml_fields_fail(&l->f, n, "%s: %s", key, ferr.msg);
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        data[--len] = '\0';
    if (len == 0 || strlen(data) != len) {
        free(data);
        return yaml_fields_fail(&l->f, n, "%s: '%s' is empty or holds a NUL byte", key, path);
    }
    free(*out);
    *out = data;
    return 0;
}

int config__load_pem(struct loader *l, const struct yaml_tree_node *n, const char *key, char **out)
{
    int rc = yaml_fields_scalar(&l->f, n, key);
    if (rc)
        return rc;
    struct medic_error ferr;
    char *data = NULL, *path = config__resolve_path(l->f.file, n->value);
    size_t len;
    if (!path)
        return medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
    if (medic_read_config_file(path, CONFIG_MAX_PEM_BYTES, &data, &len, &ferr))
        rc = yaml_fields_fail(&l->f, n, "%s: %s", key, ferr.msg);
    else if (!strstr(data, "-----BEGIN "))
        rc = yaml_fields_fail(&l->f, n, "%s: '%s' is not a PEM file", key, path);
    free(path);
    if (rc) {
        free(data);
        return rc;
    }
    *out = data;
    return 0;
}

int config__load_basic(struct loader *l, const struct yaml_tree_node *n, const char *key,
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
        rc = config__read_secret(l, pass, "password_file", &c->basic_password);
    return rc;
}

/* auth.approvers: [{ name: alice, token_file: F }, ...] */
static int load_approvers(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"name", "token_file", NULL};
    struct medic_config *c = l->config;
    int rc = yaml_fields_sequence(&l->f, n, "approvers");
    if (rc == 0 && n->count > MEDIC_MAX_APPROVERS)
        rc = yaml_fields_fail(&l->f, n, "approvers: at most %d", MEDIC_MAX_APPROVERS);
    for (size_t i = 0; i < n->count && rc == 0; i++) {
        const struct yaml_tree_node *item = n->items[i];
        if ((rc = yaml_fields_mapping(&l->f, item, "an approver")) ||
            (rc = yaml_fields_known_keys(&l->f, item, "an approver", keys)))
            break;
        const struct yaml_tree_node *name = yaml_tree_get(item, "name");
        const struct yaml_tree_node *file = yaml_tree_get(item, "token_file");
        if (!name || !file) {
            rc = yaml_fields_fail(&l->f, item, "an approver needs name and token_file");
            break;
        }
        char *who = NULL, *token = NULL;
        rc = yaml_fields_string(&l->f, name, "name", &who);
        if (rc == 0 && (!who[0] || strlen(who) > 64 ||
                        strspn(who, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                    "-_.@") != strlen(who)))
            rc = yaml_fields_fail(&l->f, name,
                                  "name: up to 64 letters, digits, '-', '_', '.' or '@' (it "
                                  "is what the audit log records)");
        for (size_t k = 0; rc == 0 && k < c->approver_count; k++)
            if (strcmp(c->approvers[k].name, who) == 0)
                rc = yaml_fields_fail(&l->f, name, "name: '%s' is named twice", who);
        if (rc == 0)
            rc = config__read_secret(l, file, "token_file", &token);
        if (rc) {
            free(who);
            free(token);
            break;
        }
        c->approvers[c->approver_count++] = (struct medic_approver){who, token};
    }
    return rc;
}

int config__load_auth(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"webhook_bearer_token_file",
                                       "webhook_basic_auth",
                                       "read_bearer_token_file",
                                       "read_basic_auth",
                                       "admin_bearer_token_file",
                                       "admin_basic_auth",
                                       "approvers",
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
            rc = config__read_secret(l, v, key, &targets[i]->bearer_token);
        snprintf(key, sizeof(key), "%s_basic_auth", classes[i]);
        v = yaml_tree_get(n, key);
        if (v && rc == 0)
            rc = config__load_basic(l, v, key, targets[i]);
    }
    const struct yaml_tree_node *v = yaml_tree_get(n, "approvers");
    if (v && rc == 0)
        rc = load_approvers(l, v);
    return rc;
}

/* A path from the configuration, relative to the file's own folder. */
char *config__resolve_path(const char *config_file, const char *path)
{
    if (path[0] == '/' || !strchr(config_file, '/'))
        return strdup(path);
    const char *slash = strrchr(config_file, '/');
    size_t dir = (size_t)(slash - config_file);
    size_t len = dir + 1 + strlen(path) + 1;
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "%.*s/%s", (int)dir, config_file, path);
    return out;
}

int config__load_notifiers(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"type",        "url",         "from", "to",
                                       "routing_key", "credentials", NULL};
    static const char *const types[] = {"webhook", "slack", "pagerduty", "smtp"};
    struct medic_config *c = l->config;
    int rc = yaml_fields_mapping(&l->f, n, "notifiers");
    if (rc)
        return rc;
    if (n->count > MEDIC_MAX_NOTIFIERS)
        return yaml_fields_fail(&l->f, n, "notifiers: at most %d", MEDIC_MAX_NOTIFIERS);
    for (size_t i = 0; i < n->count; i++) {
        const struct yaml_tree_node *x = n->items[i], *v;
        struct medic_notifier *nt = &c->notifiers[c->notifier_count++];
        if (!(nt->name = strdup(n->keys[i])))
            return medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
        if ((rc = yaml_fields_mapping(&l->f, x, nt->name)) ||
            (rc = yaml_fields_known_keys(&l->f, x, "a notifier", keys)))
            return rc;
        if (!(v = yaml_tree_get(x, "type")))
            return yaml_fields_fail(&l->f, x,
                                    "notifier '%s': needs a type (webhook, slack, "
                                    "pagerduty or smtp)",
                                    nt->name);
        if ((rc = yaml_fields_scalar(&l->f, v, "type")))
            return rc;
        size_t t;
        for (t = 0; t < 4 && strcmp(v->value, types[t]) != 0; t++)
            ;
        if (t == 4)
            return yaml_fields_fail(&l->f, v,
                                    "type: expected webhook, slack, pagerduty or smtp, "
                                    "got '%s'",
                                    v->value);
        nt->type = (enum medic_notifier_type)t;
        /* a secret URL (a Slack webhook's) may stay in the credentials file */
        const struct credential *cred = NULL;
        const struct yaml_tree_node *cv = yaml_tree_get(x, "credentials");
        if (cv) {
            if ((rc = yaml_fields_string(&l->f, cv, "credentials", &nt->credentials)))
                return rc;
            if (!(cred = credentials_find(&c->credentials, nt->credentials)))
                return yaml_fields_fail(&l->f, cv,
                                        "credentials: '%s' is not in the credentials "
                                        "file%s",
                                        nt->credentials,
                                        c->credentials_file ? "" : " (no credentials_file is set)");
        }
        const char *url = NULL;
        if ((v = yaml_tree_get(x, "url"))) {
            if ((rc = yaml_fields_string(&l->f, v, "url", &nt->url)))
                return rc;
            url = nt->url;
        } else if (cred && cred->url) {
            url = cred->url;
            v = cv;
        } else {
            return yaml_fields_fail(&l->f, x,
                                    "notifier '%s': needs a url (here, or as `url:` of its "
                                    "credentials in the credentials file, for a secret one)",
                                    nt->name);
        }
        const char *scheme = nt->type == MEDIC_NOTIFIER_SMTP ? "smtp" : "http";
        if (strncmp(url, scheme, strlen(scheme)) != 0 || !strstr(url, "://"))
            return yaml_fields_fail(&l->f, v, "url%s: expected %s:// or %ss:// for a %s notifier",
                                    url == nt->url ? "" : " (in the credentials file)", scheme,
                                    scheme, types[t]);
        if ((v = yaml_tree_get(x, "from")) &&
            (rc = yaml_fields_string(&l->f, v, "from", &nt->from)))
            return rc;
        if ((v = yaml_tree_get(x, "to"))) {
            if ((rc = yaml_fields_sequence(&l->f, v, "to")))
                return rc;
            if (v->count == 0 || v->count > 16)
                return yaml_fields_fail(&l->f, v, "to: expected 1 to 16 addresses");
            for (size_t k = 0; k < v->count; k++) {
                if ((rc = yaml_fields_string(&l->f, v->items[k], "to", &nt->to[k])))
                    return rc;
                nt->to_count++;
            }
        }
        if ((v = yaml_tree_get(x, "routing_key")) &&
            (rc = yaml_fields_string(&l->f, v, "routing_key", &nt->routing_key)))
            return rc;
        if (nt->type == MEDIC_NOTIFIER_SMTP && (!nt->from || !nt->to_count))
            return yaml_fields_fail(&l->f, x, "notifier '%s': smtp needs from and to", nt->name);
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "credentials.h"
#include "yaml_fields.h"
#include "yaml_tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CREDENTIALS_MAX 10000

void credentials_release(struct credentials *c)
{
    for (size_t i = 0; i < c->count; i++) {
        struct credential *x = &c->items[i];
        free(x->name);
        free(x->username);
        /* wipe secrets before giving the memory back */
        if (x->password)
            memset(x->password, 0, strlen(x->password));
        if (x->token)
            memset(x->token, 0, strlen(x->token));
        if (x->url)
            memset(x->url, 0, strlen(x->url));
        if (x->routing_key)
            memset(x->routing_key, 0, strlen(x->routing_key));
        free(x->password);
        free(x->token);
        free(x->url);
        free(x->routing_key);
    }
    free(c->items);
    memset(c, 0, sizeof(*c));
}

const struct credential *credentials_find(const struct credentials *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->count; i++)
        if (strcmp(c->items[i].name, name) == 0)
            return &c->items[i];
    return NULL;
}

int credentials_load(const char *path, struct credentials *out, struct medic_error *err)
{
    static const char *const keys[] = {"username", "password", "token", "url", "routing_key", NULL};
    memset(out, 0, sizeof(*out));
    struct stat st;
    if (stat(path, &st) != 0)
        return medic_error_set(err, MEDIC_E_IO, "cannot read credentials file '%s': %s", path,
                               strerror(errno));
    if ((st.st_mode & 0777) != 0600 && (st.st_mode & 0777) != 0400)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "credentials file '%s' has mode %03o; it must be 0600 or 0400 "
                               "(chmod 600 '%s')",
                               path, (unsigned)(st.st_mode & 0777), path);
    struct yaml_tree tree;
    int rc = yaml_tree_load(path, &tree, err);
    if (rc)
        return rc;
    struct yaml_fields f = {path, err};
    const struct yaml_tree_node *root = tree.root;
    if (!root || root->kind != YAML_TREE_MAPPING)
        rc = yaml_fields_fail(&f, root, "credentials: expected a mapping of names");
    else if (root->count > CREDENTIALS_MAX)
        rc = yaml_fields_fail(&f, root, "credentials: more than %d", CREDENTIALS_MAX);
    else if (!(out->items = calloc(root->count ? root->count : 1, sizeof(*out->items))))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < root->count; i++) {
        const struct yaml_tree_node *n = root->items[i], *v;
        struct credential *c = &out->items[out->count++];
        if (!(c->name = strdup(root->keys[i]))) {
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        if ((rc = yaml_fields_mapping(&f, n, c->name)) ||
            (rc = yaml_fields_known_keys(&f, n, "a credential", keys)))
            break;
        if ((v = yaml_tree_get(n, "username")) &&
            (rc = yaml_fields_string(&f, v, "username", &c->username)))
            break;
        if ((v = yaml_tree_get(n, "password")) &&
            (rc = yaml_fields_string(&f, v, "password", &c->password)))
            break;
        if ((v = yaml_tree_get(n, "token")) && (rc = yaml_fields_string(&f, v, "token", &c->token)))
            break;
        if ((v = yaml_tree_get(n, "url")) && (rc = yaml_fields_string(&f, v, "url", &c->url)))
            break;
        if ((v = yaml_tree_get(n, "routing_key")) &&
            (rc = yaml_fields_string(&f, v, "routing_key", &c->routing_key)))
            break;
        if (!c->token && !(c->username && c->password) && !c->url && !c->routing_key)
            rc = yaml_fields_fail(&f, n,
                                  "credential '%s': needs username and password, a token, a url "
                                  "or a routing_key",
                                  c->name);
    }
    yaml_tree_release(&tree);
    if (rc)
        credentials_release(out);
    return rc;
}

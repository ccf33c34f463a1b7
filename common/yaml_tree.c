/* SPDX-License-Identifier: Apache-2.0 */
#include "yaml_tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* Reads all of f (closed here) into a NUL-terminated buffer of at most
 * max bytes. */
static int read_whole(FILE *f, const char *path, size_t max, char **out, size_t *len,
                      struct medic_error *err)
{
    char *data = malloc(max + 1);
    if (!data) {
        fclose(f);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    size_t n = fread(data, 1, max + 1, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        return medic_error_set(err, MEDIC_E_IO, "cannot read '%s'", path);
    }
    if (n > max) {
        free(data);
        return medic_error_set(err, MEDIC_E_LIMIT, "'%s' is larger than %zu bytes", path, max);
    }
    data[n] = '\0';
    *out = data;
    *len = n;
    return 0;
}

int medic_read_file(const char *path, size_t max, char **out, size_t *len, struct medic_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return medic_error_set(err, MEDIC_E_IO, "cannot open '%s': %s", path, strerror(errno));
    return read_whole(f, path, max, out, len, err);
}

int medic_read_config_file(const char *path, size_t max, char **out, size_t *len,
                           struct medic_error *err)
{
    /* O_NONBLOCK: opening a FIFO with no writer must not wait either */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return medic_error_set(err, MEDIC_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return medic_error_set(err, MEDIC_E_IO, "'%s' is not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    return read_whole(f, path, max, out, len, err);
}

struct builder {
    const char *file;
    yaml_parser_t parser;
    size_t nodes;
    struct medic_error *err;
};

static void node_free(struct yaml_tree_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->count; i++) {
        if (n->keys)
            free(n->keys[i]);
        node_free(n->items[i]);
    }
    free(n->keys);
    free(n->key_lines);
    free(n->key_cols);
    free(n->items);
    free(n->value);
    free(n);
}

static int fail_at(struct builder *b, int code, const yaml_mark_t *mark, const char *msg)
{
    return medic_error_set(b->err, code, "%s:%zu:%zu: %s", b->file, mark->line + 1,
                           mark->column + 1, msg);
}

static int next_event(struct builder *b, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&b->parser, ev)) {
        yaml_mark_t mark = b->parser.problem_mark;
        char msg[256];
        snprintf(msg, sizeof(msg), "invalid YAML: %s%s%s",
                 b->parser.problem ? b->parser.problem : "syntax error",
                 b->parser.context ? " " : "", b->parser.context ? b->parser.context : "");
        return fail_at(b, MEDIC_E_INVALID, &mark, msg);
    }
    return 0;
}

static int build_node(struct builder *b, yaml_event_t *ev, int depth, struct yaml_tree_node **out);

static int append_item(struct yaml_tree_node *n, size_t *cap, struct yaml_tree_node *item,
                       char *key, int kline, int kcol)
{
    if (n->count == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        struct yaml_tree_node **items = realloc(n->items, c * sizeof(*items));
        if (!items)
            return MEDIC_E_NOMEM;
        n->items = items;
        if (n->kind == YAML_TREE_MAPPING) {
            char **keys = realloc(n->keys, c * sizeof(*keys));
            if (keys)
                n->keys = keys;
            int *kl = realloc(n->key_lines, c * sizeof(*kl));
            if (kl)
                n->key_lines = kl;
            int *kc = realloc(n->key_cols, c * sizeof(*kc));
            if (kc)
                n->key_cols = kc;
            if (!keys || !kl || !kc)
                return MEDIC_E_NOMEM;
        }
        *cap = c;
    }
    n->items[n->count] = item;
    if (n->kind == YAML_TREE_MAPPING) {
        n->keys[n->count] = key;
        n->key_lines[n->count] = kline;
        n->key_cols[n->count] = kcol;
    }
    n->count++;
    return 0;
}

static int build_collection(struct builder *b, struct yaml_tree_node *n, int depth)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        int rc = next_event(b, &ev);
        if (rc)
            return rc;
        if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        char *key = NULL;
        int kline = 0, kcol = 0;
        if (n->kind == YAML_TREE_MAPPING) {
            if (ev.type != YAML_SCALAR_EVENT) {
                rc = fail_at(b, MEDIC_E_INVALID, &ev.start_mark, "mapping keys must be scalars");
                yaml_event_delete(&ev);
                return rc;
            }
            kline = (int)ev.start_mark.line + 1;
            kcol = (int)ev.start_mark.column + 1;
            for (size_t i = 0; i < n->count; i++) {
                if (strcmp(n->keys[i], (const char *)ev.data.scalar.value) == 0) {
                    char msg[200];
                    snprintf(msg, sizeof(msg), "duplicate key '%.100s'",
                             (const char *)ev.data.scalar.value);
                    rc = fail_at(b, MEDIC_E_INVALID, &ev.start_mark, msg);
                    yaml_event_delete(&ev);
                    return rc;
                }
            }
            key = strdup((const char *)ev.data.scalar.value);
            yaml_event_delete(&ev);
            if (!key)
                return MEDIC_E_NOMEM;
            if ((rc = next_event(b, &ev))) {
                free(key);
                return rc;
            }
        }
        struct yaml_tree_node *item = NULL;
        rc = build_node(b, &ev, depth + 1, &item);
        if (rc == 0 && (rc = append_item(n, &cap, item, key, kline, kcol)) != 0)
            medic_error_set(b->err, rc, "out of memory");
        if (rc) {
            free(key);
            node_free(item);
            return rc;
        }
    }
}

/* Takes ownership of ev. */
static int build_node(struct builder *b, yaml_event_t *ev, int depth, struct yaml_tree_node **out)
{
    int rc = 0;
    if (++b->nodes > YAML_TREE_MAX_NODES) {
        rc = fail_at(b, MEDIC_E_LIMIT, &ev->start_mark, "too many YAML nodes");
        goto out;
    }
    if (depth > YAML_TREE_MAX_DEPTH) {
        rc = fail_at(b, MEDIC_E_LIMIT, &ev->start_mark, "YAML nested too deeply");
        goto out;
    }
    if (ev->type == YAML_ALIAS_EVENT || (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.anchor) ||
        (ev->type == YAML_MAPPING_START_EVENT && ev->data.mapping_start.anchor) ||
        (ev->type == YAML_SEQUENCE_START_EVENT && ev->data.sequence_start.anchor)) {
        rc = fail_at(b, MEDIC_E_INVALID, &ev->start_mark,
                     "YAML anchors and aliases are not supported");
        goto out;
    }
    struct yaml_tree_node *n = calloc(1, sizeof(*n));
    if (!n) {
        rc = medic_error_set(b->err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    n->line = (int)ev->start_mark.line + 1;
    n->col = (int)ev->start_mark.column + 1;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        n->kind = YAML_TREE_SCALAR;
        n->value = strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (!n->value)
            rc = medic_error_set(b->err, MEDIC_E_NOMEM, "out of memory");
        break;
    case YAML_MAPPING_START_EVENT:
        n->kind = YAML_TREE_MAPPING;
        rc = build_collection(b, n, depth);
        break;
    case YAML_SEQUENCE_START_EVENT:
        n->kind = YAML_TREE_SEQUENCE;
        rc = build_collection(b, n, depth);
        break;
    default:
        rc = fail_at(b, MEDIC_E_INVALID, &ev->start_mark, "unexpected YAML event");
    }
    if (rc) {
        node_free(n);
        goto out;
    }
    *out = n;
out:
    yaml_event_delete(ev);
    return rc;
}

int yaml_tree_parse(const char *file, const char *text, size_t len, struct yaml_tree *out,
                    struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    if (len > YAML_TREE_MAX_BYTES)
        return medic_error_set(err, MEDIC_E_LIMIT, "%s:1:1: file larger than %zu bytes", file,
                               YAML_TREE_MAX_BYTES);
    struct builder b = {.file = file, .err = err};
    if (!yaml_parser_initialize(&b.parser))
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    out->file = strdup(file);
    int rc = out->file ? 0 : MEDIC_E_NOMEM;
    int docs = 0;
    while (rc == 0) {
        yaml_event_t ev;
        if ((rc = next_event(&b, &ev)))
            break;
        yaml_event_type_t type = ev.type;
        if (type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
            rc = fail_at(&b, MEDIC_E_INVALID, &ev.start_mark, "only one YAML document is allowed");
            yaml_event_delete(&ev);
            break;
        }
        if (type == YAML_SCALAR_EVENT || type == YAML_MAPPING_START_EVENT ||
            type == YAML_SEQUENCE_START_EVENT || type == YAML_ALIAS_EVENT) {
            rc = build_node(&b, &ev, 0, &out->root);
            continue;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&b.parser);
    if (rc)
        yaml_tree_release(out);
    return rc;
}

int yaml_tree_load(const char *path, struct yaml_tree *out, struct medic_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = medic_read_config_file(path, YAML_TREE_MAX_BYTES, &text, &len, err);
    if (rc)
        return rc;
    rc = yaml_tree_parse(path, text, len, out, err);
    free(text);
    return rc;
}

void yaml_tree_release(struct yaml_tree *tree)
{
    node_free(tree->root);
    free(tree->file);
    memset(tree, 0, sizeof(*tree));
}

const struct yaml_tree_node *yaml_tree_get(const struct yaml_tree_node *map, const char *key)
{
    if (!map || map->kind != YAML_TREE_MAPPING)
        return NULL;
    for (size_t i = 0; i < map->count; i++)
        if (strcmp(map->keys[i], key) == 0)
            return map->items[i];
    return NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm's list of nodes (`scontrol show nodes --json`): names, partitions
 * and GPU counts, for `medic inventory import` and `medic inventory
 * check`. */
#include "slurm.h"
#include "slurm_text.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES_MAX 100000
#define OUTPUT_MAX ((size_t)256 << 20)

void slurm_node_list_release(struct slurm_node_list *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].name);
        free(l->items[i].partitions);
        free(l->items[i].state);
        free(l->items[i].reason);
        free(l->items[i].features);
    }
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int slurm_gres_gpus(const char *gres)
{
    int total = 0;
    for (const char *p = gres; p && *p;) {
        const char *end = p + strcspn(p, ",");
        /* an entry gpu[:TYPE]:COUNT[(S:...)]; a comma inside (S:0,1) does not end it */
        const char *paren = memchr(p, '(', (size_t)(end - p));
        if (paren) {
            const char *close = strchr(paren, ')');
            end = close ? close + 1 + strcspn(close + 1, ",") : p + strlen(p);
        }
        if (strncmp(p, "gpu:", 4) == 0) {
            const char *stop = paren ? paren : end;
            const char *colon = stop;
            while (colon > p && colon[-1] != ':')
                colon--;
            int n = atoi(colon);
            if (n > 0 && n <= 1024)
                total += n;
        }
        p = *end ? end + 1 : end;
    }
    return total;
}

int slurm_nodes_parse(const char *json, size_t len, struct slurm_node_list *out,
                      struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    if (len > OUTPUT_MAX)
        return medic_error_set(err, MEDIC_E_LIMIT, "Slurm's node list is over 256 MiB");
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes"), *n;
    if (!cJSON_IsArray(nodes)) {
        cJSON_Delete(root);
        return medic_error_set(err, MEDIC_E_INVALID,
                               "not Slurm's node list: expected the JSON of `scontrol show nodes "
                               "--json`, an object with nodes");
    }
    int count = cJSON_GetArraySize(nodes);
    if (count > NODES_MAX) {
        cJSON_Delete(root);
        return medic_error_set(err, MEDIC_E_LIMIT, "more than %d nodes", NODES_MAX);
    }
    out->items = calloc(count ? (size_t)count : 1, sizeof(*out->items));
    int rc = out->items ? 0 : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    cJSON_ArrayForEach(n, nodes)
    {
        if (rc)
            break;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(n, "name");
        const cJSON *parts = cJSON_GetObjectItemCaseSensitive(n, "partitions"), *p;
        const cJSON *gres = cJSON_GetObjectItemCaseSensitive(n, "gres");
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(n, "state"), *flag;
        if (!cJSON_IsString(name) || !name->valuestring[0])
            continue;
        struct slurm_node_info *x = &out->items[out->count++];
        char list[1024] = "";
        cJSON_ArrayForEach(p, parts)
        {
            if (cJSON_IsString(p) && strlen(list) + strlen(p->valuestring) + 2 < sizeof(list))
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                         list[0] ? "," : "", p->valuestring);
        }
        x->name = strdup(name->valuestring);
        x->partitions = strdup(list);
        x->gpus = cJSON_IsString(gres) ? slurm_gres_gpus(gres->valuestring) : 0;
        /* "state": ["IDLE", "MAINT"] (or a string, with "state_flags", in
         * older releases): joined as the one-line form writes it */
        char joined[256] = "";
        if (cJSON_IsString(state))
            snprintf(joined, sizeof(joined), "%s", state->valuestring);
        const cJSON *lists[] = {state, cJSON_GetObjectItemCaseSensitive(n, "state_flags")};
        for (size_t k = 0; k < 2; k++) {
            const cJSON *flags = cJSON_IsArray(lists[k]) ? lists[k] : NULL;
            cJSON_ArrayForEach(flag, flags)
            {
                if (cJSON_IsString(flag) &&
                    strlen(joined) + strlen(flag->valuestring) + 2 < sizeof(joined))
                    snprintf(joined + strlen(joined), sizeof(joined) - strlen(joined), "%s%s",
                             joined[0] ? "+" : "", flag->valuestring);
            }
        }
        for (char *c = joined; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        x->maint = strstr(joined, "MAINT") != NULL;
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(n, "reason");
        const cJSON *features = cJSON_GetObjectItemCaseSensitive(n, "features"), *feature;
        char list_features[1024] = "";
        if (cJSON_IsString(features))
            snprintf(list_features, sizeof(list_features), "%s", features->valuestring);
        const cJSON *feature_list = cJSON_IsArray(features) ? features : NULL;
        cJSON_ArrayForEach(feature, feature_list)
        {
            if (cJSON_IsString(feature) &&
                strlen(list_features) + strlen(feature->valuestring) + 2 < sizeof(list_features))
                snprintf(list_features + strlen(list_features),
                         sizeof(list_features) - strlen(list_features), "%s%s",
                         list_features[0] ? "," : "", feature->valuestring);
        }
        x->state = strdup(joined);
        x->reason = strdup(cJSON_IsString(reason) ? reason->valuestring : "");
        x->features = strdup(list_features);
        if (!x->name || !x->partitions || !x->state || !x->reason || !x->features)
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    cJSON_Delete(root);
    if (rc)
        slurm_node_list_release(out);
    return rc;
}

void slurm_field(const char *line, size_t len, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);
    const char *end = line + len;
    out[0] = '\0';
    for (size_t i = 0; i + klen < len; i++) {
        if ((i > 0 && line[i - 1] != ' ') || memcmp(line + i, key, klen) != 0 ||
            line[i + klen] != '=')
            continue;
        const char *v = line + i + klen + 1, *stop = v;
        if (strcmp(key, "Reason") == 0) {
            stop = end;
            for (const char *b = v; b < end; b++)
                if (*b == ']' && (b + 1 == end || b[1] == ' ' || b[1] == '\n')) {
                    stop = b + 1;
                    break;
                }
        } else {
            while (stop < end && *stop != ' ' && *stop != '\n')
                stop++;
        }
        snprintf(out, size, "%.*s", (int)(stop - v), v);
        return;
    }
}

int slurm_nodes_parse_text(const char *text, struct slurm_node_list *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t lines = 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    if (lines > NODES_MAX + 1)
        return medic_error_set(err, MEDIC_E_LIMIT, "more than %d nodes", NODES_MAX);
    out->items = calloc(lines, sizeof(*out->items));
    if (!out->items)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        char name[256], gres[512], parts[1024], state[256], reason[1100], features[1024];
        slurm_field(line, len, "NodeName", name, sizeof(name));
        slurm_field(line, len, "AvailableFeatures", features, sizeof(features));
        slurm_field(line, len, "Reason", reason, sizeof(reason));
        slurm_field(line, len, "State", state, sizeof(state));
        slurm_field(line, len, "Gres", gres, sizeof(gres));
        slurm_field(line, len, "Partitions", parts, sizeof(parts));
        if (name[0]) {
            struct slurm_node_info *x = &out->items[out->count++];
            x->name = strdup(name);
            x->partitions = strdup(parts);
            x->gpus = strcmp(gres, "(null)") ? slurm_gres_gpus(gres) : 0;
            x->maint = strstr(state, "MAINT") != NULL; /* IDLE+MAINT, MIXED+MAINT+DRAIN, ... */
            x->state = strdup(state);
            x->reason = strdup(reason);
            x->features = strdup(strcmp(features, "(null)") ? features : "");
            if (!x->name || !x->partitions || !x->state || !x->reason || !x->features) {
                slurm_node_list_release(out);
                return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            }
        }
        line += len + (line[len] == '\n');
    }
    return 0;
}

int slurm_nodes_read(const struct slurm_options *o, struct slurm_node_list *out,
                     struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t size = (size_t)64 << 20;
    char *text = malloc(size);
    if (!text)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    static const char *const json[] = {"show", "nodes", "--json", NULL};
    static const char *const oneliner[] = {"-o", "show", "nodes", NULL};
    int status = slurm_scontrol(o, json, text, size), rc = 0;
    int old = status != 0 && strstr(text, "--json");
    if (old)
        status = slurm_scontrol(o, oneliner, text, size);
    if (status != 0)
        rc = medic_error_set(err, MEDIC_E_IO, "%s show nodes: %s%.300s", o->scontrol,
                             status == -2 ? "timed out; " : "", text);
    else if (old)
        rc = slurm_nodes_parse_text(text, out, err);
    else
        rc = slurm_nodes_parse(text, strlen(text), out, err);
    free(text);
    return rc;
}

void slurm_switch_list_release(struct slurm_switch_list *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].name);
        free(l->items[i].nodes);
    }
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int slurm_topology_parse(const char *text, struct slurm_switch_list *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t lines = 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    if (lines > NODES_MAX + 1)
        return medic_error_set(err, MEDIC_E_LIMIT, "more than %d switches", NODES_MAX);
    out->items = calloc(lines, sizeof(*out->items));
    if (!out->items)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        char name[256], level[16], nodes[4096];
        slurm_field(line, len, "SwitchName", name, sizeof(name));
        slurm_field(line, len, "Level", level, sizeof(level));
        slurm_field(line, len, "Nodes", nodes, sizeof(nodes));
        if (name[0] && nodes[0]) {
            struct slurm_switch *x = &out->items[out->count++];
            x->name = strdup(name);
            x->level = atoi(level);
            x->nodes = strdup(nodes);
            if (!x->name || !x->nodes) {
                slurm_switch_list_release(out);
                return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            }
        }
        line += len + (line[len] == '\n');
    }
    return 0;
}

int slurm_topology_read(const struct slurm_options *o, struct slurm_switch_list *out,
                        struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t size = (size_t)16 << 20;
    char *text = malloc(size);
    if (!text)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    static const char *const args[] = {"show", "topology", NULL};
    int status = slurm_scontrol(o, args, text, size), rc = 0;
    if (status != 0)
        rc = medic_error_set(err, MEDIC_E_IO, "%s show topology: %s%.300s", o->scontrol,
                             status == -2 ? "timed out; " : "", text);
    else
        rc = slurm_topology_parse(text, out, err);
    free(text);
    return rc;
}

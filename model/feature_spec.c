/* SPDX-License-Identifier: Apache-2.0 */
#include "feature_spec.h"
#include "rule_score.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int features_from_metadata(const struct safetensors *st, size_t input_dim, struct feature_spec *out,
                           struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    const char *window = safetensors_meta(st, "window");
    const char *step = safetensors_meta(st, "step");
    const char *features = safetensors_meta(st, "features");
    if (!window && !step && !features)
        return medic_error_set(err, MEDIC_E_NOTFOUND,
                               "the model file describes no features (window, step, features)");
    char *end;
    long w = window ? strtol(window, &end, 10) : 0;
    if (!window || *end || w < 1 || w > 100000)
        return medic_error_set(err, MEDIC_E_INVALID, "metadata window: expected 1..100000 steps");
    out->window = (size_t)w;
    if (!step || medic_duration_parse(step, &out->step) || out->step <= 0)
        return medic_error_set(err, MEDIC_E_INVALID, "metadata step: expected a duration (60s)");
    cJSON *list = features ? cJSON_Parse(features) : NULL;
    int rc = 0;
    if (!cJSON_IsArray(list) || (size_t)cJSON_GetArraySize(list) != input_dim ||
        input_dim > FEATURES_MAX)
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "metadata features: expected a JSON array of %zu features", input_dim);
    const cJSON *f;
    cJSON_ArrayForEach(f, list)
    {
        if (rc)
            break;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *query = cJSON_GetObjectItemCaseSensitive(f, "query");
        const cJSON *center = cJSON_GetObjectItemCaseSensitive(f, "center");
        const cJSON *scale = cJSON_GetObjectItemCaseSensitive(f, "scale");
        if (!cJSON_IsString(name) || !cJSON_IsString(query) || !cJSON_IsNumber(center) ||
            !cJSON_IsNumber(scale) || !isfinite(center->valuedouble) ||
            !isfinite(scale->valuedouble) || scale->valuedouble == 0 ||
            strlen(name->valuestring) >= sizeof(out->items[0].name) ||
            strlen(query->valuestring) >= sizeof(out->items[0].query)) {
            rc = medic_error_set(err, MEDIC_E_INVALID,
                                 "metadata features[%zu]: needs name, query (at most 511 bytes), "
                                 "center and a non-zero scale",
                                 out->count);
            break;
        }
        struct feature *x = &out->items[out->count++];
        snprintf(x->name, sizeof(x->name), "%s", name->valuestring);
        snprintf(x->query, sizeof(x->query), "%s", query->valuestring);
        x->center = center->valuedouble;
        x->scale = scale->valuedouble;
    }
    cJSON_Delete(list);
    return rc ? rc : rule_blend_from_metadata(st, out, err);
}

static int put(char *out, size_t size, size_t *n, const char *s, int escape)
{
    for (; *s; s++) {
        if (escape && (*s == '"' || *s == '\\')) {
            if (*n + 1 >= size)
                return MEDIC_E_LIMIT;
            out[(*n)++] = '\\';
        }
        if (escape && (unsigned char)*s < 0x20)
            continue; /* no control characters inside a PromQL string */
        if (*n + 1 >= size)
            return MEDIC_E_LIMIT;
        out[(*n)++] = *s;
    }
    out[*n] = '\0';
    return 0;
}

/* Renders f's query with {{node}} as node and {{gpu}} as gpu (escaped);
 * a NULL node_match or gpu is a regex match instead: node_match's regex
 * (".+" when both node and node_match are NULL), or every GPU. */
static int render(const struct feature *f, const char *node, const char *node_match,
                  const char *gpu, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = f->query; *p;) {
        int rc = 0;
        if (!node &&
            (strncmp(p, "=\"{{node}}\"", 11) == 0 || strncmp(p, "=~\"{{node}}\"", 12) == 0)) {
            /* no node named: the nodes the regex matches */
            if ((rc = put(out, size, &n, "=~\"", 0)) == 0 &&
                (rc = put(out, size, &n, node_match ? node_match : ".+", 1)) == 0)
                rc = put(out, size, &n, "\"", 0);
            p += p[1] == '~' ? 12 : 11;
        } else if (!gpu && strncmp(p, "=\"{{gpu}}\"", 10) == 0) {
            /* no GPU named: every GPU of the node */
            rc = put(out, size, &n, "=~\".+\"", 0);
            p += 10;
        } else if (strncmp(p, "{{node}}", 8) == 0) {
            rc = put(out, size, &n, node ? node : "", 1);
            p += 8;
        } else if (strncmp(p, "{{gpu}}", 7) == 0) {
            rc = put(out, size, &n, gpu ? gpu : "", 1);
            p += 7;
        } else {
            char one[2] = {*p++, 0};
            rc = put(out, size, &n, one, 0);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int features_query(const struct feature *f, const char *node, const char *gpu, char *out,
                   size_t size)
{
    return render(f, node, NULL, gpu, out, size);
}

int features_query_match(const struct feature *f, const char *node_regex, char *out, size_t size)
{
    return render(f, NULL, node_regex, NULL, out, size);
}

int features_nodes_regex(const char *const *nodes, size_t count, struct medic_buf *out)
{
    for (size_t i = 0; i < count; i++) {
        if (i)
            medic_buf_puts(out, "|");
        for (const char *c = nodes[i]; *c; c++) {
            if (strchr("\\.+*?()|[]{}^$", *c))
                medic_buf_puts(out, "\\");
            medic_buf_append(out, c, 1);
        }
    }
    return out->error;
}

void features_scale(const struct feature_spec *spec, float *rows, size_t steps)
{
    for (size_t t = 0; t < steps; t++)
        for (size_t d = 0; d < spec->count; d++) {
            float *v = &rows[t * spec->count + d];
            *v = (float)((*v - spec->items[d].center) / spec->items[d].scale);
        }
}

int features_node_label(const struct feature *f, char *out, size_t size)
{
    const char *at = strstr(f->query, "\"{{node}}\"");
    if (!at || at - f->query < 2)
        return MEDIC_E_NOTFOUND;
    const char *end = at - 1; /* at '=' or '~' */
    if (*end == '~')
        end--;
    if (end <= f->query || *end != '=')
        return MEDIC_E_NOTFOUND;
    while (end > f->query && end[-1] == ' ')
        end--;
    const char *begin = end;
    while (begin > f->query && (begin[-1] == '_' || isalnum((unsigned char)begin[-1])))
        begin--;
    size_t n = (size_t)(end - begin);
    if (n == 0 || n >= size)
        return MEDIC_E_NOTFOUND;
    memcpy(out, begin, n);
    out[n] = 0;
    return 0;
}

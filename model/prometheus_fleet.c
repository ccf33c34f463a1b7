/* SPDX-License-Identifier: Apache-2.0 */
#include "prometheus_fleet.h"
#include "json.h"
#include "prometheus_internal.h"
#include "timeutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prometheus_fleet_release(struct prometheus_fleet *f)
{
    free(f->series);
    free(f->rows);
    free(f->raw);
    medic_map_release(&f->index);
    memset(f, 0, sizeof(*f));
}

float *prometheus_fleet_rows(const struct prometheus_fleet *f, const struct feature_spec *spec,
                             size_t i)
{
    return f->rows + i * spec->window * spec->count;
}

/* The series for (node, gpu), found or created; -2 when creating it
 * failed (err set). */
static long series_for(struct prometheus_fleet *f, const struct feature_spec *spec,
                       const char *node, const char *gpu, size_t max_series,
                       struct medic_error *err)
{
    char key[sizeof(f->series[0].node) + sizeof(f->series[0].gpu) + 1];
    snprintf(key, sizeof(key), "%s\037%s", node, gpu);
    uintptr_t found = (uintptr_t)medic_map_get(&f->index, key);
    if (found)
        return (long)(found - 1);
    if (f->count == max_series) {
        medic_error_set(err, MEDIC_E_LIMIT, "prometheus: more than %zu GPU series", max_series);
        return -2;
    }
    const size_t cells = spec->window * spec->count;
    if (f->count == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        if (cap > max_series)
            cap = max_series;
        struct prometheus_series *series = realloc(f->series, cap * sizeof(*series));
        if (series)
            f->series = series;
        float *rows = series ? realloc(f->rows, cap * cells * sizeof(float)) : NULL;
        if (rows)
            f->rows = rows;
        float *raw = rows ? realloc(f->raw, cap * cells * sizeof(float)) : NULL;
        if (!raw) {
            medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            return -2;
        }
        f->raw = raw;
        f->cap = cap;
    }
    size_t i = f->count;
    if (medic_map_put(&f->index, key, (void *)(uintptr_t)(i + 1))) {
        medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        return -2;
    }
    struct prometheus_series *s = &f->series[i];
    snprintf(s->node, sizeof(s->node), "%s", node);
    snprintf(s->gpu, sizeof(s->gpu), "%s", gpu);
    s->usable = 1;
    float *row = f->raw + i * cells;
    for (size_t k = 0; k < cells; k++)
        row[k] = NAN;
    /* the steps the previous fleet saw, moved back by the steps since */
    const struct prometheus_fleet *prev = f->carry_from;
    uintptr_t was = prev ? (uintptr_t)medic_map_get(&prev->index, key) : 0;
    if (was && f->carry_shift < spec->window)
        memcpy(row, prev->raw + (was - 1) * cells + f->carry_shift * spec->count,
               (cells - f->carry_shift * spec->count) * sizeof(float));
    else if (prev)
        f->fresh++;
    f->count++;
    return (long)i;
}

int prometheus_parse_fleet(const char *body, size_t len, const struct feature_spec *spec, size_t d,
                           const char *node_label, int64_t start, size_t max_series,
                           struct prometheus_fleet *out, struct medic_error *err)
{
    struct medic_arena nodes;
    medic_arena_init(&nodes);
    cJSON *j = medic_json_parse_in(&nodes, body, len, NULL);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(data, "result"), *series;
    int rc = 0;
    if (!cJSON_IsArray(result))
        rc = medic_error_set(err, MEDIC_E_INVALID, "prometheus: no result for feature %s",
                             spec->items[d].name);
    cJSON_ArrayForEach(series, result)
    {
        if (rc)
            break;
        const cJSON *metric = cJSON_GetObjectItemCaseSensitive(series, "metric");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(metric, node_label);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(metric, "gpu");
        const char *gpu = cJSON_IsString(g) ? g->valuestring : "";
        /* a value too long for its field would be cut and could merge two
         * series: such a series is left out */
        if (!cJSON_IsString(n) || !n->valuestring[0] ||
            strlen(n->valuestring) >= sizeof(out->series[0].node) ||
            strlen(gpu) >= sizeof(out->series[0].gpu))
            continue;
        /* answers arrive in any order: any feature can name a GPU first (one
         * some feature lacks is left out by prometheus_fleet_fill) */
        long i = series_for(out, spec, n->valuestring, gpu, max_series, err);
        if (i == -2) {
            rc = err->code;
            break;
        }
        prometheus__place(cJSON_GetObjectItemCaseSensitive(series, "values"), spec, d, start,
                          out->raw + (size_t)i * spec->window * spec->count);
    }
    medic_arena_release(&nodes);
    return rc;
}

int prometheus_fleet_subset(const struct prometheus_fleet *src, const struct feature_spec *spec,
                            const char *const *nodes, size_t n, struct prometheus_fleet *out)
{
    memset(out, 0, sizeof(*out));
    medic_map_init(&out->index);
    out->end = src->end;
    struct medic_map wanted, seen;
    medic_map_init(&wanted);
    medic_map_init(&seen);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = medic_map_put(&wanted, nodes[i], (void *)nodes[i]) ? MEDIC_E_NOMEM : 0;
    const size_t cells = spec->window * spec->count;
    for (size_t i = 0; i < src->count && rc == 0; i++) {
        const struct prometheus_series *s = &src->series[i];
        if (!medic_map_get(&wanted, s->node))
            continue;
        if (out->count == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 16;
            struct prometheus_series *series = realloc(out->series, cap * sizeof(*series));
            if (series)
                out->series = series;
            float *raw = series ? realloc(out->raw, cap * cells * sizeof(float)) : NULL;
            if (!raw) {
                rc = MEDIC_E_NOMEM;
                break;
            }
            out->raw = raw;
            out->cap = cap;
        }
        char key[sizeof(s->node) + sizeof(s->gpu) + 1];
        snprintf(key, sizeof(key), "%s\037%s", s->node, s->gpu);
        if (medic_map_put(&out->index, key, (void *)(uintptr_t)(out->count + 1)) ||
            medic_map_put(&seen, s->node, (void *)s->node)) {
            rc = MEDIC_E_NOMEM;
            break;
        }
        out->series[out->count] = *s;
        memcpy(out->raw + out->count * cells, src->raw + i * cells, cells * sizeof(float));
        out->count++;
    }
    if (rc == 0 && seen.used < wanted.used)
        rc = MEDIC_E_NOTFOUND;
    medic_map_release(&wanted);
    medic_map_release(&seen);
    if (rc)
        prometheus_fleet_release(out);
    return rc;
}

void prometheus_fleet_fill(const struct feature_spec *spec, struct prometheus_fleet *f)
{
    if (f->count)
        memcpy(f->rows, f->raw, f->count * spec->window * spec->count * sizeof(float));
    struct medic_map reporting; /* nodes with a usable series */
    medic_map_init(&reporting);
    for (size_t i = 0; i < f->count; i++) {
        struct prometheus_series *s = &f->series[i];
        size_t bad = 0;
        int at_start = 0;
        s->lost = (struct prometheus_silence){0, 0};
        if (prometheus__fill(spec, prometheus_fleet_rows(f, spec, i), &f->filled, &bad,
                             &at_start)) {
            s->usable = 0;
            s->bad_feature = (unsigned short)bad;
            s->bad_at_start = (unsigned char)at_start;
        } else {
            s->usable = 1;
            /* out of memory: no GPU of this node is taken for lost */
            medic_map_put(&reporting, s->node, s);
        }
    }
    for (size_t i = 0; i < f->count; i++) {
        struct prometheus_series *s = &f->series[i];
        if (s->usable)
            continue;
        s->lost =
            prometheus__lost(prometheus__silence(spec, f->raw + i * spec->window * spec->count),
                             medic_map_get(&reporting, s->node) != NULL);
        if (s->lost.steps) {
            f->lost++;
            continue;
        }
        if (f->unusable++ == 0) {
            char why[200];
            prometheus_series_problem(spec, s, why, sizeof(why));
            snprintf(f->first_problem, sizeof(f->first_problem), "node %.100s: %.140s", s->node,
                     why);
        }
    }
    medic_map_release(&reporting);
}

void prometheus_series_problem(const struct feature_spec *spec, const struct prometheus_series *s,
                               char *out, size_t size)
{
    struct medic_error err = {0};
    prometheus__gap_error(spec, s->bad_feature, s->bad_at_start, s->gpu, &err);
    snprintf(out, size, "%.*s", (int)(size ? size - 1 : 0), err.msg);
}

struct request {
    CURL *easy;
    struct medic_buf body;
    char full[1024];
    char *form;        /* the POSTed query: a node list can be long for a URL */
    const char *label; /* the node label of the feature's query */
    size_t d;          /* the feature */
};

struct fetch {
    const struct prometheus_fleet_query *q;
    const struct feature_spec *spec;
    int64_t start;
    struct prometheus_fleet *out;
};

/* Runs every request on m until all are done, the deadline passes or the
 * caller cancels; each answer is placed as soon as it arrives, so that
 * medic parses one while Prometheus computes the others. */
static int run_all(CURLM *m, size_t n, const struct fetch *f, int64_t deadline,
                   struct medic_error *err)
{
    const struct prometheus_fleet_query *q = f->q;
    int rc = 0;
    for (size_t left = n; left && rc == 0;) {
        int running = 0;
        if (curl_multi_perform(m, &running) != CURLM_OK)
            return medic_error_set(err, MEDIC_E_IO, "prometheus %s: curl multi failed", q->url);
        CURLMsg *msg;
        int queued;
        while (rc == 0 && (msg = curl_multi_info_read(m, &queued))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct request *r = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            left--;
            rc = prometheus__result(r->easy, msg->data.result, q->url, r->full, err);
            if (rc == 0)
                rc = prometheus_parse_fleet(r->body.data ? r->body.data : "", r->body.len, f->spec,
                                            r->d, r->label, f->start, q->max_series, f->out, err);
            medic_buf_release(&r->body);
        }
        if (!left || rc)
            break;
        int64_t wait_ms = (deadline - medic_time_monotonic()) / MEDIC_NS_PER_MS;
        if (wait_ms <= 0)
            return medic_error_set(err, MEDIC_E_IO, "prometheus %s: timed out after %ldms", q->url,
                                   q->timeout_ms);
        if (q->cancelled && q->cancelled(q->arg))
            return medic_error_set(err, MEDIC_E_IO, "prometheus %s: cancelled", q->url);
        curl_multi_poll(m, NULL, 0, (int)(wait_ms < 100 ? wait_ms : 100), NULL);
    }
    return rc;
}

int prometheus_fetch_fleet(const struct prometheus_fleet_query *q, const struct feature_spec *spec,
                           int64_t now, struct prometheus_fleet *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    medic_map_init(&out->index);
    const size_t F = spec->count;
    const int64_t deadline = medic_time_monotonic() + (int64_t)q->timeout_ms * MEDIC_NS_PER_MS;
    int64_t end = now / spec->step * spec->step;
    int64_t start = end - (int64_t)(spec->window - 1) * spec->step;
    out->end = end;
    /* with the previous fleet: the steps since its window ended, and its
     * last step again (a sample scraped just before that step may have
     * been stored after the previous fleet asked for it; the steps before
     * were a step old or more when it asked) */
    int64_t from = start;
    const struct prometheus_fleet *prev = q->previous;
    if (prev && prev->count && prev->end <= end && prev->end > start) {
        from = prev->end;
        out->carry_from = prev;
        out->carry_shift = (size_t)((end - prev->end) / spec->step);
    }
    out->asked_steps = (size_t)((end - from) / spec->step) + 1;
    char labels[FEATURES_MAX][64];
    for (size_t d = 0; d < F; d++)
        if (features_node_label(&spec->items[d], labels[d], sizeof(labels[d])))
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "feature %s: its query has no {{node}} label to split the "
                                   "fleet's answer by",
                                   spec->items[d].name);
    struct request *req = calloc(F, sizeof(*req));
    CURLM *m = curl_multi_init();
    int rc = req && m ? 0 : medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (rc == 0) {
        curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)(q->parallel ? q->parallel : 1));
        curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)(q->parallel ? q->parallel : 1));
    }
    /* the query for a node list grows with it, once per {{node}} in the
     * template (escaping can double the regex): sized for the longest */
    size_t query_size = 0;
    for (size_t d = 0; d < F; d++) {
        size_t uses = 0;
        for (const char *p = spec->items[d].query; (p = strstr(p, "{{node}}")); p += 8)
            uses++;
        size_t need = sizeof(spec->items[d].query) +
                      uses * (2 * (q->node_regex ? strlen(q->node_regex) : 0) + 8);
        query_size = need > query_size ? need : query_size;
    }
    char *query = malloc(query_size);
    if (!query && rc == 0)
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (size_t d = 0; d < F && rc == 0; d++) {
        struct request *r = &req[d];
        medic_buf_init(&r->body, PROMETHEUS_FLEET_MAX_BODY);
        if (!(r->easy = curl_easy_init()))
            rc = medic_error_set(err, MEDIC_E_NOMEM, "cannot create a curl handle");
        else if (features_query_match(&spec->items[d], q->node_regex, query, query_size) ||
                 prometheus__range_form(r->easy, query, from, end, spec->step, &r->form) ||
                 snprintf(r->full, sizeof(r->full), "%s/api/v1/query_range", q->url) >=
                     (int)sizeof(r->full))
            rc = medic_error_set(err, MEDIC_E_LIMIT, "feature %s: cannot build the query",
                                 spec->items[d].name);
        if (rc)
            break;
        r->label = labels[d];
        r->d = d;
        prometheus__easy_setup(r->easy, r->full, q->timeout_ms, &r->body);
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->form);
        curl_easy_setopt(r->easy, CURLOPT_PRIVATE, (char *)r);
        curl_multi_add_handle(m, r->easy);
        out->requests++;
    }
    free(query);
    struct fetch f = {.q = q, .spec = spec, .start = start, .out = out};
    /* every GPU the previous fleet had carries on (one Prometheus no longer
     * answers for gets a gap, as in a whole-window fetch) */
    for (size_t i = 0; out->carry_from && i < prev->count && rc == 0; i++)
        if (series_for(out, spec, prev->series[i].node, prev->series[i].gpu, q->max_series, err) ==
            -2)
            rc = err->code;
    if (rc == 0)
        rc = run_all(m, F, &f, deadline, err);
    if (rc == 0 && out->count == 0)
        rc = medic_error_set(err, MEDIC_E_NOTFOUND,
                             "prometheus has no series for any node in the "
                             "window");
    if (rc == 0)
        prometheus_fleet_fill(spec, out);
    out->carry_from = NULL;
    for (size_t d = 0; req && d < F; d++) {
        if (req[d].easy) {
            curl_multi_remove_handle(m, req[d].easy);
            curl_easy_cleanup(req[d].easy);
        }
        medic_buf_release(&req[d].body);
        free(req[d].form);
    }
    if (m)
        curl_multi_cleanup(m);
    free(req);
    if (rc) {
        size_t requests = out->requests;
        prometheus_fleet_release(out);
        out->requests = requests;
    }
    return rc;
}

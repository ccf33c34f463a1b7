/* SPDX-License-Identifier: Apache-2.0 */
#include "prometheus.h"
#include "buf.h"
#include "json.h"
#include "prometheus_internal.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prometheus_window_release(struct prometheus_window *w)
{
    for (size_t i = 0; i < w->count; i++)
        free(w->rows[i]);
    memset(w, 0, sizeof(*w));
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    return medic_buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

void prometheus__easy_setup(CURL *c, const char *full, long timeout_ms, struct medic_buf *out)
{
    medic_buf_reset(out);
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
}

int prometheus__result(CURL *c, CURLcode rc, const char *url, const char *full,
                       struct medic_error *err)
{
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK)
        return medic_error_set(err, MEDIC_E_IO, "prometheus %s: %s", url, curl_easy_strerror(rc));
    if (code != 200)
        return medic_error_set(err, MEDIC_E_IO, "prometheus %s: HTTP %ld for %.200s", url, code,
                               full + strlen(url));
    return 0;
}

static int get(CURL *c, const char *url, const char *full, long timeout_ms, struct medic_buf *out,
               struct medic_error *err)
{
    prometheus__easy_setup(c, full, timeout_ms, out);
    return prometheus__result(c, curl_easy_perform(c), url, full, err);
}

static int range_url(CURL *c, const char *url, const char *query, int64_t start, int64_t end,
                     int64_t step, char *full, size_t size)
{
    char *escaped = curl_easy_escape(c, query, 0);
    if (!escaped)
        return MEDIC_E_NOMEM;
    int n = snprintf(full, size, "%s/api/v1/query_range?query=%s&start=%lld&end=%lld&step=%lld",
                     url, escaped, (long long)(start / MEDIC_NS_PER_SEC),
                     (long long)(end / MEDIC_NS_PER_SEC), (long long)(step / MEDIC_NS_PER_SEC));
    curl_free(escaped);
    return n < 0 || (size_t)n >= size ? MEDIC_E_LIMIT : 0;
}

int prometheus__range_form(CURL *c, const char *query, int64_t start, int64_t end, int64_t step,
                           char **form)
{
    char *escaped = curl_easy_escape(c, query, 0);
    if (!escaped)
        return MEDIC_E_NOMEM;
    size_t size = strlen(escaped) + 96;
    *form = malloc(size);
    if (*form)
        snprintf(*form, size, "query=%s&start=%lld&end=%lld&step=%lld", escaped,
                 (long long)(start / MEDIC_NS_PER_SEC), (long long)(end / MEDIC_NS_PER_SEC),
                 (long long)(step / MEDIC_NS_PER_SEC));
    curl_free(escaped);
    return *form ? 0 : MEDIC_E_NOMEM;
}

static int fetch(CURL *c, const char *url, const char *query, int64_t start, int64_t end,
                 int64_t step, long timeout_ms, struct medic_buf *out, struct medic_error *err)
{
    char full[8192]; /* the query URL-escaped */
    int rc = range_url(c, url, query, start, end, step, full, sizeof(full));
    if (rc)
        return medic_error_set(err, rc, "prometheus: cannot build the query's URL");
    return get(c, url, full, timeout_ms, out, err);
}

int prometheus_label_values(const char *url, long timeout_ms, const char *label, size_t max_values,
                            char ***values, size_t *count, struct medic_error *err)
{
    *values = NULL;
    *count = 0;
    for (const char *p = label; *p; p++)
        if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (p != label && *p >= '0' && *p <= '9')))
            return medic_error_set(err, MEDIC_E_INVALID, "not a label name: %.64s", label);
    CURL *c = curl_easy_init();
    if (!c)
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot create a curl handle");
    struct medic_buf body;
    medic_buf_init(&body, (size_t)16 << 20);
    char full[1024];
    snprintf(full, sizeof(full), "%s/api/v1/label/%s/values", url, label);
    int rc = get(c, url, full, timeout_ms, &body, err);
    cJSON *j = rc ? NULL : cJSON_ParseWithLength(body.data ? body.data : "", body.len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data"), *v;
    if (rc == 0 && !cJSON_IsArray(data))
        rc = medic_error_set(err, MEDIC_E_INVALID, "prometheus: no label values for %s", label);
    size_t n = rc ? 0 : (size_t)cJSON_GetArraySize(data);
    if (n > max_values)
        n = max_values;
    if (rc == 0 && n && !(*values = calloc(n, sizeof(char *))))
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    if (rc == 0)
        cJSON_ArrayForEach(v, data)
        {
            if (*count == n)
                break;
            if (cJSON_IsString(v) && !((*values)[*count] = strdup(v->valuestring))) {
                rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
                break;
            }
            if (cJSON_IsString(v))
                (*count)++;
        }
    cJSON_Delete(j);
    medic_buf_release(&body);
    curl_easy_cleanup(c);
    if (rc) {
        for (size_t i = 0; i < *count; i++)
            free((*values)[i]);
        free(*values);
        *values = NULL;
        *count = 0;
    }
    return rc;
}

void prometheus__place(const cJSON *values, const struct feature_spec *spec, size_t d,
                       int64_t start, float *row)
{
    const size_t W = spec->window, F = spec->count;
    const cJSON *v;
    cJSON_ArrayForEach(v, values)
    {
        const cJSON *ts = cJSON_GetArrayItem(v, 0), *val = cJSON_GetArrayItem(v, 1);
        /* seconds before 2096: the ns arithmetic below cannot overflow */
        if (!cJSON_IsNumber(ts) || !cJSON_IsString(val) || !(fabs(ts->valuedouble) < 4e9))
            continue;
        double x = strtod(val->valuestring, NULL);
        int64_t t = (int64_t)llround(ts->valuedouble * 1e9);
        int64_t k = (t - start + spec->step / 2) / spec->step;
        if (k >= 0 && (size_t)k < W && fabs(x) <= FLT_MAX)
            row[(size_t)k * F + d] = (float)x;
    }
}

static int slot_for(struct prometheus_window *w, const char *gpu, size_t cells, int create)
{
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->gpu[i], gpu) == 0)
            return (int)i;
    if (!create || w->count == PROMETHEUS_MAX_SERIES)
        return -1;
    w->rows[w->count] = malloc(cells * sizeof(float));
    if (!w->rows[w->count])
        return -1;
    for (size_t i = 0; i < cells; i++)
        w->rows[w->count][i] = NAN;
    snprintf(w->gpu[w->count], sizeof(w->gpu[0]), "%s", gpu);
    return (int)w->count++;
}

int prometheus_parse_range(const char *body, size_t len, const struct feature_spec *spec, size_t d,
                           const char *gpu, int64_t start, struct prometheus_window *out,
                           struct medic_error *err)
{
    const size_t W = spec->window, F = spec->count;
    struct medic_arena nodes;
    medic_arena_init(&nodes);
    cJSON *j = medic_json_parse_in(&nodes, body, len, NULL);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(data, "result"), *series;
    if (!cJSON_IsArray(result)) {
        medic_arena_release(&nodes);
        return medic_error_set(err, MEDIC_E_INVALID, "prometheus: no result for feature %s",
                               spec->items[d].name);
    }
    cJSON_ArrayForEach(series, result)
    {
        const cJSON *metric = cJSON_GetObjectItemCaseSensitive(series, "metric");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(metric, "gpu");
        const char *label = gpu ? gpu : (cJSON_IsString(g) ? g->valuestring : "");
        /* the first feature decides which GPUs there are */
        int slot = slot_for(out, label, W * F, d == 0);
        if (slot < 0)
            continue;
        prometheus__place(cJSON_GetObjectItemCaseSensitive(series, "values"), spec, d, start,
                          out->rows[slot]);
    }
    medic_arena_release(&nodes);
    return 0;
}

/* Forward-fills short gaps. With every GPU of the node (whole_node), one
 * silent for longer while another is usable is lost (marked, not scored);
 * any other long gap, or no data at the start, is refused. */
static int fill_window(const struct feature_spec *spec, int whole_node, struct prometheus_window *w,
                       struct medic_error *err)
{
    struct prometheus_silence silent[PROMETHEUS_MAX_SERIES];
    size_t bad[PROMETHEUS_MAX_SERIES] = {0}, usable = 0;
    int at_start[PROMETHEUS_MAX_SERIES] = {0}, ok[PROMETHEUS_MAX_SERIES];
    for (size_t s = 0; s < w->count; s++) {
        size_t filled = 0;
        silent[s] = prometheus__silence(spec, w->rows[s]);
        ok[s] = prometheus__fill(spec, w->rows[s], &filled, &bad[s], &at_start[s]) == 0;
        usable += (size_t)ok[s];
        w->filled += filled;
    }
    for (size_t s = 0; s < w->count; s++) {
        if (ok[s])
            continue;
        w->lost[s] = prometheus__lost(silent[s], whole_node && usable);
        if (!w->lost[s].steps)
            return prometheus__gap_error(spec, bad[s], at_start[s], w->gpu[s], err);
    }
    return 0;
}

int prometheus_fetch_window(const char *url, long timeout_ms, const struct feature_spec *spec,
                            const char *node, const char *gpu, int64_t now,
                            struct prometheus_window *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    const size_t W = spec->window, F = spec->count;
    int64_t end = now / spec->step * spec->step;
    int64_t start = end - (int64_t)(W - 1) * spec->step;
    CURL *c = curl_easy_init();
    struct medic_buf body;
    medic_buf_init(&body, (size_t)16 << 20);
    int rc = c ? 0 : medic_error_set(err, MEDIC_E_NOMEM, "cannot create a curl handle");
    /* the timeout bounds the whole window, not each query */
    const int64_t deadline = medic_time_monotonic() + (int64_t)timeout_ms * MEDIC_NS_PER_MS;
    for (size_t d = 0; d < F && rc == 0; d++) {
        long left = (long)((deadline - medic_time_monotonic()) / MEDIC_NS_PER_MS);
        if (left <= 0) {
            rc = medic_error_set(err, MEDIC_E_IO, "prometheus %s: timed out after %ldms", url,
                                 timeout_ms);
            break;
        }
        char query[2048]; /* a template of 511 with several {{node}} */
        if (features_query(&spec->items[d], node, gpu, query, sizeof(query))) {
            rc = medic_error_set(err, MEDIC_E_LIMIT, "feature %s: query too long",
                                 spec->items[d].name);
            break;
        }
        if ((rc = fetch(c, url, query, start, end, spec->step, left, &body, err)))
            break;
        if ((rc = prometheus_parse_range(body.data ? body.data : "", body.len, spec, d, gpu, start,
                                         out, err)))
            break;
        if (d == 0 && out->count == 0) {
            rc = medic_error_set(err, MEDIC_E_NOTFOUND,
                                 "prometheus has no %s series for node %s%s%s in the window",
                                 spec->items[0].name, node, gpu ? " gpu " : "", gpu ? gpu : "");
            break;
        }
    }
    if (rc == 0)
        rc = fill_window(spec, gpu == NULL, out, err);
    medic_buf_release(&body);
    if (c)
        curl_easy_cleanup(c);
    if (rc)
        prometheus_window_release(out);
    return rc;
}

int prometheus__gap_error(const struct feature_spec *spec, size_t d, int at_start, const char *gpu,
                          struct medic_error *err)
{
    return medic_error_set(
        err, MEDIC_E_INVALID, "feature %s of gpu %s: %s (more than %d steps missing)",
        spec->items[d].name, gpu[0] ? gpu : "-",
        at_start ? "no data at the window's start" : "a gap in the window", PROMETHEUS_MAX_GAP);
}

struct prometheus_silence prometheus__silence(const struct feature_spec *spec, const float *row)
{
    const size_t W = spec->window, F = spec->count;
    struct prometheus_silence longest = {0, 0};
    for (size_t k = 0, run = 0; k < W; k++) {
        run = isnan(row[k * F]) ? run + 1 : 0;
        if (run > PROMETHEUS_MAX_GAP && run >= longest.steps)
            longest = (struct prometheus_silence){(unsigned short)run, (unsigned short)(W - 1 - k)};
    }
    return longest;
}

struct prometheus_silence prometheus__lost(struct prometheus_silence silence, int node_reports)
{
    return node_reports ? silence : (struct prometheus_silence){0, 0};
}

void prometheus_silence_describe(const struct prometheus_silence *s, int64_t step, char *out,
                                 size_t size)
{
    char span[32], ago[32];
    medic_duration_format((int64_t)s->steps * step, span, sizeof(span));
    medic_duration_format((int64_t)s->ago * step, ago, sizeof(ago));
    if (s->ago)
        snprintf(out, size,
                 "telemetry lost: nothing for %s until %s ago while the node's other GPUs "
                 "reported",
                 span, ago);
    else
        snprintf(out, size,
                 "telemetry lost: nothing for the last %s while the node's other GPUs reported",
                 span);
}

int prometheus__fill(const struct feature_spec *spec, float *row, size_t *filled,
                     size_t *bad_feature, int *at_start)
{
    const size_t W = spec->window, F = spec->count;
    for (size_t d = 0; d < F; d++) {
        size_t gap = 0;
        for (size_t k = 0; k < W; k++) {
            float *x = &row[k * F + d];
            if (!isnan(*x)) {
                gap = 0;
                continue;
            }
            if (k == 0 || ++gap > PROMETHEUS_MAX_GAP) {
                *bad_feature = d;
                *at_start = k == 0;
                return MEDIC_E_INVALID;
            }
            *x = row[(k - 1) * F + d];
            (*filled)++;
        }
    }
    return 0;
}

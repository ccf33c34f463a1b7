/* SPDX-License-Identifier: Apache-2.0 */
#include "agent_client.h"
#include "buf.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    return medic_buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

/* One request; returns the HTTP status, or -1 (transport error in why) or
 * -2 (timeout). */
static long call(const char *url, const char *path, const char *token, const char *body,
                 long timeout_ms, struct medic_buf *out, char *why, size_t size)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, size, "cannot create a curl handle");
        return -1;
    }
    char full[2048], auth[600];
    snprintf(full, sizeof(full), "%s%s", url, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %.512s", token ? token : "");
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        snprintf(why, size, "agent %s: %s", url, curl_easy_strerror(rc));
        return rc == CURLE_OPERATION_TIMEDOUT ? -2 : -1;
    }
    return code;
}

static void error_of(const struct medic_buf *b, long code, char *out, size_t size)
{
    cJSON *j = cJSON_Parse(b->data ? b->data : "");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    snprintf(out, size, "HTTP %ld: %s", code, cJSON_IsString(e) ? e->valuestring : "no detail");
    cJSON_Delete(j);
}

enum medic_outcome agent_power_limit(const char *url, const char *token, const int *gpus,
                                     size_t gpu_count, int watts, long timeout_ms, char *detail,
                                     size_t size)
{
    int all[64];
    struct medic_buf b;
    medic_buf_init(&b, (size_t)1 << 20);
    detail[0] = '\0';
    if (gpu_count == 0) {
        long code = call(url, "/v1/gpus", token, NULL, timeout_ms, &b, detail, size);
        if (code != 200) {
            if (code > 0)
                error_of(&b, code, detail, size);
            medic_buf_release(&b);
            return code == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
        }
        cJSON *j = cJSON_Parse(b.data);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "gpus"), *g;
        cJSON_ArrayForEach(g, list)
        {
            const cJSON *index = cJSON_GetObjectItemCaseSensitive(g, "index");
            if (cJSON_IsNumber(index) && gpu_count < 64)
                all[gpu_count++] = index->valueint;
        }
        cJSON_Delete(j);
        gpus = all;
        if (!gpu_count) {
            snprintf(detail, size, "the agent lists no GPU");
            medic_buf_release(&b);
            return MEDIC_OUTCOME_FAILED;
        }
    }
    size_t used = 0;
    for (size_t i = 0; i < gpu_count; i++) {
        char path[64], body[64];
        snprintf(path, sizeof(path), "/v1/gpus/%d/power-limit", gpus[i]);
        snprintf(body, sizeof(body), "{\"watts\":%d}", watts);
        medic_buf_reset(&b);
        long code = call(url, path, token, body, timeout_ms, &b, detail + used, size - used);
        if (code != 200) {
            if (code > 0)
                error_of(&b, code, detail + used, size - used);
            medic_buf_release(&b);
            return code == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
        }
        cJSON *j = cJSON_Parse(b.data ? b.data : "");
        const cJSON *prev = cJSON_GetObjectItemCaseSensitive(j, "previous_w");
        const cJSON *now = cJSON_GetObjectItemCaseSensitive(j, "limit_w");
        const cJSON *kept = cJSON_GetObjectItemCaseSensitive(j, "kept_original");
        used += (size_t)snprintf(
            detail + used, size - used, "%sGPU %d: %.0f W -> %.0f W%s", i ? "; " : "", gpus[i],
            cJSON_IsNumber(prev) ? prev->valuedouble : 0.0,
            cJSON_IsNumber(now) ? now->valuedouble : (double)watts,
            cJSON_IsTrue(kept) ? " (the stricter limit set before medic stays)" : "");
        if (used >= size)
            used = size - 1;
        cJSON_Delete(j);
    }
    medic_buf_release(&b);
    return MEDIC_OUTCOME_SUCCEEDED;
}

enum medic_outcome agent_restore(const char *url, const char *token, long timeout_ms, char *detail,
                                 size_t size)
{
    struct medic_buf b;
    medic_buf_init(&b, (size_t)1 << 20);
    long code = call(url, "/v1/restore", token, "{}", timeout_ms, &b, detail, size);
    enum medic_outcome r = MEDIC_OUTCOME_SUCCEEDED;
    if (code == 200) {
        cJSON *j = cJSON_Parse(b.data ? b.data : "");
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "restored"), *g;
        size_t used = (size_t)snprintf(detail, size, "restored");
        cJSON_ArrayForEach(g, list)
        {
            const cJSON *index = cJSON_GetObjectItemCaseSensitive(g, "index");
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(g, "limit_w");
            if (used < size && cJSON_IsNumber(index) && cJSON_IsNumber(w))
                used += (size_t)snprintf(detail + used, size - used, " GPU %d: %.0f W;",
                                         index->valueint, w->valuedouble);
        }
        cJSON_Delete(j);
    } else {
        if (code > 0)
            error_of(&b, code, detail, size);
        r = code == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    }
    medic_buf_release(&b);
    return r;
}

enum medic_outcome agent_gpu_reset(const char *url, const char *token, int index, const char *uuid,
                                   long timeout_ms, char *detail, size_t size)
{
    struct medic_buf b, body;
    medic_buf_init(&b, (size_t)1 << 20);
    medic_buf_init(&body, 1024);
    medic_buf_puts(&body, "{");
    if (uuid) {
        medic_buf_puts(&body, "\"uuid\":");
        medic_buf_json_string(&body, uuid);
    }
    medic_buf_puts(&body, "}");
    char path[64];
    snprintf(path, sizeof(path), "/v1/gpus/%d/reset", index);
    long code = call(url, path, token, body.data, timeout_ms, &b, detail, size);
    enum medic_outcome r;
    if (code == 200) {
        cJSON *j = cJSON_Parse(b.data ? b.data : "");
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "uuid");
        const cJSON *ra = cJSON_GetObjectItemCaseSensitive(j, "recovery_action");
        snprintf(detail, size, "GPU %d (%s) reset and back, recovery action %s", index,
                 cJSON_IsString(u) ? u->valuestring : "?",
                 cJSON_IsString(ra) ? ra->valuestring : "not offered by the driver");
        cJSON_Delete(j);
        r = MEDIC_OUTCOME_SUCCEEDED;
    } else if (code > 0) {
        error_of(&b, code, detail, size);
        /* a GPU not there or busy: the reset was not tried */
        r = code == 404 || code == 409 ? MEDIC_OUTCOME_REFUSED : MEDIC_OUTCOME_FAILED;
    } else {
        r = code == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    }
    medic_buf_release(&body);
    medic_buf_release(&b);
    return r;
}

/* Appends "; " and a finding to detail. */
static void finding(char *detail, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void finding(char *detail, size_t size, const char *fmt, ...)
{
    size_t used = strlen(detail);
    if (used + 3 >= size)
        return;
    if (used)
        used += (size_t)snprintf(detail + used, size - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail + used, size - used, fmt, ap);
    va_end(ap);
}

int agent_health_judge(const char *json, size_t len, int expected_gpus,
                       const struct medic_health_criteria *h, char *detail, size_t size)
{
    detail[0] = '\0';
    cJSON *j = len <= AGENT_HEALTH_MAX ? cJSON_ParseWithLength(json, len) : NULL;
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(j, "gpu_count");
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(j, "gpus");
    if (!cJSON_IsNumber(count) || !cJSON_IsArray(gpus)) {
        cJSON_Delete(j);
        snprintf(detail, size, "the agent's health report is not one medic reads");
        return -1;
    }
    int visible = count->valueint;
    if (expected_gpus > 0 && visible < expected_gpus - h->missing_gpus)
        finding(detail, size, "%d of %d GPUs visible (the inventory's gpus): one fell off the bus?",
                visible, expected_gpus);
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus)
    {
        const cJSON *index = cJSON_GetObjectItemCaseSensitive(g, "index");
        const cJSON *ra = cJSON_GetObjectItemCaseSensitive(g, "recovery_action");
        const cJSON *remap = cJSON_GetObjectItemCaseSensitive(g, "remapped_rows");
        const cJSON *retired = cJSON_GetObjectItemCaseSensitive(g, "retired_pages_pending");
        int i = cJSON_IsNumber(index) ? index->valueint : -1;
        int code = cJSON_IsString(ra) ? medic_recovery_parse(ra->valuestring) : -2;
        if (code != -2 && (code < 0 || !(h->recovery_ok & (1u << code))))
            finding(detail, size, "GPU %d: the driver recommends %.40s", i, ra->valuestring);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(remap, "pending")) &&
            !h->remap_pending_ok)
            finding(detail, size, "GPU %d: a row remapping is pending (a GPU reset applies it)", i);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(remap, "failure")))
            finding(detail, size, "GPU %d: row remapping failed (no spare rows left: an RMA)", i);
        if (cJSON_IsTrue(retired) && !h->retirement_pending_ok)
            finding(detail, size, "GPU %d: a page retirement is pending", i);
    }
    cJSON_Delete(j);
    if (detail[0])
        return 0;
    snprintf(detail, size, "%d GPU(s) visible%s, none with a recovery action or pending repair",
             visible,
             expected_gpus <= 0         ? ""
             : visible >= expected_gpus ? " as the inventory says"
                                        : " (safety.health.missing_gpus allows fewer)");
    return 1;
}

int agent_health_recovery(const char *json, size_t len, int *codes, size_t max, size_t *count)
{
    *count = 0;
    cJSON *j = len <= AGENT_HEALTH_MAX ? cJSON_ParseWithLength(json, len) : NULL;
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(j, "gpus"), *g;
    if (!cJSON_IsArray(gpus)) {
        cJSON_Delete(j);
        return -1;
    }
    cJSON_ArrayForEach(g, gpus)
    {
        const cJSON *index = cJSON_GetObjectItemCaseSensitive(g, "index");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(g, "recovery_action_code");
        if (!cJSON_IsNumber(index) || index->valuedouble < 0 || index->valuedouble >= (double)max)
            continue;
        size_t i = (size_t)index->valuedouble;
        while (*count <= i)
            codes[(*count)++] = -1;
        codes[i] = cJSON_IsNumber(code) && code->valuedouble >= 0 &&
                           code->valuedouble < MEDIC_RECOVERY_COUNT
                       ? (int)code->valuedouble
                       : -1;
    }
    cJSON_Delete(j);
    return 0;
}

int agent_health_after(const char *json, size_t len, int gpu, int64_t after, char *detail,
                       size_t size)
{
    cJSON *j = len <= AGENT_HEALTH_MAX ? cJSON_ParseWithLength(json, len) : NULL;
    const cJSON *when = cJSON_GetObjectItemCaseSensitive(j, "booted_at"), *g;
    const char *what = "booted";
    if (gpu >= 0) {
        when = NULL;
        what = "enumerated";
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(j, "gpus"))
        {
            const cJSON *index = cJSON_GetObjectItemCaseSensitive(g, "index");
            if (cJSON_IsNumber(index) && index->valuedouble == (double)gpu)
                when = cJSON_GetObjectItemCaseSensitive(g, "enumerated_at");
        }
    }
    int64_t t = 0;
    int seen = -1;
    char after_text[40];
    medic_time_format(after, after_text, sizeof(after_text));
    char subject[32] = "the node";
    if (gpu >= 0)
        snprintf(subject, sizeof(subject), "GPU %d", gpu);
    if (cJSON_IsString(when) &&
        medic_time_parse_rfc3339(when->valuestring, strlen(when->valuestring), &t) == 0) {
        /* the agent's times have whole seconds or finer: a later instant */
        seen = t > after;
        snprintf(detail, size, "%s %s at %s, %s %s", subject, what, when->valuestring,
                 seen ? "after" : "not since", after_text);
    } else {
        snprintf(detail, size, "the agent does not say when %s was %s (an older agent?)", subject,
                 what);
    }
    cJSON_Delete(j);
    return seen;
}

enum medic_outcome agent_health_read(const char *url, const char *token, long timeout_ms,
                                     struct medic_buf *out, char *detail, size_t size)
{
    long code = call(url, "/v1/health", token, NULL, timeout_ms, out, detail, size);
    if (code == 200)
        return MEDIC_OUTCOME_SUCCEEDED;
    if (code > 0)
        error_of(out, code, detail, size);
    return code == -2 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
}

enum medic_outcome agent_health(const char *url, const char *token, int expected_gpus,
                                const struct medic_health_criteria *h, long timeout_ms,
                                char *detail, size_t size)
{
    struct medic_buf b;
    medic_buf_init(&b, AGENT_HEALTH_MAX);
    enum medic_outcome r = agent_health_read(url, token, timeout_ms, &b, detail, size);
    if (r == MEDIC_OUTCOME_SUCCEEDED &&
        agent_health_judge(b.data ? b.data : "", b.len, expected_gpus, h, detail, size) != 1)
        r = MEDIC_OUTCOME_FAILED;
    medic_buf_release(&b);
    return r;
}

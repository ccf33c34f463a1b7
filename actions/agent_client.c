#include "agent_client.h"
#include "buf.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
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

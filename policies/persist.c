#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_STATE_VERSION 1

static void json_time(struct medic_buf *b, const char *key, int64_t t)
{
    medic_buf_printf(b, "\"%s\":\"%lld\"", key, (long long)t);
}

static void json_labels(struct medic_buf *b, const char *key, const struct label_copy *l)
{
    medic_buf_printf(b, "\"%s\":{", key);
    for (size_t i = 0; i < l->count; i++) {
        if (i)
            medic_buf_puts(b, ",");
        medic_buf_json_string(b, l->items[i].name);
        medic_buf_puts(b, ":");
        medic_buf_json_string(b, l->items[i].value);
    }
    medic_buf_puts(b, "}");
}

int policy_state_save(const struct policy_state *st, struct medic_buf *b)
{
    medic_buf_printf(b, "{\"version\":%d,\"storm_active\":%s,\"instances\":[", ENGINE_STATE_VERSION,
                     st->storm_active ? "true" : "false");
    int first = 1;
    for (size_t i = 0; i < st->instance_count; i++) {
        const struct instance *in = st->instances[i];
        if (in->removed)
            continue;
        medic_buf_puts(b, first ? "{" : ",{");
        first = 0;
        medic_buf_puts(b, "\"fingerprint\":");
        medic_buf_json_string(b, in->fingerprint);
        medic_buf_puts(b, ",\"identity\":");
        medic_buf_json_string(b, in->identity);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", in->starts_at);
        medic_buf_puts(b, ",\"policy\":");
        medic_buf_json_string(b, in->policy);
        medic_buf_printf(b,
                         ",\"next_step\":%zu,\"acted\":%d,\"disrupting\":%d,\"halted\":%d,"
                         "\"drained\":%d,\"limited\":%d,",
                         in->next_step, in->acted, in->disrupting, in->halted, in->drained,
                         in->limited);
        medic_buf_puts(b, "\"halted_by\":");
        medic_buf_json_string(b, in->halted_by);
        medic_buf_puts(b, ",\"node\":");
        medic_buf_json_string(b, in->node);
        medic_buf_printf(b, ",\"in_inventory\":%d,\"alertname\":", in->in_inventory);
        medic_buf_json_string(b, in->alertname);
        if (isnan(in->risk))
            medic_buf_puts(b, ",\"risk\":null,");
        else
            medic_buf_printf(b, ",\"risk\":%.17g,", in->risk);
        json_labels(b, "labels", &in->labels);
        medic_buf_puts(b, ",");
        json_labels(b, "annotations", &in->annotations);
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "],\"unmatched\":[");
    first = 1;
    for (size_t i = 0; i < st->unmatched_count; i++) {
        const struct unmatched *u = st->unmatched[i];
        if (u->last_seen == INT64_MIN)
            continue;
        medic_buf_puts(b, first ? "{\"fingerprint\":" : ",{\"fingerprint\":");
        first = 0;
        medic_buf_json_string(b, u->fingerprint);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", u->starts_at);
        medic_buf_puts(b, ",");
        json_time(b, "last_seen", u->last_seen);
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "],\"nodes\":[");
    for (size_t i = 0; i < st->node_count; i++) {
        const struct node_state *n = st->nodes[i];
        medic_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        medic_buf_json_string(b, n->name);
        medic_buf_printf(b,
                         ",\"drained_by_medic\":%d,\"limited_by_medic\":%d,"
                         "\"disrupting_instances\":%d,",
                         n->drained_by_medic, n->limited_by_medic, n->disrupting_instances);
        medic_buf_printf(b, "\"drain_holders\":%d,\"limit_holders\":%d,", n->drain_holders,
                         n->limit_holders);
        json_time(b, "last_alerting", n->last_alerting);
        medic_buf_puts(b, ",\"history\":[");
        for (size_t k = 0; k < n->history_count; k++) {
            const struct action_record *r = &n->history[k];
            medic_buf_puts(b, k ? ",{\"policy\":" : "{\"policy\":");
            medic_buf_json_string(b, r->policy);
            medic_buf_puts(b, ",");
            json_time(b, "time", r->time);
            medic_buf_puts(b, ",\"fingerprint\":");
            medic_buf_json_string(b, r->fingerprint);
            medic_buf_puts(b, ",");
            json_time(b, "starts_at", r->starts_at);
            medic_buf_puts(b, "}");
        }
        medic_buf_puts(b, "]}");
    }
    medic_buf_puts(b, "],\"resolved\":[");
    for (size_t i = 0; i < st->resolved_count; i++) {
        const struct resolved_alert *r = st->resolved[i];
        medic_buf_puts(b, i ? ",{\"key\":" : "{\"key\":");
        medic_buf_json_string(b, r->key);
        medic_buf_puts(b, ",");
        json_time(b, "at", r->at);
        medic_buf_printf(b, ",\"noted\":%d}", r->noted);
    }
    return medic_buf_puts(b, "]}");
}

struct loader {
    struct medic_error *err;
    int failed;
};

static const cJSON *field(struct loader *l, const cJSON *obj, const char *key, int type)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || !(v->type & type)) {
        if (!l->failed)
            medic_error_set(l->err, MEDIC_E_INVALID, "engine state: '%s' is missing or mistyped",
                            key);
        l->failed = 1;
        return NULL;
    }
    return v;
}

static const char *text_field(struct loader *l, const cJSON *obj, const char *key)
{
    const cJSON *v = field(l, obj, key, cJSON_String);
    return v ? v->valuestring : "";
}

static int64_t time_field(struct loader *l, const cJSON *obj, const char *key)
{
    const char *s = text_field(l, obj, key);
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!l->failed && (*end || end == s)) {
        medic_error_set(l->err, MEDIC_E_INVALID, "engine state: '%s' is not a time", key);
        l->failed = 1;
    }
    return (int64_t)v;
}

static int int_field(struct loader *l, const cJSON *obj, const char *key)
{
    const cJSON *v = field(l, obj, key, cJSON_Number);
    return v ? v->valueint : 0;
}

static int load_labels(struct loader *l, const cJSON *obj, const char *key, struct label_copy *out)
{
    const cJSON *m = field(l, obj, key, cJSON_Object);
    memset(out, 0, sizeof(*out));
    if (!m)
        return -1;
    size_t n = (size_t)cJSON_GetArraySize(m);
    if (n == 0)
        return 0;
    if (!(out->items = calloc(n, sizeof(*out->items))))
        return -1;
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return -1;
        out->items[out->count].name = strdup(e->string);
        out->items[out->count].value = strdup(e->valuestring);
        out->count++;
        if (!out->items[out->count - 1].name || !out->items[out->count - 1].value)
            return -1;
    }
    return 0;
}

int policy_state_load(const char *json, size_t len, struct policy_state **out,
                      struct medic_error *err)
{
    struct loader l = {err, 0};
    cJSON *root = cJSON_ParseWithLength(json, len);
    struct policy_state *st = policy_state_new();
    if (!root || !st) {
        cJSON_Delete(root);
        policy_state_free(st);
        return medic_error_set(err, MEDIC_E_INVALID, "engine state: not JSON");
    }
    if (int_field(&l, root, "version") != ENGINE_STATE_VERSION && !l.failed) {
        medic_error_set(err, MEDIC_E_INVALID, "engine state: unknown version");
        l.failed = 1;
    }
    const cJSON *storm = cJSON_GetObjectItemCaseSensitive(root, "storm_active");
    st->storm_active = cJSON_IsTrue(storm);
    const cJSON *list = field(&l, root, "instances", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        struct medic_label none_items[1];
        struct medic_labels none = {none_items, 0};
        struct policy_alert a = {
            text_field(&l, e, "fingerprint"), MEDIC_STATUS_FIRING, &none, &none, 0, NAN};
        const cJSON *risk = cJSON_GetObjectItemCaseSensitive(e, "risk");
        a.risk = cJSON_IsNumber(risk) ? risk->valuedouble : NAN;
        struct policy stub = {0};
        stub.name = (char *)text_field(&l, e, "policy");
        int64_t starts_at = time_field(&l, e, "starts_at");
        struct label_copy labels;
        if (l.failed)
            break;
        if (load_labels(&l, e, "labels", &labels)) {
            policy__labels_free(&labels);
            if (!l.failed)
                medic_error_set(err, MEDIC_E_INVALID, "engine state: bad labels");
            l.failed = 1;
            break;
        }
        /* keyed by identity; a state saved before identities had one is
         * keyed by its labels now */
        char identity[ALERT_IDENTITY_SIZE];
        const cJSON *saved_identity = cJSON_GetObjectItemCaseSensitive(e, "identity");
        struct medic_labels label_view = {labels.items, labels.count};
        if (cJSON_IsString(saved_identity))
            snprintf(identity, sizeof(identity), "%s", saved_identity->valuestring);
        else
            policy__alert_identity(a.fingerprint, &label_view, identity, sizeof(identity));
        struct instance *in =
            policy__new_instance(st, &a, identity, starts_at, &stub, text_field(&l, e, "node"),
                                 int_field(&l, e, "in_inventory"));
        if (!in) {
            policy__labels_free(&labels);
            l.failed = 1;
            medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        in->labels = labels;
        in->cached_policy = NULL;
        in->next_step = (size_t)int_field(&l, e, "next_step");
        in->acted = int_field(&l, e, "acted");
        in->disrupting = int_field(&l, e, "disrupting");
        in->halted = int_field(&l, e, "halted");
        in->drained = int_field(&l, e, "drained");
        in->limited = int_field(&l, e, "limited");
        snprintf(in->halted_by, sizeof(in->halted_by), "%s", text_field(&l, e, "halted_by"));
        snprintf(in->alertname, sizeof(in->alertname), "%s", text_field(&l, e, "alertname"));
        if (load_labels(&l, e, "annotations", &in->annotations)) {
            if (!l.failed)
                medic_error_set(err, MEDIC_E_INVALID, "engine state: bad labels");
            l.failed = 1;
        }
    }
    list = l.failed ? NULL : field(&l, root, "unmatched", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        struct policy_alert a = {
            text_field(&l, e, "fingerprint"), MEDIC_STATUS_FIRING, NULL, NULL, 0, NAN};
        int64_t starts_at = time_field(&l, e, "starts_at");
        int64_t last_seen = time_field(&l, e, "last_seen");
        if (!l.failed)
            policy__remember_unmatched(st, a.fingerprint, starts_at, last_seen);
    }
    list = l.failed ? NULL : field(&l, root, "nodes", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        struct node_state *n = policy__node_get(st, text_field(&l, e, "name"), 1);
        if (!n || l.failed) {
            l.failed = 1;
            break;
        }
        n->drained_by_medic = int_field(&l, e, "drained_by_medic");
        n->limited_by_medic = int_field(&l, e, "limited_by_medic");
        n->disrupting_instances = int_field(&l, e, "disrupting_instances");
        n->drain_holders = int_field(&l, e, "drain_holders");
        n->limit_holders = int_field(&l, e, "limit_holders");
        n->last_alerting = time_field(&l, e, "last_alerting");
        const cJSON *history = field(&l, e, "history", cJSON_Array);
        for (const cJSON *h = history ? history->child : NULL; h && !l.failed; h = h->next) {
            if (policy__grow((void **)&n->history, n->history_count, &n->history_cap,
                             sizeof(*n->history))) {
                l.failed = 1;
                break;
            }
            struct action_record *r = &n->history[n->history_count];
            snprintf(r->policy, sizeof(r->policy), "%s", text_field(&l, h, "policy"));
            r->time = time_field(&l, h, "time");
            r->starts_at = time_field(&l, h, "starts_at");
            r->fingerprint = strdup(text_field(&l, h, "fingerprint"));
            if (r->fingerprint)
                n->history_count++;
        }
    }
    /* absent from a state saved before resolves were remembered */
    list = l.failed ? NULL : cJSON_GetObjectItemCaseSensitive(root, "resolved");
    for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e && !l.failed; e = e->next) {
        const char *key = text_field(&l, e, "key");
        int64_t at = time_field(&l, e, "at");
        if (l.failed || policy__grow((void **)&st->resolved, st->resolved_count, &st->resolved_cap,
                                     sizeof(*st->resolved))) {
            l.failed = 1;
            break;
        }
        struct resolved_alert *r = calloc(1, sizeof(*r));
        if (!r || !(r->key = strdup(key)) || medic_map_put(&st->resolved_by_alert, r->key, r)) {
            if (r)
                free(r->key);
            free(r);
            l.failed = 1;
            medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        r->at = at;
        r->noted = int_field(&l, e, "noted");
        st->resolved[st->resolved_count++] = r;
    }
    cJSON_Delete(root);
    if (l.failed) {
        policy_state_free(st);
        return err && err->code ? err->code : MEDIC_E_INVALID;
    }
    *out = st;
    return 0;
}

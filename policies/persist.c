#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_STATE_VERSION 2

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

static void json_text(struct medic_buf *b, const char *key, const char *value)
{
    medic_buf_printf(b, ",\"%s\":", key);
    medic_buf_json_string(b, value);
}

static void save_incident(struct medic_buf *b, const struct incident *in)
{
    medic_buf_printf(b, "{\"id\":\"%lld\"", (long long)in->id);
    json_text(b, "key", in->key);
    json_text(b, "node", in->node);
    json_text(b, "policy", in->policy);
    json_text(b, "state", policy_incident_state_name(in->state));
    json_text(b, "alertname", in->alertname);
    medic_buf_puts(b, ",");
    json_time(b, "opened_at", in->opened_at);
    medic_buf_puts(b, ",");
    json_time(b, "fresh_after", in->fresh_after);
    medic_buf_printf(b,
                     ",\"in_inventory\":%d,\"next_step\":%zu,\"awaiting\":%d,\"awaiting_kind\":%d,"
                     "\"awaiting_watts\":%d,\"acted\":%d,\"halted\":%d,\"drained\":%d,"
                     "\"limit_watts\":%d,\"closing\":%d,\"closing_as\":%d,",
                     in->in_inventory, in->next_step, in->awaiting, (int)in->awaiting_kind,
                     in->awaiting_watts, in->acted, in->halted, in->drained, in->limit_watts,
                     in->closing, (int)in->closing_as);
    json_time(b, "awaiting_decision", in->awaiting_decision);
    json_text(b, "halted_by", in->halted_by);
    json_text(b, "closing_cause", in->closing_cause);
    if (isnan(in->risk))
        medic_buf_puts(b, ",\"risk\":null,");
    else
        medic_buf_printf(b, ",\"risk\":%.17g,", in->risk);
    json_labels(b, "labels", &in->labels);
    medic_buf_puts(b, ",");
    json_labels(b, "annotations", &in->annotations);
    medic_buf_puts(b, ",\"undo\":[");
    for (int k = 0; k < in->undo_count; k++) {
        medic_buf_puts(b, k ? ",{" : "{");
        json_time(b, "decision", in->undo[k].decision);
        medic_buf_printf(b, ",\"kind\":%d}", (int)in->undo[k].kind);
    }
    medic_buf_puts(b, "],\"members\":[");
    for (size_t k = 0; k < in->member_count; k++) {
        const struct member *m = &in->members[k];
        medic_buf_puts(b, k ? ",{\"identity\":" : "{\"identity\":");
        medic_buf_json_string(b, m->identity);
        json_text(b, "fingerprint", m->fingerprint);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", m->starts_at);
        medic_buf_puts(b, ",");
        json_time(b, "last_seen", m->last_seen);
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "]}");
}

int policy_state_save(const struct policy_state *st, struct medic_buf *b)
{
    medic_buf_printf(b,
                     "{\"version\":%d,\"storm_active\":%s,\"next_incident\":\"%lld\","
                     "\"incidents\":[",
                     ENGINE_STATE_VERSION, st->storm_active ? "true" : "false",
                     (long long)st->next_incident_id);
    int first = 1;
    for (size_t i = 0; i < st->incident_count; i++) {
        if (st->incidents[i]->final)
            continue;
        if (!first)
            medic_buf_puts(b, ",");
        first = 0;
        save_incident(b, st->incidents[i]);
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
        medic_buf_printf(b, ",\"drained_by_medic\":%d,\"limited_by_medic\":%d,\"acting\":%d,",
                         n->drained_by_medic, n->limited_by_medic, n->acting);
        json_time(b, "last_alerting", n->last_alerting);
        medic_buf_puts(b, ",\"history\":[");
        for (size_t k = 0; k < n->history_count; k++) {
            const struct action_record *r = &n->history[k];
            medic_buf_puts(b, k ? ",{\"policy\":" : "{\"policy\":");
            medic_buf_json_string(b, r->policy);
            medic_buf_puts(b, ",");
            json_time(b, "time", r->time);
            medic_buf_puts(b, ",");
            json_time(b, "incident", r->incident);
            medic_buf_puts(b, "}");
        }
        medic_buf_puts(b, "]}");
    }
    medic_buf_puts(b, "],\"resolved\":[");
    for (size_t i = 0; i < st->resolved_count; i++) {
        const struct resolved_alert *r = st->resolved[i];
        medic_buf_puts(b, i ? ",{\"identity\":" : "{\"identity\":");
        medic_buf_json_string(b, r->identity);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", r->starts_at);
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

static void copy_field(struct loader *l, const cJSON *obj, const char *key, char *to, size_t size)
{
    snprintf(to, size, "%s", text_field(l, obj, key));
}

static int load_incident(struct loader *l, struct policy_state *st, const cJSON *e)
{
    int64_t id = time_field(l, e, "id");
    const char *key = text_field(l, e, "key");
    int state = policy_incident_state_parse(text_field(l, e, "state"));
    if (l->failed || state < 0 || id <= 0) {
        if (!l->failed)
            medic_error_set(l->err, MEDIC_E_INVALID, "engine state: a bad incident");
        return l->failed = 1;
    }
    struct incident *in = policy__incident_restore(st, id, key);
    if (!in) {
        medic_error_set(l->err, MEDIC_E_NOMEM, "out of memory");
        return l->failed = 1;
    }
    in->state = (enum policy_incident_state)state;
    copy_field(l, e, "node", in->node, sizeof(in->node));
    copy_field(l, e, "policy", in->policy, sizeof(in->policy));
    copy_field(l, e, "alertname", in->alertname, sizeof(in->alertname));
    copy_field(l, e, "halted_by", in->halted_by, sizeof(in->halted_by));
    copy_field(l, e, "closing_cause", in->closing_cause, sizeof(in->closing_cause));
    in->opened_at = time_field(l, e, "opened_at");
    in->fresh_after = time_field(l, e, "fresh_after");
    in->awaiting_decision = time_field(l, e, "awaiting_decision");
    in->in_inventory = int_field(l, e, "in_inventory");
    in->next_step = (size_t)int_field(l, e, "next_step");
    in->awaiting = int_field(l, e, "awaiting");
    in->awaiting_kind = (enum medic_action_kind)int_field(l, e, "awaiting_kind");
    in->awaiting_watts = int_field(l, e, "awaiting_watts");
    in->acted = int_field(l, e, "acted");
    in->halted = int_field(l, e, "halted");
    in->drained = int_field(l, e, "drained");
    in->limit_watts = int_field(l, e, "limit_watts");
    in->closing = int_field(l, e, "closing");
    in->closing_as = (enum policy_incident_state)int_field(l, e, "closing_as");
    if ((unsigned)in->awaiting_kind >= MEDIC_ACTION_KIND_COUNT ||
        (unsigned)in->closing_as >= INCIDENT_STATE_COUNT) {
        if (!l->failed)
            medic_error_set(l->err, MEDIC_E_INVALID, "engine state: a bad incident");
        return l->failed = 1;
    }
    const cJSON *risk = cJSON_GetObjectItemCaseSensitive(e, "risk");
    in->risk = cJSON_IsNumber(risk) ? risk->valuedouble : NAN;
    if (load_labels(l, e, "labels", &in->labels) ||
        load_labels(l, e, "annotations", &in->annotations)) {
        if (!l->failed)
            medic_error_set(l->err, MEDIC_E_INVALID, "engine state: bad labels");
        return l->failed = 1;
    }
    const cJSON *undo = field(l, e, "undo", cJSON_Array);
    for (const cJSON *u = undo ? undo->child : NULL; u && !l->failed; u = u->next) {
        int kind = int_field(l, u, "kind");
        if (in->undo_count >= INCIDENT_MAX_UNDO || (unsigned)kind >= MEDIC_ACTION_KIND_COUNT) {
            medic_error_set(l->err, MEDIC_E_INVALID, "engine state: a bad undo step");
            return l->failed = 1;
        }
        in->undo[in->undo_count].decision = time_field(l, u, "decision");
        in->undo[in->undo_count++].kind = (enum medic_action_kind)kind;
    }
    const cJSON *members = field(l, e, "members", cJSON_Array);
    for (const cJSON *m = members ? members->child : NULL; m && !l->failed; m = m->next) {
        const char *identity = text_field(l, m, "identity");
        const char *fingerprint = text_field(l, m, "fingerprint");
        int64_t starts_at = time_field(l, m, "starts_at");
        int64_t last_seen = time_field(l, m, "last_seen");
        if (!l->failed && policy__member_add(in, identity, fingerprint, starts_at, last_seen)) {
            medic_error_set(l->err, MEDIC_E_NOMEM, "out of memory");
            return l->failed = 1;
        }
    }
    return l->failed;
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
    int version = int_field(&l, root, "version");
    if (version != ENGINE_STATE_VERSION && !l.failed) {
        medic_error_set(err, MEDIC_E_INVALID,
                        "engine state: version %d, this medic reads version %d (alert instances "
                        "became incidents); see docs/policies.md, \"Upgrading\"",
                        version, ENGINE_STATE_VERSION);
        l.failed = 1;
    }
    const cJSON *storm = cJSON_GetObjectItemCaseSensitive(root, "storm_active");
    st->storm_active = cJSON_IsTrue(storm);
    const cJSON *list = l.failed ? NULL : field(&l, root, "incidents", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next)
        load_incident(&l, st, e);
    if (!l.failed) {
        int64_t next = time_field(&l, root, "next_incident");
        if (next > st->next_incident_id)
            st->next_incident_id = next;
    }
    list = l.failed ? NULL : field(&l, root, "unmatched", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        const char *identity = text_field(&l, e, "fingerprint");
        int64_t starts_at = time_field(&l, e, "starts_at");
        int64_t last_seen = time_field(&l, e, "last_seen");
        if (!l.failed)
            policy__remember_unmatched(st, identity, starts_at, last_seen);
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
        n->acting = int_field(&l, e, "acting");
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
            r->incident = time_field(&l, h, "incident");
            n->history_count++;
        }
    }
    list = l.failed ? NULL : field(&l, root, "resolved", cJSON_Array);
    for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next) {
        const char *identity = text_field(&l, e, "identity");
        int64_t starts_at = time_field(&l, e, "starts_at");
        int64_t at = time_field(&l, e, "at");
        if (l.failed)
            break;
        if (policy__remember_resolved(st, identity, starts_at, at)) {
            medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            l.failed = 1;
            break;
        }
        policy__resolved(st, identity)->noted = int_field(&l, e, "noted");
    }
    cJSON_Delete(root);
    if (l.failed) {
        policy_state_free(st);
        return err && err->code ? err->code : MEDIC_E_INVALID;
    }
    *out = st;
    return 0;
}

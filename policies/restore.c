/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine's state rebuilt from its rows (persist.c writes them),
 * and from the single document earlier medics saved. Every field is
 * checked; rows of an earlier format load to the same state. */
#include "engine_internal.h"
#include "rows.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the positions of format 3 meant, kept as they were: reordering
 * medic's tables never changes what a stored row means. */
static const char *const v3_action_kinds[] = {
    "power_limit", "restore_power_limit", "ipmi_power_cycle", "drain", "resume", "notify"};
static const char *const v3_incident_states[] = {"open",    "draining",  "drained", "limiting",
                                                 "limited", "cycling",   "cycled",  "failed",
                                                 "undoing", "recovered", "expired", "closed"};

/* ---- rows in ---- */

struct loader {
    struct medic_error *err;
    int failed;
};

static int load_fail(struct loader *l, int code, const char *what)
{
    if (!l->failed)
        medic_error_set(l->err, code, "engine state: %s", what);
    l->failed = 1;
    return code;
}

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

/* A name from table (by name; or, in rows of format 3, by its position in
 * that format's table): its index in names now, or -1. */
static int named_field(struct loader *l, const cJSON *obj, const char *key, const char *const *v3,
                       size_t v3_count, int (*parse)(const char *))
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    int found = -1;
    if (cJSON_IsString(v))
        found = parse(v->valuestring);
    else if (cJSON_IsNumber(v) && v->valueint >= 0 && (size_t)v->valueint < v3_count)
        found = parse(v3[v->valueint]);
    if (found < 0 && !l->failed) {
        medic_error_set(l->err, MEDIC_E_INVALID, "engine state: '%s' names nothing medic knows",
                        key);
        l->failed = 1;
    }
    return found;
}

static int kind_field(struct loader *l, const cJSON *obj, const char *key)
{
    return named_field(l, obj, key, v3_action_kinds,
                       sizeof(v3_action_kinds) / sizeof(v3_action_kinds[0]),
                       medic_action_parse_kind);
}

static int state_field(struct loader *l, const cJSON *obj, const char *key)
{
    return named_field(l, obj, key, v3_incident_states,
                       sizeof(v3_incident_states) / sizeof(v3_incident_states[0]),
                       policy_incident_state_parse);
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
    if (l->failed || state < 0 || id <= 0)
        return load_fail(l, MEDIC_E_INVALID, "a bad incident");
    if (policy__incident_by_id(st, id))
        return load_fail(l, MEDIC_E_INVALID, "an incident twice");
    struct incident *in = policy__incident_restore(st, id, key);
    if (!in)
        return load_fail(l, MEDIC_E_NOMEM, "out of memory");
    in->state = (enum policy_incident_state)state;
    copy_field(l, e, "node", in->node, sizeof(in->node));
    copy_field(l, e, "policy", in->policy, sizeof(in->policy));
    copy_field(l, e, "alertname", in->alertname, sizeof(in->alertname));
    copy_field(l, e, "halted_by", in->halted_by, sizeof(in->halted_by));
    if (cJSON_GetObjectItemCaseSensitive(e, "previous"))
        copy_field(l, e, "previous", in->previous, sizeof(in->previous));
    const cJSON *stale = cJSON_GetObjectItemCaseSensitive(e, "stale_step");
    if (cJSON_IsNumber(stale) && stale->valuedouble >= 0 && stale->valuedouble <= POLICY_MAX_STEPS)
        in->stale_step = (int)stale->valuedouble;
    copy_field(l, e, "closing_cause", in->closing_cause, sizeof(in->closing_cause));
    /* newer medics' fields: absent from rows an older one wrote */
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(e, "drained_as");
    if (cJSON_IsString(as))
        snprintf(in->drained_as, sizeof(in->drained_as), "%s", as->valuestring);
    const cJSON *held = cJSON_GetObjectItemCaseSensitive(e, "held");
    const cJSON *held_by = cJSON_GetObjectItemCaseSensitive(e, "held_by");
    in->held = cJSON_IsNumber(held) && held->valueint != 0;
    if (cJSON_IsString(held_by))
        snprintf(in->held_by, sizeof(in->held_by), "%s", held_by->valuestring);
    if (cJSON_GetObjectItemCaseSensitive(e, "pending_step")) { /* a step waits for a person */
        in->pending = 1;
        in->pending_step = (size_t)int_field(l, e, "pending_step");
        in->pending_until = time_field(l, e, "pending_until");
        in->pending_decision = time_field(l, e, "pending_decision");
        int from = state_field(l, e, "pending_from");
        in->pending_from = from >= 0 ? (enum policy_incident_state)from : INCIDENT_OPEN;
        /* absent from rows of a medic that did not record the offer: an
         * approval of such a step offers it again */
        /* absent from rows of a medic that told on-call at once */
        in->pending_since = cJSON_GetObjectItemCaseSensitive(e, "pending_since")
                                ? time_field(l, e, "pending_since")
                                : in->pending_until - POLICY_DEFAULT_APPROVAL_TIMEOUT;
        const cJSON *told = cJSON_GetObjectItemCaseSensitive(e, "pending_told");
        in->pending_told = !cJSON_IsNumber(told) || told->valueint != 0;
        const cJSON *offer = cJSON_GetObjectItemCaseSensitive(e, "pending_offer");
        if (cJSON_IsString(offer) && !(in->pending_offer = strdup(offer->valuestring)))
            return load_fail(l, MEDIC_E_NOMEM, "out of memory");
    }
    const cJSON *approved = cJSON_GetObjectItemCaseSensitive(e, "approved");
    if (cJSON_IsObject(approved)) {
        const char *offer = text_field(l, approved, "offer");
        copy_field(l, approved, "by", in->approved_by, sizeof(in->approved_by));
        copy_field(l, approved, "reason", in->approved_reason, sizeof(in->approved_reason));
        in->approved_until = time_field(l, approved, "until");
        if (!l->failed && !(in->approved_offer = strdup(offer)))
            return load_fail(l, MEDIC_E_NOMEM, "out of memory");
    }
    if (cJSON_GetObjectItemCaseSensitive(e, "cycled_at")) /* absent: no power cycle, or older */
        in->cycled_at = time_field(l, e, "cycled_at");
    if (cJSON_GetObjectItemCaseSensitive(e, "reset_at"))
        in->reset_at = time_field(l, e, "reset_at");
    if (cJSON_GetObjectItemCaseSensitive(e, "step_ended_at"))
        in->step_ended_at = time_field(l, e, "step_ended_at");
    if (cJSON_GetObjectItemCaseSensitive(e, "awaiting_since"))
        in->awaiting_since = time_field(l, e, "awaiting_since");
    in->opened_at = time_field(l, e, "opened_at");
    in->fresh_after = time_field(l, e, "fresh_after");
    in->awaiting_decision = time_field(l, e, "awaiting_decision");
    in->in_inventory = int_field(l, e, "in_inventory");
    in->next_step = (size_t)int_field(l, e, "next_step");
    in->awaiting = int_field(l, e, "awaiting");
    int awaiting_kind = kind_field(l, e, "awaiting_kind");
    in->awaiting_watts = int_field(l, e, "awaiting_watts");
    in->acted = int_field(l, e, "acted");
    in->halted = int_field(l, e, "halted");
    in->drained = int_field(l, e, "drained");
    in->limit_watts = int_field(l, e, "limit_watts");
    in->closing = int_field(l, e, "closing");
    int closing_as = state_field(l, e, "closing_as");
    if (l->failed)
        return 1;
    in->awaiting_kind = (enum medic_action_kind)awaiting_kind;
    in->closing_as = (enum policy_incident_state)closing_as;
    const cJSON *repair = cJSON_GetObjectItemCaseSensitive(e, "repair");
    if (cJSON_IsObject(repair)) { /* the repair loop's, when it ran */
        in->last_failed = int_field(l, repair, "last_failed");
        in->quarantining = int_field(l, repair, "quarantining");
        copy_field(l, repair, "why", in->quarantine_why, sizeof(in->quarantine_why));
    }
    const cJSON *risk = cJSON_GetObjectItemCaseSensitive(e, "risk");
    in->risk = cJSON_IsNumber(risk) ? risk->valuedouble : NAN;
    if (load_labels(l, e, "labels", &in->labels) ||
        load_labels(l, e, "annotations", &in->annotations))
        return load_fail(l, MEDIC_E_INVALID, "bad labels");
    const cJSON *undo = field(l, e, "undo", cJSON_Array);
    for (const cJSON *u = undo ? undo->child : NULL; u && !l->failed; u = u->next) {
        int kind = kind_field(l, u, "kind");
        if (l->failed)
            return 1;
        if (in->undo_count >= INCIDENT_MAX_UNDO)
            return load_fail(l, MEDIC_E_INVALID, "a bad undo step");
        in->undo[in->undo_count].decision = time_field(l, u, "decision");
        in->undo[in->undo_count++].kind = (enum medic_action_kind)kind;
    }
    const cJSON *members = field(l, e, "members", cJSON_Array);
    for (const cJSON *m = members ? members->child : NULL; m && !l->failed; m = m->next) {
        const char *identity = text_field(l, m, "identity");
        const char *fingerprint = text_field(l, m, "fingerprint");
        int64_t starts_at = time_field(l, m, "starts_at");
        int64_t last_seen = time_field(l, m, "last_seen");
        if (!l->failed && policy__member_add(in, identity, fingerprint, starts_at, last_seen))
            return load_fail(l, MEDIC_E_NOMEM, "out of memory");
        if (!l->failed && cJSON_GetObjectItemCaseSensitive(m, "claimed_start"))
            in->members[in->member_count - 1].claimed_start = time_field(l, m, "claimed_start");
    }
    return l->failed;
}

static int load_node(struct loader *l, struct policy_state *st, const cJSON *e)
{
    const char *name = text_field(l, e, "name");
    if (l->failed)
        return 1;
    if (policy__node_get(st, name, 0))
        return load_fail(l, MEDIC_E_INVALID, "a node twice");
    struct node_state *n = policy__node_get(st, name, 1);
    if (!n)
        return load_fail(l, MEDIC_E_NOMEM, "out of memory");
    n->drained_by_medic = int_field(l, e, "drained_by_medic");
    n->limited_by_medic = int_field(l, e, "limited_by_medic");
    n->acting = int_field(l, e, "acting");
    n->last_alerting = time_field(l, e, "last_alerting");
    if ((n->quarantined = cJSON_GetObjectItemCaseSensitive(e, "quarantined_at") != NULL))
        n->quarantined_at = time_field(l, e, "quarantined_at");
    /* absent in rows written before it was kept */
    const cJSON *alertname = cJSON_GetObjectItemCaseSensitive(e, "alertname");
    if (cJSON_IsString(alertname))
        snprintf(n->alertname, sizeof(n->alertname), "%s", alertname->valuestring);
    const cJSON *history = field(l, e, "history", cJSON_Array);
    for (const cJSON *h = history ? history->child : NULL; h && !l->failed; h = h->next) {
        if (policy__grow((void **)&n->history, n->history_count, &n->history_cap,
                         sizeof(*n->history)))
            return load_fail(l, MEDIC_E_NOMEM, "out of memory");
        struct action_record *r = &n->history[n->history_count];
        snprintf(r->policy, sizeof(r->policy), "%s", text_field(l, h, "policy"));
        r->time = time_field(l, h, "time");
        r->incident = time_field(l, h, "incident");
        /* absent in rows written before episodes were kept */
        if (cJSON_GetObjectItemCaseSensitive(h, "episode"))
            r->episode = time_field(l, h, "episode");
        /* absent: a repair (rows written before power limits were told apart) */
        const cJSON *repair = cJSON_GetObjectItemCaseSensitive(h, "repair");
        r->repair = !cJSON_IsNumber(repair) || repair->valueint != 0;
        n->history_count++;
    }
    return l->failed;
}

static int load_unmatched(struct loader *l, struct policy_state *st, const cJSON *e)
{
    const char *identity = text_field(l, e, "fingerprint");
    int64_t starts_at = time_field(l, e, "starts_at");
    int64_t last_seen = time_field(l, e, "last_seen");
    if (!l->failed) /* out of memory: forgotten, and its repeat recorded again */
        policy__remember_unmatched(st, identity, starts_at, last_seen);
    return l->failed;
}

static int load_resolved(struct loader *l, struct policy_state *st, const cJSON *e)
{
    const char *identity = text_field(l, e, "identity");
    int64_t starts_at = time_field(l, e, "starts_at");
    int64_t at = time_field(l, e, "at");
    int noted = int_field(l, e, "noted");
    if (l->failed)
        return 1;
    if (policy__remember_resolved(st, identity, starts_at, at))
        return load_fail(l, MEDIC_E_NOMEM, "out of memory");
    policy__resolved(st, identity)->noted = noted;
    return 0;
}

static int load_engine(struct loader *l, struct policy_state *st, const cJSON *e, int version)
{
    int found = int_field(l, e, "version");
    if (!l->failed && found == ENGINE_STATE_POSITIONS_VERSION)
        st->rows_outdated = 1; /* read as they are; written again with names */
    else if (!l->failed && found != version) {
        medic_error_set(l->err, MEDIC_E_INVALID,
                        "engine state: version %d, this medic reads version %d (alert instances "
                        "became incidents); see docs/policies.md, \"Upgrading\"",
                        found, version);
        l->failed = 1;
    }
    st->storm_active = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "storm_active"));
    const cJSON *pause = cJSON_GetObjectItemCaseSensitive(e, "pause");
    if (cJSON_IsObject(pause)) { /* newer medics' field */
        st->pause.on = 1;
        copy_field(l, pause, "by", st->pause.by, sizeof(st->pause.by));
        copy_field(l, pause, "reason", st->pause.reason, sizeof(st->pause.reason));
        st->pause.since = time_field(l, pause, "since");
        st->pause.until = time_field(l, pause, "until");
    }
    int64_t next = time_field(l, e, "next_incident");
    if (!l->failed && next > st->next_incident_id)
        st->next_incident_id = next;
    return l->failed;
}

static int load_item(struct loader *l, struct policy_state *st, int kind, const cJSON *e)
{
    switch (kind) {
    case ROW_ENGINE:
        return load_engine(l, st, e, ENGINE_STATE_VERSION);
    case ROW_INCIDENT:
        return load_incident(l, st, e);
    case ROW_NODE:
        return load_node(l, st, e);
    case ROW_UNMATCHED:
        return load_unmatched(l, st, e);
    default:
        return load_resolved(l, st, e);
    }
}

int policy_state_load_row(struct policy_state *st, const char *kind, const char *value, size_t len,
                          struct medic_error *err)
{
    struct loader l = {err, 0};
    int k = -1;
    for (int i = 0; i < ROW_KIND_COUNT; i++)
        if (strcmp(policy__row_kind_names[i], kind) == 0)
            k = i;
    if (k < 0)
        return medic_error_set(err, MEDIC_E_INVALID, "engine state: a row of unknown kind '%.40s'",
                               kind);
    cJSON *e = cJSON_ParseWithLength(value, len);
    if (!cJSON_IsObject(e)) {
        cJSON_Delete(e);
        return medic_error_set(err, MEDIC_E_INVALID, "engine state: a %s row is not JSON", kind);
    }
    load_item(&l, st, k, e);
    cJSON_Delete(e);
    return l.failed ? (err && err->code ? err->code : MEDIC_E_INVALID) : 0;
}

int policy_state_import(const char *json, size_t len, struct policy_state **out,
                        struct medic_error *err)
{
    struct loader l = {err, 0};
    cJSON *root = cJSON_ParseWithLength(json, len);
    struct policy_state *st = policy_state_new();
    if (!cJSON_IsObject(root) || !st) {
        cJSON_Delete(root);
        policy_state_free(st);
        return medic_error_set(err, MEDIC_E_INVALID, "engine state: not JSON");
    }
    load_engine(&l, st, root, ENGINE_STATE_LEGACY_VERSION);
    static const struct {
        const char *array;
        enum row_kind kind;
    } parts[] = {{"incidents", ROW_INCIDENT},
                 {"unmatched", ROW_UNMATCHED},
                 {"nodes", ROW_NODE},
                 {"resolved", ROW_RESOLVED}};
    for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]) && !l.failed; p++) {
        const cJSON *list = field(&l, root, parts[p].array, cJSON_Array);
        for (const cJSON *e = list ? list->child : NULL; e && !l.failed; e = e->next)
            load_item(&l, st, (int)parts[p].kind, e);
    }
    cJSON_Delete(root);
    if (l.failed) {
        policy_state_free(st);
        return err && err->code ? err->code : MEDIC_E_INVALID;
    }
    policy_state_loaded(st);
    *out = st;
    return 0;
}

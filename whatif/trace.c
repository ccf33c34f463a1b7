/* SPDX-License-Identifier: Apache-2.0 */
/* The fault trace: events read from JSON, checked one by one, sorted by
 * time. */
#include "whatif.h"
#include "json.h"
#include "map.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAX 256   /* a node id's bytes */
#define TEXT_MAX 512 /* a Level, Class or Desc */

/* A string member of o, at most max bytes, copied into the trace. */
static const char *member_text(struct whatif_trace *t, const cJSON *o, const char *name, size_t max,
                               size_t index, struct medic_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        medic_error_set(err, MEDIC_E_INVALID, "event %zu: \"%s\" must be a non-empty string", index,
                        name);
        return NULL;
    }
    if (strlen(v->valuestring) > max) {
        medic_error_set(err, MEDIC_E_LIMIT, "event %zu: \"%s\" is over %zu bytes", index, name,
                        max);
        return NULL;
    }
    const char *copy = medic_arena_strdup(&t->arena, v->valuestring);
    if (!copy)
        medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    return copy;
}

static int read_event(struct whatif_trace *t, struct medic_map *ids, const cJSON *o, size_t index,
                      struct medic_error *err)
{
    struct whatif_event *e = &t->events[index];
    e->seq = index;
    if (!cJSON_IsObject(o))
        return medic_error_set(err, MEDIC_E_INVALID, "event %zu: not an object", index);
    const char *id = member_text(t, o, "node_id", ID_MAX, index, err);
    if (!id)
        return err->code;
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(o, "event_time");
    if (!cJSON_IsNumber(time) || !isfinite(time->valuedouble) || time->valuedouble < 0 ||
        time->valuedouble > WHATIF_TRACE_MAX_DAYS)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "event %zu: \"event_time\" must be days from the trace's start, "
                               "0 to %d",
                               index, WHATIF_TRACE_MAX_DAYS);
    e->at = (int64_t)llround(time->valuedouble * 86400.0 * 1e9);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "event_type");
    const char *tn = cJSON_IsString(type) ? type->valuestring : "";
    if (strcmp(tn, "fault_start") != 0 && strcmp(tn, "fault_end") != 0)
        return medic_error_set(err, MEDIC_E_INVALID,
                               "event %zu: \"event_type\" must be fault_start or fault_end", index);
    e->start = tn[6] == 's';
    const cJSON *fault = cJSON_GetObjectItemCaseSensitive(o, "fault_type");
    if (!cJSON_IsObject(fault))
        return medic_error_set(err, MEDIC_E_INVALID,
                               "event %zu: \"fault_type\" must be an object with Level, Class "
                               "and Desc",
                               index);
    if (!(e->level = member_text(t, fault, "Level", TEXT_MAX, index, err)) ||
        !(e->class_name = member_text(t, fault, "Class", TEXT_MAX, index, err)) ||
        !(e->desc = member_text(t, fault, "Desc", TEXT_MAX, index, err)))
        return err->code;
    /* the node's index: 1 + its place in nodes, in the map */
    size_t known = (size_t)(uintptr_t)medic_map_get(ids, id);
    if (!known) {
        t->nodes[t->node_count] = id;
        known = ++t->node_count;
        if (medic_map_put(ids, id, (void *)(uintptr_t)known))
            return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    }
    e->node = known - 1;
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const struct whatif_event *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq); /* the file's order breaks ties */
}

int whatif_trace_parse(const char *text, size_t len, struct whatif_trace *out,
                       struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    medic_arena_init(&out->arena);
    if (len > WHATIF_TRACE_MAX_BYTES)
        return medic_error_set(err, MEDIC_E_LIMIT, "the trace is over %zu MiB",
                               WHATIF_TRACE_MAX_BYTES >> 20);
    struct medic_arena nodes;
    medic_arena_init(&nodes);
    struct medic_map ids;
    medic_map_init(&ids);
    int rc = 0;
    const cJSON *root = medic_json_parse_in(&nodes, text, len, NULL);
    if (!cJSON_IsArray(root)) {
        rc = medic_error_set(err, MEDIC_E_INVALID,
                             "the trace is not a JSON array of events (node_id, event_time, "
                             "event_type, fault_type)");
        goto out;
    }
    size_t n = (size_t)cJSON_GetArraySize(root);
    if (n > WHATIF_TRACE_MAX_EVENTS) {
        rc = medic_error_set(err, MEDIC_E_LIMIT, "the trace has over %d events",
                             WHATIF_TRACE_MAX_EVENTS);
        goto out;
    }
    out->events = calloc(n ? n : 1, sizeof(*out->events));
    out->nodes = calloc(n ? n : 1, sizeof(*out->nodes));
    if (!out->events || !out->nodes) {
        rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
        goto out;
    }
    size_t i = 0;
    for (const cJSON *o = root->child; o && rc == 0; o = o->next)
        rc = read_event(out, &ids, o, i++, err);
    if (rc)
        goto out;
    out->count = n;
    qsort(out->events, n, sizeof(*out->events), by_time);
    out->span = n ? out->events[n - 1].at : 0;
out:
    medic_map_release(&ids);
    medic_arena_release(&nodes);
    if (rc)
        whatif_trace_release(out);
    return rc;
}

int whatif_trace_load(const char *path, struct whatif_trace *out, struct medic_error *err)
{
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof(*out));
    medic_arena_init(&out->arena);
    int rc = medic_read_file(path, WHATIF_TRACE_MAX_BYTES, &text, &len, err);
    if (rc == 0) {
        rc = whatif_trace_parse(text, len, out, err);
        if (rc) {
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg);
            medic_error_set(err, rc, "%s: %s", path, why);
        }
    }
    free(text);
    return rc;
}

void whatif_trace_release(struct whatif_trace *t)
{
    free(t->events);
    free(t->nodes);
    medic_arena_release(&t->arena);
    memset(t, 0, sizeof(*t));
    medic_arena_init(&t->arena);
}

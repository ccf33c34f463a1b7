/* SPDX-License-Identifier: Apache-2.0 */
#include "payload.h"
#include "json.h"
#include "timeutil.h"
#include "utf8.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void receiver_limits_widest(struct receiver_limits *limits)
{
    limits->max_body_bytes = RECEIVER_WIDEST_BODY_BYTES;
    limits->max_alerts = RECEIVER_WIDEST_ALERTS;
    limits->max_labels = RECEIVER_WIDEST_LABELS;
    limits->max_label_name_bytes = 256;
    limits->max_label_value_bytes = RECEIVER_WIDEST_VALUE_BYTES;
    limits->max_annotation_value_bytes = RECEIVER_WIDEST_VALUE_BYTES;
    limits->max_string_bytes = 8192;
    limits->max_depth = 64;
}

void receiver_limits_default(struct receiver_limits *limits)
{
    limits->max_body_bytes = (size_t)1 << 20;
    limits->max_alerts = 1000;
    limits->max_labels = 64;
    limits->max_label_name_bytes = 256;
    limits->max_label_value_bytes = 4096;
    limits->max_annotation_value_bytes = 16384;
    limits->max_string_bytes = 8192;
    limits->max_depth = 64;
}

struct parse_ctx {
    const struct receiver_limits *limits;
    struct medic_notification *out;
    struct medic_error *err;
    size_t alert; /* the alert being parsed, NO_ALERT at the notification's level */
    char path[96];
};

#define NO_ALERT ((size_t)-1)

/* Where key is, for an error message ("alerts[3].labels", "groupKey"; the
 * alert itself for a NULL key): formatted only when there is an error. */
static const char *at(struct parse_ctx *c, const char *key)
{
    if (c->alert == NO_ALERT)
        return key;
    if (key)
        snprintf(c->path, sizeof(c->path), "alerts[%zu].%s", c->alert, key);
    else
        snprintf(c->path, sizeof(c->path), "alerts[%zu]", c->alert);
    return c->path;
}

static const char *json_type_name(const cJSON *item)
{
    if (cJSON_IsString(item))
        return "string";
    if (cJSON_IsNumber(item))
        return "number";
    if (cJSON_IsBool(item))
        return "boolean";
    if (cJSON_IsNull(item))
        return "null";
    if (cJSON_IsArray(item))
        return "array";
    if (cJSON_IsObject(item))
        return "object";
    return "invalid value";
}

static int wrong_type(struct parse_ctx *c, const char *path, const char *want, const cJSON *got)
{
    return medic_error_set(c->err, MEDIC_E_INVALID, "%s: expected %s, got %s", path, want,
                           json_type_name(got));
}

/* Position of byte offset in body as 1-based line and column. */
static void line_col(const char *body, size_t offset, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < offset; i++) {
        if (body[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* Refuses nesting deeper than the limit and raw control characters inside
 * strings (a NUL among them: JSON needs them escaped, and C strings would
 * silently end there) before cJSON builds anything; sets *unterminated
 * when the body ends inside a string, object or array. */
static int check_depth(const char *body, size_t len, int max_depth, int *unterminated,
                       struct medic_error *err)
{
    /* the brackets open, to tell a body cut short (each closed as opened,
     * some left open) from one broken inside (a ']' closing a '{') */
    char open[128];
    int depth = 0, in_string = 0, mismatched = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = body[i];
        if (ch == '\0' || (in_string && (unsigned char)ch < 0x20)) {
            size_t line, col;
            line_col(body, i, &line, &col);
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "invalid JSON: raw control character U+%04X %sat line %zu, "
                                   "column %zu (byte %zu); JSON needs it escaped",
                                   (unsigned)(unsigned char)ch, in_string ? "inside a string " : "",
                                   line, col, i);
        }
        if (in_string) {
            if (ch == '\\' && i + 1 < len && body[i + 1] != '\0')
                i++;
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '{' || ch == '[') {
            if (++depth > max_depth) {
                size_t line, col;
                line_col(body, i, &line, &col);
                return medic_error_set(err, MEDIC_E_LIMIT,
                                       "JSON nested deeper than %d levels at line %zu, column "
                                       "%zu (byte %zu)",
                                       max_depth, line, col, i);
            }
            if (depth >= 1 && depth <= (int)sizeof(open))
                open[depth - 1] = ch;
        } else if (ch == '}' || ch == ']') {
            /* a close with nothing open, or one that closes the other kind */
            if (depth <= 0 ||
                (depth <= (int)sizeof(open) && open[depth - 1] != (ch == '}' ? '{' : '[')))
                mismatched = 1;
            depth--;
        }
    }
    *unterminated = !mismatched && (in_string || depth > 0);
    return 0;
}

static int get_string(struct parse_ctx *c, const cJSON *obj, const char *key, int required,
                      size_t max_len, const char **out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item) {
        *out = NULL;
        if (required)
            return medic_error_set(c->err, MEDIC_E_INVALID, "%s: required field is missing",
                                   at(c, key));
        return 0;
    }
    if (!cJSON_IsString(item))
        return wrong_type(c, at(c, key), "a string", item);
    size_t len = strlen(item->valuestring);
    if (len > max_len)
        return medic_error_set(c->err, MEDIC_E_LIMIT, "%s: %zu bytes, over the limit of %zu",
                               at(c, key), len, max_len);
    *out = medic_arena_strndup(&c->out->arena, item->valuestring, len);
    return *out ? 0 : medic_error_set(c->err, MEDIC_E_NOMEM, "out of memory");
}

static int compare_labels(const void *a, const void *b)
{
    return strcmp(((const struct medic_label *)a)->name, ((const struct medic_label *)b)->name);
}

static int get_labels(struct parse_ctx *c, const cJSON *obj, const char *key, int required,
                      size_t max_value, struct medic_labels *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    out->items = NULL;
    out->count = 0;
    if (!item) {
        if (required)
            return medic_error_set(c->err, MEDIC_E_INVALID, "%s: required field is missing",
                                   at(c, key));
        return 0;
    }
    if (!cJSON_IsObject(item))
        return wrong_type(c, at(c, key), "an object of strings", item);
    size_t n = (size_t)cJSON_GetArraySize(item);
    if (n > c->limits->max_labels)
        return medic_error_set(c->err, MEDIC_E_LIMIT, "%s: %zu entries, over the limit of %zu",
                               at(c, key), n, c->limits->max_labels);
    if (n == 0)
        return 0;
    out->items = medic_arena_alloc(&c->out->arena, n * sizeof(*out->items));
    if (!out->items)
        return medic_error_set(c->err, MEDIC_E_NOMEM, "out of memory");
    size_t i = 0;
    for (const cJSON *e = item->child; e; e = e->next, i++) {
        size_t name_len = strlen(e->string);
        if (name_len == 0)
            return medic_error_set(c->err, MEDIC_E_INVALID, "%s: empty name", at(c, key));
        if (name_len > c->limits->max_label_name_bytes)
            return medic_error_set(c->err, MEDIC_E_LIMIT,
                                   "%s: a name of %zu bytes, over the limit of %zu", at(c, key),
                                   name_len, c->limits->max_label_name_bytes);
        if (!cJSON_IsString(e)) {
            char sub[sizeof(c->path) + 264];
            snprintf(sub, sizeof(sub), "%s.%.256s", at(c, key), e->string);
            return wrong_type(c, sub, "a string", e);
        }
        size_t value_len = strlen(e->valuestring);
        if (value_len > max_value)
            return medic_error_set(c->err, MEDIC_E_LIMIT,
                                   "%s.%.256s: %zu bytes, over the limit of %zu", at(c, key),
                                   e->string, value_len, max_value);
        out->items[i].name = medic_arena_strndup(&c->out->arena, e->string, name_len);
        out->items[i].value = medic_arena_strndup(&c->out->arena, e->valuestring, value_len);
        if (!out->items[i].name || !out->items[i].value)
            return medic_error_set(c->err, MEDIC_E_NOMEM, "out of memory");
    }
    out->count = n;
    qsort(out->items, n, sizeof(*out->items), compare_labels);
    for (i = 1; i < n; i++)
        if (strcmp(out->items[i - 1].name, out->items[i].name) == 0)
            return medic_error_set(c->err, MEDIC_E_INVALID, "%s: duplicate name '%.256s'",
                                   at(c, key), out->items[i].name);
    return 0;
}

static int get_status(struct parse_ctx *c, const cJSON *obj, enum medic_alert_status *out)
{
    const char *s;
    int rc = get_string(c, obj, "status", 1, 16, &s);
    if (rc)
        return rc;
    if (strcmp(s, "firing") == 0)
        *out = MEDIC_STATUS_FIRING;
    else if (strcmp(s, "resolved") == 0)
        *out = MEDIC_STATUS_RESOLVED;
    else
        return medic_error_set(c->err, MEDIC_E_INVALID,
                               "%s: expected \"firing\" or \"resolved\", got \"%s\"",
                               at(c, "status"), s);
    return 0;
}

static int get_time(struct parse_ctx *c, const cJSON *obj, const char *key, int required,
                    int64_t *out)
{
    const char *s = NULL;
    int rc = get_string(c, obj, key, required, 64, &s);
    if (rc)
        return rc;
    if (!s) {
        *out = MEDIC_TIME_UNSET;
        return 0;
    }
    if (medic_time_parse_rfc3339(s, strlen(s), out))
        return medic_error_set(c->err, MEDIC_E_INVALID, "%s: not an RFC 3339 time: \"%s\"",
                               at(c, key), s);
    return 0;
}

static int parse_alert(struct parse_ctx *c, const cJSON *item, size_t index,
                       struct medic_alert *alert)
{
    const struct receiver_limits *lim = c->limits;
    c->alert = index;
    if (!cJSON_IsObject(item))
        return wrong_type(c, at(c, NULL), "an object", item);
    int rc;
    if ((rc = get_status(c, item, &alert->status)) ||
        (rc = get_labels(c, item, "labels", 1, lim->max_label_value_bytes, &alert->labels)) ||
        (rc = get_labels(c, item, "annotations", 0, lim->max_annotation_value_bytes,
                         &alert->annotations)) ||
        (rc = get_time(c, item, "startsAt", 1, &alert->starts_at)) ||
        (rc = get_time(c, item, "endsAt", 0, &alert->ends_at)) ||
        (rc = get_string(c, item, "generatorURL", 0, lim->max_string_bytes,
                         &alert->generator_url)) ||
        (rc = get_string(c, item, "fingerprint", 0, 128, &alert->fingerprint)))
        return rc;
    if (alert->labels.count == 0)
        return medic_error_set(c->err, MEDIC_E_INVALID, "%s: an alert needs labels",
                               at(c, "labels"));
    if (!alert->fingerprint || !*alert->fingerprint) {
        char hex[17];
        medic_labels_fingerprint(&alert->labels, hex);
        alert->fingerprint = medic_arena_strdup(&c->out->arena, hex);
        if (!alert->fingerprint)
            return medic_error_set(c->err, MEDIC_E_NOMEM, "out of memory");
    }
    return 0;
}

static int parse_root(struct parse_ctx *c, const cJSON *root)
{
    const struct receiver_limits *lim = c->limits;
    struct medic_notification *n = c->out;
    int rc;
    if (!cJSON_IsObject(root))
        return wrong_type(c, "payload", "an object", root);
    if ((rc = get_string(c, root, "version", 1, 16, &n->version)))
        return rc;
    if (strcmp(n->version, "4") != 0)
        return medic_error_set(c->err, MEDIC_E_INVALID,
                               "version: webhook payload version \"%s\" is not supported "
                               "(expected \"4\")",
                               n->version);
    if ((rc = get_string(c, root, "groupKey", 1, lim->max_string_bytes, &n->group_key)) ||
        (rc = get_status(c, root, &n->status)) ||
        (rc = get_string(c, root, "receiver", 0, lim->max_string_bytes, &n->receiver)) ||
        (rc = get_string(c, root, "externalURL", 0, lim->max_string_bytes, &n->external_url)) ||
        (rc =
             get_labels(c, root, "groupLabels", 0, lim->max_label_value_bytes, &n->group_labels)) ||
        (rc = get_labels(c, root, "commonLabels", 0, lim->max_label_value_bytes,
                         &n->common_labels)) ||
        (rc = get_labels(c, root, "commonAnnotations", 0, lim->max_annotation_value_bytes,
                         &n->common_annotations)))
        return rc;

    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(root, "truncatedAlerts");
    if (trunc) {
        if (!cJSON_IsNumber(trunc))
            return wrong_type(c, "truncatedAlerts", "an integer", trunc);
        double v = trunc->valuedouble;
        if (v < 0 || v > 9007199254740992.0 || floor(v) != v)
            return medic_error_set(c->err, MEDIC_E_INVALID,
                                   "truncatedAlerts: expected a non-negative integer, got %g", v);
        n->truncated_alerts = (int64_t)v;
    }

    const cJSON *alerts = cJSON_GetObjectItemCaseSensitive(root, "alerts");
    if (!alerts)
        return medic_error_set(c->err, MEDIC_E_INVALID, "alerts: required field is missing");
    if (!cJSON_IsArray(alerts))
        return wrong_type(c, "alerts", "an array", alerts);
    size_t count = (size_t)cJSON_GetArraySize(alerts);
    if (count > lim->max_alerts)
        return medic_error_set(c->err, MEDIC_E_LIMIT, "alerts: %zu alerts, over the limit of %zu",
                               count, lim->max_alerts);
    if (count == 0)
        return medic_error_set(c->err, MEDIC_E_INVALID, "alerts: a notification needs alerts");
    n->alerts = medic_arena_alloc(&n->arena, count * sizeof(*n->alerts));
    if (!n->alerts)
        return medic_error_set(c->err, MEDIC_E_NOMEM, "out of memory");
    size_t i = 0;
    for (const cJSON *item = alerts->child; item; item = item->next, i++)
        if ((rc = parse_alert(c, item, i, &n->alerts[i])))
            return rc;
    n->alert_count = count;
    return 0;
}

int receiver_payload_parse(const char *body, size_t len, const struct receiver_limits *limits,
                           struct medic_notification *out, struct medic_error *err)
{
    if (len == 0)
        return medic_error_set(err, MEDIC_E_INVALID, "empty body: expected a JSON object");
    if (len > limits->max_body_bytes)
        return medic_error_set(err, MEDIC_E_LIMIT, "body of %zu bytes, over the limit of %zu", len,
                               limits->max_body_bytes);
    size_t bad = medic_utf8_check(body, len);
    if (bad != len) {
        size_t line, col;
        line_col(body, bad, &line, &col);
        return medic_error_set(err, MEDIC_E_INVALID,
                               "invalid UTF-8 at line %zu, column %zu (byte %zu)", line, col, bad);
    }
    int unterminated = 0;
    int rc = check_depth(body, len, limits->max_depth, &unterminated, err);
    if (rc)
        return rc;
    const char *end = NULL;
    struct medic_arena nodes; /* the tree, dropped once its values are copied */
    medic_arena_init(&nodes);
    cJSON *root = medic_json_parse_in(&nodes, body, len, &end);
    if (!root) {
        medic_arena_release(&nodes);
        size_t offset = end && end >= body ? (size_t)(end - body) : 0;
        if (offset > len)
            offset = len;
        size_t line, col;
        line_col(body, offset, &line, &col);
        /* the body ends before the value does: cut short on the way */
        if (unterminated || offset >= len)
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "invalid JSON: body ends early at line %zu, column %zu "
                                   "(byte %zu); truncated?",
                                   line, col, offset);
        unsigned char c = (unsigned char)body[offset];
        char what[24] = "";
        if (c >= 0x20 && c < 0x7f)
            snprintf(what, sizeof(what), ": unexpected '%c'", c);
        return medic_error_set(err, MEDIC_E_INVALID,
                               "invalid JSON at line %zu, column %zu (byte %zu)%s", line, col,
                               offset, what);
    }
    /* trailing content after the value (only white space is allowed) */
    for (const char *p = end; p && p < body + len; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            medic_arena_release(&nodes);
            size_t offset = (size_t)(p - body), line, col;
            line_col(body, offset, &line, &col);
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "invalid JSON: unexpected data after the object at line %zu, "
                                   "column %zu (byte %zu)",
                                   line, col, offset);
        }
    }
    struct parse_ctx c = {.limits = limits, .out = out, .err = err, .alert = NO_ALERT};
    rc = parse_root(&c, root);
    medic_arena_release(&nodes);
    return rc;
}

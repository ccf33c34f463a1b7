/* SPDX-License-Identifier: Apache-2.0 */
#include "alert.h"
#include "error.h"
#include "sha256.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void medic_notification_init(struct medic_notification *n)
{
    memset(n, 0, sizeof(*n));
    medic_arena_init(&n->arena);
}

void medic_notification_release(struct medic_notification *n)
{
    medic_arena_release(&n->arena);
    memset(n, 0, sizeof(*n));
}

static int copy_labels(struct medic_arena *a, const struct medic_labels *from,
                       struct medic_labels *to)
{
    to->count = 0;
    to->items = NULL;
    if (from->count == 0)
        return 0;
    if (!(to->items = medic_arena_alloc(a, from->count * sizeof(*to->items))))
        return MEDIC_E_NOMEM;
    for (size_t i = 0; i < from->count; i++) {
        to->items[i].name = medic_arena_strdup(a, from->items[i].name);
        to->items[i].value = medic_arena_strdup(a, from->items[i].value);
        if (!to->items[i].name || !to->items[i].value)
            return MEDIC_E_NOMEM;
    }
    to->count = from->count;
    return 0;
}

/* A copy of s in the arena; NULL stays NULL. 0 or MEDIC_E_NOMEM. */
static int copy_text(struct medic_arena *a, const char *s, const char **to)
{
    *to = s ? medic_arena_strdup(a, s) : NULL;
    return s && !*to ? MEDIC_E_NOMEM : 0;
}

int medic_notification_copy(const struct medic_notification *from, struct medic_notification *out)
{
    medic_notification_init(out);
    struct medic_arena *a = &out->arena;
    out->truncated_alerts = from->truncated_alerts;
    out->status = from->status;
    int rc = copy_text(a, from->version, &out->version) ||
             copy_text(a, from->group_key, &out->group_key) ||
             copy_text(a, from->receiver, &out->receiver) ||
             copy_text(a, from->external_url, &out->external_url) ||
             copy_labels(a, &from->group_labels, &out->group_labels) ||
             copy_labels(a, &from->common_labels, &out->common_labels) ||
             copy_labels(a, &from->common_annotations, &out->common_annotations);
    if (!rc && from->alert_count &&
        !(out->alerts = medic_arena_alloc(a, from->alert_count * sizeof(*out->alerts))))
        rc = MEDIC_E_NOMEM;
    for (size_t i = 0; !rc && i < from->alert_count; i++) {
        const struct medic_alert *x = &from->alerts[i];
        struct medic_alert *y = &out->alerts[i];
        y->status = x->status;
        y->starts_at = x->starts_at;
        y->ends_at = x->ends_at;
        rc = copy_labels(a, &x->labels, &y->labels) ||
             copy_labels(a, &x->annotations, &y->annotations) ||
             copy_text(a, x->generator_url, &y->generator_url) ||
             copy_text(a, x->fingerprint, &y->fingerprint);
        out->alert_count = i + 1;
    }
    if (rc) {
        medic_notification_release(out);
        return MEDIC_E_NOMEM;
    }
    return 0;
}

const char *medic_labels_get(const struct medic_labels *labels, const char *name)
{
    size_t lo = 0, hi = labels->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(labels->items[mid].name, name);
        if (c == 0)
            return labels->items[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void medic_labels_fingerprint(const struct medic_labels *l, char out[17])
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < l->count; i++) {
        const char *parts[2] = {l->items[i].name, l->items[i].value};
        for (int k = 0; k < 2; k++) {
            for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++) {
                h ^= *p;
                h *= UINT64_C(1099511628211);
            }
            h ^= 0xff;
            h *= UINT64_C(1099511628211);
        }
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

const char *medic_alert_status_name(enum medic_alert_status status)
{
    return status == MEDIC_STATUS_RESOLVED ? "resolved" : "firing";
}

int medic_alert_node(const struct medic_labels *labels, const char *const *label_names,
                     size_t label_count, char *out, size_t out_size)
{
    for (size_t i = 0; i < label_count; i++) {
        const char *v = medic_labels_get(labels, label_names[i]);
        if (!v || !*v)
            continue;
        size_t len = strlen(v);
        const char *start = v;
        if (v[0] == '[') {
            const char *close = strchr(v, ']');
            if (close) {
                start = v + 1;
                len = (size_t)(close - start);
            }
        } else {
            const char *colon = strrchr(v, ':');
            /* one colon followed by digits only: host:port; several colons: IPv6 */
            if (colon && colon == strchr(v, ':') && colon[1] &&
                strspn(colon + 1, "0123456789") == strlen(colon + 1))
                len = (size_t)(colon - v);
        }
        if (len > MEDIC_NODE_NAME_MAX || len >= out_size) {
            /* never a prefix of the label: it could name another node */
            size_t cut = sizeof(MEDIC_NODE_NAME_CUT) - 1;
            size_t keep = out_size > cut + 1 ? out_size - cut - 1 : 0;
            keep = medic_utf8_boundary(start, keep < len ? keep : len);
            snprintf(out, out_size, "%.*s%s", (int)keep, start, keep ? MEDIC_NODE_NAME_CUT : "");
            return MEDIC_E_LIMIT;
        }
        snprintf(out, out_size, "%.*s", (int)len, start);
        return 0;
    }
    if (out_size)
        out[0] = '\0';
    return MEDIC_E_NOTFOUND;
}

static int compare_alert_ptr(const void *a, const void *b)
{
    const struct medic_alert *x = *(const struct medic_alert *const *)a;
    const struct medic_alert *y = *(const struct medic_alert *const *)b;
    int c = strcmp(x->fingerprint, y->fingerprint);
    if (c)
        return c;
    if (x->status != y->status)
        return x->status < y->status ? -1 : 1;
    if (x->starts_at != y->starts_at)
        return x->starts_at < y->starts_at ? -1 : 1;
    if (x->ends_at != y->ends_at)
        return x->ends_at < y->ends_at ? -1 : 1;
    return 0;
}

void medic_notification_dedupe_key(const struct medic_notification *n, char out[65])
{
    const struct medic_alert **order = NULL;
    if (n->alert_count) {
        order = malloc(n->alert_count * sizeof(*order));
        if (!order)
            MEDIC_BUG("out of memory computing a dedupe key");
        for (size_t i = 0; i < n->alert_count; i++)
            order[i] = &n->alerts[i];
        qsort(order, n->alert_count, sizeof(*order), compare_alert_ptr);
    }
    struct medic_sha256 *h = medic_sha256_new();
    medic_sha256_field(h, n->group_key);
    for (size_t i = 0; i < n->alert_count; i++) {
        char times[64];
        snprintf(times, sizeof(times), "%lld/%lld", (long long)order[i]->starts_at,
                 (long long)order[i]->ends_at);
        medic_sha256_field(h, order[i]->fingerprint);
        medic_sha256_field(h, medic_alert_status_name(order[i]->status));
        medic_sha256_field(h, times);
    }
    medic_sha256_finish(h, out);
    free(order);
}

int medic_gpu_index(const char *text)
{
    if (!text || !text[0] || strlen(text) > 3 || strspn(text, "0123456789") != strlen(text))
        return -1;
    int index = atoi(text);
    return index <= 255 ? index : -1;
}

void medic_risk_format(double risk, char *out, size_t size)
{
    snprintf(out, size, risk > 0 && risk < 0.01 ? "%.2g" : "%.2f", risk);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The what-if's report, for a person (text) or a program (JSON). */
#include "whatif.h"
#include "table.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_DAY (86400.0 * 1e9)

const char *whatif_fate_name(enum whatif_fate f)
{
    static const char *const names[] = {"acted",       "covered",   "held",   "pending",
                                        "notify_only", "no_policy", "unsent", "nothing"};
    return (unsigned)f < WHATIF_FATE_COUNT ? names[f] : "nothing";
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (nearest rank) of the class's times to first action, ns;
 * -1 when none acted. */
static int64_t quantile(const struct whatif_counts *c, double q)
{
    if (!c->latency_count)
        return -1;
    int64_t *v = malloc(c->latency_count * sizeof(*v));
    if (!v)
        return -1;
    memcpy(v, c->latency, c->latency_count * sizeof(*v));
    qsort(v, c->latency_count, sizeof(*v), by_value);
    size_t rank = (size_t)(q * (double)c->latency_count + 0.999999);
    int64_t x = v[rank ? rank - 1 : 0];
    free(v);
    return x;
}

static void duration(int64_t ns, char *out, size_t size)
{
    if (ns < 0)
        snprintf(out, size, "-");
    else
        medic_duration_format(ns, out, size);
}

/* The most frequent guard of the held faults, "" when none was held. */
static void guards_text(const struct whatif_counts *c, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (int g = 0; g < POLICY_GUARD_COUNT && at < size; g++)
        if (c->held[g])
            at += (size_t)snprintf(out + at, size - at, "%s%s %zu", at ? ", " : "",
                                   policy_guard_name((enum policy_guard)g), c->held[g]);
}

static double per_kilo_node_day(const struct whatif_report *r)
{
    double node_days = (double)r->nodes * ((double)r->span / NS_PER_DAY);
    return node_days > 0 ? (double)r->disruptions * 1000.0 / node_days : 0;
}

static const struct whatif_report *sorting;

/* Classes by their faults, most first; first seen first among equals. */
static int by_faults(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, k = *(const size_t *)b;
    size_t x = sorting->classes[i].faults, y = sorting->classes[k].faults;
    return x != y ? (x < y) - (x > y) : (i > k) - (i < k);
}

static int class_rows(const struct whatif_report *r, struct medic_table *t)
{
    static const char *const names[] = {"class",  "faults",   "acted",     "covered", "held",
                                        "waited", "notified", "no_policy", "unsent",  "nothing"};
    size_t *order = malloc((r->class_count + 1) * sizeof(*order));
    int rc = order ? medic_table_init(t, 10, names, NULL) : MEDIC_E_NOMEM;
    for (size_t i = 0; i < r->class_count; i++)
        order[i] = i;
    sorting = r;
    if (rc == 0)
        qsort(order, r->class_count, sizeof(*order), by_faults);
    for (size_t i = 0; i <= r->class_count && rc == 0; i++) {
        const struct whatif_counts *c = i < r->class_count ? &r->classes[order[i]] : &r->all;
        char n[1 + WHATIF_FATE_COUNT][24];
        snprintf(n[0], sizeof(n[0]), "%zu", c->faults);
        for (int f = 0; f < WHATIF_FATE_COUNT; f++)
            snprintf(n[1 + f], sizeof(n[1 + f]), "%zu", c->fate[f]);
        const char *row[] = {c->name, n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8]};
        rc = medic_table_add_row(t, row);
    }
    free(order);
    return rc;
}

/* Time to first action and guards, for the classes that have them. */
static void class_lines(const struct whatif_report *r, struct medic_buf *out)
{
    for (size_t i = 0; i <= r->class_count; i++) {
        const struct whatif_counts *c = i < r->class_count ? &r->classes[i] : &r->all;
        char p50[32], p90[32], max[32], held[400];
        if (c->latency_count) {
            duration(quantile(c, 0.5), p50, sizeof(p50));
            duration(quantile(c, 0.9), p90, sizeof(p90));
            duration(quantile(c, 1.0), max, sizeof(max));
            medic_buf_printf(out, "%s: fault to first action p50 %s, p90 %s, max %s\n", c->name,
                             p50, p90, max);
        }
        guards_text(c, held, sizeof(held));
        if (held[0])
            medic_buf_printf(out, "%s: held by %s\n", c->name, held);
    }
}

static void text(const struct whatif_report *r, const struct medic_table *classes,
                 struct medic_buf *out)
{
    medic_buf_printf(out,
                     "%zu faults over %.1f days on %zu servers (%zu with a fault), placed in "
                     "an inventory of %zu nodes\n(%zu events; %zu starts of a fault already "
                     "open; %zu faults no mapping rule takes)\n\n",
                     r->faults, (double)r->span / NS_PER_DAY, r->nodes, r->named, r->fleet,
                     r->events, r->repeats, r->unmapped);
    medic_table_render(classes, MEDIC_FORMAT_TABLE, out);
    medic_buf_puts(out, "\n");
    class_lines(r, out);
    medic_buf_printf(out, "\nsteps decided to run:");
    int any = 0;
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++)
        if (r->actions[k])
            medic_buf_printf(out, "%s %s %zu", any++ ? "," : "",
                             medic_action_name((enum medic_action_kind)k), r->actions[k]);
    medic_buf_printf(out, "%s\ndisruptions: %zu, %.2f per 1,000 node-days\n", any ? "" : " none",
                     r->disruptions, per_kilo_node_day(r));
    for (size_t i = 0; i < r->cap_count; i++) {
        const struct whatif_cap *c = &r->caps[i];
        medic_buf_printf(out, "%-40s peak %zu of %zu", c->name, c->peak, c->limit);
        if (c->peak)
            medic_buf_printf(out, " (day %.1f)", (double)c->peak_at / NS_PER_DAY);
        medic_buf_puts(out, "\n");
    }
    medic_buf_printf(out, "storms: %zu\nquarantined nodes: %zu", r->storms, r->quarantined_count);
    for (size_t i = 0; i < r->quarantined_count; i++)
        medic_buf_printf(out, "%s%s", i ? ", " : " (", r->quarantined[i]);
    medic_buf_puts(out, r->quarantined_count ? ")\n" : "\n");
}

static void json_counts(const struct whatif_counts *c, struct medic_buf *out)
{
    medic_buf_puts(out, "{\"class\":");
    medic_buf_json_string(out, c->name);
    medic_buf_printf(out, ",\"faults\":%zu", c->faults);
    for (int f = 0; f < WHATIF_FATE_COUNT; f++)
        medic_buf_printf(out, ",\"%s\":%zu", whatif_fate_name((enum whatif_fate)f), c->fate[f]);
    medic_buf_puts(out, ",\"held_by\":{");
    int any = 0;
    for (int g = 0; g < POLICY_GUARD_COUNT; g++)
        if (c->held[g])
            medic_buf_printf(out, "%s\"%s\":%zu", any++ ? "," : "",
                             policy_guard_name((enum policy_guard)g), c->held[g]);
    int64_t p50 = quantile(c, 0.5), p90 = quantile(c, 0.9), max = quantile(c, 1.0);
    if (p50 < 0)
        medic_buf_puts(out, "},\"to_action_s\":null}");
    else
        medic_buf_printf(out, "},\"to_action_s\":{\"p50\":%.3f,\"p90\":%.3f,\"max\":%.3f}}",
                         (double)p50 / 1e9, (double)p90 / 1e9, (double)max / 1e9);
}

static void json(const struct whatif_report *r, struct medic_buf *out)
{
    medic_buf_printf(out,
                     "{\"events\":%zu,\"faults\":%zu,\"repeats\":%zu,\"unmapped\":%zu,"
                     "\"nodes\":%zu,\"named\":%zu,\"fleet\":%zu,\"days\":%.4f,\"all\":",
                     r->events, r->faults, r->repeats, r->unmapped, r->nodes, r->named, r->fleet,
                     (double)r->span / NS_PER_DAY);
    json_counts(&r->all, out);
    medic_buf_puts(out, ",\"classes\":[");
    for (size_t i = 0; i < r->class_count; i++) {
        medic_buf_puts(out, i ? "," : "");
        json_counts(&r->classes[i], out);
    }
    medic_buf_puts(out, "],\"actions\":{");
    int any = 0;
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++)
        if (r->actions[k])
            medic_buf_printf(out, "%s\"%s\":%zu", any++ ? "," : "",
                             medic_action_name((enum medic_action_kind)k), r->actions[k]);
    medic_buf_printf(out, "},\"disruptions\":%zu,\"per_1000_node_days\":%.4f,\"caps\":[",
                     r->disruptions, per_kilo_node_day(r));
    for (size_t i = 0; i < r->cap_count; i++) {
        medic_buf_puts(out, i ? ",{\"cap\":" : "{\"cap\":");
        medic_buf_json_string(out, r->caps[i].name);
        medic_buf_printf(out, ",\"limit\":%zu,\"peak\":%zu,\"peak_day\":%.4f}", r->caps[i].limit,
                         r->caps[i].peak, (double)r->caps[i].peak_at / NS_PER_DAY);
    }
    medic_buf_printf(out, "],\"storms\":%zu,\"quarantined\":[", r->storms);
    for (size_t i = 0; i < r->quarantined_count; i++) {
        medic_buf_puts(out, i ? "," : "");
        medic_buf_json_string(out, r->quarantined[i]);
    }
    medic_buf_puts(out, "],\"timeline\":[");
    for (size_t i = 0; i < r->point_count; i++)
        medic_buf_printf(out, "%s[%.5f,%zu,%zu]", i ? "," : "",
                         (double)r->timeline[i].at / NS_PER_DAY, r->timeline[i].disrupted,
                         r->timeline[i].quarantined);
    medic_buf_puts(out, "]}\n");
}

int whatif_report_render(const struct whatif_report *r, int format, struct medic_buf *out)
{
    if (format == MEDIC_FORMAT_JSON) {
        json(r, out);
        return 0;
    }
    struct medic_table classes = {0};
    int rc = class_rows(r, &classes);
    if (rc == 0)
        text(r, &classes, out);
    medic_table_release(&classes);
    return rc;
}

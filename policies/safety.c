/* SPDX-License-Identifier: Apache-2.0 */
/* The fleet-wide safety settings (`safety:`): their defaults, parsing and
 * release, and the caps they set. */
#include "policy_parse.h"
#include "hostlist.h"
#include "inventory.h"
#include "timezone.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t policy_max_disrupted_nodes(const struct policy_safety *s, size_t inventory)
{
    return (size_t)floor(s->max_disrupted_fraction * (double)inventory + 1e-9);
}

int policy_maintenance_covers(const struct maintenance_window *m, const char *node)
{
    return m->hosts ? medic_hostlist_match(m->hosts, node)
                    : regexec(&m->nodes, node, 0, NULL, 0) == 0;
}

void policy_safety_default(struct policy_safety *s)
{
    memset(s, 0, sizeof(*s));
    s->max_disruptive_in_flight = 2;
    s->max_disrupted_fraction = 0.05;
    s->storm_max_alerting_nodes = 20;
    s->storm_window = 5 * 60 * MEDIC_NS_PER_SEC;
    s->max_alert_age = 3600 * MEDIC_NS_PER_SEC;
    s->alert_expiry = 12 * 3600 * MEDIC_NS_PER_SEC;
    s->restart_grace = 5 * 60 * MEDIC_NS_PER_SEC;
    s->quarantine_incidents = 3;
    s->quarantine_window = 7 * 86400 * MEDIC_NS_PER_SEC;
    medic_health_criteria_default(&s->health);
    s->held_notice = 15 * 60 * MEDIC_NS_PER_SEC;
}

int policy_maintenance_active(const struct maintenance_window *m, int64_t now, int64_t *until)
{
    if (!m->days) {
        *until = m->end;
        return now >= m->start && now < m->end;
    }
    /* on the window's local clock: today's occurrence, or yesterday's when
     * it runs past midnight */
    int64_t t = now / MEDIC_NS_PER_SEC;
    int64_t local = t + medic_tz_offset(m->tz, t);
    int64_t day = local >= 0 ? local / 86400 : (local - 86399) / 86400;
    int minute = (int)((local - day * 86400) / 60);
    int crosses = m->to_min <= m->from_min;
    for (int back = 0; back <= crosses; back++) {
        int64_t d = day - back;
        int wday = (int)(((d % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
        if (!(m->days & (1u << wday)))
            continue;
        int from = back ? m->from_min - 1440 : m->from_min;
        int to = crosses ? from + (m->to_min + 1440 - m->from_min) : m->to_min;
        if (minute >= from && minute < to) {
            *until = now + (int64_t)(to - minute) * 60 * MEDIC_NS_PER_SEC -
                     (local % 60) * MEDIC_NS_PER_SEC - now % MEDIC_NS_PER_SEC;
            return 1;
        }
    }
    return 0;
}

/* every: 'sunday 02:00-06:00', 'saturday,sunday 22:00-02:00', 'day 03:00-04:00' */
static int parse_every(const char *text, struct maintenance_window *m)
{
    static const char *const names[] = {"sunday",   "monday", "tuesday", "wednesday",
                                        "thursday", "friday", "saturday"};
    const char *space = strchr(text, ' ');
    if (!space)
        return -1;
    char days[160];
    snprintf(days, sizeof(days), "%.*s", (int)(space - text), text);
    for (char *d = strtok(days, ","); d; d = strtok(NULL, ",")) {
        if (strcmp(d, "day") == 0) {
            m->days |= 0x7f;
            continue;
        }
        if (strcmp(d, "weekday") == 0) {
            m->days |= 0x3e;
            continue;
        }
        int k = 0;
        while (k < 7 && strcmp(d, names[k]) != 0 && strncmp(d, names[k], 3) != 0)
            k++;
        if (k == 7 || (strlen(d) != 3 && strcmp(d, names[k]) != 0))
            return -1;
        m->days |= 1u << k;
    }
    int h1, m1, h2, m2, n = 0;
    if (sscanf(space + 1, "%2d:%2d-%2d:%2d%n", &h1, &m1, &h2, &m2, &n) != 4 || space[1 + n] ||
        h1 > 23 || m1 > 59 || h2 > 24 || m2 > 59 || (h2 == 24 && m2) || h1 < 0 || m1 < 0 ||
        h2 < 0 || m2 < 0)
        return -1;
    m->from_min = h1 * 60 + m1;
    m->to_min = h2 * 60 + m2;
    return m->days && m->from_min != m->to_min ? 0 : -1;
}

const char *policy_group_of(const struct group_cap *cap, const struct inventory_node *node)
{
    if (cap->label)
        return inventory_node_label(node, cap->label);
    return medic_hostlist_match(cap->hosts, node->name) ? cap->nodes_text : NULL;
}

size_t policy_group_limit(const struct group_cap *cap, size_t size)
{
    size_t limit = cap->max_disrupted;
    if (cap->max_fraction >= 0) {
        size_t f = (size_t)floor(cap->max_fraction * (double)size + 1e-9);
        if (f < limit)
            limit = f;
    }
    return limit;
}

size_t policy_group_size(const struct group_cap *cap, const char *group,
                         const struct inventory *inventory)
{
    size_t n = 0;
    for (size_t i = 0; inventory && i < inventory->count; i++) {
        const char *g = policy_group_of(cap, &inventory->nodes[i]);
        n += g && strcmp(g, group) == 0;
    }
    return n;
}

void policy__safety_release(struct policy_safety *s)
{
    for (size_t i = 0; i < s->group_cap_count; i++) {
        free(s->group_caps[i].label);
        free(s->group_caps[i].nodes_text);
        medic_hostlist_free(s->group_caps[i].hosts);
    }
    free(s->group_caps);
    for (size_t i = 0; i < s->maintenance_count; i++) {
        if (s->maintenance[i].hosts)
            medic_hostlist_free(s->maintenance[i].hosts);
        else
            regfree(&s->maintenance[i].nodes);
        free(s->maintenance[i].nodes_text);
        free(s->maintenance[i].reason);
        free(s->maintenance[i].every);
        free(s->maintenance[i].zone);
        medic_tz_free(s->maintenance[i].tz);
    }
    free(s->maintenance);
    free(s->storm_notifier);
}

static int parse_maintenance(struct parser *p, const struct yaml_tree_node *n,
                             struct policy_safety *s)
{
    static const char *const keys[] = {"nodes",    "start",  "end", "every",
                                       "timezone", "reason", NULL};
    int rc = yaml_fields_sequence(&p->f, n, "maintenance");
    if (rc)
        return rc;
    s->maintenance = calloc(n->count ? n->count : 1, sizeof(*s->maintenance));
    if (!s->maintenance)
        return medic_error_set(p->f.err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n->count; i++) {
        const struct yaml_tree_node *w = n->items[i];
        struct maintenance_window *m = &s->maintenance[i];
        if ((rc = yaml_fields_mapping(&p->f, w, "maintenance")) ||
            (rc = yaml_fields_known_keys(&p->f, w, "a maintenance window", keys)))
            return rc;
        const struct yaml_tree_node *nodes = yaml_tree_get(w, "nodes");
        const struct yaml_tree_node *start = yaml_tree_get(w, "start");
        const struct yaml_tree_node *end = yaml_tree_get(w, "end");
        const struct yaml_tree_node *every = yaml_tree_get(w, "every");
        const struct yaml_tree_node *zone = yaml_tree_get(w, "timezone");
        if (!nodes || (every ? start || end : !start || !end))
            return yaml_fields_fail(&p->f, w,
                                    "maintenance: needs nodes, and start and end (a dated window) "
                                    "or every (a recurring one: every: 'sunday 02:00-06:00')");
        if (zone && !every)
            return yaml_fields_fail(&p->f, zone,
                                    "timezone: for a recurring window (every:); start and end "
                                    "carry their own offset");
        if ((rc = yaml_fields_string(&p->f, nodes, "nodes", &m->nodes_text)))
            return rc;
        char why[192];
        int bad = m->nodes_text[0] == '~'
                      ? policy_regex_compile(m->nodes_text + 1, &m->nodes, why, sizeof(why))
                      : medic_hostlist_parse(m->nodes_text, &m->hosts, why, sizeof(why));
        if (bad) { /* not counted yet: nothing else releases its text */
            rc = m->nodes_text[0] == '~'
                     ? yaml_fields_fail(&p->f, nodes, "nodes: the regex %s", why)
                     : yaml_fields_fail(&p->f, nodes,
                                        "nodes: %s (a Slurm hostlist: gpu-[0001-0100,0200]; "
                                        "~REGEX for a regular expression)",
                                        why);
            free(m->nodes_text);
            m->nodes_text = NULL;
            return rc;
        }
        s->maintenance_count++;
        if (every) {
            char tzwhy[160];
            if ((rc = yaml_fields_string(&p->f, every, "every", &m->every)))
                return rc;
            if (parse_every(m->every, m))
                return yaml_fields_fail(&p->f, every,
                                        "every: DAYS HH:MM-HH:MM, days sunday..saturday (or sun.."
                                        "sat), comma-separated, or day or weekday: 'sunday "
                                        "02:00-06:00', 'saturday,sunday 22:00-02:00'");
            if (zone && (rc = yaml_fields_string(&p->f, zone, "timezone", &m->zone)))
                return rc;
            if (medic_tz_load(m->zone ? m->zone : "UTC", &m->tz, tzwhy, sizeof(tzwhy)))
                return yaml_fields_fail(&p->f, zone, "timezone: %s", tzwhy);
            const struct yaml_tree_node *reason = yaml_tree_get(w, "reason");
            if (reason && (rc = yaml_fields_string(&p->f, reason, "reason", &m->reason)))
                return rc;
            continue;
        }
        const struct yaml_tree_node *times[2] = {start, end};
        int64_t *out[2] = {&m->start, &m->end};
        for (int k = 0; k < 2; k++) {
            if ((rc = yaml_fields_scalar(&p->f, times[k], k ? "end" : "start")))
                return rc;
            if (medic_time_parse_rfc3339(times[k]->value, strlen(times[k]->value), out[k]) ||
                *out[k] == MEDIC_TIME_UNSET)
                return yaml_fields_fail(&p->f, times[k], "%s: not an RFC 3339 time",
                                        k ? "end" : "start");
        }
        if (m->end <= m->start)
            return yaml_fields_fail(&p->f, end, "end: must come after start");
        const struct yaml_tree_node *reason = yaml_tree_get(w, "reason");
        if (reason && (rc = yaml_fields_string(&p->f, reason, "reason", &m->reason)))
            return rc;
    }
    return 0;
}

/* quarantine: { incidents: N, window: D }, or off */
static int parse_quarantine(struct parser *p, const struct yaml_tree_node *v,
                            struct policy_safety *s)
{
    static const char *const keys[] = {"incidents", "window", NULL};
    if (v->kind == YAML_TREE_SCALAR && strcmp(v->value, "off") == 0) {
        s->quarantine_incidents = 0;
        return 0;
    }
    int rc = yaml_fields_mapping(&p->f, v, "quarantine");
    if (rc == 0)
        rc = yaml_fields_known_keys(&p->f, v, "quarantine", keys);
    const struct yaml_tree_node *x;
    if (rc == 0 && (x = yaml_tree_get(v, "incidents")))
        rc = yaml_fields_size(&p->f, x, "incidents", 2, 1000, &s->quarantine_incidents);
    if (rc == 0 && (x = yaml_tree_get(v, "window")))
        rc = yaml_fields_duration(&p->f, x, "window", &s->quarantine_window);
    if (rc == 0 && (s->quarantine_window < MEDIC_NS_PER_SEC ||
                    s->quarantine_window > 365 * 86400 * MEDIC_NS_PER_SEC))
        rc = yaml_fields_fail(&p->f, yaml_tree_get(v, "window"),
                              "window: 1s to 365d (a node's incidents within it are counted)");
    return rc;
}

/* health: what a verify accepts (struct medic_health_criteria) */
static int parse_health(struct parser *p, const struct yaml_tree_node *v,
                        struct medic_health_criteria *h)
{
    static const char *const keys[] = {"missing_gpus",
                                       "recovery_actions",
                                       "allow_pending_remap",
                                       "allow_pending_retirement",
                                       "slurm",
                                       "bmc",
                                       NULL};
    int rc = yaml_fields_mapping(&p->f, v, "health");
    if (rc == 0)
        rc = yaml_fields_known_keys(&p->f, v, "health", keys);
    const struct yaml_tree_node *x;
    size_t missing = 0;
    if (rc == 0 && (x = yaml_tree_get(v, "missing_gpus")) &&
        (rc = yaml_fields_size(&p->f, x, "missing_gpus", 0, 64, &missing)) == 0)
        h->missing_gpus = (int)missing;
    if (rc == 0 && (x = yaml_tree_get(v, "recovery_actions"))) {
        h->recovery_ok = 0;
        rc = policy__parse_recovery(p, x, "recovery_actions", &h->recovery_ok);
    }
    if (rc == 0 && (x = yaml_tree_get(v, "allow_pending_remap")))
        rc = yaml_fields_bool(&p->f, x, "allow_pending_remap", &h->remap_pending_ok);
    if (rc == 0 && (x = yaml_tree_get(v, "allow_pending_retirement")))
        rc = yaml_fields_bool(&p->f, x, "allow_pending_retirement", &h->retirement_pending_ok);
    if (rc == 0 && (x = yaml_tree_get(v, "slurm")))
        rc = yaml_fields_bool(&p->f, x, "slurm", &h->slurm);
    if (rc == 0 && (x = yaml_tree_get(v, "bmc")))
        rc = yaml_fields_bool(&p->f, x, "bmc", &h->bmc);
    return rc;
}

/* group_caps: [ { label: rack | nodes: HOSTLIST, max_disrupted: N,
 * max_disrupted_fraction: F } ] */
static int parse_group_caps(struct parser *p, const struct yaml_tree_node *n,
                            struct policy_safety *s)
{
    static const char *const keys[] = {"label", "nodes", "max_disrupted", "max_disrupted_fraction",
                                       NULL};
    int rc = yaml_fields_sequence(&p->f, n, "group_caps");
    if (rc)
        return rc;
    if (n->count > 64)
        return yaml_fields_fail(&p->f, n, "group_caps: at most 64");
    if (!(s->group_caps = calloc(n->count ? n->count : 1, sizeof(*s->group_caps))))
        return medic_error_set(p->f.err, MEDIC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n->count; i++) {
        const struct yaml_tree_node *c = n->items[i], *label, *nodes, *max, *fraction;
        struct group_cap *g = &s->group_caps[s->group_cap_count++];
        g->max_disrupted = SIZE_MAX;
        g->max_fraction = -1;
        g->line = c->line;
        g->col = c->col;
        if ((rc = yaml_fields_mapping(&p->f, c, "a group cap")) ||
            (rc = yaml_fields_known_keys(&p->f, c, "a group cap", keys)))
            return rc;
        label = yaml_tree_get(c, "label");
        nodes = yaml_tree_get(c, "nodes");
        max = yaml_tree_get(c, "max_disrupted");
        fraction = yaml_tree_get(c, "max_disrupted_fraction");
        if (!label == !nodes)
            return yaml_fields_fail(&p->f, c,
                                    "a group cap: name its groups by `label: rack` (one group per "
                                    "value of an inventory label) or `nodes: HOSTLIST`, one of "
                                    "the two");
        if (!max && !fraction)
            return yaml_fields_fail(&p->f, c,
                                    "a group cap: set max_disrupted, max_disrupted_fraction or "
                                    "both");
        if (label && (rc = yaml_fields_string(&p->f, label, "label", &g->label)))
            return rc;
        if (nodes) {
            char why[200];
            if ((rc = yaml_fields_string(&p->f, nodes, "nodes", &g->nodes_text)))
                return rc;
            if (medic_hostlist_parse(g->nodes_text, &g->hosts, why, sizeof(why)))
                return yaml_fields_fail(&p->f, nodes,
                                        "nodes: %s (a Slurm hostlist: gpu-[0001-0100,0200])", why);
        }
        if (max &&
            (rc = yaml_fields_size(&p->f, max, "max_disrupted", 0, 100000, &g->max_disrupted)))
            return rc;
        if (fraction && (rc = yaml_fields_number(&p->f, fraction, "max_disrupted_fraction", 0, 1,
                                                 &g->max_fraction)))
            return rc;
    }
    return 0;
}

int policy__parse_safety(struct parser *p, const struct yaml_tree_node *n, struct policy_safety *s)
{
    static const char *const keys[] = {"max_disruptive_in_flight",
                                       "max_disrupted_fraction",
                                       "storm",
                                       "max_alert_age",
                                       "alert_expiry",
                                       "restart_grace",
                                       "maintenance",
                                       "quarantine",
                                       "health",
                                       "group_caps",
                                       "held_notice",
                                       "maintenance_from_slurm",
                                       NULL};
    static const char *const storm_keys[] = {"max_alerting_nodes", "window", "notifier", NULL};
    int rc = yaml_fields_mapping(&p->f, n, "safety");
    if (rc == 0)
        rc = yaml_fields_known_keys(&p->f, n, "safety", keys);
    const struct yaml_tree_node *v;
    if (rc == 0 && (v = yaml_tree_get(n, "max_disruptive_in_flight")))
        rc = yaml_fields_size(&p->f, v, "max_disruptive_in_flight", 0, 100000,
                              &s->max_disruptive_in_flight);
    if (rc == 0 && (v = yaml_tree_get(n, "max_disrupted_fraction")))
        rc = yaml_fields_number(&p->f, v, "max_disrupted_fraction", 0, 1,
                                &s->max_disrupted_fraction);
    if (rc == 0 && (v = yaml_tree_get(n, "max_alert_age")))
        rc = yaml_fields_duration(&p->f, v, "max_alert_age", &s->max_alert_age);
    if (rc == 0 && (v = yaml_tree_get(n, "alert_expiry"))) {
        rc = yaml_fields_duration(&p->f, v, "alert_expiry", &s->alert_expiry);
        if (rc == 0 && s->alert_expiry < MEDIC_NS_PER_SEC)
            rc = yaml_fields_fail(&p->f, v,
                                  "alert_expiry: at least 1s (set it above Alertmanager's "
                                  "repeat_interval)");
    }
    if (rc == 0 && (v = yaml_tree_get(n, "restart_grace")))
        rc = yaml_fields_duration(&p->f, v, "restart_grace", &s->restart_grace);
    if (rc == 0 && (v = yaml_tree_get(n, "storm"))) {
        const struct yaml_tree_node *x;
        rc = yaml_fields_mapping(&p->f, v, "storm");
        if (rc == 0)
            rc = yaml_fields_known_keys(&p->f, v, "storm", storm_keys);
        if (rc == 0 && (x = yaml_tree_get(v, "max_alerting_nodes")))
            rc = yaml_fields_size(&p->f, x, "max_alerting_nodes", 1, 1000000,
                                  &s->storm_max_alerting_nodes);
        if (rc == 0 && (x = yaml_tree_get(v, "window")))
            rc = yaml_fields_duration(&p->f, x, "window", &s->storm_window);
        if (rc == 0 && (x = yaml_tree_get(v, "notifier"))) {
            rc = yaml_fields_string(&p->f, x, "notifier", &s->storm_notifier);
            if (rc == 0)
                rc = policy__known_notifier(p, x, s->storm_notifier);
        } else if (rc == 0) {
            /* a breaker that holds actions back must tell someone */
            rc = yaml_fields_fail(&p->f, v,
                                  "storm: needs a notifier, told when a storm starts and ends "
                                  "(disruptive actions are held meanwhile)");
        }
    }
    if (rc == 0 && (v = yaml_tree_get(n, "maintenance")))
        rc = parse_maintenance(p, v, s);
    if (rc == 0 && (v = yaml_tree_get(n, "quarantine")))
        rc = parse_quarantine(p, v, s);
    if (rc == 0 && (v = yaml_tree_get(n, "health")))
        rc = parse_health(p, v, &s->health);
    if (rc == 0 && (v = yaml_tree_get(n, "group_caps")))
        rc = parse_group_caps(p, v, s);
    if (rc == 0 && (v = yaml_tree_get(n, "maintenance_from_slurm")))
        rc = yaml_fields_bool(&p->f, v, "maintenance_from_slurm", &s->maintenance_from_slurm);
    if (rc == 0 && (v = yaml_tree_get(n, "held_notice"))) {
        if (v->kind == YAML_TREE_SCALAR && strcmp(v->value, "off") == 0)
            s->held_notice = 0;
        else if ((rc = yaml_fields_duration(&p->f, v, "held_notice", &s->held_notice)) == 0 &&
                 s->held_notice < MEDIC_NS_PER_SEC)
            rc = yaml_fields_fail(&p->f, v, "held_notice: at least 1s, or off");
    }
    return rc;
}

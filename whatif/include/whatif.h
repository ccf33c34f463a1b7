/* SPDX-License-Identifier: Apache-2.0 */
/* What a configuration would have done over a fault trace, before it goes
 * live: the trace's faults become Alertmanager alerts by a mapping file and
 * are played through the policy engine on its own clock (no wall-clock
 * wait; nothing runs: every awaited action succeeds at once), and what it
 * decided is counted per fault class: faults acted on, held by which
 * guard, time from fault to first action, disrupted nodes against each
 * cap, quarantines, disruptions per 1,000 node-days. */
#ifndef MEDIC_WHATIF_H
#define MEDIC_WHATIF_H

#include "arena.h"
#include "buf.h"
#include "config.h"
#include "error.h"
#include "policy_engine.h"

#include <stddef.h>
#include <stdint.h>

/* A fault trace in the InfiniteHBD format: a JSON array of events, each
 * {"node_id", "event_time" (days from the trace's start), "event_type"
 * ("fault_start" or "fault_end"), "fault_type": {"Level", "Class",
 * "Desc"}}. */
#define WHATIF_TRACE_MAX_BYTES ((size_t)64 << 20)
#define WHATIF_TRACE_MAX_EVENTS 1000000
#define WHATIF_TRACE_MAX_DAYS 3660 /* ten years */

struct whatif_event {
    int64_t at;  /* ns from the trace's start */
    int start;   /* 1 fault_start, 0 fault_end */
    size_t node; /* index in whatif_trace.nodes */
    size_t seq;  /* its place in the file */
    const char *level, *class_name, *desc;
};

struct whatif_trace {
    struct medic_arena arena;
    struct whatif_event *events; /* in time order (ties in file order) */
    size_t count;
    const char **nodes; /* node ids, in order of first appearance */
    size_t node_count;
    int64_t span; /* the last event's time, ns */
};

/* Parses a trace of len bytes (at most WHATIF_TRACE_MAX_BYTES). Errors
 * (MEDIC_E_INVALID, MEDIC_E_LIMIT) name the event: "event 12: ...". */
int whatif_trace_parse(const char *text, size_t len, struct whatif_trace *out,
                       struct medic_error *err);
int whatif_trace_load(const char *path, struct whatif_trace *out, struct medic_error *err);
void whatif_trace_release(struct whatif_trace *t);

/* How faults become alerts: the first rule whose level, class and desc
 * (each optional, exact) match a fault gives its alertname and labels. */
struct whatif_rule {
    char *level, *class_name, *desc; /* NULL: any */
    char *alertname;
    char **label_names, **label_values;
    size_t label_count;
    int line; /* in the mapping file */
};

struct whatif_mapping {
    struct whatif_rule *rules;
    size_t count;
    int64_t group_wait;      /* a fault's first notification comes this long after it; 30s */
    int64_t repeat_interval; /* a firing alert is sent again this often; 4h */
    char *node_label;        /* the label naming the node; NULL: the config's first */
    size_t trace_nodes;      /* the servers the trace covers; 0: the ones it names */
};

#define WHATIF_MAPPING_MAX_RULES 1000
#define WHATIF_MAPPING_MAX_LABELS 16

int whatif_mapping_parse(const char *file, const char *text, size_t len, struct whatif_mapping *out,
                         struct medic_error *err);
int whatif_mapping_load(const char *path, struct whatif_mapping *out, struct medic_error *err);
void whatif_mapping_release(struct whatif_mapping *m);
/* The rule for a fault, or NULL when none takes it. */
const struct whatif_rule *whatif_mapping_find(const struct whatif_mapping *m, const char *level,
                                              const char *class_name, const char *desc);

/* What became of the faults of one class (or of all). */
enum whatif_fate {
    WHATIF_ACTED,       /* a disruptive step ran on its node while it was open */
    WHATIF_COVERED,     /* its node was already held out of service by medic */
    WHATIF_HELD,        /* a guard kept every disruptive step back (held[]) */
    WHATIF_PENDING,     /* a step waited for a person, and none came */
    WHATIF_NOTIFY_ONLY, /* its policy only told someone */
    WHATIF_NO_POLICY,   /* no policy took its alert */
    WHATIF_UNSENT,      /* over within group_wait: Alertmanager never sent it */
    WHATIF_NOTHING,     /* a policy took it, and nothing was decided while it was open */
    WHATIF_FATE_COUNT
};

struct whatif_counts {
    char name[160]; /* "Level / Class"; "all" for the total */
    size_t faults;
    size_t fate[WHATIF_FATE_COUNT];
    size_t held[POLICY_GUARD_COUNT]; /* WHATIF_HELD faults by the guard that held them */
    int64_t *latency;                /* fault start to first action, ns, per acted fault */
    size_t latency_count;
};

/* A change of the disrupted nodes' count: the chart's points. */
struct whatif_point {
    int64_t at; /* ns from the trace's start */
    size_t disrupted, quarantined;
};

struct whatif_cap {
    char name[160];
    size_t limit, peak;
    int64_t peak_at; /* ns from the trace's start */
};

struct whatif_report {
    size_t events, faults, unmapped, repeats;
    size_t nodes; /* the servers the trace covers: node-days count them */
    size_t named; /* of those, the ones with an event */
    size_t fleet; /* the inventory's nodes: the caps count them */
    int64_t span;
    struct whatif_counts all;
    struct whatif_counts *classes;
    size_t class_count;
    size_t actions[MEDIC_ACTION_KIND_COUNT]; /* steps decided to run, by action */
    size_t disruptions;                      /* of those, the disruptive ones */
    size_t storms;
    struct whatif_cap *caps; /* [0] repairs in flight, [1] the fleet's fraction, then groups */
    size_t cap_count;
    char **quarantined; /* nodes ever quarantined */
    size_t quarantined_count;
    struct whatif_point *timeline;
    size_t point_count;
};

struct whatif_options {
    int64_t start;   /* the trace's day 0 on medic's clock, ns */
    int64_t tick;    /* the scheduler runs at least this often while anything is open */
    int approve_all; /* every step waiting for a person is approved at once */
};

/* Plays trace through config by mapping. The trace's nodes, in order of
 * first appearance, are spread evenly over the inventory's nodes in its
 * order (the k-th of the trace's n servers is inventory node k * size / n;
 * MEDIC_E_INVALID when the inventory has fewer nodes than the trace).
 * progress (may be NULL) is called now and then
 * with the share done (0..1). */
int whatif_play(const struct medic_config *config, const struct whatif_trace *trace,
                const struct whatif_mapping *mapping, const struct whatif_options *opt,
                void (*progress)(void *arg, double done), void *arg, struct whatif_report *out,
                struct medic_error *err);
void whatif_report_release(struct whatif_report *r);

/* The report as text (MEDIC_FORMAT_TABLE) or JSON, and the chart of
 * disrupted nodes over the trace with the caps drawn, as SVG. */
const char *whatif_fate_name(enum whatif_fate f);
int whatif_report_render(const struct whatif_report *r, int format, struct medic_buf *out);
int whatif_chart_svg(const struct whatif_report *r, struct medic_buf *out);

#endif

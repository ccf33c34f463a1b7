/* SPDX-License-Identifier: Apache-2.0 */
/* Between the play (play.c) and its tally (tally.c). */
#ifndef MEDIC_WHATIF_INTERNAL_H
#define MEDIC_WHATIF_INTERNAL_H

#include "whatif.h"
#include "map.h"

/* A fault of the trace, from its start to its end (or the trace's). */
struct whatif_fault {
    int64_t start;    /* ns from the trace's start */
    int64_t acted_at; /* the first disruptive step on its node while open, likewise */
    size_t node, cls; /* trace node; class in the report */
    const char *node_name;
    char fingerprint[17];
    int acted, covered, guarded, pending, notified, no_policy, unsent;
    enum policy_guard guard; /* the first guard that kept a step back */
};

/* The faults of one trace node still waiting for what becomes of them. */
struct node_faults {
    size_t *items;
    size_t count, cap;
};

/* The servers the trace covers: the mapping's trace_nodes, at least the
 * ones the trace names. */
size_t whatif__covered(const struct whatif_trace *trace, const struct whatif_mapping *map);
/* The caps from the safety section and the inventory, before the play. */
int whatif__report_init(struct whatif_report *r, const struct policy_safety *s,
                        const struct inventory *inv);
/* The class "level / class_name" in r (added when new): its index. */
int whatif__class_of(struct whatif_report *r, const char *level, const char *class_name,
                     size_t *index);
/* The fault is over: its fate counted in its class and in all. */
void whatif__count(struct whatif_report *r, const struct whatif_fault *f);
/* The node was quarantined (counted once). */
void whatif__quarantined(struct whatif_report *r, const char *node);
/* The disrupted nodes after a step at `at` (ns from the trace's start):
 * the timeline and the caps' peaks (the groups' only when ran: a step ran,
 * so that the nodes held may have changed). */
int whatif__sample(struct whatif_report *r, const struct policy_state *st,
                   const struct policy_context *ctx, int64_t at, int ran);
/* qsort order of struct medic_label by name. */
int whatif__label_order(const void *a, const void *b);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The whole fleet's input windows (or those of a set of nodes) from
 * Prometheus in one query_range per model feature: each feature's query
 * with `{{node}}` matching every node (`=~".+"`) or the nodes asked for
 * (`=~"a|b"`) and `{{gpu}}` every GPU, POSTed, the answers split into one window per (node, gpu)
 * by the node label the query puts `{{node}}` in and by `gpu`. The
 * requests run concurrently (at most `parallel` at a time) on one libcurl
 * multi handle and share one deadline, so the number of requests and the
 * time a cycle takes do not grow with the number of nodes Prometheus
 * knows. A GPU silent for longer than PROMETHEUS_MAX_GAP steps while
 * another GPU of its node reported throughout is lost (prometheus.h);
 * any other window with a long gap is kept out, with the reason, rather
 * than scored on made-up values.
 *
 * Given the previous cycle's fleet, a fetch asks only for the steps since
 * its window ended and that window's last step again (a sample scraped
 * just before it may have been stored just after), and takes the older
 * steps from it: Prometheus evaluates a feature over the whole fleet at 1
 * or 2 steps instead of the window's 30. A fetch for a few nodes can start
 * from the previous cycle's windows of those nodes (prometheus_fleet_subset). */
#ifndef MEDIC_MODEL_PROMETHEUS_FLEET_H
#define MEDIC_MODEL_PROMETHEUS_FLEET_H

#include "error.h"
#include "feature_spec.h"
#include "map.h"
#include "prometheus.h"

#include <stddef.h>
#include <stdint.h>

#define PROMETHEUS_FLEET_MAX_BODY ((size_t)32 << 20) /* bytes of one answer */

struct prometheus_series {
    char node[128];
    char gpu[32];
    int usable;                     /* 0: a gap too long, or no data at the window's start */
    unsigned short bad_feature;     /* when not usable: the feature, */
    unsigned char bad_at_start;     /* and whether its data starts too late; */
    struct prometheus_silence lost; /* or, with steps, the GPU is lost */
};

struct prometheus_fleet {
    size_t count, cap;
    struct prometheus_series *series;
    float *rows;             /* [cap][window][features]: series i at i * window * features */
    float *raw;              /* the same, as Prometheus answered (gaps not filled) */
    int64_t end;             /* the window's last step */
    size_t asked_steps;      /* steps asked of Prometheus (the window's, or fewer) */
    size_t fresh;            /* series the previous fleet did not have (0 without one) */
    size_t unusable;         /* series kept out (not the lost ones) */
    size_t lost;             /* series of lost GPUs */
    char first_problem[256]; /* why the first of them was kept out */
    size_t filled;           /* points forward-filled */
    size_t requests;         /* query_range requests made */
    struct medic_map index;  /* "node\037gpu" -> series index + 1 */
    /* while fetching: the previous fleet and how many steps later this
     * window ends; new series start from its raw rows */
    const struct prometheus_fleet *carry_from;
    size_t carry_shift;
};

struct prometheus_fleet_query {
    const char *url;
    const char *node_regex;      /* the nodes asked for (features_nodes_regex); NULL: every node */
    long timeout_ms;             /* for the whole fetch */
    size_t max_series;           /* (node, gpu) windows at most; more is MEDIC_E_LIMIT */
    size_t parallel;             /* requests in flight at most */
    int (*cancelled)(void *arg); /* polled while waiting; NULL: never */
    void *arg;
    /* the last cycle's fleet for the same features and Prometheus, or NULL:
     * used when its window ended at most window - 2 steps before this one */
    const struct prometheus_fleet *previous;
};

/* The windows ending at now (aligned down to the step). Errors:
 * MEDIC_E_IO (Prometheus unreachable, slow or failing: err says which),
 * MEDIC_E_INVALID (a feature's query has no {{node}} label, or an answer
 * is malformed), MEDIC_E_LIMIT (too many series or too large an answer),
 * MEDIC_E_NOTFOUND (the first feature has no series). */
int prometheus_fetch_fleet(const struct prometheus_fleet_query *q, const struct feature_spec *spec,
                           int64_t now, struct prometheus_fleet *out, struct medic_error *err);

/* Places one query_range answer for feature d, split by node_label and
 * gpu, on the grid starting at start, creating the series it names first
 * (at most max_series). out must start zeroed, its index initialised. */
int prometheus_parse_fleet(const char *body, size_t len, const struct feature_spec *spec, size_t d,
                           const char *node_label, int64_t start, size_t max_series,
                           struct prometheus_fleet *out, struct medic_error *err);

/* Fills short gaps of every series, marks the lost GPUs and keeps out the
 * other series with a long gap. */
void prometheus_fleet_fill(const struct feature_spec *spec, struct prometheus_fleet *f);

/* Why series s (not usable) was kept out, as prometheus_fetch_window says it. */
void prometheus_series_problem(const struct feature_spec *spec, const struct prometheus_series *s,
                               char *out, size_t size);

void prometheus_fleet_release(struct prometheus_fleet *f);

/* The series of the n nodes in src, copied into out (its own memory, the
 * same end), to start a fetch of those nodes from: 0, MEDIC_E_NOTFOUND
 * when src lacks any of them, MEDIC_E_NOMEM. */
int prometheus_fleet_subset(const struct prometheus_fleet *src, const struct feature_spec *spec,
                            const char *const *nodes, size_t n, struct prometheus_fleet *out);

/* Series i's rows: [window][features]. */
float *prometheus_fleet_rows(const struct prometheus_fleet *f, const struct feature_spec *spec,
                             size_t i);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The risk `medic serve` gives each alert of a round: the configured model
 * scores the alert's GPU (its `gpu` label) or, without one, every GPU of
 * its node (the node's risk is its worst GPU's), from windows fetched from
 * Prometheus. The nodes of a round are fetched together: the round's
 * alerts are announced first (engine_risk_want), and the first alert
 * scored fetches all of them in one query_range per model feature
 * (model/prometheus_fleet.h, up to ENGINE_RISK_NODES_PER_FETCH nodes a
 * time), so a storm costs as many requests as a single alert. The round's
 * fetches share one budget (the configured Prometheus timeout): once
 * Prometheus fails or the budget is spent, the round's remaining alerts get
 * an unknown risk (NAN) with the reason, so a slow Prometheus never stalls
 * the pipeline. */
#ifndef MEDIC_ENGINE_RISK_H
#define MEDIC_ENGINE_RISK_H

#include "alert.h"
#include "arena.h"
#include "config.h"
#include "engine_fleet.h"
#include "map.h"

#include <stddef.h>
#include <stdint.h>

#define ENGINE_RISK_NODES_PER_FETCH 256
/* a round's requests in flight: every feature of a few nodes at once */
#define ENGINE_RISK_PARALLEL FEATURES_MAX

struct engine_risk_entry {
    char node[128];
    char gpu[32];   /* "": the node's worst GPU */
    double risk;    /* NAN: unknown */
    char note[240]; /* "risk 0.83 gpu 3 (temp=81 power=402)" or why it is unknown */
};

struct engine_risk {
    const struct medic_config *config;
    struct engine_fleet *fleet; /* NULL: none */
    int enabled;
    int64_t now, deadline;    /* deadline: monotonic */
    char unavailable[200];    /* "" while Prometheus answers */
    struct medic_arena arena; /* the round's entries and node names */
    struct medic_map entries; /* "node\037gpu" -> struct engine_risk_entry * */
    struct medic_map asked;   /* node -> its name in the arena, once announced */
    struct medic_map fetched; /* node -> its name in the arena, once fetched */
    const char **wanted;      /* nodes announced, not fetched yet */
    size_t wanted_count, wanted_cap;
};

/* Starts a round at now (wall clock); scoring is off without a Prometheus
 * URL in config. A GPU the fleet's last cycle scored on the same window
 * (same model, window ending at the same step) takes that risk and is not
 * fetched again. */
void engine_risk_begin(struct engine_risk *r, const struct medic_config *config,
                       struct engine_fleet *fleet, int64_t now);

/* Announces an alert the round will score, so that its node is fetched
 * with the others. */
void engine_risk_want(struct engine_risk *r, const struct medic_alert *a);

/* The entry for alert a (NULL: not scored, as for a resolved alert, an
 * alert with no node, or when scoring is off). Fetches the announced nodes
 * (and a's) when a's node has not been fetched yet. */
const struct engine_risk_entry *engine_risk_alert(struct engine_risk *r,
                                                  const struct medic_alert *a);

void engine_risk_end(struct engine_risk *r);

/* Every alert of n scored (its node fetched with the others): risks[i]
 * (NAN: unknown) and the entry that says why, scored[i] (NULL: none). */
void engine_risk_notification(struct engine_risk *r, const struct medic_notification *n,
                              double *risks, const struct engine_risk_entry **scored);

#endif

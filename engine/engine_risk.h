/* The risk `medic serve` gives each alert of a round: the configured model
 * scores the alert's GPU (its `gpu` label) or, without one, every GPU of
 * its node, from a window fetched from Prometheus. Nodes are fetched once
 * per round, and the round's fetches share one budget (the configured
 * Prometheus timeout): once Prometheus fails or the budget is spent, the
 * round's remaining alerts get an unknown risk (NAN) with the reason, so a
 * slow Prometheus never stalls the pipeline. */
#ifndef MEDIC_ENGINE_RISK_H
#define MEDIC_ENGINE_RISK_H

#include "alert.h"
#include "config.h"
#include "risk.h"

#include <stddef.h>
#include <stdint.h>

#define ENGINE_RISK_MAX 64 /* distinct (node, gpu) scored per round */

struct engine_risk_entry {
    char node[128];
    char gpu[32];
    double risk;    /* NAN: unknown */
    char note[240]; /* "risk 0.83 gpu 3 (temp=81 power=402)" or why it is unknown */
};

struct engine_risk {
    const struct medic_config *config;
    int enabled;
    int64_t now, deadline;     /* deadline: monotonic */
    char unavailable[200];     /* "" while Prometheus answers */
    struct risk_scorer scorer; /* set up at the round's first scoring */
    int scorer_ready;
    size_t count;
    struct engine_risk_entry items[ENGINE_RISK_MAX];
};

/* Starts a round at now (wall clock); scoring is off without a model and a
 * Prometheus URL in config. */
void engine_risk_begin(struct engine_risk *r, const struct medic_config *config, int64_t now);

/* The entry for alert a (NULL: not scored, as for a resolved alert, an
 * alert with no node, or when scoring is off). */
const struct engine_risk_entry *engine_risk_alert(struct engine_risk *r,
                                                  const struct medic_alert *a);

void engine_risk_end(struct engine_risk *r);

#endif

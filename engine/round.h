/* SPDX-License-Identifier: Apache-2.0 */
/* One round of the pipeline, in phases:
 * - gather (round_gather.c), without the engine's lock: the handover, the
 *   people's requests, what the audit log holds for the round (stored
 *   notifications, awaited outcomes), and every notification's risks and
 *   recovery actions, the round's nodes asked of Prometheus and of their
 *   agents together;
 * - decide (pipeline.c), the lock taken once: only policy calls on what was
 *   gathered, so the page and /api/v1/dry-run never read a half-applied
 *   round;
 * - commit, then dispatch of what was committed (pipeline.c).
 * Private to engine/. */
#ifndef MEDIC_ENGINE_ROUND_H
#define MEDIC_ENGINE_ROUND_H

#include "engine_health.h"
#include "engine_people.h"
#include "engine_risk.h"
#include "handover.h"
#include "pipeline_internal.h"
#include "policy_engine.h"

#include <stddef.h>
#include <stdint.h>

/* Notifications evaluated per round at most; more wait for the next one. */
#define ROUND_LIMIT 256

/* A notification of the round and what was gathered for it. */
struct round_item {
    int64_t id, first_alert, received_at; /* first_alert AUDIT_DUPLICATE: a repeat */
    const struct medic_notification *n;   /* NULL: stored, and no longer readable */
    struct medic_notification stored;     /* n, when read back from the audit log */
    /* per alert (NULL for a repeat): its risk (NAN unknown), the entry
     * that says why, the recovery action its GPU's driver recommends */
    double *risks;
    const struct engine_risk_entry **scored;
    const char **recoveries;
};

/* An outcome an incident awaits, as it came. */
struct round_outcome {
    int64_t incident, decision;
    enum medic_outcome outcome;
    char detail[1024];
};

struct round {
    struct engine_pipeline *e;
    struct policy_context ctx;
    struct policy_decisions out;
    int64_t now;  /* the engine's clock: what the policy engine measures intervals on */
    int64_t wall; /* the wall clock at the same instant: what is recorded */
    struct round_item items[ROUND_LIMIT];
    size_t item_count;
    struct round_outcome *outcomes; /* the awaited ones that came, handed over or logged */
    size_t outcome_count;
    int64_t evaluated[ROUND_LIMIT];
    size_t evaluated_count;
    struct people_round people; /* pauses, answers to pending steps, releases */
    /* per decision: the notification and alert it came from (0: a tick) */
    int64_t *notification_of, *alert_of;
    size_t origin_cap;
    struct engine_risk risk;
    struct engine_health health; /* the GPUs' recovery actions, for when.recovery_action */
};

/* The gather phase of round r (r->e, now and wall set; people read): the
 * context from config, the notifications of h (or of the log, when h says
 * so), the awaited outcomes that came (handed over in h, or from the log
 * when h says so), and what each
 * notification's alerts need from Prometheus and the agents. Takes no
 * lock of the engine: only its thread changes the state, which it reads. */
int round_gather(struct round *r, const struct handed *h, const struct medic_config *config,
                 struct medic_error *err);
/* Frees what gather took (the items, the outcomes, the risks' round). */
void round_release(struct round *r);

#endif

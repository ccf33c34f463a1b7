/* SPDX-License-Identifier: Apache-2.0 */
/* The people's requests a round of the engine takes (engine/people.c):
 * pauses, answers to steps waiting for approval and releases of
 * quarantined nodes, recorded in the audit
 * log by whichever replica took them. Read before the round takes the
 * engine's lock, applied under it, marked taken with what came of each in
 * the round's transaction. */
#ifndef MEDIC_ENGINE_PEOPLE_H
#define MEDIC_ENGINE_PEOPLE_H

#include "audit.h"
#include "policy_engine.h"

#include <stddef.h>
#include <stdint.h>

/* The most requests of each kind one round takes; more wait for the next. */
#define PEOPLE_PER_ROUND 16

struct people_round {
    /* in the order they were accepted (created_at, wall clock) */
    struct person_request {
        int64_t id, decision_id, until, created_at;
        enum { PERSON_PAUSE, PERSON_ANSWER, PERSON_RELEASE } kind;
        int yes;  /* pause (else unpause); approve (else deny) */
        int undo; /* a denial that asks medic to undo what the incident holds */
        char by[128], reason[512], node[128];
    } items[3 * PEOPLE_PER_ROUND];
    size_t count, pause_reads, answer_reads, release_reads;
    size_t applied; /* the first items[] not applied yet */
    /* what came of each, for the round's audit_evaluation_in */
    struct audit_request_mark pauses[PEOPLE_PER_ROUND], approvals[PEOPLE_PER_ROUND],
        releases[PEOPLE_PER_ROUND];
    size_t pause_count, approval_count, release_count;
    char results[3 * PEOPLE_PER_ROUND][600];
};

/* Reads the requests no round took yet into p (emptied first). Returns 1
 * when more wait than a round takes (read them in the next), 0 otherwise;
 * a failure to read is logged, and the round goes on without them. */
int people_read(struct people_round *p, struct audit_reader *reader);

/* Applies, in the order they were accepted, those not applied yet that
 * were accepted before `before` (wall clock; INT64_MAX: all): a round
 * applies the requests accepted before a notification ahead of it, so a
 * resolve accepted before an approval is taken first. policy_pause,
 * policy_approve, policy_release, each's decisions appended to out;
 * origin(arg, from) is called after each with the index of its first
 * decision. A pause's `until` (wall clock) is taken as the time it leaves
 * from the request, on the engine's clock (now; wall: the round's wall
 * clock), so a step of the wall clock neither shortens nor stretches it.
 * 0, or the error that fails the round. */
int people_apply(struct people_round *p, int64_t before, const struct policy_context *ctx,
                 struct policy_state *st, int64_t now, int64_t wall, struct policy_decisions *out,
                 int (*origin)(void *arg, size_t from), void *arg);

#endif

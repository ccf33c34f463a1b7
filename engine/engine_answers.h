/* SPDX-License-Identifier: Apache-2.0 */
/* People's requests waiting for what came of them: an answer to a step,
 * a pause, a release is recorded in the audit log on the HTTP thread that
 * received it, and its connection waits suspended (receiver_later) while
 * the engine that leads (this replica's, or another's through the shared
 * log) takes it in a round. One thread of its own reads what came of the
 * waiting requests when it is told that an engine took some: this
 * replica's engine tells it once that round is committed
 * (engine_answers_taken); on a log several replicas share, the database
 * tells it when any engine's round commits (audit_listener; while it
 * cannot, the requests are looked up every 50 ms). It answers each once
 * taken (200, or 409 when refused), or 202 after 10 s when no engine took
 * it yet. No HTTP thread sleeps or reads the database for them, and no
 * reader polls. Private to engine/. */
#ifndef MEDIC_ENGINE_ANSWERS_H
#define MEDIC_ENGINE_ANSWERS_H

#include "audit.h"
#include "server.h"

#include <stdint.h>

/* How long a request waits for an engine to take it before 202. */
#define ENGINE_ANSWER_WAIT (10 * MEDIC_NS_PER_SEC)

struct engine_answers;

typedef int (*engine_answer_result)(struct audit_reader *reader, int64_t id,
                                    struct audit_approval_result *out, struct medic_error *err);

int engine_answers_start(const char *audit_path, struct engine_answers **out,
                         struct medic_error *err);
/* Answers every request still waiting (202: recorded, not taken yet) and
 * stops the thread. */
void engine_answers_stop(struct engine_answers *a);
/* Request id of kind what ("approval", "pause_request",
 * "release_request"), read with result, from who: answered through later
 * as JSON once taken. 0, or MEDIC_E_NOMEM (then later was not taken). */
int engine_answers_wait(struct engine_answers *a, const char *what, int64_t id,
                        engine_answer_result result, const char *who,
                        const struct receiver_later *later);
/* This replica's engine committed a round that took people's requests:
 * the waiting ones are looked up now. */
void engine_answers_taken(struct engine_answers *a);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The bodies of a person's requests over HTTP (engine/requests.c):
 * POST /api/v1/approvals/ID, POST or DELETE /api/v1/pause and
 * POST /api/v1/nodes/NODE/release. */
#ifndef MEDIC_ENGINE_REQUESTS_H
#define MEDIC_ENGINE_REQUESTS_H

#include "error.h"

#include <stddef.h>
#include <stdint.h>

/* Larger bodies are refused (the receiver reads at most this much too). */
#define ENGINE_REQUEST_MAX_BYTES 16384

/* {"decision": "approve"|"deny", "reason": "..."}; a denial needs a
 * reason. 0, or MEDIC_E_INVALID with what it should have been in why. */
struct engine_answer {
    int approve;
    int undo; /* a denial with "undo": true: medic undoes what the incident holds */
    char reason[512];
};
int engine_parse_answer(const char *body, size_t len, struct engine_answer *out, char *why,
                        size_t size);

/* {"reason": "...", "until": RFC 3339 or a duration from now}: a pause
 * (pause 1) needs a reason; its end (pause 0) takes no until and may have
 * no body. until: MEDIC_TIME_UNSET when not given. */
struct engine_pause {
    char reason[512];
    int64_t until;
};
int engine_parse_pause(const char *body, size_t len, int pause, int64_t now,
                       struct engine_pause *out, char *why, size_t size);

/* A release of node (the path's NODE: an inventory name) with
 * {"reason": "..."}, the reason required (what was repaired). */
struct engine_release {
    char node[128];
    char reason[512];
};
int engine_parse_release(const char *node, const char *body, size_t len, struct engine_release *out,
                         char *why, size_t size);

#endif

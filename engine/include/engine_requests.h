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

/* The fields of one of the on-call page's forms
 * (application/x-www-form-urlencoded): csrf, decision, reason, until, each
 * decoded and capped; other fields are refused. 0, or MEDIC_E_INVALID. */
struct engine_form {
    char csrf[65];
    char decision[16];
    char reason[512];
    char until[64];
    char undo[8]; /* "yes": the deny form's undo box was ticked */
};
int engine_parse_form(const char *body, size_t len, struct engine_form *out, char *why,
                      size_t size);

/* The anti-forgery token of the form that posts to path, for a request
 * that came with authorization (its Authorization header; NULL: none),
 * made at now (ns): a keyed hash under a secret this daemon drew at random
 * when it started, so that another site cannot make it without the
 * credential, nobody can guess a password from it offline, and it does not
 * outlive the daemon. 32 hex digits. */
void engine_form_token(const char *authorization, const char *path, int64_t now, char out[33]);
/* Whether token is one engine_form_token made for authorization and path
 * at most ENGINE_FORM_TOKEN_LIFE ago (compared in constant time). */
#define ENGINE_FORM_TOKEN_LIFE (2 * 3600 * MEDIC_NS_PER_SEC)
int engine_form_token_valid(const char *authorization, const char *path, const char *token,
                            int64_t now);

#endif

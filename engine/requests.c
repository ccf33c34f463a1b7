/* SPDX-License-Identifier: Apache-2.0 */
/* The bodies of a person's requests over HTTP: an answer to a step
 * waiting for approval, a pause, a release of a quarantined node. Parsed here, capped and checked
 * whole, before anything is recorded (tests/fuzz/fuzz_requests.c). */
#include "engine_requests.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* A reason is a few lines on-call reads. */
#define REASON_MAX 500
/* A pause ends by itself at most this far ahead (a longer one is a
 * configuration change: a maintenance window). */
#define PAUSE_LONGEST (30 * 24 * 3600 * MEDIC_NS_PER_SEC)

static int fail(char *why, size_t size, const char *message)
{
    snprintf(why, size, "%s", message);
    return MEDIC_E_INVALID;
}

int engine_parse_answer(const char *body, size_t len, struct engine_answer *out, char *why,
                        size_t size)
{
    memset(out, 0, sizeof(*out));
    if (len > ENGINE_REQUEST_MAX_BYTES)
        return fail(why, size, "the body is over 16 KiB");
    cJSON *root = cJSON_ParseWithLength(body, len);
    /* {"approve": true|false} as the contract says; {"decision":
     * "approve"|"deny"} as the page's forms and earlier clients send */
    const cJSON *answer = cJSON_GetObjectItemCaseSensitive(root, "decision");
    const cJSON *yes = cJSON_GetObjectItemCaseSensitive(root, "approve");
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(root, "reason");
    const cJSON *undo = cJSON_GetObjectItemCaseSensitive(root, "undo");
    int approve = cJSON_IsString(answer) && strcmp(answer->valuestring, "approve") == 0;
    int deny = cJSON_IsString(answer) && strcmp(answer->valuestring, "deny") == 0;
    if (cJSON_IsBool(yes) && !answer) {
        approve = cJSON_IsTrue(yes);
        deny = !approve;
    }
    int rc = 0;
    if (!cJSON_IsObject(root) || (!approve && !deny) || (answer && yes))
        rc = fail(why, size, "the body is {\"approve\": true or false, \"reason\": \"...\"}");
    else if (reason && !cJSON_IsString(reason))
        rc = fail(why, size, "reason is text");
    else if (undo && (!cJSON_IsBool(undo) || (approve && cJSON_IsTrue(undo))))
        rc = fail(why, size,
                  "undo: true goes with a denial (medic undoes what the incident holds; "
                  "without it the node is held for a person)");
    else if (deny && (!reason || !reason->valuestring[0]))
        rc = fail(why, size, "a denial needs a reason: on-call reads it");
    else if (reason && strlen(reason->valuestring) > REASON_MAX)
        rc = fail(why, size, "reason: at most 500 bytes");
    if (rc == 0) {
        out->approve = approve;
        out->undo = cJSON_IsTrue(undo);
        if (reason)
            snprintf(out->reason, sizeof(out->reason), "%s", reason->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

/* An RFC 3339 time too far ahead to be read (the year 9999): refused
 * with the bound, not as malformed. */
static int far_date(const cJSON *u)
{
    const char *v = cJSON_IsString(u) ? u->valuestring : "";
    return strlen(v) >= 10 && strspn(v, "0123456789") == 4 && v[4] == '-' && v[7] == '-' &&
           strncmp(v, "2100", 4) >= 0;
}

int engine_parse_pause(const char *body, size_t len, int pause, int64_t now,
                       struct engine_pause *out, char *why, size_t size)
{
    memset(out, 0, sizeof(*out));
    out->until = MEDIC_TIME_UNSET;
    if (!pause && len == 0)
        return 0; /* DELETE with no body */
    if (len > ENGINE_REQUEST_MAX_BYTES)
        return fail(why, size, "the body is over 16 KiB");
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "reason");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "until");
    int64_t d = 0, at = MEDIC_TIME_UNSET;
    int rc = 0;
    if (!cJSON_IsObject(root))
        rc = fail(why, size,
                  "the body is {\"reason\": \"...\", \"until\": \"2026-11-26T18:00:00Z\" or "
                  "\"2h\"}");
    else if (r && (!cJSON_IsString(r) || strlen(r->valuestring) > REASON_MAX))
        rc = fail(why, size, "reason is text of at most 500 bytes");
    else if (pause && (!r || !r->valuestring[0]))
        rc = fail(why, size, "a pause needs a reason: on-call reads it");
    else if (u && !pause)
        rc = fail(why, size, "until goes with a pause, not its end");
    else if (u && (!cJSON_IsString(u) ||
                   (medic_time_parse_rfc3339(u->valuestring, strlen(u->valuestring), &at) &&
                    medic_duration_parse(u->valuestring, &d))))
        rc = fail(why, size,
                  far_date(u) ? "until: at most 30 days ahead (a longer hold is a maintenance "
                                "window in the configuration)"
                              : "until takes an RFC 3339 time or a duration from now (90m, 2h)");
    else if (u && at == MEDIC_TIME_UNSET && d <= 0)
        rc = fail(why, size,
                  "until: a time after now or a duration above zero; leave it out for a pause "
                  "that lasts until `medic unpause`");
    else if (u &&
             (at != MEDIC_TIME_UNSET ? at > now && at - now > PAUSE_LONGEST : d > PAUSE_LONGEST))
        rc = fail(why, size,
                  "until: at most 30 days ahead (a longer hold is a maintenance window in the "
                  "configuration)");
    if (rc == 0) {
        if (r)
            snprintf(out->reason, sizeof(out->reason), "%s", r->valuestring);
        out->until = at != MEDIC_TIME_UNSET ? at : d > 0 ? now + d : MEDIC_TIME_UNSET;
    }
    cJSON_Delete(root);
    return rc;
}

int engine_parse_release(const char *node, const char *body, size_t len, struct engine_release *out,
                         char *why, size_t size)
{
    memset(out, 0, sizeof(*out));
    size_t n = strlen(node);
    if (n == 0 || n >= sizeof(out->node) ||
        strspn(node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") != n)
        return fail(why, size,
                    "a release goes to /api/v1/nodes/NODE/release, NODE an inventory name "
                    "(letters, digits, '-', '_', '.', ':')");
    if (len > ENGINE_REQUEST_MAX_BYTES)
        return fail(why, size, "the body is over 16 KiB");
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "reason");
    int rc = 0;
    if (!cJSON_IsObject(root) || cJSON_GetArraySize(root) != 1 || !cJSON_IsString(r))
        rc = fail(why, size,
                  "the body is {\"reason\": \"...\"}: what was repaired, for the audit log");
    else if (!r->valuestring[0] || strlen(r->valuestring) > REASON_MAX)
        rc = fail(why, size, "a release needs a reason of at most 500 bytes: what was repaired");
    if (rc == 0) {
        snprintf(out->node, sizeof(out->node), "%s", node);
        snprintf(out->reason, sizeof(out->reason), "%s", r->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

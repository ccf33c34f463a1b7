/* SPDX-License-Identifier: Apache-2.0 */
/* medic's side of `medic agent`: set and restore GPU power limits, reset
 * a GPU and read the node's GPU health over HTTP(S) with a bearer token
 * (libcurl, bounded time). */
#ifndef MEDIC_ACTIONS_AGENT_CLIENT_H
#define MEDIC_ACTIONS_AGENT_CLIENT_H

#include "action.h"
#include "buf.h"
#include <stddef.h>
#include <stdint.h>

/* Sets watts on gpus (gpu_count of them; 0: every GPU the agent lists). */
enum medic_outcome agent_power_limit(const char *url, const char *token, const int *gpus,
                                     size_t gpu_count, int watts, long timeout_ms, char *detail,
                                     size_t size);
/* Puts back every limit the agent remembers replacing. */
enum medic_outcome agent_restore(const char *url, const char *token, long timeout_ms, char *detail,
                                 size_t size);

/* Resets GPU index (the agent checks it is still uuid, when given):
 * succeeded once the agent saw it back; refused when the agent did not try
 * (no such GPU, processes on it, another GPU under that index). */
enum medic_outcome agent_gpu_reset(const char *url, const char *token, int index, const char *uuid,
                                   long timeout_ms, char *detail, size_t size);

/* The largest health report medic reads. */
#define AGENT_HEALTH_MAX ((size_t)1 << 20)

/* Judges an agent's GET /v1/health report by h (safety.health; by
 * default: expected_gpus visible, 0 not checked; no GPU with a recovery
 * action other than none, a pending or failed row remapping, or a pending
 * page retirement; a failed remapping never passes). 1 healthy, 0 not
 * (detail says what), -1 not a report. */
int agent_health_judge(const char *json, size_t len, int expected_gpus,
                       const struct medic_health_criteria *h, char *detail, size_t size);

/* The recovery action the driver recommends for each GPU of a health
 * report, by GPU index (codes[i]: -1 unknown; count: the GPUs reported, at
 * most max). 0, or -1 when it is not a report. */
int agent_health_recovery(const char *json, size_t len, int *codes, size_t max, size_t *count);

/* Evidence in a health report that the repair happened after `after`
 * (medic_time_now's clock): the node booted later (its "booted_at"), or,
 * with gpu >= 0, that GPU was enumerated later (its "enumerated_at": the
 * agent's NVML found it in an initialisation after the reset). 1 seen, 0
 * not, -1 the report does not say; detail says what was read. */
int agent_health_after(const char *json, size_t len, int gpu, int64_t after, char *detail,
                       size_t size);

/* Reads GET /v1/health into out (at most AGENT_HEALTH_MAX bytes): succeeded
 * with the body, else why in detail. */
enum medic_outcome agent_health_read(const char *url, const char *token, long timeout_ms,
                                     struct medic_buf *out, char *detail, size_t size);

/* Reads and judges the node's health: succeeded when healthy. */
enum medic_outcome agent_health(const char *url, const char *token, int expected_gpus,
                                const struct medic_health_criteria *h, long timeout_ms,
                                char *detail, size_t size);

#endif

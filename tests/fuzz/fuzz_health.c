/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: an agent's health report (GET /v1/health), read by a
 * verify step, must never crash or leak medic, whatever the agent (or
 * something posing as it) answers; a report judged healthy names no
 * finding, and the judgement always says something; the evidence of a
 * repair (a boot, a GPU enumerated after it) is 1, 0 or -1 and says what
 * it read. */
#include "agent_client.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char detail[600];
    struct medic_health_criteria strict, lenient;
    medic_health_criteria_default(&strict);
    lenient = (struct medic_health_criteria){
        .missing_gpus = 2, .recovery_ok = ~0u, .remap_pending_ok = 1, .retirement_pending_ok = 1};
    for (int k = 0; k < 4; k++) {
        int expected = k & 1 ? 8 : 0;
        const struct medic_health_criteria *h = k & 2 ? &lenient : &strict;
        int r = agent_health_judge((const char *)data, size, expected, h, detail, sizeof(detail));
        if (r < -1 || r > 1 || !detail[0] || strlen(detail) >= sizeof(detail))
            abort();
        if (r == 1 && (strstr(detail, "recommends") || strstr(detail, "fell off") ||
                       strstr(detail, "remapping failed")))
            abort();
    }
    for (int gpu = -1; gpu < 2; gpu++) {
        int seen = agent_health_after((const char *)data, size, gpu, INT64_C(1795335000000000000),
                                      detail, sizeof(detail));
        if (seen < -1 || seen > 1 || !detail[0] || strlen(detail) >= sizeof(detail))
            abort();
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: an agent's health report (GET /v1/health), read by a
 * verify step, must never crash or leak medic, whatever the agent (or
 * something posing as it) answers; a report judged healthy names no
 * finding, and the judgement always says something. */
#include "agent_client.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char detail[600];
    for (int expected = 0; expected <= 8; expected += 8) {
        int r = agent_health_judge((const char *)data, size, expected, detail, sizeof(detail));
        if (r < -1 || r > 1 || !detail[0] || strlen(detail) >= sizeof(detail))
            abort();
        if (r == 1 && (strstr(detail, "recommends") || strstr(detail, "fell off")))
            abort();
    }
    return 0;
}

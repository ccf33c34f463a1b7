/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the webhook payload parser must never crash, leak or
 * read out of bounds, whatever the bytes. */
#include "payload.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct receiver_limits limits;
    static int ready;
    if (!ready) {
        receiver_limits_default(&limits);
        limits.max_alerts = 50;
        ready = 1;
    }
    struct medic_notification n;
    struct medic_error err;
    medic_notification_init(&n);
    if (receiver_payload_parse((const char *)data, size, &limits, &n, &err) == 0) {
        char key[65];
        medic_notification_dedupe_key(&n, key);
    }
    medic_notification_release(&n);
    return 0;
}

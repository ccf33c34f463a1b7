/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the what-if's inputs, a fault trace (JSON) and a
 * mapping file (YAML), must never crash or leak medic, whatever a file
 * given to `medic what-if` holds; every event read has a node among the
 * trace's, a time within the trace's span and its three texts; every rule
 * has an alertname. */
#include "whatif.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct medic_error err = {0};
    struct whatif_trace t;
    if (whatif_trace_parse((const char *)data, size, &t, &err) == 0) {
        for (size_t i = 0; i < t.count; i++) {
            const struct whatif_event *e = &t.events[i];
            if (e->node >= t.node_count || e->at < 0 || e->at > t.span || !e->level ||
                !e->class_name || !e->desc || (i && e->at < t.events[i - 1].at))
                abort();
        }
        whatif_trace_release(&t);
    }
    struct whatif_mapping m;
    if (whatif_mapping_parse("fuzz.yaml", (const char *)data, size, &m, &err) == 0) {
        for (size_t i = 0; i < m.count; i++)
            if (!m.rules[i].alertname || !m.rules[i].alertname[0])
                abort();
        whatif_mapping_release(&m);
    }
    return 0;
}

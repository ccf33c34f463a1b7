/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a Prometheus query_range answer, as the first and then
 * a second feature of a node's window, and of the whole fleet's windows
 * (split by node and gpu, then gaps filled), must be placed on the grid or
 * refused, never crash; the input is capped like the fetcher's body. */
#include "prometheus.h"
#include "prometheus_fleet.h"
#include "timeutil.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    static struct feature_spec spec;
    if (!spec.count) {
        spec.window = 30;
        spec.step = 60 * MEDIC_NS_PER_SEC;
        spec.count = 2;
        strcpy(spec.items[0].name, "a");
        strcpy(spec.items[1].name, "b");
    }
    struct prometheus_window w;
    struct medic_error err;
    const int64_t start = 1795340000LL * MEDIC_NS_PER_SEC;
    for (int with_gpu = 0; with_gpu < 2; with_gpu++) {
        memset(&w, 0, sizeof(w));
        if (prometheus_parse_range((const char *)data, size, &spec, 0, with_gpu ? "3" : NULL, start,
                                   &w, &err) == 0)
            prometheus_parse_range((const char *)data, size, &spec, 1, with_gpu ? "3" : NULL, start,
                                   &w, &err);
        prometheus_window_release(&w);
    }
    struct prometheus_fleet f;
    memset(&f, 0, sizeof(f));
    medic_map_init(&f.index);
    if (prometheus_parse_fleet((const char *)data, size, &spec, 0, "Hostname", start, 64, &f,
                               &err) == 0 &&
        prometheus_parse_fleet((const char *)data, size, &spec, 1, "Hostname", start, 64, &f,
                               &err) == 0)
        prometheus_fleet_fill(&spec, &f);
    prometheus_fleet_release(&f);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: Slurm's list of nodes, as `medic inventory import`
 * and the reader of Slurm's nodes parse it (the JSON of `scontrol show
 * nodes --json`, the one-line text form, a Gres string), and its topology
 * (`scontrol show topology`), must never crash or leak medic, whatever
 * scontrol or a file given with --from holds; every node read has a name,
 * a state, a reason and features (maybe empty), and its GPU count stays in
 * bounds; every switch has a name and nodes. */
#include "slurm.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct slurm_node_list l;
    struct medic_error err = {0};
    for (int form = 0; form < 2; form++) {
        int rc = form ? slurm_nodes_parse_text(text, &l, &err)
                      : slurm_nodes_parse((const char *)data, size, &l, &err);
        if (rc == 0) {
            for (size_t i = 0; i < l.count; i++)
                if (!l.items[i].name || !l.items[i].name[0] || !l.items[i].partitions ||
                    !l.items[i].state || !l.items[i].reason || !l.items[i].features ||
                    l.items[i].gpus < 0)
                    abort();
            slurm_node_list_release(&l);
        }
    }
    struct slurm_switch_list sw;
    if (slurm_topology_parse(text, &sw, &err) == 0) {
        for (size_t i = 0; i < sw.count; i++)
            if (!sw.items[i].name || !sw.items[i].name[0] || !sw.items[i].nodes)
                abort();
        slurm_switch_list_release(&sw);
    }
    if (slurm_gres_gpus(text) < 0)
        abort();
    free(text);
    return 0;
}

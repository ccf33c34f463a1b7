/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a whole configuration file (every directive, the
 * inventory and its hostlists, notifiers, safety, policies, the model's
 * settings) must never crash or leak, whatever the bytes; a configuration
 * that loads goes through the serving rules and the warnings as
 * `medic check config` does. Files it names are only read. */
#include "config.h"
#include "yaml_tree.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct yaml_tree tree;
    struct medic_error err;
    if (size > 65536 || yaml_tree_parse("fuzz.yaml", (const char *)data, size, &tree, &err))
        return 0;
    struct medic_config config;
    memset(&config, 0, sizeof(config));
    if (medic_config_from_tree("fuzz.yaml", tree.root, NULL, &config, &err) == 0) {
        static struct medic_config_warnings warnings;
        struct medic_error serving = {0};
        (void)medic_config_check_serving(&config, &serving);
        medic_config_warn(&config, &warnings);
        for (size_t i = 0; i < warnings.count; i++)
            if (!warnings.items[i][0])
                abort(); /* a warning always says something */
        medic_config_release(&config);
    } else if (!err.msg[0]) {
        abort(); /* a refusal always says why */
    }
    yaml_tree_release(&tree);
    return 0;
}

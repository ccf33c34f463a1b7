/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "commands.h"
#include "options.h"
#include "config.h"
#include "policy.h"
#include "yaml_fields.h"

#include <stdio.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic check config [--strict] FILE...\n"
    "       medic check config --reference\n"
    "       medic check policy FILE...\n"
    "       medic check live FILE [--nodes A,B,...] [--sample N] (see --help there)\n"
    "\n"
    "Validates configuration files without starting anything: YAML syntax, every\n"
    "key and value, and the secret, certificate, inventory and policy files they\n"
    "name. A policy file holds `policies` (and may hold `safety`); its notify\n"
    "steps' notifiers are checked against the configuration that includes it.\n"
    "Errors are printed as FILE:LINE:COL: message. A configuration is also held\n"
    "to the rules `medic serve` runs by (live mode needs webhook authentication and,\n"
    "with disruptive policies, safety.storm.notifier); what would be refused once\n"
    "live is printed as a warning; with --strict (for CI), a warning fails the\n"
    "file too.\n"
    "\n",
    "`medic check live` goes further: it reaches each node's BMC, agent and\n"
    "Slurm node, and asks Slurm whether medic may update nodes.\n"
    "\n"
    "Exit status: 0 when every file is valid, 1 when one is not (or, with\n"
    "--strict, has a warning), 2 on bad usage.\n",
};

static int check_policies(int count, char **files)
{
    static const char *const keys[] = {"policies", "safety", NULL};
    int status = 0;
    for (int i = 0; i < count; i++) {
        struct yaml_tree tree;
        struct policy_set set;
        struct medic_error err = {0};
        struct yaml_fields f = {files[i], &err};
        int rc = yaml_tree_load(files[i], &tree, &err);
        if (rc == 0) {
            if (!tree.root || !yaml_tree_get(tree.root, "policies"))
                rc = yaml_fields_fail(&f, tree.root, "a policy file is a mapping with policies");
            else
                rc = yaml_fields_known_keys(&f, tree.root, "a policy file", keys);
            if (rc == 0)
                rc = policy_set_parse(files[i], yaml_tree_get(tree.root, "policies"),
                                      yaml_tree_get(tree.root, "safety"), NULL, 0, &set, &err);
            if (rc == 0) {
                printf("%s: valid (%zu policies)\n", files[i], set.count);
                policy_set_release(&set);
            }
            yaml_tree_release(&tree);
        }
        if (rc) {
            fprintf(stderr, "%s\n", err.msg);
            status = 1;
        }
    }
    return status;
}

int medic_cmd_check(int argc, char **argv)
{
    int strict = 0, reference = 0, first = 0;
    const struct cli_option options[] = {
        CLI_OPT_FLAG("strict", &strict, "config: a warning fails the file too (for CI)"),
        CLI_OPT_FLAG("reference", &reference,
                     "config: print every configuration key with its default, bounds and "
                     "meaning, from the table medic reads configurations with (the table in "
                     "docs/configuration.md)"),
        CLI_OPT_END,
    };
    for (int i = 1; i < argc && !(i == 1 && strcmp(argv[1], "live") == 0); i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli_usage(stdout, &help, options);
            return 0;
        }
    if (argc >= 2 && strcmp(argv[1], "live") == 0)
        return medic_cmd_check_live(argc - 1, argv + 1);
    if (argc >= 3 && strcmp(argv[1], "policy") == 0)
        return check_policies(argc - 2, argv + 2);
    if (argc < 2 || strcmp(argv[1], "config") != 0)
        return argc >= 2 ? cli_usage_error("check", &help, options, "unknown check '%s'", argv[1])
                         : cli_usage_error("check", &help, options, "say what to check");
    int rc = cli_parse("check config", &help, argc, argv, 2, options, &first);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (reference) {
        if (first != argc || strict) {
            fprintf(stderr, "medic check config: --reference takes nothing else\n");
            return 2;
        }
        struct medic_buf b;
        medic_buf_init(&b, 0);
        rc = medic_config_reference(&b);
        if (rc == 0)
            fputs(b.data, stdout);
        medic_buf_release(&b);
        return rc ? 1 : 0;
    }
    if (first == argc)
        return cli_usage_error("check config", &help, options, "name the configuration files");
    int status = 0;
    for (int i = first; i < argc; i++) {
        struct medic_config config;
        struct medic_error err = {0};
        if (medic_config_load(argv[i], &config, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            status = 1;
            continue;
        }
        if (medic_config_check_serving(&config, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            medic_config_release(&config);
            status = 1;
            continue;
        }
        char audit[512];
        audit_location_redacted(config.audit_path, audit, sizeof(audit));
        printf("%s: valid (mode %s, listen %s, audit %s, %zu policies, %zu inventory nodes, "
               "model %s %.12s%s)\n",
               argv[i], medic_mode_name(config.mode), config.listen, audit, config.policies.count,
               config.inventory.count, config.model_path ? config.model_path : "built-in",
               config.model.hash,
               config.prometheus_url ? "" : ", no prometheus.url: alerts are not scored");
        static struct medic_config_warnings warnings;
        medic_config_warn(&config, &warnings);
        for (size_t w = 0; w < warnings.count; w++)
            fprintf(stderr, "warning: %s%s%s\n",
                    strncmp(warnings.items[w], argv[i], strlen(argv[i])) ? argv[i] : "",
                    strncmp(warnings.items[w], argv[i], strlen(argv[i])) ? ": " : "",
                    warnings.items[w]);
        if (strict && warnings.count) {
            fprintf(stderr, "%s: %zu warning(s), and --strict makes them fail\n", argv[i],
                    warnings.count);
            status = 1;
        }
        medic_config_release(&config);
    }
    return status;
}

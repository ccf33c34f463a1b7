#include "commands.h"
#include "config.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: medic check config FILE...\n"
    "\n"
    "Validates configuration files without starting anything: YAML syntax, every\n"
    "key and value, and the secret and certificate files they name. Errors are\n"
    "printed as FILE:LINE:COL: message.\n"
    "\n"
    "Exit status: 0 when every file is valid, 1 when one is not, 2 on bad usage.\n";

int medic_cmd_check(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "config") != 0) {
        if (argc >= 2 && strcmp(argv[1], "config") != 0)
            fprintf(stderr, "medic check: unknown check '%s'\n", argv[1]);
        fputs(usage, stderr);
        return 2;
    }
    int status = 0;
    for (int i = 2; i < argc; i++) {
        struct medic_config config;
        struct medic_error err = {0};
        if (medic_config_load(argv[i], &config, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            status = 1;
            continue;
        }
        printf("%s: valid (mode %s, listen %s, audit %s)\n", argv[i],
               config.mode == MEDIC_MODE_LIVE ? "live" : "dry-run", config.listen,
               config.audit_path);
        medic_config_release(&config);
    }
    return status;
}

#include "commands.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

int medic_cmd_version(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: medic version\n\nPrints medic's version and the versions of the libraries "
             "it runs with.");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "medic version: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("medic %s\n", medic_version);
    printf("  compiler:       %s\n", __VERSION__);
    printf("  sqlite:         %s\n", sqlite3_libversion());
    printf("  libmicrohttpd:  %s\n", MHD_get_version());
    printf("  cjson:          %s\n", cJSON_Version());
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "buf.h"
#include "commands.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

int medic_cmd_version(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: medic version\n\nPrints medic's version, the audit log's schema version it\n"
             "writes, and the versions of the libraries it runs with.");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "medic version: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("medic %s\n", medic_version);
    printf("  audit schema:   %d\n", audit_schema_version());
    printf("  compiler:       %s\n", __VERSION__);
    struct medic_buf libs;
    medic_buf_init(&libs, 0);
    audit_library_versions(&libs);
    fwrite(libs.data ? libs.data : "", 1, libs.len, stdout);
    medic_buf_release(&libs);
    printf("  libmicrohttpd:  %s\n", MHD_get_version());
    printf("  cjson:          %s\n", cJSON_Version());
    return 0;
}

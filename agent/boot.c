/* SPDX-License-Identifier: Apache-2.0 */
#include "boot.h"
#include "timeutil.h"

#include <stdio.h>
#include <string.h>

void node_boot_read(const char *proc, struct node_boot *out)
{
    char path[512], line[256];
    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "%s/sys/kernel/random/boot_id", proc ? proc : "/proc");
    FILE *f = fopen(path, "r");
    if (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        /* a UUID: hex digits and dashes, nothing else is passed on */
        if (line[0] && strspn(line, "0123456789abcdef-") == strlen(line) &&
            strlen(line) < sizeof(out->id))
            memcpy(out->id, line, strlen(line) + 1);
    }
    if (f)
        fclose(f);
    snprintf(path, sizeof(path), "%s/stat", proc ? proc : "/proc");
    f = fopen(path, "r");
    long long btime;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %lld", &btime) == 1 && btime > 0) {
            out->booted_at = (int64_t)btime * MEDIC_NS_PER_SEC;
            break;
        }
    if (f)
        fclose(f);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* What the node says of its last boot: the kernel's boot id (a new one at
 * every boot) and the time it booted. A verify after a power cycle reads
 * them as evidence that the node really booted. */
#ifndef MEDIC_AGENT_BOOT_H
#define MEDIC_AGENT_BOOT_H

#include <stddef.h>
#include <stdint.h>

struct node_boot {
    char id[64];       /* /proc/sys/kernel/random/boot_id; "" unread */
    int64_t booted_at; /* medic_time_now's clock (btime in /proc/stat); 0 unread */
};

/* Reads both from proc (NULL: "/proc"); what cannot be read stays empty. */
void node_boot_read(const char *proc, struct node_boot *out);

#endif

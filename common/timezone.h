/* SPDX-License-Identifier: Apache-2.0 */
/* Time zones by name (Europe/Berlin), read from the system's zoneinfo
 * files (TZif, RFC 8536) without touching the process's TZ: the UTC offset
 * in force at an instant, for windows that recur on a local clock. */
#ifndef MEDIC_TIMEZONE_H
#define MEDIC_TIMEZONE_H

#include <stdint.h>
#include <stddef.h>

struct medic_tz;

/* Loads zone name ("UTC", "Europe/Berlin") from /usr/share/zoneinfo (or
 * $MEDIC_ZONEINFO). 0, or -1 with why. */
int medic_tz_load(const char *name, struct medic_tz **out, char *why, size_t size);
/* The UTC offset in seconds (east positive) in force at unix time t. */
int medic_tz_offset(const struct medic_tz *tz, int64_t t);
void medic_tz_free(struct medic_tz *tz);

#endif

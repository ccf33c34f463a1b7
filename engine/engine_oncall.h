/* SPDX-License-Identifier: Apache-2.0 */
/* A replica's own word to on-call (engine/oncall.c). Private to engine/. */
#ifndef MEDIC_ENGINE_ONCALL_H
#define MEDIC_ENGINE_ONCALL_H

#include "config.h"

/* Sends message (about node, "" when none) through the configuration's
 * safety.storm.notifier on a detached thread; nothing is recorded. */
void engine_tell_oncall_async(struct config_slot *configs, const char *node, const char *message);

#endif

/* medic's side of `medic agent`: set and restore GPU power limits on a node
 * over HTTP(S) with a bearer token (libcurl, bounded time). */
#ifndef MEDIC_ACTIONS_AGENT_CLIENT_H
#define MEDIC_ACTIONS_AGENT_CLIENT_H

#include "action.h"
#include <stddef.h>

/* Sets watts on gpus (gpu_count of them; 0: every GPU the agent lists). */
enum medic_outcome agent_power_limit(const char *url, const char *token, const int *gpus,
                                     size_t gpu_count, int watts, long timeout_ms, char *detail,
                                     size_t size);
/* Puts back every limit the agent remembers replacing. */
enum medic_outcome agent_restore(const char *url, const char *token, long timeout_ms, char *detail,
                                 size_t size);

#endif

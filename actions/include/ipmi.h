/* SPDX-License-Identifier: Apache-2.0 */
/* Power cycles through a BMC with libfreeipmi, out of band (RMCP+ /
 * LAN_2_0, or IPMI 1.5 / LAN), with bounded session timeouts, and confirms
 * through the chassis status that the node went down and came back. A
 * command that changes the chassis goes out on a session of its own that
 * does not resend it while the BMC may still answer (a resent request is a
 * second command to a BMC); a BMC silent for the whole session timeout
 * gets one copy, sent by FreeIPMI as it gives up. A command whose reply was
 * lost is never sent again by medic: the power state says whether it
 * happened. */
#ifndef MEDIC_ACTIONS_IPMI_H
#define MEDIC_ACTIONS_IPMI_H

#include "action.h"
#include "fence.h"
#include "error.h"

#include <stddef.h>

struct ipmi_target {
    const char *address; /* host or host:port */
    const char *username;
    const char *password;
    int lan_2_0;              /* 1: RMCP+ (default), 0: IPMI 1.5 */
    int cipher_suite;         /* RMCP+ only */
    unsigned int workarounds; /* libfreeipmi flags, from ipmi_workaround_flags() */
};

struct ipmi_options {
    unsigned int session_timeout_ms;        /* default 3000 */
    unsigned int retransmission_timeout_ms; /* default 500 */
    unsigned int confirm_timeout_ms;        /* how long to watch the power state; default 60000 */
    const struct action_fence *fence;       /* asked right before the power command; NULL: none */
};

void ipmi_options_default(struct ipmi_options *o);

/* FreeIPMI's workaround names (as `ipmipower -W`: opensesspriv, authcap,
 * intel20, supermicro20, sun20, integritycheckvalue, idzero, unexpectedauth,
 * forcepermsg, endianseq, noauthcodecheck, nochecksumcheck) into flags for
 * the driver. MEDIC_E_INVALID naming the first unknown one. */
int ipmi_workaround_flags(const char *const *names, size_t count, int lan_2_0, unsigned int *flags,
                          struct medic_error *err);

/* Power cycles; when the node stays off and power_on is set, powers it on.
 * detail says what was seen (times, the BMC's error). */
enum medic_outcome ipmi_power_cycle(const struct ipmi_target *t, int power_on,
                                    const struct ipmi_options *o, char *detail, size_t size);

/* Reads the power state: 1 on, 0 off, -1 error (detail says why). */
int ipmi_power_state(const struct ipmi_target *t, const struct ipmi_options *o, char *detail,
                     size_t size);

#endif

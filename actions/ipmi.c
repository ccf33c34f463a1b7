/* SPDX-License-Identifier: Apache-2.0 */
#include "ipmi.h"
#include "timeutil.h"

#include <freeipmi/freeipmi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void ipmi_options_default(struct ipmi_options *o)
{
    o->session_timeout_ms = 3000;
    o->retransmission_timeout_ms = 500;
    o->confirm_timeout_ms = 60000;
    o->fence = NULL;
}

int ipmi_workaround_flags(const char *const *names, size_t count, int lan_2_0, unsigned int *flags,
                          struct medic_error *err)
{
    static const struct {
        const char *name;
        unsigned int lan, lan20;
    } table[] = {
        {"authcap", IPMI_WORKAROUND_FLAGS_OUTOFBAND_AUTHENTICATION_CAPABILITIES,
         IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_AUTHENTICATION_CAPABILITIES},
        {"opensesspriv", 0, IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE},
        {"intel20", 0, IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_INTEL_2_0_SESSION},
        {"supermicro20", 0, IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUPERMICRO_2_0_SESSION},
        {"sun20", 0, IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_SUN_2_0_SESSION},
        {"integritycheckvalue", 0,
         IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NON_EMPTY_INTEGRITY_CHECK_VALUE},
        {"idzero", IPMI_WORKAROUND_FLAGS_OUTOFBAND_ACCEPT_SESSION_ID_ZERO, 0},
        {"unexpectedauth", IPMI_WORKAROUND_FLAGS_OUTOFBAND_CHECK_UNEXPECTED_AUTHCODE, 0},
        {"forcepermsg", IPMI_WORKAROUND_FLAGS_OUTOFBAND_FORCE_PERMSG_AUTHENTICATION, 0},
        {"endianseq", IPMI_WORKAROUND_FLAGS_OUTOFBAND_BIG_ENDIAN_SEQUENCE_NUMBER, 0},
        {"noauthcodecheck", IPMI_WORKAROUND_FLAGS_OUTOFBAND_NO_AUTH_CODE_CHECK, 0},
        {"nochecksumcheck", IPMI_WORKAROUND_FLAGS_OUTOFBAND_NO_CHECKSUM_CHECK,
         IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_NO_CHECKSUM_CHECK},
    };
    *flags = 0;
    for (size_t i = 0; i < count; i++) {
        size_t k;
        for (k = 0; k < sizeof(table) / sizeof(table[0]); k++)
            if (strcasecmp(names[i], table[k].name) == 0)
                break;
        if (k == sizeof(table) / sizeof(table[0]))
            return medic_error_set(err, MEDIC_E_INVALID, "unknown IPMI workaround '%s'", names[i]);
        unsigned int f = lan_2_0 ? table[k].lan20 : table[k].lan;
        if (!f)
            return medic_error_set(err, MEDIC_E_INVALID,
                                   "IPMI workaround '%s' does not apply to driver %s", names[i],
                                   lan_2_0 ? "lan_2_0" : "lan");
        *flags |= f;
    }
    return 0;
}

/* How a session resends. FreeIPMI resends a request unanswered after the
 * retransmission timeout, with new sequence numbers, so a BMC cannot tell
 * the copy from a second command; and it sends one more as the session
 * timeout runs out. */
enum session_kind {
    SESSION_READS,   /* resent after retransmission_timeout_ms */
    SESSION_COMMAND, /* a command that changes the chassis: retransmission
                      * just under the session timeout, so it goes out once,
                      * and once more only when the BMC stays silent */
    SESSION_PATIENT, /* for a BMC whose session needs a resend while it opens
                      * (ipmi_sim's IPMI 1.5 gets its first answer wrong):
                      * resent after session_timeout_ms, given up after twice
                      * that; the command may go out three times to a BMC
                      * silent that long */
};

static ipmi_ctx_t open_session(const struct ipmi_target *t, const struct ipmi_options *o,
                               enum session_kind kind, char *detail, size_t size)
{
    ipmi_ctx_t ctx = ipmi_ctx_create();
    if (!ctx) {
        snprintf(detail, size, "cannot create an IPMI context");
        return NULL;
    }
    unsigned int session =
        kind == SESSION_PATIENT ? 2 * o->session_timeout_ms : o->session_timeout_ms;
    unsigned int retransmission = kind == SESSION_READS     ? o->retransmission_timeout_ms
                                  : kind == SESSION_COMMAND ? o->session_timeout_ms - 1
                                                            : o->session_timeout_ms;
    int rc;
    if (t->lan_2_0)
        rc = ipmi_ctx_open_outofband_2_0(
            ctx, t->address, t->username, t->password, NULL, 0, IPMI_PRIVILEGE_LEVEL_ADMIN,
            (uint8_t)t->cipher_suite, session, retransmission, t->workarounds, IPMI_FLAGS_DEFAULT);
    else
        rc = ipmi_ctx_open_outofband(ctx, t->address, t->username, t->password,
                                     IPMI_AUTHENTICATION_TYPE_MD5, IPMI_PRIVILEGE_LEVEL_ADMIN,
                                     session, retransmission, t->workarounds, IPMI_FLAGS_DEFAULT);
    if (rc < 0) {
        /* the BMC's error, never the password */
        snprintf(detail, size, "cannot open a session with BMC %s: %s", t->address,
                 ipmi_ctx_errormsg(ctx));
        ipmi_ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

static void close_session(ipmi_ctx_t ctx)
{
    if (ctx) {
        ipmi_ctx_close(ctx);
        ipmi_ctx_destroy(ctx);
    }
}

/* 1 on, 0 off, -1 error. */
static int read_power(ipmi_ctx_t ctx, char *detail, size_t size)
{
    fiid_obj_t st = fiid_obj_create(tmpl_cmd_get_chassis_status_rs);
    uint64_t on = 0;
    int r = -1;
    if (st && ipmi_cmd_get_chassis_status(ctx, st) >= 0 &&
        FIID_OBJ_GET(st, "current_power_state.power_is_on", &on) >= 0)
        r = on ? 1 : 0;
    else
        snprintf(detail, size, "cannot read the chassis status: %s", ipmi_ctx_errormsg(ctx));
    fiid_obj_destroy(st);
    return r;
}

/* Sends one chassis control command on a session of its own that does not
 * resend it while the BMC may still answer (SESSION_COMMAND); a BMC whose
 * session cannot be opened so gets a SESSION_PATIENT one. Opening a session
 * sends nothing that changes the chassis. The fence (NULL: none) is asked
 * once the session is open, right before the command. 0 sent, -1 failed,
 * 1 fenced: not sent; why says which. */
static int chassis_control(const struct ipmi_target *t, const struct ipmi_options *o,
                           const struct action_fence *fence, uint8_t command, char *why,
                           size_t size)
{
    ipmi_ctx_t ctx = open_session(t, o, SESSION_COMMAND, why, size);
    if (!ctx)
        ctx = open_session(t, o, SESSION_PATIENT, why, size);
    if (!ctx)
        return -1;
    /* FreeIPMI's session timeout counts from the last answer, its copy's
     * from the send: a pause between them lets it give up right after the
     * one copy, rather than wait again */
    usleep(20 * 1000);
    if (action_fenced(fence, why, size)) {
        close_session(ctx);
        return 1;
    }
    fiid_obj_t rs = fiid_obj_create(tmpl_cmd_chassis_control_rs);
    int rc = rs ? ipmi_cmd_chassis_control(ctx, command, rs) : -1;
    if (rc < 0)
        snprintf(why, size, "%s", ipmi_ctx_errormsg(ctx));
    fiid_obj_destroy(rs);
    close_session(ctx);
    return rc;
}

int ipmi_power_state(const struct ipmi_target *t, const struct ipmi_options *o, char *detail,
                     size_t size)
{
    struct ipmi_options defaults;
    if (!o) {
        ipmi_options_default(&defaults);
        o = &defaults;
    }
    ipmi_ctx_t ctx = open_session(t, o, SESSION_READS, detail, size);
    if (!ctx)
        return -1;
    int r = read_power(ctx, detail, size);
    close_session(ctx);
    return r;
}

/* Polls the power state until it equals want or the deadline passes;
 * returns the ms it took, or -1. Reopens the session when it drops. */
static int64_t wait_for(ipmi_ctx_t *ctx, const struct ipmi_target *t, const struct ipmi_options *o,
                        int want, int64_t start, int64_t deadline, char *detail, size_t size)
{
    while (medic_time_monotonic() < deadline) {
        if (!*ctx)
            *ctx = open_session(t, o, SESSION_READS, detail, size);
        int on = *ctx ? read_power(*ctx, detail, size) : -1;
        if (on < 0 && *ctx) {
            close_session(*ctx); /* a BMC may drop sessions across a power change */
            *ctx = NULL;
        }
        if (on == want)
            return (medic_time_monotonic() - start) / MEDIC_NS_PER_MS;
        usleep(200 * 1000);
    }
    return -1;
}

static enum medic_outcome refused(ipmi_ctx_t ctx, const char *why, char *detail, size_t size)
{
    snprintf(detail, size, "%s", why);
    close_session(ctx);
    return MEDIC_OUTCOME_REFUSED;
}

enum medic_outcome ipmi_power_cycle(const struct ipmi_target *t, int power_on,
                                    const struct ipmi_options *o, char *detail, size_t size)
{
    struct ipmi_options defaults;
    if (!o) {
        ipmi_options_default(&defaults);
        o = &defaults;
    }
    char why[256] = "";
    ipmi_ctx_t ctx = open_session(t, o, SESSION_READS, detail, size);
    if (!ctx)
        return strstr(detail, "timeout") || strstr(detail, "timed out") ? MEDIC_OUTCOME_TIMED_OUT
                                                                        : MEDIC_OUTCOME_FAILED;
    int64_t start = medic_time_monotonic();
    int64_t deadline = start + (int64_t)o->confirm_timeout_ms * MEDIC_NS_PER_MS;
    int before = read_power(ctx, detail, size);
    if (before < 0) {
        close_session(ctx);
        return MEDIC_OUTCOME_FAILED;
    }
    enum medic_outcome result = MEDIC_OUTCOME_SUCCEEDED;
    if (before == 0) {
        /* a power cycle does nothing to a node that is off */
        if (!power_on) {
            snprintf(detail, size, "the node was off; not powered on (power_on: false)");
            close_session(ctx);
            return MEDIC_OUTCOME_FAILED;
        }
        int up = chassis_control(t, o, o->fence, IPMI_CHASSIS_CONTROL_POWER_UP, why, sizeof(why));
        if (up > 0)
            return refused(ctx, why, detail, size);
        if (up < 0 &&
            wait_for(&ctx, t, o, 1, start, start + 5 * MEDIC_NS_PER_SEC, detail, size) < 0) {
            snprintf(detail, size, "the node was off; power on failed: %s", why);
            close_session(ctx);
            return MEDIC_OUTCOME_FAILED;
        }
        int64_t on_ms = wait_for(&ctx, t, o, 1, start, deadline, detail, size);
        if (on_ms < 0)
            snprintf(detail, size, "the node was off; powered on, still off after %u ms",
                     o->confirm_timeout_ms);
        else
            snprintf(detail, size, "the node was off: powered on (on after %lld ms)",
                     (long long)on_ms);
        close_session(ctx);
        return on_ms < 0 ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_SUCCEEDED;
    }
    int cycle = chassis_control(t, o, o->fence, IPMI_CHASSIS_CONTROL_POWER_CYCLE, why, sizeof(why));
    if (cycle > 0)
        return refused(ctx, why, detail, size);
    int sent = cycle == 0;
    /* sent or not, the power state is the truth: a lost reply is not resent */
    int64_t off_ms = wait_for(&ctx, t, o, 0, start, sent ? deadline : start + 10 * MEDIC_NS_PER_SEC,
                              detail, size);
    if (off_ms < 0) {
        if (sent)
            snprintf(detail, size, "power cycle accepted but the node never went off within %u ms",
                     o->confirm_timeout_ms);
        else
            snprintf(detail, size,
                     "power cycle failed (%s) and the node never went off; not resent", why);
        close_session(ctx);
        return sent ? MEDIC_OUTCOME_TIMED_OUT : MEDIC_OUTCOME_FAILED;
    }
    int64_t on_ms = wait_for(&ctx, t, o, 1, start, deadline, detail, size);
    if (on_ms < 0 && power_on) {
        /* it stayed off: power it on, as the policy says */
        char why_on[256] = "";
        chassis_control(t, o, NULL, IPMI_CHASSIS_CONTROL_POWER_UP, why_on, sizeof(why_on));
        on_ms = wait_for(&ctx, t, o, 1, medic_time_monotonic(),
                         medic_time_monotonic() + 30 * MEDIC_NS_PER_SEC, detail, size);
        if (on_ms >= 0)
            snprintf(detail, size,
                     "power cycled: off after %lld ms, stayed off, powered on (on %lld ms later)",
                     (long long)off_ms, (long long)on_ms);
        else
            result = MEDIC_OUTCOME_TIMED_OUT;
    } else if (on_ms >= 0) {
        snprintf(detail, size, "power cycled%s: off after %lld ms, on after %lld ms",
                 sent ? "" : " (the reply was lost; the power state confirms it)",
                 (long long)off_ms, (long long)on_ms);
    } else {
        result = MEDIC_OUTCOME_TIMED_OUT;
    }
    if (result == MEDIC_OUTCOME_TIMED_OUT)
        snprintf(detail, size, "power cycle: off after %lld ms, not back on within %u ms%s",
                 (long long)off_ms, o->confirm_timeout_ms,
                 power_on ? " even after a power on" : " (power_on: false)");
    close_session(ctx);
    return result;
}

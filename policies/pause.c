/* SPDX-License-Identifier: Apache-2.0 */
/* The fleet-wide pause: a person holds every disruptive step, everywhere,
 * without a configuration change. A transient guard (policy__check_guards):
 * held steps are decided again once it ends, while their alerts are still
 * fresh; undo steps (resume, restore_power_limit) never wait for it, so a
 * pause never traps a node out of service. It is part of the engine's
 * state (its engine row): it survives restarts and takeovers. */
#include "engine_internal.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* On-call hears when a pause starts and ends (safety.storm.notifier, the
 * notifier that hears about medic itself). */
static void pause_notice(const struct policy_context *ctx, int64_t now, const char *message,
                         struct policy_decisions *out)
{
    struct policy_decision *d = policy__new_decision(out);
    if (!d)
        return;
    d->time = now;
    d->risk = NAN;
    policy__notify_oncall(ctx, d, message, out);
}

static void end_pause(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                      const char *how, struct policy_decisions *out)
{
    char message[1100];
    snprintf(message, sizeof(message),
             "medic pause ended (%s; it was paused by %s: %s): disruptive steps held meanwhile "
             "are decided again while their alerts are fresh",
             how, st->pause.by, st->pause.reason);
    memset(&st->pause, 0, sizeof(st->pause));
    policy__touch_engine(st);
    pause_notice(ctx, now, message, out);
}

int policy_pause(const struct policy_context *ctx, struct policy_state *st,
                 const struct policy_pause *p, int64_t now, struct policy_decisions *out, char *why,
                 size_t why_size)
{
    if (!p->pause) {
        if (!st->pause.on) {
            snprintf(why, why_size, "medic is not paused");
            return MEDIC_E_NOTFOUND;
        }
        char how[200];
        snprintf(how, sizeof(how), "unpaused by %s", p->by);
        end_pause(ctx, st, now, how, out);
        return out->failed;
    }
    if (p->until != MEDIC_TIME_UNSET && p->until <= now) {
        snprintf(why, why_size, "until is not in the future");
        return MEDIC_E_INVALID;
    }
    int again = st->pause.on;
    const char *reason = p->reason && p->reason[0] ? p->reason : "no reason given";
    if (again && strcmp(st->pause.by, p->by) != 0) {
        /* two people's pauses: both are kept, and the later end wins (a
         * shorter one never cuts another's short) */
        char by[sizeof(st->pause.by)], text[sizeof(st->pause.reason)];
        snprintf(by, sizeof(by), "%.60s, %.60s", st->pause.by, p->by);
        snprintf(text, sizeof(text), "%.180s; and by %.60s: %.130s", st->pause.reason, p->by,
                 reason);
        snprintf(st->pause.by, sizeof(st->pause.by), "%s", by);
        snprintf(st->pause.reason, sizeof(st->pause.reason), "%s", text);
        if (st->pause.until != MEDIC_TIME_UNSET &&
            (p->until == MEDIC_TIME_UNSET || p->until > st->pause.until))
            st->pause.until = p->until;
    } else { /* a first pause, or its own person's renewal: as asked now */
        st->pause.on = 1;
        snprintf(st->pause.by, sizeof(st->pause.by), "%s", p->by);
        snprintf(st->pause.reason, sizeof(st->pause.reason), "%s", reason);
        if (!again)
            st->pause.since = now;
        st->pause.until = p->until;
    }
    policy__touch_engine(st);
    char until[48] = "until unpaused", message[1100];
    if (st->pause.until != MEDIC_TIME_UNSET) {
        char t[40];
        snprintf(until, sizeof(until), "until %s",
                 medic_time_format(st->pause.until, t, sizeof(t)));
    }
    snprintf(message, sizeof(message),
             "medic %s by %s (%s): every disruptive step is held fleet-wide %s; resume and "
             "restore_power_limit of nodes medic disrupted still run, and an action under way "
             "finishes",
             again ? "pause renewed" : "paused", st->pause.by, st->pause.reason, until);
    pause_notice(ctx, now, message, out);
    return out->failed;
}

void policy__pause_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                        struct policy_decisions *out)
{
    if (st->pause.on && st->pause.until != MEDIC_TIME_UNSET && now >= st->pause.until)
        end_pause(ctx, st, now, "its time ran out", out);
}

int policy_paused(const struct policy_state *st, struct policy_pause_state *out)
{
    memset(out, 0, sizeof(*out));
    if (!st->pause.on)
        return 0;
    snprintf(out->by, sizeof(out->by), "%s", st->pause.by);
    snprintf(out->reason, sizeof(out->reason), "%s", st->pause.reason);
    out->since = st->pause.since;
    out->until = st->pause.until;
    return 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The held steps' notice: a disruptive step that a cap, a maintenance
 * window, a budget or a cooldown held or suppressed leaves a broken node
 * in service, so on-call is told, batched: at most one message per
 * safety.held_notice, listing each such incident and why. Steps held by a
 * storm or a person's pause are left out (the storm notice and the person
 * said so already). */
#include "engine_internal.h"
#include "buf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define HELD_NOTICE_LINES 20

void policy__held_notice(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                         struct policy_decisions *out)
{
    int64_t interval = ctx->policies->safety.held_notice;
    if (!st->unreported || interval <= 0 || (st->held_told_at && now - st->held_told_at < interval))
        return;
    /* st->unreported says there is something to tell; the incidents say
     * what (one closed meanwhile is no longer listed) */
    struct medic_buf lines, msg;
    medic_buf_init(&lines, 0);
    medic_buf_init(&msg, 0);
    size_t told = 0;
    for (size_t i = 0; i < st->incident_count; i++) {
        struct incident *in = st->incidents[i];
        if (!in->unreported)
            continue;
        in->unreported = 0;
        if (told++ >= HELD_NOTICE_LINES)
            continue;
        const struct policy *pol = policy__incident_policy(ctx, in);
        if (in->held && pol && in->next_step < pol->step_count)
            medic_buf_printf(&lines, "\n- %s (policy %s, incident %lld): step %zu (%s) held: %s",
                             in->node, in->policy, (long long)in->id, in->next_step + 1,
                             medic_action_name(pol->steps[in->next_step].action.kind), in->held_by);
        else
            medic_buf_printf(&lines, "\n- %s (policy %s, incident %lld): %s", in->node, in->policy,
                             (long long)in->id,
                             in->halted ? in->halted_by : "a step was held, and is no longer");
    }
    medic_buf_printf(&msg,
                     "medic held or suppressed disruptive steps on %zu node(s): they may still "
                     "be failing and in service%s",
                     told, lines.data ? lines.data : "");
    if (told > HELD_NOTICE_LINES)
        medic_buf_printf(&msg, "\n- and %zu more", told - HELD_NOTICE_LINES);
    if (ctx->external_url)
        medic_buf_printf(&msg, "\non-call page: %.200s/", ctx->external_url);
    medic_buf_release(&lines);
    st->unreported = 0;
    if (!told) {
        medic_buf_release(&msg);
        return;
    }
    st->held_told_at = now;
    struct policy_decision *d = policy__new_decision(out);
    if (d && !msg.error) {
        d->time = now;
        d->risk = NAN;
        policy__notify_oncall(ctx, d, msg.data, out);
        int none = d->verdict == VERDICT_SUPPRESSED;
        snprintf(d->reason, sizeof(d->reason),
                 "held steps notice: %zu incident(s) with a disruptive step held or suppressed%s",
                 told, none ? "; no safety.storm.notifier to tell" : "");
    } else {
        out->failed = MEDIC_E_NOMEM;
    }
    medic_buf_release(&msg);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* What on-call sees of the policy state: the open incidents, each with
 * the step its ladder takes next. */
#include "engine_internal.h"
#include "table.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The incident's next move, for a person: what it waits for, why it
 * stopped, or its next step and when that is due. */
static void next_move(const struct policy_context *ctx, struct incident *in, char *what,
                      size_t size, char *due, size_t due_size)
{
    due[0] = '\0';
    const struct policy *pol = policy__incident_policy(ctx, in);
    if (in->closing)
        snprintf(what, size, "closing: %s", in->closing_cause);
    else if (in->awaiting)
        snprintf(what, size, "waiting for the %s outcome", medic_action_name(in->awaiting_kind));
    else if (in->state == INCIDENT_QUARANTINED)
        snprintf(what, size,
                 "quarantined, waits for a person (release: /release/%s, medic node "
                 "release): %.150s",
                 in->node, in->quarantine_why);
    else if (in->state == INCIDENT_FAILED)
        snprintf(what, size, "stopped: needs a person");
    else if (in->pending) {
        /* the step that waits, not the one after it */
        if (in->pending_decision > 0)
            snprintf(what, size,
                     "step %zu waits for approval (/approvals/%lld, medic approve %lld): %.200s",
                     in->pending_step + 1, (long long)in->pending_decision,
                     (long long)in->pending_decision,
                     in->pending_offer ? in->pending_offer : "the step");
        else
            snprintf(what, size, "step %zu waits for approval: %.200s", in->pending_step + 1,
                     in->pending_offer ? in->pending_offer : "the step");
        medic_time_format(in->pending_until, due, due_size);
    } else if (in->approved_offer && in->held)
        snprintf(what, size, "step %zu approved by %s, held: %s", in->next_step + 1,
                 in->approved_by, in->held_by);
    else if (in->halted)
        snprintf(what, size, "no further disruptive step: %s", in->halted_by);
    else if (in->held && pol && in->next_step < pol->step_count)
        snprintf(what, size, "step %zu (%s) held: %s", in->next_step + 1,
                 medic_action_name(pol->steps[in->next_step].action.kind), in->held_by);
    else if (!pol)
        snprintf(what, size, "its policy is no longer configured");
    else if (in->next_step >= pol->step_count)
        snprintf(what, size, "ladder done; on resolve: %zu step(s)", pol->on_resolved_count);
    else {
        const struct policy_step *step = &pol->steps[in->next_step];
        int64_t grace = ctx->policies->safety.restart_grace;
        int64_t due_at = policy__step_due(in, step);
        if (medic_action_disruptive(step->action.kind) &&
            !policy__incident_fresh(in, grace, in->fresh_after) &&
            in->fresh_after + grace > due_at) {
            /* after a restart: the alert seen again, or restart_grace */
            char until[40];
            medic_time_format(in->fresh_after + grace, until, sizeof(until));
            snprintf(what, size,
                     "step %zu: %s; medic restarted: it waits for its alert to be seen again, "
                     "or until %s (safety.restart_grace)",
                     in->next_step + 1, medic_action_name(step->action.kind), until);
            due_at = in->fresh_after + grace;
        } else {
            snprintf(what, size, "step %zu: %s", in->next_step + 1,
                     medic_action_name(step->action.kind));
        }
        medic_time_format(due_at, due, due_size);
    }
}

int policy_open_incidents_table(const struct policy_context *ctx, struct policy_state *st,
                                const char *node, size_t limit, struct medic_table *out)
{
    static const char *const names[] = {"incident", "node",      "policy", "state",    "alerts",
                                        "risk",     "next_step", "due",    "opened_at"};
    static const enum medic_column_type types[] = {MEDIC_COL_INT,  MEDIC_COL_TEXT, MEDIC_COL_TEXT,
                                                   MEDIC_COL_TEXT, MEDIC_COL_INT,  MEDIC_COL_REAL,
                                                   MEDIC_COL_TEXT, MEDIC_COL_TEXT, MEDIC_COL_TEXT};
    int rc = medic_table_init(out, 9, names, types);
    for (size_t i = 0; rc == 0 && i < st->incident_count && out->nrows < limit; i++) {
        struct incident *in = st->incidents[i];
        if (in->final || (node && strcmp(in->node, node) != 0))
            continue;
        char id[24], alerts[24], risk[32], what[400], due[40], opened[40];
        snprintf(id, sizeof(id), "%lld", (long long)in->id);
        snprintf(alerts, sizeof(alerts), "%zu", in->member_count);
        snprintf(risk, sizeof(risk), "%.3f", in->risk);
        next_move(ctx, in, what, sizeof(what), due, sizeof(due));
        medic_time_format(in->opened_at, opened, sizeof(opened));
        const char *values[] = {id,         in->node,
                                in->policy, policy_incident_state_name(in->state),
                                alerts,     isnan(in->risk) ? NULL : risk,
                                what,       due[0] ? due : NULL,
                                opened};
        rc = medic_table_add_row(out, values);
    }
    if (rc)
        medic_table_release(out);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* A step's action as decided for one incident: its literal parameters,
 * the GPU taken from the incident's alert, and its text rendered from the
 * step's template. */
#include "engine_internal.h"
#include "buf.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decided action: the step's literal parameters, its text rendered
 * from the template and cut to MEDIC_ACTION_TEXT_MAX at a UTF-8 boundary
 * with a visible marker. Returns 0 or MEDIC_E_NOMEM. */
int policy__build_action(const struct policy_step *step, const struct incident *in,
                         struct policy_decision *d)
{
    int rc = medic_action_copy(&d->action, &step->action);
    if (rc)
        return rc;
    d->has_action = 1;
    struct medic_gpu_list *limited = &d->action.u.power_limit.gpus;
    if (step->action.kind == MEDIC_ACTION_POWER_LIMIT && limited->from_alert) {
        /* gpus: alert: the GPU of the alert that opened the incident */
        struct medic_labels labels = {in->labels.items, in->labels.count};
        int index = medic_gpu_index(medic_labels_get(&labels, "gpu"));
        limited->count = 0; /* none named: the executor refuses, never every GPU */
        if (index >= 0)
            limited->items[limited->count++] = index;
    }
    if (step->action.kind == MEDIC_ACTION_GPU_RESET) {
        /* the GPU of the alert that opened the incident (dcgm-exporter's labels) */
        struct medic_labels labels = {in->labels.items, in->labels.count};
        const char *gpu = medic_labels_get(&labels, "gpu");
        const char *uuid = medic_labels_get(&labels, "UUID");
        if ((gpu && gpu[0] && medic_action_set_text(&d->action, "gpu", gpu, strlen(gpu))) ||
            (uuid && uuid[0] && medic_action_set_text(&d->action, "uuid", uuid, strlen(uuid))))
            return MEDIC_E_NOMEM;
    }
    const char *text_key = medic_action_text_key(step->action.kind);
    int drain = step->action.kind == MEDIC_ACTION_DRAIN; /* a drain always has a reason */
    if (!text_key || (!step->has_text && !drain))
        return 0;
    struct medic_labels labels = {in->labels.items, in->labels.count};
    struct medic_labels annotations = {in->annotations.items, in->annotations.count};
    struct template_vars vars = {&labels, &annotations, in->risk, in->node, in->previous};
    struct medic_buf text;
    medic_buf_init(&text, POLICY_TEMPLATE_MAX_OUTPUT + 1);
    if (step->has_text)
        rc = policy_template_render(&step->text, &vars, &text);
    else
        rc = medic_buf_printf(&text, "%s on %s", in->alertname, in->node);
    char suffix[96] = "";
    if (drain) /* Slurm shows who drained: say it was medic */
        snprintf(suffix, sizeof(suffix), " (medic policy %s)", in->policy);
    size_t room = MEDIC_ACTION_TEXT_MAX - strlen(suffix);
    size_t size = (text.len < room ? text.len : room) + 1;
    char *fitted = rc == 0 ? malloc(size + strlen(suffix)) : NULL;
    if (fitted) {
        size_t len = medic_text_fit(fitted, size, text.data ? text.data : "", text.len);
        memcpy(fitted + len, suffix, strlen(suffix) + 1);
        char **field = medic_action_text_field(&d->action, text_key);
        free(*field);
        *field = fitted; /* the action owns it now */
    } else if (rc == 0) {
        rc = MEDIC_E_NOMEM;
    }
    medic_buf_release(&text);
    return rc;
}

/* A verify's evidence of the repair it follows: after a power cycle, a
 * boot later than it; after a GPU reset, that GPU enumerated later than it.
 * Returns 0 or MEDIC_E_NOMEM. */
int policy__verify_evidence(const struct incident *in, struct medic_action *verify)
{
    char when[40];
    if (in->cycled_at) {
        medic_time_format(in->cycled_at, when, sizeof(when));
        if (medic_action_set_text(verify, "booted_after", when, strlen(when)))
            return MEDIC_E_NOMEM;
    }
    if (in->reset_at && in->reset_at > in->cycled_at) { /* a boot since enumerates every GPU */
        struct medic_labels labels = {in->labels.items, in->labels.count};
        const char *gpu = medic_labels_get(&labels, "gpu");
        medic_time_format(in->reset_at, when, sizeof(when));
        if (medic_action_set_text(verify, "reset_after", when, strlen(when)) ||
            medic_action_set_text(verify, "reset_gpu", gpu ? gpu : "", gpu ? strlen(gpu) : 0))
            return MEDIC_E_NOMEM;
    }
    return 0;
}

/* What came of a step, in words, for the next notify step's
 * {{ $previous }}. */
void policy__remember_step(struct incident *in, enum medic_action_kind kind, const char *what,
                           const char *reason)
{
    if (kind == MEDIC_ACTION_NOTIFY)
        return;
    snprintf(in->previous, sizeof(in->previous), "%s %s%s%.180s", medic_action_name(kind), what,
             reason && *reason ? ": " : "", reason ? reason : "");
    policy__touch_incident(in);
}

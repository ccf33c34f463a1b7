#include "engine_evaluate.h"

void engine_context_from_config(const struct medic_config *config, struct policy_context *out)
{
    out->policies = &config->policies;
    out->inventory = &config->inventory;
    out->node_labels = (const char *const *)config->node_labels;
    out->node_label_count = config->node_label_count;
    out->live = config->mode == MEDIC_MODE_LIVE;
}

int engine_evaluate_notification(const struct policy_context *ctx, struct policy_state *st,
                                 const struct medic_notification *n, const double *risks,
                                 double risk, int64_t now, struct policy_decisions *out)
{
    int rc = policy_tick(ctx, st, now, out);
    for (size_t i = 0; i < n->alert_count && rc == 0; i++) {
        const struct medic_alert *a = &n->alerts[i];
        struct policy_alert pa = {a->fingerprint,  a->status,    &a->labels,
                                  &a->annotations, a->starts_at, risks ? risks[i] : risk};
        rc = policy_evaluate(ctx, st, &pa, now, out);
    }
    return rc;
}

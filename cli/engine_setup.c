#include "engine_setup.h"

void medic_engine_context(const struct medic_config *config, struct engine_context *out)
{
    out->policies = &config->policies;
    out->inventory = &config->inventory;
    out->node_labels = (const char *const *)config->node_labels;
    out->node_label_count = config->node_label_count;
    out->live = config->mode == MEDIC_MODE_LIVE;
}

int medic_engine_notification(const struct engine_context *ctx, struct engine_state *st,
                              const struct medic_notification *n, const double *risks, double risk,
                              int64_t now, struct engine_decisions *out)
{
    int rc = engine_tick(ctx, st, now, out);
    for (size_t i = 0; i < n->alert_count && rc == 0; i++) {
        const struct medic_alert *a = &n->alerts[i];
        struct engine_alert ea = {a->fingerprint,  a->status,    &a->labels,
                                  &a->annotations, a->starts_at, risks ? risks[i] : risk};
        rc = engine_evaluate(ctx, st, &ea, now, out);
    }
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_evaluate.h"

#include <math.h>
#include <stdio.h>

void engine_context_from_config(const struct medic_config *config, struct policy_context *out)
{
    out->policies = &config->policies;
    out->inventory = &config->inventory;
    out->node_labels = (const char *const *)config->node_labels;
    out->node_label_count = config->node_label_count;
    out->live = medic_mode_acts(config->mode);
    out->approve = config->mode == MEDIC_MODE_APPROVE;
    out->external_url = config->external_url;
    out->slurm_maint = NULL; /* engine_slurm_view_context sets them where a reader runs */
    out->slurm_node = NULL;
    out->slurm_arg = NULL;
    out->decision_ids = 0; /* the daemon's rounds set it: they record decisions by id */
}

/* The policy engine could not make every decision for alert a (NULL: the
 * scheduler's round): record that as a decision with verdict error, so
 * that nothing is lost silently, and go on with the next alert. */
static int record_failure(const struct policy_context *ctx, const struct medic_alert *a,
                          double risk, int64_t now, struct policy_decisions *out)
{
    const char *why =
        out->failed == MEDIC_E_LIMIT ? "over the cap of decisions in one round" : "out of memory";
    char node[128] = "", reason[400];
    out->failed = 0;
    if (a && medic_alert_node(&a->labels, ctx->node_labels, ctx->node_label_count, node,
                              sizeof(node)) != 0)
        node[0] = '\0';
    if (a)
        snprintf(reason, sizeof(reason),
                 "medic could not decide this alert (%s): a step may be missing; check node "
                 "'%s' by hand",
                 why, node);
    else
        snprintf(reason, sizeof(reason),
                 "medic could not decide every due escalation step (%s); check the nodes with "
                 "open alerts by hand",
                 why);
    return policy_decisions_add_error(out, node,
                                      a ? medic_labels_get(&a->labels, "alertname") : NULL,
                                      a ? a->fingerprint : NULL, risk, now, reason);
}

int engine_tick(const struct policy_context *ctx, struct policy_state *st, int64_t now,
                struct policy_decisions *out)
{
    return policy_tick(ctx, st, now, out) ? record_failure(ctx, NULL, NAN, now, out) : 0;
}

int engine_evaluate_notification(const struct policy_context *ctx, struct policy_state *st,
                                 const struct medic_notification *n, int duplicate,
                                 const double *risks, const char *const *recoveries, double risk,
                                 int64_t now, struct policy_decisions *out)
{
    /* a round evaluates its notifications at one time: the state is
     * brought up to it once, not once per notification (a tick visits
     * the open incidents with something due) */
    int rc = policy_last_tick(st) == now ? 0 : engine_tick(ctx, st, now, out);
    for (size_t i = 0; i < n->alert_count && rc == 0; i++) {
        const struct medic_alert *a = &n->alerts[i];
        double r = duplicate ? NAN : risks ? risks[i] : risk;
        struct policy_alert pa = {a->fingerprint,
                                  a->status,
                                  &a->labels,
                                  &a->annotations,
                                  a->starts_at,
                                  r,
                                  recoveries && !duplicate ? recoveries[i] : NULL};
        if (duplicate)
            policy_seen_again(ctx, st, &pa, now);
        else if (policy_evaluate(ctx, st, &pa, now, out))
            rc = record_failure(ctx, a, r, now, out);
    }
    return rc;
}

struct row_loader {
    struct policy_state *st;
    struct medic_error *err;
};

static int load_row(void *arg, const char *kind, const char *key, const char *value, size_t len)
{
    struct row_loader *l = arg;
    (void)key;
    return policy_state_load_row(l->st, kind, value, len, l->err);
}

int engine_state_read(struct audit_reader *reader, struct policy_state **out, int *legacy,
                      struct medic_error *err)
{
    struct row_loader l = {policy_state_new(), err};
    size_t rows = 0;
    *legacy = 0;
    if (!l.st)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = audit_read_engine_rows(reader, load_row, &l, &rows, err);
    if (rc == 0 && rows == 0) {
        struct medic_buf saved;
        medic_buf_init(&saved, (size_t)1 << 30);
        rc = audit_read_engine_state(reader, &saved, err);
        if (rc == 0) {
            policy_state_free(l.st);
            l.st = NULL;
            rc = policy_state_import(saved.data, saved.len, &l.st, err);
            *legacy = rc == 0;
        } else if (rc == MEDIC_E_NOTFOUND) {
            rc = 0; /* nothing evaluated yet */
        }
        medic_buf_release(&saved);
    }
    if (rc) {
        policy_state_free(l.st);
        return rc;
    }
    policy_state_loaded(l.st);
    *out = l.st;
    return 0;
}

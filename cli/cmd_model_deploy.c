/* SPDX-License-Identifier: Apache-2.0 */
/* medic model check --dataset: whether a retrained model may replace the
 * one in use, judged on labelled windows it never trained on. */
#include "commands.h"
#include "default_model.h"
#include "deploy_check.h"

#include <stdio.h>
#include <stdlib.h>

static void row(const char *name, const struct deploy_stats *s)
{
    printf("  %-30s %7.3f  %7.3f\n", name, s->ap, s->recall);
}

int medic_cmd_model_check_dataset(const char *model_path, const char *against_path,
                                  const char *dataset_path, size_t draws, uint64_t seed)
{
    struct model model = {0}, against = {0};
    struct deploy_dataset d = {0};
    struct medic_error err = {0};
    double *scores = NULL;
    int status = 1;
    const char *failed = model_path;
    if (model_load(model_path, &model, &err))
        goto out;
    failed = against_path ? against_path : "the built-in model";
    if (model_load_or_builtin(against_path, &against, &err))
        goto out;
    failed = dataset_path;
    if (deploy_dataset_load(dataset_path, &d, &err))
        goto out;
    scores = malloc(3 * (d.count ? d.count : 1) * sizeof(double));
    if (!scores) {
        failed = "scoring";
        err = (struct medic_error){.code = MEDIC_E_NOMEM, .msg = "out of memory"};
        goto out;
    }
    double *new_risk = scores, *old_risk = scores + d.count, *rule = scores + 2 * d.count;
    char used[1024];
    failed = model_path;
    if (deploy_model_scores(&model, &d, new_risk, &err))
        goto out;
    failed = against_path ? against_path : "the built-in model";
    if (deploy_model_scores(&against, &d, old_risk, &err))
        goto out;
    deploy_rule_scores(&d, rule, used, sizeof(used));
    struct deploy_report r;
    failed = "comparing";
    if (deploy_compare(&d, new_risk, old_risk, rule, draws, seed, &r)) {
        err = (struct medic_error){.code = MEDIC_E_NOMEM, .msg = "out of memory"};
        goto out;
    }
    failed = model_path;
    if (deploy_monotone_probe(&model, &d, new_risk, &r, &err))
        goto out;
    failed = NULL;
    char in_use[128];
    snprintf(in_use, sizeof(in_use), "in use (%.12s)", against.hash);
    printf("dataset: %s: %zu windows, %zu positive from %zu faults%s, %zu negative; "
           "horizon %s\n",
           dataset_path, d.count, d.positives, d.faults,
           d.grouped ? "" : " (no samples metadata: each window counted as a fault)",
           d.count - d.positives, d.horizon);
    printf("new model: %s (%.12s)\nin use: %s\nrule: %s\n\n", model_path, model.hash,
           against_path ? against_path : "the built-in model", used[0] ? used : "no feature");
    printf("  %-30s %7s  %7s\n", "", "PR-AUC", "recall at 1% FPR");
    row("new model", &r.model);
    row(in_use, &r.against);
    row("rule", &r.rule);
    printf("\nlead over the model in use: %+.3f PR-AUC (95%% lower bound %+.3f)\n"
           "lead over the rule:         %+.3f PR-AUC (95%% lower bound %+.3f)\n"
           "(lower bounds from %zu resamplings of the faults and negative draws, seed %llu)\n\n",
           r.over_against.mean, r.over_against.lower, r.over_rule.mean, r.over_rule.lower, r.draws,
           (unsigned long long)seed);
    printf("more evidence, the new model's risk (each input raised by one over the last %d "
           "steps):\n",
           DEPLOY_PROBE_STEPS);
    for (size_t k = 0; k < r.monotone_count; k++)
        printf("  %-30s falls in %5.1f%% of the windows (lowest new/old %.2f)\n",
               r.monotone[k].name, 100 * r.monotone[k].falls, r.monotone[k].lowest);
    if (!r.monotone_count)
        printf("  (the model reads none of the evidence inputs)\n");
    printf("\n");
    char why[512];
    if (deploy_verdict(&d, &r, why, sizeof(why))) {
        printf("verdict: deploy: it ranks this fleet's failing GPUs better than the model in "
               "use and the rule, by more than chance\n");
        status = 0;
    } else {
        printf("verdict: refused: %s\n", why);
    }
out:
    if (failed)
        fprintf(stderr, "medic model check: %s: %s\n", failed, err.msg);
    free(scores);
    deploy_dataset_release(&d);
    model_release(&model);
    model_release(&against);
    return status;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "options.h"
#include "default_model.h"
#include "feature_spec.h"
#include "lstm.h"
#include "risk.h"
#include "rule_score.h"
#include "table.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic predict [--model FILE]\n"
    "                     (--csv FILE | --prometheus URL --node N [--gpu G])\n"
    "                     [--at TIME] [--format table|json] [--window-csv FILE]\n"
    "\n"
    "The failure risk of one window of telemetry.\n"
    "\n",
    "The model file must describe its features (window, step, features with\n"
    "PromQL templates and scaler); see docs/model.md.\n",
};

/* Writes one scored window back in raw units (the scaler undone) as CSV
 * with the features' names as header, the format read_csv reads. */
static int write_window(const char *path, const struct feature_spec *spec, const float *scaled,
                        size_t steps, struct medic_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return medic_error_set(err, MEDIC_E_IO, "cannot write: %s", strerror(errno));
    for (size_t d = 0; d < spec->count; d++)
        fprintf(f, "%s%s", d ? "," : "", spec->items[d].name);
    fputc('\n', f);
    for (size_t t = 0; t < steps; t++)
        for (size_t d = 0; d < spec->count; d++) {
            const struct feature *ft = &spec->items[d];
            fprintf(f, "%.9g%s", scaled[t * spec->count + d] * ft->scale + ft->center,
                    d + 1 < spec->count ? "," : "\n");
        }
    if (fclose(f) != 0)
        return medic_error_set(err, MEDIC_E_IO, "cannot write: %s", strerror(errno));
    return 0;
}

static int read_csv(const char *path, const struct feature_spec *spec, float *rows, size_t *steps,
                    struct medic_error *err)
{
    char *text;
    size_t len;
    int rc = medic_read_file(path, (size_t)64 << 20, &text, &len, err);
    if (rc)
        return rc;
    int column_of[FEATURES_MAX];
    size_t columns = 0, count = 0, cap = spec->window;
    char *save = NULL;
    float *all = calloc(1, sizeof(float));
    size_t all_rows = 0;
    for (char *line = strtok_r(text, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r')
            line[--l] = '\0';
        if (!l)
            continue;
        char *cs = NULL;
        if (columns == 0) {
            for (char *name = strtok_r(line, ",", &cs); name; name = strtok_r(NULL, ",", &cs)) {
                int found = -1;
                for (size_t d = 0; d < spec->count; d++)
                    if (strcmp(spec->items[d].name, name) == 0)
                        found = (int)d;
                if (found < 0 || columns >= FEATURES_MAX) {
                    rc = medic_error_set(err, MEDIC_E_INVALID,
                                         "%s: column '%.60s' is not one of the model's features",
                                         path, name);
                    break;
                }
                column_of[columns++] = found;
            }
            if (rc == 0 && columns != spec->count)
                rc = medic_error_set(err, MEDIC_E_INVALID, "%s: %zu columns for %zu features", path,
                                     columns, spec->count);
            continue;
        }
        float *grown = realloc(all, (all_rows + 1) * spec->count * sizeof(float));
        if (!grown) {
            rc = medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
            break;
        }
        all = grown;
        size_t c = 0;
        for (char *v = strtok_r(line, ",", &cs); v && c < columns; v = strtok_r(NULL, ",", &cs)) {
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !isfinite(x)) {
                rc = medic_error_set(err, MEDIC_E_INVALID, "%s: row %zu: '%.30s' is not a number",
                                     path, all_rows + 1, v);
                break;
            }
            all[all_rows * spec->count + (size_t)column_of[c++]] = (float)x;
        }
        if (rc == 0 && c != columns)
            rc = medic_error_set(err, MEDIC_E_INVALID, "%s: row %zu has %zu values, not %zu", path,
                                 all_rows + 1, c, columns);
        all_rows++;
    }
    (void)count;
    if (rc == 0 && all_rows < cap)
        rc = medic_error_set(err, MEDIC_E_INVALID, "%s: %zu rows, the model's window is %zu", path,
                             all_rows, cap);
    if (rc == 0) {
        memcpy(rows, all + (all_rows - cap) * spec->count, cap * spec->count * sizeof(float));
        *steps = cap;
    }
    free(all);
    free(text);
    return rc;
}

int medic_cmd_predict(int argc, char **argv)
{
    const char *model_path = NULL, *csv = NULL, *prom = NULL, *node = NULL, *gpu = NULL,
               *window_csv = NULL, *at = NULL;
    int format = MEDIC_FORMAT_TABLE;
    const struct cli_option options[] = {
        CLI_OPT_STRING("csv", &csv, "FILE",
                       "rows are time steps, oldest first; a header row names the columns, "
                       "which must be the model's features (in any order). Values are raw: "
                       "the model's scaler is applied. The last `window` rows are used."),
        CLI_OPT_STRING("prometheus", &prom, "URL",
                       "fetch the window from Prometheus with query_range, each feature's "
                       "PromQL template filled with --node and --gpu; without --gpu every GPU "
                       "of the node is scored and the highest risk is the node's. A GPU "
                       "that sent nothing for over 5 steps while another of the node "
                       "reported is lost: risk 1, with how long (the node's other GPUs are "
                       "fetched with --gpu too, to tell it; a long gap is otherwise an "
                       "error)."),
        CLI_OPT_STRING("node", &node, "N", "with --prometheus: the node"),
        CLI_OPT_STRING("gpu", &gpu, "G", "with --prometheus: one GPU of it"),
        CLI_OPT_STRING("at", &at, "TIME",
                       "with --prometheus: the window ending at TIME (RFC 3339, or a duration "
                       "meaning that long ago: 8h), aligned down to the model's step, instead "
                       "of now: what the model said of node N last night."),
        CLI_OPT_STRING("window-csv", &window_csv, "FILE",
                       "with --prometheus and --gpu: also write the window fetched, raw "
                       "(before the scaler), as CSV that --csv reads back: what the model saw."),
        CLI_OPT_STRING("model", &model_path, "FILE",
                       "a model file; without it, the model built into medic (`medic model "
                       "info` shows it)."),
        CLI_OPT_FORMAT("format", &format, 0, "table (default) or json"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("predict", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    int json = format == MEDIC_FORMAT_JSON;
    if (rest != argc || (!csv == !prom) || (prom && !node))
        return cli_usage_error("predict", &help, options,
                               "give --csv FILE, or --prometheus URL with --node");
    int64_t when = medic_time_now();
    if (at && (!prom || medic_time_parse_bound(at, when, &when))) {
        fprintf(stderr, "medic predict: %s\n",
                !prom ? "--at needs --prometheus"
                      : "--at: expected an RFC 3339 time (2026-11-23T02:00:00Z) or a duration "
                        "before now (8h)");
        return 2;
    }
    if (window_csv && !(prom && gpu)) {
        fputs("medic predict: --window-csv needs --prometheus and --gpu (one window)\n", stderr);
        return 2;
    }
    struct model m;
    struct feature_spec spec;
    struct medic_error err = {0};
    if (model_load_or_builtin(model_path, &m, &err) ||
        features_from_metadata(&m.file, m.D, &spec, &err)) {
        fprintf(stderr, "medic predict: %s\n", err.msg);
        if (m.w)
            model_release(&m);
        return 1;
    }
    struct risk_scorer scorer;
    struct risk_score score = {0};
    int status = 1;
    if (risk_scorer_init(&scorer, &m, &spec)) {
        fprintf(stderr, "medic predict: out of memory\n");
        model_release(&m);
        return 1;
    }
    size_t steps = spec.window;
    int rc;
    if (csv) {
        rc = read_csv(csv, &spec, scorer.rows, &steps, &err);
        if (rc == 0 && (rc = risk_score_rows(&scorer, 1, steps, &score)))
            medic_error_set(&err, rc, "the prediction failed");
        snprintf(score.gpu[0], sizeof(score.gpu[0]), "%s", gpu ? gpu : "");
    } else {
        rc = risk_score_prometheus(&scorer, prom, 5000, node, gpu, when, &score, &err);
    }
    if (rc == 0 && window_csv && score.lost[0].steps) {
        char why[160];
        prometheus_silence_describe(&score.lost[0], spec.step, why, sizeof(why));
        rc = medic_error_set(&err, MEDIC_E_NOTFOUND, "gpu %s is lost (%s): no window to write",
                             score.gpu[0], why);
    } else if (rc == 0 && window_csv &&
               (rc = write_window(window_csv, &spec, scorer.rows, steps, &err)))
        medic_error_prefix(&err, window_csv);
    if (rc) {
        fprintf(stderr, "medic predict: %s\n", err.msg);
        goto out;
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "risk", score.risk);
        cJSON_AddStringToObject(o, "model_hash", m.hash);
        if (prom) { /* the window's last step */
            char end[40];
            cJSON_AddStringToObject(
                o, "window_end", medic_time_format(when / spec.step * spec.step, end, sizeof(end)));
        }
        if (node)
            cJSON_AddStringToObject(o, "node", node);
        else
            cJSON_AddNullToObject(o, "node");
        cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");
        for (size_t s = 0; s < score.count; s++) {
            cJSON *g = cJSON_CreateObject();
            cJSON_AddStringToObject(g, "gpu", score.gpu[s]);
            cJSON_AddNumberToObject(g, "risk", score.gpu_risk[s]);
            if (!score.lost[s].steps) { /* the rule score; a part of the risk with a blend */
                char terms[160];
                rule_fired_describe(score.fired[s], terms, sizeof(terms));
                cJSON_AddNumberToObject(g, "rule_score", score.rule[s]);
                cJSON_AddStringToObject(g, "rule_terms", terms);
            }
            if (score.lost[s].steps) {
                char why[160];
                prometheus_silence_describe(&score.lost[s], spec.step, why, sizeof(why));
                cJSON_AddNumberToObject(
                    g, "telemetry_lost_seconds",
                    (double)(score.lost[s].steps * spec.step / MEDIC_NS_PER_SEC));
                cJSON_AddStringToObject(g, "reason", why);
            }
            cJSON_AddItemToArray(gpus, g);
        }
        char *text = cJSON_PrintUnformatted(o);
        if (text)
            puts(text);
        free(text);
        cJSON_Delete(o);
    } else {
        for (size_t s = 0; s < score.count; s++) {
            char why[180] = "";
            if (score.lost[s].steps)
                prometheus_silence_describe(&score.lost[s], spec.step, why, sizeof(why));
            else if (spec.blend.on && score.fired[s]) {
                char terms[160];
                rule_fired_describe(score.fired[s], terms, sizeof(terms));
                snprintf(why, sizeof(why), "(rule: %s)", terms);
            }
            printf("gpu %-4s risk %.4f%s%s\n", score.gpu[s][0] ? score.gpu[s] : "-",
                   score.gpu_risk[s], why[0] ? " " : "", why);
        }
        printf("risk %.4f (model %.12s, window %zu x %llds)\n", score.risk, m.hash, steps,
               (long long)(spec.step / MEDIC_NS_PER_SEC));
    }
    status = 0;
out:
    risk_scorer_release(&scorer);
    model_release(&m);
    return status;
}

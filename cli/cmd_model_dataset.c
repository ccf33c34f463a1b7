/* SPDX-License-Identifier: Apache-2.0 */
/* medic model dataset: training windows from the operator's own Prometheus
 * around the incidents in medic's audit log, for model/train/. */
#include "audit.h"
#include "commands.h"
#include "options.h"
#include "default_model.h"
#include "deploy_check.h"
#include "feature_spec.h"
#include "prometheus.h"
#include "random.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic model dataset --db PATH|URL --prometheus URL --out FILE\n"
    "                           [--model FILE] [--since T] [--until T]\n"
    "                           [--actions LIST] [--horizon D] [--stride D]\n"
    "                           [--negatives N] [--quiet D]\n"
    "                           [--seed N] [--timeout D]\n"
    "\n"
    "Exports labelled windows of telemetry for retraining the model\n"
    "(model/train/medic_train.py retrain --dataset FILE).\n"
    "\n"
    "Positives: for each action in the audit log that medic carried out and saw\n"
    "succeed (by default drain and ipmi_power_cycle: the hardware faults it\n"
    "confirmed) and whose alert started in [since, until), the windows ending\n"
    "every STRIDE before the alert's start, back to HORIZON before it; for the\n"
    "alert's GPU (its gpu label), or every GPU of the node without one.\n"
    "Negatives: N times drawn at random in [since, until] on random nodes that\n"
    "Prometheus knows (the model's node label), keeping only those with no\n"
    "decision in the audit log within QUIET of the time; every GPU of the node.\n"
    "\n"
    "The windows are the model's (its features, window and step: the built-in\n"
    "model unless --model), raw values, fetched with query_range as `medic\n"
    "predict` does; a window with a gap is skipped and counted.\n"
    "\n",
    "The file is safetensors: `windows` [N, window, features] F32, `labels` [N]\n"
    "(1 positive, 0 negative), and metadata: the model's `features`, `window`,\n"
    "`step`, and `samples` (JSON: node, gpu, end, label, source per window).\n"
    "--db is the audit log: the SQLite file or a postgresql:// URL.\n",
};

#define MAX_INCIDENTS 100000
/* 432 MB of the built-in model's 30 x 18 windows; a larger model's stop
 * where medic model check's cap on the file would */
#define MAX_WINDOWS 200000
#define MAX_ACTIONS 16

struct incident {
    char node[128], gpu[32], source[160];
    int64_t at;
};

struct dataset {
    const char *url;
    long timeout_ms;
    const struct feature_spec *spec;
    float *windows;
    float *labels;
    size_t count, cap, positives, negatives, skipped;
    cJSON *samples;
    struct incident *incidents;
    size_t incident_count, incidents_left_out;
};

static int add_incident(void *arg, const struct audit_fault *in)
{
    struct dataset *d = arg;
    if (d->incident_count == MAX_INCIDENTS) {
        d->incidents_left_out++;
        return 0;
    }
    if (d->incident_count % 256 == 0) {
        struct incident *more =
            realloc(d->incidents, (d->incident_count + 256) * sizeof(*d->incidents));
        if (!more)
            return MEDIC_E_NOMEM;
        d->incidents = more;
    }
    struct incident *x = &d->incidents[d->incident_count++];
    snprintf(x->node, sizeof(x->node), "%s", in->node);
    snprintf(x->gpu, sizeof(x->gpu), "%s", in->gpu ? in->gpu : "");
    snprintf(x->source, sizeof(x->source), "%s after %s", in->action,
             in->alertname ? in->alertname : "(no alert)");
    x->at = in->at;
    return 0;
}

static int append(struct dataset *d, const struct prometheus_window *w, size_t s, const char *node,
                  int64_t end, int label, const char *source)
{
    size_t cells = d->spec->window * d->spec->count;
    if (d->count == MAX_WINDOWS || (d->count + 1) * cells * sizeof(float) >
                                       DEPLOY_DATASET_MAX_FILE - DEPLOY_DATASET_MAX_HEADER)
        return MEDIC_E_LIMIT;
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        float *wins = realloc(d->windows, cap * cells * sizeof(float));
        if (!wins)
            return MEDIC_E_NOMEM;
        d->windows = wins;
        float *labels = realloc(d->labels, cap * sizeof(float));
        if (!labels)
            return MEDIC_E_NOMEM;
        d->labels = labels;
        d->cap = cap;
    }
    memcpy(d->windows + d->count * cells, w->rows[s], cells * sizeof(float));
    d->labels[d->count++] = (float)label;
    char when[40];
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(d->samples, o) || !cJSON_AddStringToObject(o, "node", node) ||
        !cJSON_AddStringToObject(o, "gpu", w->gpu[s]) ||
        !cJSON_AddStringToObject(o, "end", medic_time_format(end, when, sizeof(when))) ||
        !cJSON_AddNumberToObject(o, "label", label) ||
        !cJSON_AddStringToObject(o, "source", source))
        return MEDIC_E_NOMEM;
    *(label ? &d->positives : &d->negatives) += 1;
    return 0;
}

/* The window(s) of node (and gpu, "" for all) ending at end; a window that
 * cannot be had is reported and skipped. */
static int fetch(struct dataset *d, const char *node, const char *gpu, int64_t end, int label,
                 const char *source)
{
    struct prometheus_window w;
    struct medic_error err = {0};
    char when[40];
    if (prometheus_fetch_window(d->url, d->timeout_ms, d->spec, node, gpu[0] ? gpu : NULL, end, &w,
                                &err)) {
        fprintf(stderr, "  skipped %s%s%s at %s: %s\n", node, gpu[0] ? " gpu " : "", gpu,
                medic_time_format(end, when, sizeof(when)), err.msg);
        d->skipped++;
        return err.code == MEDIC_E_NOMEM ? MEDIC_E_NOMEM : 0;
    }
    int rc = 0;
    for (size_t s = 0; rc == 0 && s < w.count; s++) {
        if (w.lost[s].steps) { /* no telemetry to learn from: the others are kept */
            char why[160];
            prometheus_silence_describe(&w.lost[s], d->spec->step, why, sizeof(why));
            fprintf(stderr, "  skipped %s gpu %s at %s: %s\n", node, w.gpu[s],
                    medic_time_format(end, when, sizeof(when)), why);
            d->skipped++;
            continue;
        }
        rc = append(d, &w, s, node, end, label, source);
    }
    prometheus_window_release(&w);
    return rc;
}

struct dataset_options {
    const char *db, *url, *out, *model;
    int64_t since, until, horizon, stride, quiet, timeout;
    long negatives;
    uint64_t seed;
    const char *actions[MAX_ACTIONS];
    size_t action_count;
};

static int positives(struct dataset *d, const struct dataset_options *o)
{
    for (size_t i = 0; i < d->incident_count; i++) {
        const struct incident *x = &d->incidents[i];
        char when[40];
        size_t before = d->count;
        for (int64_t back = o->stride; back <= o->horizon; back += o->stride) {
            int rc = fetch(d, x->node, x->gpu, x->at - back, 1, x->source);
            if (rc)
                return rc;
        }
        fprintf(stderr, "incident %zu/%zu: %s on %s at %s: %zu windows\n", i + 1, d->incident_count,
                x->source, x->node, medic_time_format(x->at, when, sizeof(when)),
                d->count - before);
    }
    return 0;
}

static int negatives(struct dataset *d, const struct dataset_options *o,
                     struct audit_reader *reader, struct medic_error *err)
{
    char label[64], **nodes = NULL;
    size_t node_count = 0;
    if (o->negatives == 0)
        return 0;
    if (features_node_label(&d->spec->items[0], label, sizeof(label)))
        return medic_error_set(err, MEDIC_E_INVALID,
                               "the model's first feature has no {{node}} label to list nodes by");
    int rc =
        prometheus_label_values(o->url, d->timeout_ms, label, 100000, &nodes, &node_count, err);
    if (rc)
        return rc;
    if (node_count == 0) {
        free(nodes);
        return medic_error_set(err, MEDIC_E_NOTFOUND, "Prometheus knows no %s values", label);
    }
    uint64_t state = o->seed;
    int64_t first = o->since + (int64_t)d->spec->window * d->spec->step;
    int64_t span = o->until > first ? o->until - first : 1;
    long drawn = 0, tries = 0;
    while (rc == 0 && drawn < o->negatives && tries++ < 20 * o->negatives) {
        const char *node = nodes[medic_random_next(&state) % node_count];
        int64_t at = first + (int64_t)(medic_random_next(&state) % (uint64_t)span);
        int busy = 0;
        rc = audit_node_has_decisions(reader, node, at - o->quiet, at + o->quiet, &busy, err);
        if (rc || busy)
            continue;
        drawn++;
        rc = fetch(d, node, "", at, 0, "healthy sample");
        if (drawn % 10 == 0 || drawn == o->negatives)
            fprintf(stderr, "healthy samples: %ld/%ld (%zu windows)\n", drawn, o->negatives,
                    d->negatives);
    }
    for (size_t i = 0; i < node_count; i++)
        free(nodes[i]);
    free(nodes);
    if (rc == 0 && drawn < o->negatives)
        fprintf(stderr, "only %ld healthy samples: the other nodes and times were busy\n", drawn);
    return rc;
}

static int write_dataset(struct dataset *d, const struct dataset_options *o, const struct model *m,
                         struct medic_error *err)
{
    char *samples = cJSON_PrintUnformatted(d->samples);
    char since[40], until[40], horizon[32], stride[32];
    snprintf(horizon, sizeof(horizon), "%llds", (long long)(o->horizon / MEDIC_NS_PER_SEC));
    snprintf(stride, sizeof(stride), "%llds", (long long)(o->stride / MEDIC_NS_PER_SEC));
    const char *features = safetensors_meta(&m->file, "features");
    const struct safetensors_meta meta[] = {
        {"format", "medic-dataset"},
        {"features", (char *)features},
        {"window", (char *)safetensors_meta(&m->file, "window")},
        {"step", (char *)safetensors_meta(&m->file, "step")},
        {"horizon", horizon},
        {"stride", stride},
        {"since", medic_time_format(o->since, since, sizeof(since))},
        {"until", medic_time_format(o->until, until, sizeof(until))},
        {"prometheus", (char *)o->url},
        {"model_hash", (char *)m->hash},
        {"samples", samples},
    };
    size_t wshape[3] = {d->count, d->spec->window, d->spec->count}, lshape[1] = {d->count};
    const struct safetensors_out tensors[] = {
        {"labels", lshape, 1, d->labels},
        {"windows", wshape, 3, d->windows},
    };
    /* the header holds the samples: one medic model check could not read is refused */
    int rc = !samples ? medic_error_set(err, MEDIC_E_NOMEM, "out of memory")
                      : safetensors_write(o->out, tensors, 2, meta, sizeof(meta) / sizeof(meta[0]),
                                          DEPLOY_DATASET_MAX_HEADER, err);
    if (rc == MEDIC_E_LIMIT)
        medic_error_set(err, MEDIC_E_LIMIT,
                        "the windows' list is longer than a dataset's header may be (%zu MiB): "
                        "narrow --since and --until, or lower --negatives",
                        DEPLOY_DATASET_MAX_HEADER >> 20);
    free(samples);
    return rc;
}

static int parse_actions(char *list, struct dataset_options *o)
{
    o->action_count = 0;
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        if (o->action_count == MAX_ACTIONS)
            return -1;
        o->actions[o->action_count++] = a;
    }
    return o->action_count ? 0 : -1;
}

/* --actions, into the options (argv's own bytes are split in place). */
static int take_actions(const char *arg, void *value)
{
    return parse_actions((char *)arg, value);
}

static int parse_options(int argc, char **argv, struct dataset_options *o)
{
    int64_t now = medic_time_now();
    const char *since = "7d", *until = NULL;
    o->actions[0] = "drain";
    o->actions[1] = "ipmi_power_cycle";
    o->action_count = 2;
    o->horizon = 60 * MEDIC_NS_PER_SEC * 60;
    o->stride = 5 * 60 * MEDIC_NS_PER_SEC;
    o->quiet = 24 * 3600 * MEDIC_NS_PER_SEC;
    o->timeout = 10 * MEDIC_NS_PER_SEC;
    o->negatives = 50;
    o->seed = 1;
    const struct cli_option options[] = {
        CLI_OPT_STRING("db", &o->db, "PATH|URL", "the audit log (required)"),
        CLI_OPT_STRING("prometheus", &o->url, "URL", "where the telemetry is (required)"),
        CLI_OPT_STRING("out", &o->out, "FILE", "the dataset to write (required)"),
        CLI_OPT_STRING("model", &o->model, "FILE",
                       "the model whose windows to export (default the built-in one)"),
        CLI_OPT_STRING("since", &since, "T",
                       "RFC 3339 or relative (7d = 7 days ago); default the last 7 days"),
        CLI_OPT_STRING("until", &until, "T", "the end of that span (default now)"),
        CLI_OPT_CALLBACK("actions", o, take_actions, "action kinds, comma-separated", "LIST",
                         "comma-separated action names (default drain,ipmi_power_cycle)"),
        CLI_OPT_DURATION("horizon", &o->horizon, 0.001, "D",
                         "how far before an incident positives go (default 60m)"),
        CLI_OPT_DURATION("stride", &o->stride, 0.001, "D", "between positive windows (default 5m)"),
        CLI_OPT_INT("negatives", &o->negatives, 0, 1000000, "N",
                    "healthy node-times to sample (default 50)"),
        CLI_OPT_DURATION("quiet", &o->quiet, 0, "D",
                         "how far from any decision a healthy sample stays (default 24h)"),
        CLI_OPT_UINT64("seed", &o->seed, "N", "the sampling's random seed (default 1)"),
        CLI_OPT_DURATION("timeout", &o->timeout, 0.001, "D", "per window fetch (default 10s)"),
        CLI_OPT_END,
    };
    int rest, bad = cli_parse("model dataset", &help, argc, argv, 1, options, &rest);
    if (bad)
        return bad; /* 1: --help; 2: said, with the usage */
    if (!bad && (!o->db || !o->url || !o->out || rest != argc)) {
        fputs("medic model dataset: --db, --prometheus and --out are required\n", stderr);
        bad = 1;
    }
    o->until = now;
    if (!bad && ((until && medic_time_parse_bound(until, now, &o->until)) ||
                 medic_time_parse_bound(since, now, &o->since) || o->since >= o->until)) {
        fputs("medic model dataset: --since and --until: RFC 3339 or relative (7d), since "
              "before until\n",
              stderr);
        bad = 1;
    }
    if (bad) {
        fputc('\n', stderr);
        cli_usage(stderr, &help, options);
    }
    return bad ? 2 : 0;
}

int medic_cmd_model_dataset(int argc, char **argv)
{
    struct dataset_options o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    struct model m;
    struct feature_spec spec;
    struct audit_reader *reader = NULL;
    struct medic_error err = {0};
    struct dataset d = {.url = o.url,
                        .timeout_ms = (long)(o.timeout / MEDIC_NS_PER_MS),
                        .spec = &spec,
                        .samples = cJSON_CreateArray()};
    memset(&m, 0, sizeof(m));
    rc = d.samples ? 0 : medic_error_set(&err, MEDIC_E_NOMEM, "out of memory");
    if (rc == 0)
        rc = model_load_or_builtin(o.model, &m, &err);
    if (rc == 0)
        rc = features_from_metadata(&m.file, m.D, &spec, &err);
    if (rc == 0)
        rc = audit_reader_open(o.db, &reader, &err);
    if (rc == 0)
        rc = audit_confirmed_faults(reader, o.since, o.until, o.actions, o.action_count,
                                    add_incident, &d, &err);
    if (rc == 0) {
        char shown[512];
        audit_location_redacted(o.db, shown, sizeof(shown));
        fprintf(stderr, "%zu incidents in %s\n", d.incident_count, shown);
        if (d.incidents_left_out)
            fprintf(stderr,
                    "%zu later incidents left out (at most %d): narrow --since and --until\n",
                    d.incidents_left_out, MAX_INCIDENTS);
        rc = positives(&d, &o);
    }
    if (rc == 0)
        rc = negatives(&d, &o, reader, &err);
    if (rc == 0 && d.count == 0)
        rc = medic_error_set(&err, MEDIC_E_NOTFOUND,
                             "no windows: no incidents or healthy samples with telemetry in the "
                             "range (--since, --until)");
    if (rc == 0)
        rc = write_dataset(&d, &o, &m, &err);
    if (rc == 0)
        printf("wrote %s: %zu windows (%zu positive, %zu negative), %zu skipped\n", o.out, d.count,
               d.positives, d.negatives, d.skipped);
    else
        fprintf(stderr, "medic model dataset: %s\n",
                err.msg[0]            ? err.msg
                : rc == MEDIC_E_LIMIT ? "more windows than a dataset file holds (200000, or 1 "
                                        "GiB of them): narrow --since and --until, or lower "
                                        "--negatives"
                : rc == MEDIC_E_NOMEM ? "out of memory"
                                      : "failed");
    if (reader)
        audit_reader_free(reader);
    if (m.w)
        model_release(&m);
    cJSON_Delete(d.samples);
    free(d.windows);
    free(d.labels);
    free(d.incidents);
    return rc ? 1 : 0;
}

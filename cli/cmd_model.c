/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "options.h"
#include "default_model.h"
#include "feature_spec.h"
#include "lstm.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic model info [FILE]\n"
    "       medic model check --model FILE --vectors FILE [--tolerance X]\n"
    "       medic model check --model NEW --dataset FILE [--against FILE]\n"
    "                         [--draws N] [--seed N]\n"
    "       medic model bench [--model FILE] [--batch B] [--seq T] [--seconds S]\n"
    "                         [--kernel avx512|avx2|portable]\n"
    "       medic model dataset OPTIONS (see --help there)\n"
    "\n"
    "info   prints a model file's tensors and metadata, and how its risk is made\n"
    "       (the LSTM's, or joined with the rule score); without FILE, the model\n"
    "       built into medic (used when the configuration names none). Exits 1\n"
    "       when the metadata is malformed.\n"
    "check  runs the vectors' `input` through the model and compares with their\n"
    "       `output` and `last_hidden` (computed by PyTorch); prints\n"
    "       max_abs_err=<x> and exits 1 above the tolerance (default 1e-5) or on\n"
    "       NaN or inf.\n"
    "       With --dataset, whether NEW (a model retrained on this fleet) may\n"
    "       replace the model in use (--against, default the built-in one):\n"
    "       both and a rule written from the counters score the dataset's\n"
    "       windows (medic model dataset, of weeks NEW never trained on), and\n"
    "       NEW must lead both in PR-AUC with a 95% lower bound above zero (the\n"
    "       faults resampled), recall at 1% false positives at least the rule's,\n"
    "       and never lower a risk for more evidence (one more ECC error, Xid,\n"
    "       remapped row...) in over 1% of the windows. Prints the report;\n"
    "       exits 0 to deploy, 1 when refused.\n"
    "dataset exports labelled windows from Prometheus around the audit log's\n"
    "       incidents, for retraining (medic model dataset --help).\n"
    "bench  times predictions on one core: microseconds per prediction at batch 1\n"
    "       and predictions per second at batch B (default 64), windows of T steps\n"
    "       (default 60). Without --model it uses a D=8, H=64 model with seeded\n"
    "       random weights (the timing does not depend on the values). --kernel\n"
    "       picks the implementation (default: the fastest this CPU runs).\n"
    "\n",
    NULL,
};

static int cmd_info(const char *path)
{
    struct model m;
    struct medic_error err = {0};
    if (model_load_or_builtin(path, &m, &err)) {
        fprintf(stderr, "medic model info: %s\n", err.msg);
        return 1;
    }
    printf("model: %s\nsha256: %s\narchitecture: FaultPredictor, input %zu, hidden %zu, "
           "classifier %d\n\ntensors:\n",
           path ? path : MODEL_BUILTIN_NAME " (model/default.safetensors, embedded at build time)",
           m.hash, m.D, m.H, MODEL_CLASSIFIER_HIDDEN);
    for (size_t i = 0; i < m.file.count; i++) {
        const struct safetensor *t = &m.file.tensors[i];
        printf("  %-22s %s [", t->name, t->dtype);
        for (size_t d = 0; d < t->dims; d++)
            printf("%s%zu", d ? ", " : "", t->shape[d]);
        printf("]\n");
    }
    printf("\nmetadata:\n");
    for (size_t i = 0; i < m.file.meta_count; i++)
        printf("  %s: %s\n", m.file.meta[i].key, m.file.meta[i].value);
    /* what medic makes of the metadata: the window, the risk's formula */
    struct feature_spec spec;
    int rc = features_from_metadata(&m.file, m.D, &spec, &err);
    if (rc == 0 && spec.blend.on)
        printf("\nrisk: sigmoid(%g x logit(LSTM) + %g x rule score %s %g), the rule score's "
               "terms from the window (docs/model.md)\n",
               spec.blend.logit_weight, spec.blend.rule_weight, spec.blend.bias < 0 ? "-" : "+",
               fabs(spec.blend.bias));
    else if (rc == 0)
        printf("\nrisk: the LSTM's\n");
    else if (rc != MEDIC_E_NOTFOUND)
        fprintf(stderr, "medic model info: %s\n", err.msg);
    model_release(&m);
    return rc && rc != MEDIC_E_NOTFOUND ? 1 : 0;
}

static double max_err(const float *a, const float *b, size_t n, int *bad)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= 1e30)) /* NaN or inf: fails whatever the tolerance */
            *bad = 1;
        else if (e > worst)
            worst = e;
    }
    return worst;
}

static int cmd_check(const char *model_path, const char *vectors_path, double tolerance)
{
    struct model m;
    struct safetensors v;
    struct medic_error err = {0};
    if (model_load(model_path, &m, &err)) {
        fprintf(stderr, "medic model check: %s\n", err.msg);
        return 1;
    }
    if (safetensors_load(vectors_path, &v, &err)) {
        fprintf(stderr, "medic model check: %s\n", err.msg);
        model_release(&m);
        return 1;
    }
    const struct safetensor *in = safetensors_find(&v, "input");
    int status = 1;
    float *input = NULL, *want = NULL, *want_h = NULL, *got = NULL, *got_h = NULL;
    struct model_workspace w = {0};
    if (!in || in->dims != 3 || in->shape[2] != m.D) {
        fprintf(stderr, "medic model check: the vectors' input is not [B, T, %zu]\n", m.D);
        goto out;
    }
    size_t B = in->shape[0], T = in->shape[1], H = m.H;
    size_t s_in[] = {B, T, m.D}, s_out[] = {B, 1}, s_h[] = {B, H};
    input = malloc(B * T * m.D * sizeof(float));
    want = malloc(B * sizeof(float));
    want_h = malloc(B * H * sizeof(float));
    got = malloc(B * sizeof(float));
    got_h = malloc(B * H * sizeof(float));
    if (!input || !want || !want_h || !got || !got_h || model_workspace_init(&w, &m, B, T)) {
        fprintf(stderr, "medic model check: out of memory\n");
        goto out;
    }
    if (safetensors_f32(&v, "input", s_in, 3, input, &err) ||
        safetensors_f32(&v, "output", s_out, 2, want, &err) ||
        safetensors_f32(&v, "last_hidden", s_h, 2, want_h, &err)) {
        fprintf(stderr, "medic model check: %s: %s\n", vectors_path, err.msg);
        goto out;
    }
    if (model_predict(&m, &w, input, B, T, got, got_h)) {
        fprintf(stderr, "medic model check: the prediction failed\n");
        goto out;
    }
    int bad = 0;
    double e_out = max_err(got, want, B, &bad), e_h = max_err(got_h, want_h, B * H, &bad);
    double worst = e_out > e_h ? e_out : e_h;
    printf("max_abs_err=%.3g output=%.3g last_hidden=%.3g batch=%zu steps=%zu D=%zu H=%zu%s\n",
           bad ? NAN : worst, e_out, e_h, B, T, m.D, H, bad ? " (NaN or inf)" : "");
    status = !bad && worst <= tolerance ? 0 : 1;
out:
    model_workspace_release(&w);
    free(input);
    free(want);
    free(want_h);
    free(got);
    free(got_h);
    safetensors_release(&v);
    model_release(&m);
    return status;
}

/* A D=8, H=64 model with seeded uniform weights (PyTorch's init range),
 * built in memory as a safetensors file. */
static int random_model(struct model *m, struct medic_error *err)
{
    const size_t D = 8, H = 64, G = 4 * H, C = MODEL_CLASSIFIER_HIDDEN;
    const struct {
        const char *name;
        size_t rows, cols;
    } t[] = {{"classifier.0.bias", C, 0}, {"classifier.0.weight", C, H},
             {"classifier.2.bias", 1, 0}, {"classifier.2.weight", 1, C},
             {"lstm.bias_hh_l0", G, 0},   {"lstm.bias_ih_l0", G, 0},
             {"lstm.weight_hh_l0", G, H}, {"lstm.weight_ih_l0", G, D}};
    char header[2048];
    size_t off = 0, len = (size_t)snprintf(header, sizeof(header), "{");
    for (size_t i = 0; i < 8; i++) {
        size_t n = t[i].rows * (t[i].cols ? t[i].cols : 1) * 4;
        if (t[i].cols)
            len += (size_t)snprintf(header + len, sizeof(header) - len,
                                    "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],"
                                    "\"data_offsets\":[%zu,%zu]}",
                                    i ? "," : "", t[i].name, t[i].rows, t[i].cols, off, off + n);
        else
            len += (size_t)snprintf(header + len, sizeof(header) - len,
                                    "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                                    "\"data_offsets\":[%zu,%zu]}",
                                    i ? "," : "", t[i].name, t[i].rows, off, off + n);
        off += n;
    }
    len += (size_t)snprintf(header + len, sizeof(header) - len, "}");
    size_t size = 8 + len + off;
    unsigned char *bytes = malloc(size);
    if (!bytes)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(bytes + 8, header, len);
    uint32_t state = 12345;
    float *data = (float *)(void *)(bytes + 8 + len); /* filled by memcpy below */
    (void)data;
    for (size_t i = 0; i < off / 4; i++) {
        state = state * 1664525u + 1013904223u;
        float v = ((float)(state >> 8) / 16777216.0f * 2.0f - 1.0f) * 0.125f;
        memcpy(bytes + 8 + len + 4 * i, &v, 4);
    }
    return model_load_bytes(bytes, size, m, err);
}

static int cmd_bench(const char *path, size_t batch, size_t steps, double seconds,
                     const char *kernel)
{
    struct model m;
    struct medic_error err = {0};
    if ((path ? model_load(path, &m, &err) : random_model(&m, &err))) {
        fprintf(stderr, "medic model bench: %s\n", err.msg);
        return 1;
    }
    if (kernel) {
        const enum model_kernel all[] = {MODEL_KERNEL_PORTABLE, MODEL_KERNEL_AVX2,
                                         MODEL_KERNEL_AVX512};
        const size_t known = sizeof(all) / sizeof(all[0]);
        size_t k = 0;
        while (k < known && strcmp(kernel, model_kernel_name(all[k])) != 0)
            k++;
        if (k == known || !model_kernel_usable(all[k])) {
            fprintf(stderr, "medic model bench: kernel '%s' %s\n", kernel,
                    k == known ? "is unknown (avx512, portable)" : "does not run on this CPU");
            model_release(&m);
            return 2;
        }
        m.kernel = all[k];
    }
    struct model_workspace w;
    float *input = malloc(batch * steps * m.D * sizeof(float));
    float *out = malloc(batch * sizeof(float));
    if (!input || !out || model_workspace_init(&w, &m, batch, steps)) {
        fprintf(stderr, "medic model bench: out of memory\n");
        free(input);
        free(out);
        model_release(&m);
        return 1;
    }
    uint32_t state = 7;
    for (size_t i = 0; i < batch * steps * m.D; i++) {
        state = state * 1664525u + 1013904223u;
        input[i] = (float)(state >> 8) / 16777216.0f * 4.0f - 2.0f;
    }
    double results[2];
    for (int mode = 0; mode < 2; mode++) {
        size_t b = mode == 0 ? 1 : batch;
        model_predict(&m, &w, input, b, steps, out, NULL); /* warm up */
        size_t runs = 0;
        int64_t start = medic_time_monotonic(), end = start + (int64_t)(seconds * 1e9);
        while (medic_time_monotonic() < end) {
            model_predict(&m, &w, input, b, steps, out, NULL);
            runs++;
        }
        double elapsed = (double)(medic_time_monotonic() - start) / 1e9;
        results[mode] = mode == 0 ? elapsed / (double)runs * 1e6 : (double)(runs * b) / elapsed;
    }
    printf("model: %s (D=%zu, H=%zu), window %zu steps, one core, %s kernel\n",
           path ? path : "seeded random weights", m.D, m.H, steps, model_kernel_name(m.kernel));
    printf("batch 1: %.1f us per prediction\n", results[0]);
    printf("batch %zu: %.0f predictions/s (%.1f us each)\n", batch, results[1], 1e6 / results[1]);
    free(input);
    free(out);
    model_workspace_release(&w);
    model_release(&m);
    return 0;
}

int medic_cmd_model(int argc, char **argv)
{
    const char *model = NULL, *vectors = NULL, *kernel = NULL, *dataset = NULL, *against = NULL;
    double tolerance = 1e-5, seconds = 2.0;
    long batch = 64, steps = 60, draws = 1000, seed = 1;
    const struct cli_option options[] = {
        CLI_OPT_STRING("model", &model, "FILE", "check, bench: the model file"),
        CLI_OPT_STRING("vectors", &vectors, "FILE", "check: PyTorch's vectors"),
        CLI_OPT_REAL("tolerance", &tolerance, 0, 1, "X",
                     "check: the largest error allowed (default 1e-5)"),
        CLI_OPT_STRING("dataset", &dataset, "FILE",
                       "check: labelled windows of later weeks (medic model dataset)"),
        CLI_OPT_STRING("against", &against, "FILE",
                       "check --dataset: the model in use (default the built-in one)"),
        CLI_OPT_INT("draws", &draws, 100, 100000, "N",
                    "check --dataset: resamplings for the lower bounds (default 1000)"),
        CLI_OPT_INT("seed", &seed, 0, 1L << 62, "N",
                    "check --dataset: the resamplings' seed (default 1)"),
        CLI_OPT_INT("batch", &batch, 1, 4096, "B", "bench: the batch (default 64)"),
        CLI_OPT_INT("seq", &steps, 1, 100000, "T", "bench: steps per window (default 60)"),
        CLI_OPT_REAL("seconds", &seconds, 0.001, 3600, "S",
                     "bench: how long each timing runs (default 2)"),
        CLI_OPT_STRING("kernel", &kernel, "K", "bench: avx512, avx2 or portable"),
        CLI_OPT_END,
    };
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc < 2)
            return cli_usage_error("model", &help, options, "say what to do");
        cli_usage(stdout, &help, options);
        return 0;
    }
    if (strcmp(argv[1], "dataset") == 0)
        return medic_cmd_model_dataset(argc - 1, argv + 1);
    const char *what = argv[1];
    int rest, parsed = cli_parse("model", &help, argc, argv, 2, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (strcmp(what, "info") == 0 && rest >= argc - 1)
        return cmd_info(rest == argc - 1 ? argv[rest] : NULL);
    if (strcmp(what, "check") == 0 && model && dataset && !vectors && rest == argc)
        return medic_cmd_model_check_dataset(model, against, dataset, (size_t)draws,
                                             (uint64_t)seed);
    if (strcmp(what, "check") == 0 && model && vectors && !dataset && rest == argc)
        return cmd_check(model, vectors, tolerance);
    if (strcmp(what, "bench") == 0 && rest == argc && batch > 0 && batch <= 4096 && steps > 0 &&
        steps <= 100000 && seconds > 0)
        return cmd_bench(model, (size_t)batch, (size_t)steps, seconds, kernel);
    return cli_usage_error("model", &help, options, "'%s' needs other arguments", what);
}

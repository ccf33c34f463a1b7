/* SPDX-License-Identifier: Apache-2.0 */
/* The directive table's defaults (config/directives.h): set in a fresh
 * configuration, printed in the reference from the values medic runs with,
 * and the keys two configurations differ in. */
#include "directives.h"
#include "log.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table's own default into its field. */
static int apply_default(struct medic_config *c, const struct directive *d)
{
    void *v = (char *)c + d->at;
    switch (d->type) {
    case D_STRING:
    case D_PATH:
    case D_HTTP_URL:
        free(*(char **)v);
        *(char **)v = d->text ? strdup(d->text) : NULL;
        return d->text && !*(char **)v ? MEDIC_E_NOMEM : 0;
    case D_DURATION:
        *(int64_t *)v = d->number;
        return 0;
    case D_COUNT:
    case D_BYTES:
        *(size_t *)v = (size_t)d->number;
        return 0;
    case D_MODE:
        *(enum medic_mode *)v = (enum medic_mode)d->number;
        return 0;
    case D_LOG_LEVEL:
    case D_BOOL:
        *(int *)v = (int)d->number;
        return 0;
    case D_NONE:
    case D_REAL:
        break;
    }
    MEDIC_BUG("a default of a type the table does not set");
}

int config__apply_defaults(struct medic_config *config)
{
    int rc = 0;
    for (size_t i = 0; i < config__directive_count && rc == 0; i++) {
        const struct directive *d = &config__directives[i];
        if (d->has_default)
            rc = apply_default(config, d);
    }
    config->audit_path_set = 0; /* the default path leaves audit.url free to replace it */
    return rc;
}

/* The value in c of d's field, as medic.yaml writes it, in backquotes;
 * "none" for a string not set. */
static void value_text(const struct medic_config *c, const struct directive *d, char *out,
                       size_t size)
{
    const void *v = config__field(c, d);
    char t[160];
    switch (d->type) {
    case D_STRING:
    case D_PATH:
    case D_HTTP_URL:
        if (!*(char *const *)v) {
            snprintf(out, size, "none");
            return;
        }
        snprintf(t, sizeof(t), "%s", *(char *const *)v);
        break;
    case D_DURATION:
        config__number_text(d, *(const int64_t *)v, t, sizeof(t));
        break;
    case D_COUNT:
    case D_BYTES:
        config__number_text(d, (int64_t) * (const size_t *)v, t, sizeof(t));
        break;
    case D_REAL:
        snprintf(t, sizeof(t), "%g", *(const double *)v);
        break;
    case D_BOOL:
        snprintf(t, sizeof(t), "%s", *(const int *)v ? "true" : "false");
        break;
    case D_MODE:
        snprintf(t, sizeof(t), "%s", medic_mode_name(*(const enum medic_mode *)v));
        break;
    case D_LOG_LEVEL:
        snprintf(t, sizeof(t), "%s", medic_log_level_name(*(const int *)v));
        break;
    case D_NONE:
        snprintf(out, size, "none");
        return;
    }
    snprintf(out, size, "`%s`", t);
}

int config__show_quarantine(const struct medic_config *c, char *out, size_t size)
{
    const struct policy_safety *s = &c->policies.safety;
    char window[32];
    if (!s->quarantine_incidents)
        return snprintf(out, size, "`off`");
    return snprintf(out, size, "`{ incidents: %zu, window: %s }`", s->quarantine_incidents,
                    medic_duration_format(s->quarantine_window, window, sizeof(window)));
}

int config__show_health(const struct medic_config *c, char *out, size_t size)
{
    const struct medic_health_criteria *h = &c->policies.safety.health;
    struct medic_buf b;
    medic_buf_init(&b, 1024);
    medic_buf_printf(&b, "`{ missing_gpus: %d, recovery_actions: [", h->missing_gpus);
    for (int k = 0, first = 1; k < MEDIC_RECOVERY_COUNT; k++)
        if (h->recovery_ok & (1u << k)) {
            medic_buf_printf(&b, "%s%s", first ? "" : ", ", medic_recovery_names[k]);
            first = 0;
        }
    medic_buf_printf(&b,
                     "], allow_pending_remap: %s, allow_pending_retirement: %s, slurm: %s, "
                     "bmc: %s }`",
                     h->remap_pending_ok ? "true" : "false",
                     h->retirement_pending_ok ? "true" : "false", h->slurm ? "true" : "false",
                     h->bmc ? "true" : "false");
    int n = snprintf(out, size, "%s", b.data ? b.data : "");
    medic_buf_release(&b);
    return n;
}

int config__show_node_labels(const struct medic_config *c, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "`[");
    for (size_t i = 0; i < c->node_label_count && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "", c->node_labels[i]);
    if (n < size)
        n += (size_t)snprintf(out + n, size - n, "]`");
    return (int)n;
}

/* The row's default as the reference says it: the value medic runs with
 * when the file says nothing (from the defaults in c), or the rule in
 * words. */
static void default_text(const struct medic_config *c, const struct directive *d, char *out,
                         size_t size)
{
    if (d->words)
        snprintf(out, size, "%s", d->words);
    else if (d->show)
        d->show(c, out, size);
    else
        value_text(c, d, out, size); /* "none" without a type */
}

int medic_config_reference(struct medic_buf *out)
{
    struct medic_config c;
    int rc = medic_config_defaults(&c);
    if (rc)
        return rc;
    medic_buf_puts(out, "| key | default | a change applies | |\n|---|---|---|---|\n");
    for (size_t i = 0; i < config__directive_count; i++) {
        const struct directive *d = &config__directives[i];
        if (!d->doc)
            continue; /* a section whose keys have rows of their own */
        char def[512], lo[32], hi[32];
        default_text(&c, d, def, sizeof(def));
        medic_buf_printf(out, "| `%s%s%s` | %s | %s | %s", d->section ? d->section : "",
                         d->section ? "." : "", d->key, def,
                         d->at_restart ? "at restart" : "at reload", d->doc);
        if (d->max)
            medic_buf_printf(out, " (%s..%s)", config__number_text(d, d->min, lo, sizeof(lo)),
                             config__number_text(d, d->max, hi, sizeof(hi)));
        else if (d->min)
            medic_buf_printf(out, " (at least %s)", config__number_text(d, d->min, lo, sizeof(lo)));
        medic_buf_puts(out, " |\n");
    }
    medic_config_release(&c);
    return out->error;
}

/* Whether a and b hold the same value in d's field. */
static int same_value(const struct medic_config *a, const struct medic_config *b,
                      const struct directive *d)
{
    const void *x = config__field(a, d), *y = config__field(b, d);
    switch (d->type) {
    case D_STRING:
    case D_PATH:
    case D_HTTP_URL: {
        const char *p = *(char *const *)x, *q = *(char *const *)y;
        return p == q || (p && q && strcmp(p, q) == 0);
    }
    case D_DURATION:
        return *(const int64_t *)x == *(const int64_t *)y;
    case D_COUNT:
    case D_BYTES:
        return *(const size_t *)x == *(const size_t *)y;
    case D_REAL:
        return *(const double *)x == *(const double *)y;
    case D_MODE:
        return *(const enum medic_mode *)x == *(const enum medic_mode *)y;
    case D_LOG_LEVEL:
    case D_BOOL:
        return *(const int *)x == *(const int *)y;
    case D_NONE:
        break;
    }
    return 1; /* no one value to compare */
}

int medic_config_changes(const struct medic_config *running, const struct medic_config *fresh,
                         int restart_only, struct medic_buf *out)
{
    int changed = 0;
    for (size_t i = 0; i < config__directive_count; i++) {
        const struct directive *d = &config__directives[i];
        if ((restart_only && !d->at_restart) || d->type == D_NONE || same_value(running, fresh, d))
            continue;
        medic_buf_printf(out, "%s%s%s%s", changed ? ", " : "", d->section ? d->section : "",
                         d->section ? "." : "", d->key);
        changed++;
    }
    return changed;
}

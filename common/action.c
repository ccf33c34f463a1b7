/* SPDX-License-Identifier: Apache-2.0 */
#include "action.h"
#include "error.h"
#include "utf8.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int disruptive;
    const char *doc;
} kinds[MEDIC_ACTION_KIND_COUNT] = {
#define MEDIC_ACTION_ROW(id, name, disruptive, doc) {name, disruptive, doc},
    MEDIC_ACTION_KINDS(MEDIC_ACTION_ROW)
#undef MEDIC_ACTION_ROW
};

const struct medic_action_param medic_action_params[] = {
#define MEDIC_PARAM_ROW(kind, key, type, field, required, min, max, doc)                           \
    {MEDIC_ACTION_##kind, key, type, offsetof(struct medic_action, field), required, min, max, doc},
    MEDIC_ACTION_PARAMS(MEDIC_PARAM_ROW)
#undef MEDIC_PARAM_ROW
};
const size_t medic_action_param_count =
    sizeof(medic_action_params) / sizeof(medic_action_params[0]);

static const struct {
    const char *name, *doc;
} outcomes[MEDIC_OUTCOME_COUNT] = {
#define MEDIC_OUTCOME_ROW(id, name, doc) {name, doc},
    MEDIC_OUTCOMES(MEDIC_OUTCOME_ROW)
#undef MEDIC_OUTCOME_ROW
};

const char *const medic_recovery_names[MEDIC_RECOVERY_COUNT] = {
    "none", "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset", "bus_reset"};

int medic_recovery_parse(const char *name)
{
    for (int i = 0; i < MEDIC_RECOVERY_COUNT; i++)
        if (strcmp(medic_recovery_names[i], name) == 0)
            return i;
    return -1;
}

void medic_health_criteria_default(struct medic_health_criteria *h)
{
    *h = (struct medic_health_criteria){.recovery_ok = 1u << 0, .slurm = 1, .bmc = 1};
}

const char *medic_action_name(enum medic_action_kind kind)
{
    return (unsigned)kind < MEDIC_ACTION_KIND_COUNT ? kinds[kind].name : "unknown";
}

const char *medic_action_doc(enum medic_action_kind kind)
{
    return (unsigned)kind < MEDIC_ACTION_KIND_COUNT ? kinds[kind].doc : "";
}

int medic_action_parse_kind(const char *name)
{
    for (int k = 0; k < MEDIC_ACTION_KIND_COUNT; k++)
        if (strcmp(kinds[k].name, name) == 0)
            return k;
    return -1;
}

int medic_action_disruptive(enum medic_action_kind kind)
{
    return (unsigned)kind < MEDIC_ACTION_KIND_COUNT && kinds[kind].disruptive;
}

int medic_outcome_parse(const char *name)
{
    for (int i = 0; i < MEDIC_OUTCOME_COUNT; i++)
        if (strcmp(outcomes[i].name, name) == 0)
            return i;
    return -1;
}

const char *medic_outcome_name(enum medic_outcome outcome)
{
    return (unsigned)outcome < MEDIC_OUTCOME_COUNT ? outcomes[outcome].name : "unknown";
}

const char *medic_outcome_strerror(enum medic_outcome outcome)
{
    return (unsigned)outcome < MEDIC_OUTCOME_COUNT ? outcomes[outcome].doc : "unknown outcome";
}

void medic_action_init(struct medic_action *a, enum medic_action_kind kind)
{
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    if (kind == MEDIC_ACTION_IPMI_POWER_CYCLE)
        a->u.ipmi_power_cycle.power_on = 1;
    if (kind == MEDIC_ACTION_VERIFY)
        a->u.verify.within = MEDIC_VERIFY_DEFAULT_WITHIN;
    if (kind == MEDIC_ACTION_SLURM_REBOOT)
        a->u.slurm_reboot.within = MEDIC_REBOOT_DEFAULT_WITHIN;
}

static void *field_of(const struct medic_action *a, const struct medic_action_param *p)
{
    return (char *)a + p->offset;
}

static int is_text(enum medic_param_type t)
{
    return t == MEDIC_PARAM_TEXT || t == MEDIC_PARAM_NAME || t == MEDIC_PARAM_RECORD;
}

void medic_action_release(struct medic_action *a)
{
    for (size_t i = 0; i < medic_action_param_count; i++) {
        const struct medic_action_param *p = &medic_action_params[i];
        if (p->kind != a->kind || !is_text(p->type))
            continue;
        char **s = field_of(a, p);
        free(*s);
        *s = NULL;
    }
}

int medic_action_copy(struct medic_action *to, const struct medic_action *from)
{
    *to = *from;
    for (size_t i = 0; i < medic_action_param_count; i++) {
        const struct medic_action_param *p = &medic_action_params[i];
        if (p->kind == from->kind && is_text(p->type))
            *(char **)field_of(to, p) = NULL; /* nothing shared with from */
    }
    for (size_t i = 0; i < medic_action_param_count; i++) {
        const struct medic_action_param *p = &medic_action_params[i];
        const char *text =
            p->kind == from->kind && is_text(p->type) ? *(char *const *)field_of(from, p) : NULL;
        if (text && !(*(char **)field_of(to, p) = strdup(text))) {
            medic_action_release(to);
            return MEDIC_E_NOMEM;
        }
    }
    return 0;
}

const char *medic_action_text_key(enum medic_action_kind kind)
{
    for (size_t i = 0; i < medic_action_param_count; i++)
        if (medic_action_params[i].kind == kind && medic_action_params[i].type == MEDIC_PARAM_TEXT)
            return medic_action_params[i].key;
    return NULL;
}

char **medic_action_text_field(struct medic_action *a, const char *key)
{
    for (size_t i = 0; i < medic_action_param_count; i++) {
        const struct medic_action_param *p = &medic_action_params[i];
        if (p->kind == a->kind && is_text(p->type) && strcmp(p->key, key) == 0)
            return field_of(a, p);
    }
    return NULL;
}

size_t medic_text_fit(char *out, size_t size, const char *text, size_t len)
{
    if (len < size) {
        memcpy(out, text, len);
        out[len] = '\0';
        return len;
    }
    size_t marker = sizeof(MEDIC_ACTION_TEXT_CUT_MARKER) - 1;
    size_t keep = medic_utf8_boundary(text, size - 1 - marker);
    memcpy(out, text, keep);
    memcpy(out + keep, MEDIC_ACTION_TEXT_CUT_MARKER, marker + 1);
    return keep + marker;
}

int medic_action_set_text(struct medic_action *a, const char *key, const char *text, size_t len)
{
    char **field = medic_action_text_field(a, key);
    if (!field)
        return MEDIC_E_INVALID;
    size_t size = (len < MEDIC_ACTION_TEXT_MAX ? len : MEDIC_ACTION_TEXT_MAX) + 1;
    char *copy = malloc(size);
    if (!copy)
        return MEDIC_E_NOMEM;
    medic_text_fit(copy, size, text, len);
    free(*field);
    *field = copy;
    return 0;
}

int medic_action_params_json(const struct medic_action *a, struct medic_buf *out)
{
    size_t start = out->len;
    int rc = medic_buf_puts(out, "{");
    int first = 1;
    for (size_t i = 0; i < medic_action_param_count && rc == 0; i++) {
        const struct medic_action_param *p = &medic_action_params[i];
        if (p->kind != a->kind)
            continue;
        const void *v = field_of(a, p);
        if (is_text(p->type) && !*(char *const *)v)
            continue;
        if (p->type == MEDIC_PARAM_GPUS && ((const struct medic_gpu_list *)v)->count == 0 &&
            !((const struct medic_gpu_list *)v)->from_alert)
            continue;
        rc = medic_buf_puts(out, first ? "" : ",");
        first = 0;
        if (rc == 0)
            rc = medic_buf_json_string(out, p->key);
        if (rc == 0)
            rc = medic_buf_puts(out, ":");
        switch (p->type) {
        case MEDIC_PARAM_INT:
        case MEDIC_PARAM_SECONDS:
            if (rc == 0)
                rc = medic_buf_printf(out, "%d", *(const int *)v);
            break;
        case MEDIC_PARAM_BOOL:
            if (rc == 0)
                rc = medic_buf_puts(out, *(const int *)v ? "true" : "false");
            break;
        case MEDIC_PARAM_GPUS: {
            const struct medic_gpu_list *g = v;
            if (g->from_alert && g->count == 0) { /* the alert named none */
                if (rc == 0)
                    rc = medic_buf_puts(out, "\"alert\"");
                break;
            }
            if (rc == 0)
                rc = medic_buf_puts(out, "[");
            for (size_t k = 0; k < g->count && rc == 0; k++)
                rc = medic_buf_printf(out, "%s%d", k ? "," : "", g->items[k]);
            if (rc == 0)
                rc = medic_buf_puts(out, "]");
            break;
        }
        case MEDIC_PARAM_NAME:
        case MEDIC_PARAM_TEXT:
        case MEDIC_PARAM_RECORD:
            if (rc == 0)
                rc = medic_buf_json_string(out, *(char *const *)v);
            break;
        }
    }
    if (rc == 0)
        rc = medic_buf_puts(out, "}");
    if (rc)
        medic_buf_truncate(out, start);
    return rc;
}

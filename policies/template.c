/* SPDX-License-Identifier: Apache-2.0 */
#include "template.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_part(struct policy_template *t, size_t *cap, enum template_part_kind kind,
                    const char *text, size_t len)
{
    if (t->count == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        struct template_part *p = realloc(t->parts, c * sizeof(*p));
        if (!p)
            return MEDIC_E_NOMEM;
        t->parts = p;
        *cap = c;
    }
    char *copy = text ? strndup(text, len) : NULL;
    if (text && !copy)
        return MEDIC_E_NOMEM;
    t->parts[t->count++] = (struct template_part){kind, copy};
    return 0;
}

static int valid_name(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (i > 0 && c >= '0' && c <= '9')))
            return 0;
    }
    return 1;
}

static int parse_expression(struct policy_template *t, size_t *cap, const char *expr, size_t len)
{
    while (len && *expr == ' ') {
        expr++;
        len--;
    }
    while (len && expr[len - 1] == ' ')
        len--;
    if (len == 5 && strncmp(expr, "$risk", 5) == 0)
        return add_part(t, cap, TPL_RISK, NULL, 0);
    if (len == 5 && strncmp(expr, "$node", 5) == 0)
        return add_part(t, cap, TPL_NODE, NULL, 0);
    if (len == 9 && strncmp(expr, "$previous", 9) == 0)
        return add_part(t, cap, TPL_PREVIOUS, NULL, 0);
    if (len > 8 && strncmp(expr, "$labels.", 8) == 0 && valid_name(expr + 8, len - 8))
        return add_part(t, cap, TPL_LABEL, expr + 8, len - 8);
    if (len > 13 && strncmp(expr, "$annotations.", 13) == 0 && valid_name(expr + 13, len - 13))
        return add_part(t, cap, TPL_ANNOTATION, expr + 13, len - 13);
    return MEDIC_E_INVALID;
}

int policy_template_parse(const char *text, struct policy_template *out, int *col,
                          struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t cap = 0, len = strlen(text), i = 0, literal = 0;
    int rc = 0;
    if (len > POLICY_TEMPLATE_MAX_BYTES) {
        *col = 1;
        return medic_error_set(err, MEDIC_E_INVALID, "template longer than %d bytes",
                               POLICY_TEMPLATE_MAX_BYTES);
    }
    while (i < len && rc == 0) {
        if (text[i] == '{' && i + 1 < len && text[i + 1] == '{') {
            const char *close = strstr(text + i + 2, "}}");
            if (!close) {
                *col = (int)i + 1;
                rc = medic_error_set(err, MEDIC_E_INVALID, "template: '{{' without '}}'");
                break;
            }
            if (i > literal)
                rc = add_part(out, &cap, TPL_TEXT, text + literal, i - literal);
            size_t elen = (size_t)(close - (text + i + 2));
            if (rc == 0 &&
                (rc = parse_expression(out, &cap, text + i + 2, elen)) == MEDIC_E_INVALID) {
                *col = (int)i + 1;
                medic_error_set(err, MEDIC_E_INVALID,
                                "template: '{{%.*s}}' is not one of {{ $labels.NAME }}, "
                                "{{ $annotations.NAME }}, {{ $risk }}, {{ $node }}, "
                                "{{ $previous }}",
                                (int)(elen > 80 ? 80 : elen), text + i + 2);
                break;
            }
            i = (size_t)(close - text) + 2;
            literal = i;
        } else {
            i++;
        }
    }
    if (rc == 0 && len > literal)
        rc = add_part(out, &cap, TPL_TEXT, text + literal, len - literal);
    if (rc == MEDIC_E_NOMEM)
        medic_error_set(err, rc, "out of memory");
    if (rc)
        policy_template_release(out);
    return rc;
}

void policy_template_release(struct policy_template *t)
{
    for (size_t i = 0; i < t->count; i++)
        free(t->parts[i].text);
    free(t->parts);
    memset(t, 0, sizeof(*t));
}

int policy_template_render(const struct policy_template *t, const struct template_vars *vars,
                           struct medic_buf *out)
{
    size_t start = out->len;
    int rc = 0;
    for (size_t i = 0; i < t->count && rc == 0; i++) {
        const struct template_part *p = &t->parts[i];
        const char *v = NULL;
        char risk[32];
        switch (p->kind) {
        case TPL_TEXT:
            v = p->text;
            break;
        case TPL_LABEL:
            v = vars->labels ? medic_labels_get(vars->labels, p->text) : NULL;
            break;
        case TPL_ANNOTATION:
            v = vars->annotations ? medic_labels_get(vars->annotations, p->text) : NULL;
            break;
        case TPL_RISK:
            if (isnan(vars->risk))
                v = "unknown";
            else {
                medic_risk_format(vars->risk, risk, sizeof(risk));
                v = risk;
            }
            break;
        case TPL_NODE:
            v = vars->node;
            break;
        case TPL_PREVIOUS:
            v = vars->previous && vars->previous[0] ? vars->previous : "no step before";
            break;
        }
        if (!v)
            continue;
        size_t room = POLICY_TEMPLATE_MAX_OUTPUT + 1 - (out->len - start);
        size_t n = strlen(v);
        rc = medic_buf_append(out, v, n < room ? n : room);
    }
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* A node's GPUs on its on-call page: what its `medic agent` reports now
 * (GET /v1/health, read within 1 s when the page is served): each GPU's
 * recovery action the driver recommends, row remapping, volatile DBE,
 * compute processes and power limit. Every value is escaped. */
#include "page_internal.h"
#include "html.h"

#include <cjson/cJSON.h>
#include <stdio.h>

static void cell_text(struct medic_buf *out, const char *text)
{
    medic_buf_puts(out, "<td>");
    medic_html_text(out, text);
    medic_buf_puts(out, "</td>");
}

static void cell_value(struct medic_buf *out, const cJSON *v)
{
    char text[64];
    if (cJSON_IsString(v)) {
        cell_text(out, v->valuestring);
        return;
    }
    if (cJSON_IsNumber(v))
        snprintf(text, sizeof(text), "%g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(text, sizeof(text), "%s", cJSON_IsTrue(v) ? "yes" : "no");
    else
        snprintf(text, sizeof(text), "not offered");
    cell_text(out, text);
}

/* The most of a health report the page reads. */
#define REPORT_MAX (1 << 20)

void page__gpus(struct medic_buf *out, const struct page_source *src, const char *node)
{
    medic_buf_puts(out, "<h2>GPUs (what the node's agent reports now)</h2>\n");
    char why[300] = "";
    int inventory_gpus = 0;
    struct medic_buf b;
    medic_buf_init(&b, REPORT_MAX);
    int rc = src->agent_health(src->ctx, node, &b, &inventory_gpus, why, sizeof(why));
    if (rc == 1) { /* nothing to ask: no agent or token */
        medic_buf_puts(out, "<p class=\"empty\">");
        medic_html_text(out, why);
        medic_buf_puts(out, ".</p>\n");
        medic_buf_release(&b);
        return;
    }
    cJSON *j = rc ? NULL : cJSON_ParseWithLength(b.data ? b.data : "", b.len);
    medic_buf_release(&b);
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(j, "gpus"), *g;
    if (!cJSON_IsArray(gpus)) {
        medic_buf_puts(out, "<p class=\"empty\">The agent did not answer: ");
        medic_html_text(out, j ? "not a health report" : why);
        medic_buf_puts(out, "</p>\n");
        cJSON_Delete(j);
        return;
    }
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(j, "gpu_count");
    medic_buf_printf(out, "<p>%d GPU(s) visible%s.</p>\n",
                     cJSON_IsNumber(count) ? count->valueint : 0,
                     inventory_gpus > 0 && cJSON_IsNumber(count) && count->valueint < inventory_gpus
                         ? ", fewer than the inventory's gpus: one fell off the bus?"
                         : "");
    medic_buf_puts(out, "<table><tr><th>gpu</th><th>uuid</th><th>recovery action</th>"
                        "<th>remap pending</th><th>remap failure</th><th>volatile DBE</th>"
                        "<th>processes</th><th>power limit (W)</th></tr>\n");
    static const char *const fields[] = {"index", "uuid", "recovery_action"};
    cJSON_ArrayForEach(g, gpus)
    {
        const cJSON *remap = cJSON_GetObjectItemCaseSensitive(g, "remapped_rows");
        medic_buf_puts(out, "<tr>");
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
            cell_value(out, cJSON_GetObjectItemCaseSensitive(g, fields[i]));
        cell_value(out, cJSON_GetObjectItemCaseSensitive(remap, "pending"));
        cell_value(out, cJSON_GetObjectItemCaseSensitive(remap, "failure"));
        cell_value(out, cJSON_GetObjectItemCaseSensitive(g, "volatile_dbe"));
        cell_value(out, cJSON_GetObjectItemCaseSensitive(g, "compute_processes"));
        cell_value(out, cJSON_GetObjectItemCaseSensitive(g, "power_limit_w"));
        medic_buf_puts(out, "</tr>\n");
    }
    medic_buf_puts(out, "</table>\n");
    cJSON_Delete(j);
}

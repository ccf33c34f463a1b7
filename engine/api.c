#include "engine_serve.h"
#include "engine_evaluate.h"
#include "payload.h"
#include "table.h"
#include "timeutil.h"

#include <math.h>
#include <stdlib.h>

static int error_answer(struct medic_buf *out, int code, const char *message)
{
    medic_buf_puts(out, "{\"status\":\"error\",\"error\":");
    medic_buf_json_string(out, message);
    medic_buf_puts(out, "}\n");
    return code;
}

/* POST /api/v1/dry-run: the decisions a webhook payload would produce now,
 * from a copy of the current state; nothing is recorded or run, and each
 * action it would start is taken to succeed at once (as `medic dry-run`
 * does), so the answer shows every step due now, not only the first. */
int engine_api_dry_run(void *ctx, const char *body, size_t len, struct medic_buf *out)
{
    struct engine *e = ctx;
    struct medic_notification n;
    struct medic_error err = {0};
    struct policy_decisions decisions;
    struct policy_state *copy = NULL;
    int code = 200;
    medic_notification_init(&n);
    policy_decisions_init(&decisions);
    const struct medic_config *config = config_slot_acquire(e->configs);
    struct receiver_limits limits = config->limits;
    if (receiver_payload_parse(body, len, &limits, &n, &err)) {
        code = 400;
    } else {
        int rc = engine_copy_state(e, &copy, &err);
        struct policy_context policy_ctx;
        engine_context_from_config(config, &policy_ctx);
        int64_t now = engine_now(e);
        if (rc == 0)
            rc = engine_evaluate_notification(&policy_ctx, copy, &n, 0, NULL, NAN, now, &decisions);
        if (rc == 0)
            rc = policy_assume_success(&policy_ctx, copy, now, &decisions);
        if (rc) {
            code = 500;
            if (!err.msg[0])
                medic_error_set(&err, rc, "%s", medic_strerror(rc));
        }
    }
    medic_config_unref(config);
    if (code == 200) {
        struct medic_table table;
        medic_buf_puts(out, "{\"status\":\"success\",\"data\":");
        if (policy_decisions_table(&decisions, &table) == 0)
            medic_table_render(&table, MEDIC_FORMAT_JSON, out);
        medic_table_release(&table);
        medic_buf_puts(out, "}\n");
    } else {
        error_answer(out, code, err.msg);
    }
    policy_state_free(copy);
    policy_decisions_release(&decisions);
    medic_notification_release(&n);
    return code;
}

int engine_api_query(void *ctx, const struct receiver_query *q, struct medic_buf *out)
{
    struct engine *e = ctx;
    struct medic_error err = {0};
    int kind = audit_kind_parse(q->kind);
    if (kind < 0)
        return error_answer(out, 404,
                            "no such endpoint; use /api/v1/decisions, notifications, alerts, "
                            "actions, incidents or changes");
    struct audit_filter f;
    audit_filter_init(&f);
    f.node = q->node;
    f.alertname = q->alertname;
    f.policy = q->policy;
    f.verdict = q->verdict;
    f.status = q->status;
    f.state = q->state;
    if (q->incident) {
        char *end;
        f.incident = strtoll(q->incident, &end, 10);
        if (*end || f.incident <= 0)
            return error_answer(out, 400, "incident takes an incident's number");
    }
    int64_t now = medic_time_now();
    if ((q->since && medic_time_parse_bound(q->since, now, &f.since)) ||
        (q->until && medic_time_parse_bound(q->until, now, &f.until)))
        return error_answer(out, 400,
                            "since and until take RFC 3339 times or durations (90m, 2h, 7d)");
    if (q->limit) {
        char *end;
        f.limit = strtol(q->limit, &end, 10);
        if (*end || f.limit <= 0 || f.limit > 10000)
            return error_answer(out, 400, "limit takes 1 to 10000");
    }
    struct audit_reader *reader = NULL;
    struct medic_table table;
    int code = 200;
    if (audit_reader_open(e->audit_path, &reader, &err) ||
        audit_query(reader, (enum audit_kind)kind, &f, &table, &err)) {
        code = error_answer(out, err.code == MEDIC_E_INVALID ? 400 : 503, err.msg);
    } else {
        medic_buf_puts(out, "{\"status\":\"success\",\"data\":");
        medic_table_render(&table, MEDIC_FORMAT_JSON, out);
        medic_buf_puts(out, "}\n");
        medic_table_release(&table);
        if (out->error) { /* never half a document */
            medic_buf_reset(out);
            code = error_answer(out, 503, "the answer is too large; narrow the query (limit)");
        }
    }
    audit_reader_free(reader);
    return code;
}

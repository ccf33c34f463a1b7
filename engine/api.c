/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_serve.h"
#include "engine_evaluate.h"
#include "engine_requests.h"
#include "log.h"
#include "payload.h"
#include "table.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
            rc = engine_evaluate_notification(&policy_ctx, copy, &n, 0, NULL, NULL, NAN, now,
                                              &decisions);
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

/* One waiting step as JSON: its decision id (what /api/v1/approvals/ID
 * and `medic approve ID` name), node, policy, step, the exact action and
 * parameters an approval runs, and until when it waits. */
static int waiting_step(void *arg, const struct policy_pending_step *p)
{
    struct medic_buf *out = arg;
    char until[40];
    medic_time_format(p->until, until, sizeof(until));
    const char *space = p->offer ? strchr(p->offer, ' ') : NULL;
    medic_buf_printf(out, "%s{\"id\":%lld,\"incident\":%lld,\"node\":", out->len > 1 ? "," : "",
                     (long long)p->decision_id, (long long)p->incident);
    medic_buf_json_string(out, p->node);
    medic_buf_puts(out, ",\"policy\":");
    medic_buf_json_string(out, p->policy);
    medic_buf_printf(out, ",\"step\":%zu,\"action\":", p->step + 1);
    if (space)
        medic_buf_printf(out, "\"%.*s\",\"params\":%s", (int)(space - p->offer), p->offer,
                         space + 1);
    else
        medic_buf_puts(out, "null,\"params\":null");
    medic_buf_printf(out, ",\"until\":\"%s\"}", until);
    return 0;
}

static int list_waiting(void *arg, struct policy_state *st)
{
    return policy_pending_steps(st, waiting_step, arg);
}

/* GET /api/v1/approvals: the steps waiting for a person now (the engine's
 * state; on a replica that does not lead, as last committed). */
static int waiting_steps(struct engine *e, struct medic_buf *out)
{
    struct medic_error err = {0};
    struct medic_buf items;
    medic_buf_init(&items, 0);
    medic_buf_puts(&items, "[");
    int rc = engine_with_state(e, list_waiting, &items, &err);
    medic_buf_puts(&items, "]");
    if (rc || items.error) {
        medic_buf_release(&items);
        return error_answer(out, 503, err.msg[0] ? err.msg : "out of memory");
    }
    medic_buf_printf(out, "{\"status\":\"success\",\"data\":%s}\n", items.data);
    medic_buf_release(&items);
    return 200;
}

static int query_now(struct engine *e, const struct receiver_query *q, struct medic_buf *out);

/* A query handed to a reader: its parameters copied (the request's own
 * strings do not outlive the hand-over). */
struct query_job {
    struct engine *e;
    struct receiver_query q;
    char *strings[16];
};

static void query_job_free(void *arg)
{
    struct query_job *j = arg;
    for (size_t i = 0; i < sizeof(j->strings) / sizeof(j->strings[0]); i++)
        free(j->strings[i]);
    free(j);
}

static int query_job_run(void *arg, struct medic_buf *out)
{
    struct query_job *j = arg;
    return query_now(j->e, &j->q, out);
}

int engine_api_query(void *ctx, const struct receiver_query *q, const struct receiver_later *later,
                     struct medic_buf *out)
{
    struct engine *e = ctx;
    if (!later)
        return query_now(e, q, out);
    struct query_job *j = calloc(1, sizeof(*j));
    if (!j)
        return error_answer(out, 503, "out of memory");
    j->e = e;
    const char *const *from[] = {&q->kind,    &q->node,   &q->alertname, &q->policy,
                                 &q->verdict, &q->status, &q->since,     &q->until,
                                 &q->limit,   &q->state,  &q->incident,  &q->decision};
    const char **to[] = {&j->q.kind,    &j->q.node,   &j->q.alertname, &j->q.policy,
                         &j->q.verdict, &j->q.status, &j->q.since,     &j->q.until,
                         &j->q.limit,   &j->q.state,  &j->q.incident,  &j->q.decision};
    int nomem = 0;
    for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++)
        if (*from[i]) {
            j->strings[i] = strdup(*from[i]);
            *to[i] = j->strings[i];
            nomem |= !j->strings[i];
        }
    int rc = nomem ? MEDIC_E_NOMEM
                   : engine_readers_run(e->readers, query_job_run, j, query_job_free, later);
    if (rc) {
        query_job_free(j);
        return error_answer(
            out, 503, rc == MEDIC_E_BUSY ? "too many queries waiting; try again" : "out of memory");
    }
    return RECEIVER_LATER;
}

static int query_now(struct engine *e, const struct receiver_query *q, struct medic_buf *out)
{
    struct medic_error err = {0};
    if (strcmp(q->kind, "approvals") == 0)
        return waiting_steps(e, out);
    /* the people's past answers: /api/v1/answers (medic audit approvals) */
    int kind = audit_kind_parse(strcmp(q->kind, "answers") == 0 ? "approvals" : q->kind);
    if (kind < 0)
        return error_answer(out, 404,
                            "no such endpoint; use /api/v1/decisions, notifications, alerts, "
                            "actions, incidents, changes, approvals (the steps waiting), answers "
                            "(the people's past answers) or pauses");
    struct audit_filter f;
    audit_filter_init(&f);
    f.node = q->node;
    f.alertname = q->alertname;
    f.policy = q->policy;
    f.verdict = q->verdict;
    f.status = q->status;
    f.state = q->state;
    f.as_query = 1;
    if (q->incident) {
        char *end;
        f.incident = strtoll(q->incident, &end, 10);
        if (*end || f.incident <= 0)
            return error_answer(out, 400, "incident takes an incident's number");
    }
    if (q->decision) {
        char *end;
        f.decision = strtoll(q->decision, &end, 10);
        if (*end || f.decision <= 0)
            return error_answer(out, 400, "decision takes a decision's number");
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

struct pending_lookup {
    int64_t decision_id, incident, until;
};

static int find_pending(void *arg, struct policy_state *st)
{
    struct pending_lookup *p = arg;
    p->incident = policy_pending_incident(st, p->decision_id, &p->until);
    return 0;
}

/* The request is recorded: its answer comes through later once an engine
 * took it (engine_answers), with no HTTP thread waiting for it. */
static int answer_later(struct engine *e, const char *what, int64_t id, engine_answer_result result,
                        const char *who, const struct receiver_later *later, struct medic_buf *out)
{
    if (engine_answers_wait(e->answers, what, id, result, who, later))
        return error_answer(out, 503, "out of memory");
    return RECEIVER_LATER;
}

int engine_api_approve(void *ctx, const char *id_text, const char *body, size_t len,
                       const char *who, const char *remote_addr, const struct receiver_later *later,
                       struct medic_buf *out)
{
    struct engine *e = ctx;
    /* a plain decimal id: no sign, space, leading zero or overflow */
    size_t digits = strspn(id_text, "0123456789");
    long long id = digits && digits <= 18 && !id_text[digits] && id_text[0] != '0'
                       ? strtoll(id_text, NULL, 10)
                       : 0;
    if (id <= 0)
        return error_answer(out, 400,
                            "an answer goes to /api/v1/approvals/ID, ID the pending decision's id "
                            "(the page and `medic audit decisions --verdict pending` show it)");
    struct engine_answer parsed;
    char why[512] = "";
    if (engine_parse_answer(body, len, &parsed, why, sizeof(why)))
        return error_answer(out, 400, why);
    int approve = parsed.approve;
    const char *text = parsed.reason;
    /* a step that waits now; the engine decides for good when it takes it */
    struct medic_error err = {0};
    struct pending_lookup p = {id, 0, 0};
    if (engine_with_state(e, find_pending, &p, &err))
        return error_answer(out, 503, err.msg);
    if (!p.incident) {
        char fate[500] = "";
        struct audit_reader *reader = NULL;
        if (audit_reader_open(e->audit_path, &reader, &err) == 0)
            audit_pending_fate(reader, id, fate, sizeof(fate), &err);
        audit_reader_free(reader);
        snprintf(why, sizeof(why), "decision %lld is not a step waiting for approval: %.400s", id,
                 fate[0] ? fate
                         : "it was never pending, was answered already, withdrawn (its alerts "
                           "resolved) or expired");
        return error_answer(out, 409, why);
    }
    struct audit_approval_in in = {medic_time_now(),      id,          approve,    who,
                                   text[0] ? text : NULL, remote_addr, parsed.undo};
    int64_t approval = 0;
    if (audit_record_approval(e->store, &in, &approval, &err))
        return error_answer(out, 503, err.msg);
    medic_log_info(approve ? "step approved" : "step denied", "decision", id_text, "by", who,
                   "reason", text, NULL);
    engine_approval_recorded(e);
    return answer_later(e, "approval", approval, audit_approval_result, who, later, out);
}

struct quarantine_lookup {
    const char *node;
    int found;
};

static int is_quarantined(void *arg, const struct policy_quarantined_node *q)
{
    struct quarantine_lookup *l = arg;
    l->found |= strcmp(q->node, l->node) == 0;
    return 0;
}

static int find_quarantined(void *arg, struct policy_state *st)
{
    return policy_quarantined(st, is_quarantined, arg);
}

int engine_api_release(void *ctx, const char *node, const char *body, size_t len, const char *who,
                       const char *remote_addr, const struct receiver_later *later,
                       struct medic_buf *out)
{
    struct engine *e = ctx;
    char why[512] = "";
    struct engine_release parsed;
    if (engine_parse_release(node, body, len, &parsed, why, sizeof(why)))
        return error_answer(out, 400, why);
    /* a name the inventory does not know is the caller's mistake: 400 */
    const struct medic_config *config = config_slot_acquire(e->configs);
    const struct inventory_node *known = inventory_find(&config->inventory, parsed.node);
    char name[sizeof(parsed.node)];
    snprintf(name, sizeof(name), "%s", known ? known->name : parsed.node);
    snprintf(parsed.node, sizeof(parsed.node), "%s", name);
    medic_config_unref(config);
    if (!known) {
        snprintf(why, sizeof(why),
                 "node '%s' is not in the inventory: a release names an inventory node (by "
                 "name or alias)",
                 parsed.node);
        return error_answer(out, 400, why);
    }
    struct medic_error err = {0};
    struct quarantine_lookup l = {parsed.node, 0};
    if (engine_with_state(e, find_quarantined, &l, &err))
        return error_answer(out, 503, err.msg);
    if (!l.found) {
        snprintf(why, sizeof(why),
                 "node '%s' is not quarantined (`medic audit quarantined` lists the nodes that "
                 "are)",
                 parsed.node);
        return error_answer(out, 409, why);
    }
    struct audit_release_in in = {medic_time_now(), parsed.node, who, parsed.reason, remote_addr};
    int64_t id = 0;
    if (audit_record_release(e->store, &in, &id, &err))
        return error_answer(out, 503, err.msg);
    medic_log_warn("node released", "node", parsed.node, "by", who, "reason", parsed.reason, NULL);
    engine_approval_recorded(e);
    return answer_later(e, "release_request", id, audit_release_result, who, later, out);
}

int engine_api_pause(void *ctx, int pause, const char *body, size_t len, const char *who,
                     const char *remote_addr, const struct receiver_later *later,
                     struct medic_buf *out)
{
    struct engine *e = ctx;
    char why[300] = "";
    int64_t now = medic_time_now();
    struct engine_pause parsed;
    if (engine_parse_pause(body, len, pause, now, &parsed, why, sizeof(why)))
        return error_answer(out, 400, why);
    const char *reason = parsed.reason;
    int64_t until = parsed.until;
    struct medic_error err = {0};
    struct audit_pause_in in = {now, pause, who, reason[0] ? reason : NULL, until, remote_addr};
    int64_t id = 0;
    if (audit_record_pause(e->store, &in, &id, &err))
        return error_answer(out, 503, err.msg);
    medic_log_warn(pause ? "fleet paused" : "fleet unpaused", "by", who, "reason", reason, NULL);
    engine_approval_recorded(e);
    return answer_later(e, "pause_request", id, audit_pause_result, who, later, out);
}

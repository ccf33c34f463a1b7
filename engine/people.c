/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_people.h"
#include "log.h"
#include "timeutil.h"

#include <stdio.h>
#include <string.h>

static struct person_request *add(struct people_round *p, size_t *reads, int64_t id,
                                  int64_t created_at, const char *by, const char *reason)
{
    if (*reads == PEOPLE_PER_ROUND)
        return NULL; /* the next round takes the rest */
    (*reads)++;
    struct person_request *x = &p->items[p->count++];
    memset(x, 0, sizeof(*x));
    x->id = id;
    x->created_at = created_at;
    snprintf(x->by, sizeof(x->by), "%s", by ? by : "?");
    snprintf(x->reason, sizeof(x->reason), "%s", reason ? reason : "");
    return x;
}

static int read_pause(void *arg, const struct audit_pending_pause *q)
{
    struct people_round *p = arg;
    struct person_request *x = add(p, &p->pause_reads, q->id, q->created_at, q->by, q->reason);
    if (!x)
        return 1;
    x->kind = PERSON_PAUSE;
    x->yes = q->pause;
    x->until = q->until;
    return 0;
}

static int read_answer(void *arg, const struct audit_pending_approval *q)
{
    struct people_round *p = arg;
    struct person_request *x = add(p, &p->answer_reads, q->id, q->created_at, q->by, q->reason);
    if (!x)
        return 1;
    x->kind = PERSON_ANSWER;
    x->yes = q->approve;
    x->undo = q->undo;
    x->decision_id = q->decision_id;
    return 0;
}

static int read_release(void *arg, const struct audit_pending_release *q)
{
    struct people_round *p = arg;
    struct person_request *x = add(p, &p->release_reads, q->id, q->created_at, q->by, q->reason);
    if (!x)
        return 1;
    x->kind = PERSON_RELEASE;
    snprintf(x->node, sizeof(x->node), "%s", q->node ? q->node : "");
    return 0;
}

int people_read(struct people_round *p, struct audit_reader *reader)
{
    p->count = p->pause_reads = p->answer_reads = p->release_reads = 0;
    p->pause_count = p->approval_count = p->release_count = 0;
    struct medic_error err = {0};
    int more = 0;
    int rc = audit_pending_pauses(reader, read_pause, p, &err);
    if (rc == 1)
        more = 1, rc = 0;
    if (rc == 0 && (rc = audit_pending_approvals(reader, read_answer, p, &err)) == 1)
        more = 1, rc = 0;
    if (rc == 0 && (rc = audit_pending_releases(reader, read_release, p, &err)) == 1)
        more = 1, rc = 0;
    if (rc)
        medic_log_error("cannot read the people's requests (pauses, approvals, releases)", "error",
                        err.msg[0] ? err.msg : medic_strerror(rc), NULL);
    /* in the order they were accepted, whatever their kind (a stable
     * insertion sort: at most 48, each kind already oldest first) */
    for (size_t i = 1; i < p->count; i++) {
        struct person_request x = p->items[i];
        size_t j = i;
        for (; j > 0 && p->items[j - 1].created_at > x.created_at; j--)
            p->items[j] = p->items[j - 1];
        p->items[j] = x;
    }
    p->applied = 0;
    return more;
}

/* A pause's end on the engine's clock: as long after now as the person
 * asked from when the request was made, less what has passed since (by
 * the wall clock, within 0 and the whole of it). */
static int64_t pause_until(const struct person_request *x, int64_t now, int64_t wall)
{
    if (x->until == MEDIC_TIME_UNSET)
        return MEDIC_TIME_UNSET;
    int64_t asked = x->until - x->created_at;
    int64_t passed = wall - x->created_at;
    if (passed < 0)
        passed = 0;
    if (asked < 0)
        asked = 0;
    return now + (passed < asked ? asked - passed : 0);
}

int people_apply(struct people_round *p, int64_t before, const struct policy_context *ctx,
                 struct policy_state *st, int64_t now, int64_t wall, struct policy_decisions *out,
                 int (*origin)(void *arg, size_t from), void *arg)
{
    for (; p->applied < p->count && p->items[p->applied].created_at < before; p->applied++) {
        size_t i = p->applied;
        const struct person_request *x = &p->items[i];
        size_t from = out->count;
        char why[512] = "";
        int rc;
        struct audit_request_mark *m;
        if (x->kind == PERSON_PAUSE) {
            struct policy_pause q = {x->yes, x->by, x->reason, pause_until(x, now, wall)};
            rc = policy_pause(ctx, st, &q, now, out, why, sizeof(why));
            m = &p->pauses[p->pause_count++];
        } else if (x->kind == PERSON_ANSWER) {
            struct policy_approval q = {x->decision_id, 0, NULL, x->yes, x->by, x->reason, x->undo};
            rc = policy_approve(ctx, st, &q, now, out, why, sizeof(why));
            m = &p->approvals[p->approval_count++];
        } else {
            struct policy_release q = {x->node, x->by, x->reason};
            rc = policy_release(ctx, st, &q, now, out, why, sizeof(why));
            m = &p->releases[p->release_count++];
        }
        if (rc && rc != MEDIC_E_NOTFOUND && rc != MEDIC_E_INVALID)
            return rc;
        /* what came of it: its last decision (an answer's first: the step
         * run, held or denied, not on-call's notice after it), or why it
         * was refused */
        char *text = p->results[i];
        m->id = x->id;
        m->decision = out->count <= from         ? -1
                      : x->kind == PERSON_ANSWER ? (long)from
                                                 : (long)(out->count - 1);
        if (rc)
            snprintf(text, sizeof(p->results[i]), "refused: %s", why);
        else if (m->decision >= 0)
            snprintf(text, sizeof(p->results[i]), "%s: %s",
                     policy_verdict_name(out->items[m->decision].verdict),
                     out->items[m->decision].reason);
        else if (x->kind == PERSON_RELEASE)
            snprintf(text, sizeof(p->results[i]), "released: node '%s' had nothing to undo",
                     x->node);
        else
            snprintf(text, sizeof(p->results[i]), "done");
        m->result = text;
        if ((rc = origin(arg, from)))
            return rc;
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine's state as rows: one per incident, node, remembered
 * alert, and one for the engine itself, each a small JSON document. The
 * daemon writes only the rows a round changed, in the transaction of the
 * round's decisions, so the cost of a round follows what it did, not the
 * size of the fleet. */
#include "engine_internal.h"
#include "rows.h"
#include "lock.h"
#include "buf.h"
#include "timeutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const policy__row_kind_names[] = {"engine", "incident", "node", "unmatched",
                                              "resolved"};

/* ---- rows out ---- */

static void json_time(struct medic_buf *b, const char *key, int64_t t)
{
    medic_buf_printf(b, "\"%s\":\"%lld\"", key, (long long)t);
}

/* The references a row's value makes to decisions not committed yet. */
struct row_refs {
    struct policy_decision_ref items[1 + INCIDENT_MAX_UNDO];
    size_t count;
};

/* A decision's id, written as a time is. A decision bound but not
 * resolved yet is -(its index + 1): its quoted number is also a reference
 * the audit writer replaces with the id (a snapshot, which keeps the
 * reference, loads it back as it was). */
static void json_decision(struct medic_buf *b, const char *key, int64_t id, struct row_refs *refs)
{
    medic_buf_printf(b, "\"%s\":", key);
    size_t at = b->len;
    medic_buf_printf(b, "\"%lld\"", (long long)id);
    if (id < 0 && refs->count < sizeof(refs->items) / sizeof(refs->items[0]))
        refs->items[refs->count++] = (struct policy_decision_ref){
            .offset = at, .len = b->len - at, .index = (size_t)(-(id + 1))};
}

static void json_labels(struct medic_buf *b, const char *key, const struct label_copy *l)
{
    medic_buf_printf(b, "\"%s\":{", key);
    for (size_t i = 0; i < l->count; i++) {
        if (i)
            medic_buf_puts(b, ",");
        medic_buf_json_string(b, l->items[i].name);
        medic_buf_puts(b, ":");
        medic_buf_json_string(b, l->items[i].value);
    }
    medic_buf_puts(b, "}");
}

static void json_text(struct medic_buf *b, const char *key, const char *value)
{
    medic_buf_printf(b, ",\"%s\":", key);
    medic_buf_json_string(b, value);
}

static void save_incident(struct medic_buf *b, const struct incident *in, struct row_refs *refs)
{
    medic_buf_printf(b, "{\"id\":\"%lld\"", (long long)in->id);
    json_text(b, "key", in->key);
    json_text(b, "node", in->node);
    json_text(b, "policy", in->policy);
    json_text(b, "state", policy_incident_state_name(in->state));
    json_text(b, "alertname", in->alertname);
    medic_buf_puts(b, ",");
    json_time(b, "opened_at", in->opened_at);
    medic_buf_puts(b, ",");
    json_time(b, "fresh_after", in->fresh_after);
    medic_buf_printf(b,
                     ",\"in_inventory\":%d,\"next_step\":%zu,\"awaiting\":%d,\"awaiting_kind\":"
                     "\"%s\",\"awaiting_watts\":%d,\"acted\":%d,\"halted\":%d,\"drained\":%d,"
                     "\"limit_watts\":%d,\"closing\":%d,\"closing_as\":\"%s\",",
                     in->in_inventory, in->next_step, in->awaiting,
                     medic_action_name(in->awaiting_kind), in->awaiting_watts, in->acted,
                     in->halted, in->drained, in->limit_watts, in->closing,
                     policy_incident_state_name(in->closing_as));
    json_decision(b, "awaiting_decision", in->awaiting_decision, refs);
    json_text(b, "halted_by", in->halted_by);
    if (in->previous[0])
        json_text(b, "previous", in->previous);
    if (in->stale_step)
        medic_buf_printf(b, ",\"stale_step\":%d", in->stale_step);
    json_text(b, "drained_as", in->drained_as);
    medic_buf_printf(b, ",\"held\":%d", in->held);
    json_text(b, "held_by", in->held_by);
    if (in->pending) {
        medic_buf_printf(b, ",\"pending_step\":%zu,", in->pending_step);
        json_time(b, "pending_until", in->pending_until);
        medic_buf_puts(b, ",");
        json_decision(b, "pending_decision", in->pending_decision, refs);
        json_text(b, "pending_from", policy_incident_state_name(in->pending_from));
        if (in->pending_offer)
            json_text(b, "pending_offer", in->pending_offer);
        medic_buf_printf(b, ",\"pending_told\":%d,", in->pending_told);
        json_time(b, "pending_since", in->pending_since);
    }
    if (in->approved_offer) { /* an approval a guard holds */
        medic_buf_puts(b, ",\"approved\":{\"offer\":");
        medic_buf_json_string(b, in->approved_offer);
        json_text(b, "by", in->approved_by);
        json_text(b, "reason", in->approved_reason);
        medic_buf_puts(b, ",");
        json_time(b, "until", in->approved_until);
        medic_buf_puts(b, "}");
    }
    json_text(b, "closing_cause", in->closing_cause);
    if (in->cycled_at) {
        medic_buf_puts(b, ",");
        json_time(b, "cycled_at", in->cycled_at);
    }
    if (in->reset_at) {
        medic_buf_puts(b, ",");
        json_time(b, "reset_at", in->reset_at);
    }
    if (in->step_ended_at) {
        medic_buf_puts(b, ",");
        json_time(b, "step_ended_at", in->step_ended_at);
    }
    if (in->awaiting && in->awaiting_since) {
        medic_buf_puts(b, ",");
        json_time(b, "awaiting_since", in->awaiting_since);
    }
    if (in->last_failed || in->quarantining || in->quarantine_why[0]) {
        medic_buf_printf(b, ",\"repair\":{\"last_failed\":%d,\"quarantining\":%d", in->last_failed,
                         in->quarantining);
        json_text(b, "why", in->quarantine_why);
        medic_buf_puts(b, "}");
    }
    if (isnan(in->risk))
        medic_buf_puts(b, ",\"risk\":null,");
    else
        medic_buf_printf(b, ",\"risk\":%.17g,", in->risk);
    json_labels(b, "labels", &in->labels);
    medic_buf_puts(b, ",");
    json_labels(b, "annotations", &in->annotations);
    medic_buf_puts(b, ",\"undo\":[");
    for (int k = 0; k < in->undo_count; k++) {
        medic_buf_puts(b, k ? ",{" : "{");
        json_decision(b, "decision", in->undo[k].decision, refs);
        medic_buf_printf(b, ",\"kind\":\"%s\"}", medic_action_name(in->undo[k].kind));
    }
    medic_buf_puts(b, "],\"members\":[");
    for (size_t k = 0; k < in->member_count; k++) {
        const struct member *m = &in->members[k];
        medic_buf_puts(b, k ? ",{\"identity\":" : "{\"identity\":");
        medic_buf_json_string(b, m->identity);
        json_text(b, "fingerprint", m->fingerprint);
        medic_buf_puts(b, ",");
        json_time(b, "starts_at", m->starts_at);
        medic_buf_puts(b, ",");
        json_time(b, "last_seen", m->last_seen);
        if (m->claimed_start) {
            medic_buf_puts(b, ",");
            json_time(b, "claimed_start", m->claimed_start);
        }
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "]}");
}

static void save_node(struct medic_buf *b, const struct node_state *n)
{
    medic_buf_puts(b, "{\"name\":");
    medic_buf_json_string(b, n->name);
    medic_buf_printf(b, ",\"drained_by_medic\":%d,\"limited_by_medic\":%d,\"acting\":%d,",
                     n->drained_by_medic, n->limited_by_medic, n->acting);
    json_time(b, "last_alerting", n->last_alerting);
    if (n->quarantined) {
        medic_buf_puts(b, ",");
        json_time(b, "quarantined_at", n->quarantined_at);
    }
    medic_buf_puts(b, ",\"alertname\":");
    medic_buf_json_string(b, n->alertname);
    medic_buf_puts(b, ",\"history\":[");
    for (size_t k = 0; k < n->history_count; k++) {
        const struct action_record *r = &n->history[k];
        medic_buf_puts(b, k ? ",{\"policy\":" : "{\"policy\":");
        medic_buf_json_string(b, r->policy);
        medic_buf_puts(b, ",");
        json_time(b, "time", r->time);
        medic_buf_puts(b, ",");
        json_time(b, "incident", r->incident);
        if (r->episode) {
            medic_buf_puts(b, ",");
            json_time(b, "episode", r->episode);
        }
        medic_buf_puts(b, r->repair ? "}" : ",\"repair\":0}");
    }
    medic_buf_puts(b, "]}");
}

static void save_unmatched(struct medic_buf *b, const struct unmatched *u)
{
    medic_buf_puts(b, "{\"fingerprint\":");
    medic_buf_json_string(b, u->fingerprint);
    medic_buf_puts(b, ",");
    json_time(b, "starts_at", u->starts_at);
    medic_buf_puts(b, ",");
    json_time(b, "last_seen", u->last_seen);
    medic_buf_puts(b, "}");
}

static void save_resolved(struct medic_buf *b, const struct resolved_alert *r)
{
    medic_buf_puts(b, "{\"identity\":");
    medic_buf_json_string(b, r->identity);
    medic_buf_puts(b, ",");
    json_time(b, "starts_at", r->starts_at);
    medic_buf_puts(b, ",");
    json_time(b, "at", r->at);
    medic_buf_printf(b, ",\"noted\":%d}", r->noted);
}

static void save_engine(struct medic_buf *b, const struct policy_state *st)
{
    medic_buf_printf(b, "{\"version\":%d,\"storm_active\":%s,\"next_incident\":\"%lld\"",
                     ENGINE_STATE_VERSION, st->storm_active ? "true" : "false",
                     (long long)st->next_incident_id);
    if (st->pause.on) {
        medic_buf_puts(b, ",\"pause\":{\"by\":");
        medic_buf_json_string(b, st->pause.by);
        json_text(b, "reason", st->pause.reason);
        medic_buf_puts(b, ",");
        json_time(b, "since", st->pause.since);
        medic_buf_puts(b, ",");
        json_time(b, "until", st->pause.until);
        medic_buf_puts(b, "}");
    }
    medic_buf_puts(b, "}");
}

/* The key of an item's row. */
static void row_key(enum row_kind kind, const void *item, char *out, size_t size)
{
    switch (kind) {
    case ROW_INCIDENT:
        snprintf(out, size, "%lld", (long long)((const struct incident *)item)->id);
        break;
    case ROW_NODE:
        snprintf(out, size, "%s", ((const struct node_state *)item)->name);
        break;
    case ROW_UNMATCHED: {
        const struct unmatched *u = item;
        policy__alert_key(u->fingerprint, u->starts_at, out, size);
        break;
    }
    case ROW_RESOLVED:
        snprintf(out, size, "%s", ((const struct resolved_alert *)item)->identity);
        break;
    default:
        snprintf(out, size, "state");
        break;
    }
}

/* Writes one item's row (or its removal, for a final incident). */
static int emit(const struct policy_state *st, enum row_kind kind, const void *item,
                struct medic_buf *b, policy_row_fn fn, void *arg)
{
    char key[INCIDENT_KEY_SIZE + 64];
    row_key(kind, item, key, sizeof(key));
    if (kind == ROW_INCIDENT && ((const struct incident *)item)->final)
        return fn(arg, policy__row_kind_names[kind], key, NULL, 0, NULL, 0);
    if (kind == ROW_UNMATCHED && ((const struct unmatched *)item)->last_seen == INT64_MIN)
        return fn(arg, policy__row_kind_names[kind], key, NULL, 0, NULL, 0);
    medic_buf_reset(b);
    struct row_refs refs = {.count = 0};
    switch (kind) {
    case ROW_INCIDENT:
        save_incident(b, item, &refs);
        break;
    case ROW_NODE:
        save_node(b, item);
        break;
    case ROW_UNMATCHED:
        save_unmatched(b, item);
        break;
    case ROW_RESOLVED:
        save_resolved(b, item);
        break;
    default:
        save_engine(b, st);
        break;
    }
    if (b->error)
        return b->error;
    return fn(arg, policy__row_kind_names[kind], key, b->data, b->len, refs.items, refs.count);
}

int policy_state_rows(const struct policy_state *st, policy_row_fn fn, void *arg)
{
    struct medic_buf b;
    medic_buf_init(&b, 0);
    int rc = emit(st, ROW_ENGINE, NULL, &b, fn, arg);
    for (size_t i = 0; rc == 0 && i < st->incident_count; i++)
        if (!st->incidents[i]->final)
            rc = emit(st, ROW_INCIDENT, st->incidents[i], &b, fn, arg);
    for (size_t i = 0; rc == 0 && i < st->node_count; i++)
        rc = emit(st, ROW_NODE, st->nodes[i], &b, fn, arg);
    for (size_t i = 0; rc == 0 && i < st->unmatched_count; i++)
        if (st->unmatched[i]->last_seen != INT64_MIN)
            rc = emit(st, ROW_UNMATCHED, st->unmatched[i], &b, fn, arg);
    for (size_t i = 0; rc == 0 && i < st->resolved_count; i++)
        rc = emit(st, ROW_RESOLVED, st->resolved[i], &b, fn, arg);
    medic_buf_release(&b);
    return rc;
}

/* Every row, and a removal for each row a lost change may have left
 * behind: after a failed allocation the change list is incomplete. */
static int emit_everything(struct policy_state *st, policy_row_fn fn, void *arg)
{
    int rc = fn(arg, NULL, NULL, NULL, 0, NULL, 0); /* NULL kind: every row goes first */
    return rc ? rc : policy_state_rows(st, fn, arg);
}

int policy_state_changes(struct policy_state *st, policy_row_fn fn, void *arg)
{
    struct policy_changes *c = &st->changes;
    int rc = 0;
    if (c->failed) {
        rc = emit_everything(st, fn, arg);
    } else {
        struct medic_buf b;
        medic_buf_init(&b, 0);
        for (size_t i = 0; rc == 0 && i < c->gone_count; i++)
            rc = fn(arg, policy__row_kind_names[c->gone[i].kind], c->gone[i].key, NULL, 0, NULL, 0);
        for (size_t i = 0; rc == 0 && i < c->dirty_count; i++)
            if (c->dirty[i].item)
                rc = emit(st, c->dirty[i].kind, c->dirty[i].item, &b, fn, arg);
        if (rc == 0 && c->engine)
            rc = emit(st, ROW_ENGINE, NULL, &b, fn, arg);
        medic_buf_release(&b);
    }
    if (rc == 0) {
        policy__changes_written(st);
    }
    return rc;
}

int policy_state_rows_outdated(const struct policy_state *st)
{
    return st->rows_outdated;
}

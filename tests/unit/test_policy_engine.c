/* SPDX-License-Identifier: Apache-2.0 */
/* The policy engine, driven with explicit times: matching, escalation,
 * on_resolved, and a test for each safety invariant of the product
 * contract. */
#include "policy_engine.h"
#include "inventory.h"
#include "policy.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MIN (60 * MEDIC_NS_PER_SEC)
#define T0 (INT64_C(1795334400) * MEDIC_NS_PER_SEC) /* 2026-11-22T08:00:00Z */

/* One row of the engine's state, as the audit log keeps it. */
struct row {
    char *key; /* "kind key" */
    char *value;
};

struct rows {
    struct row *items;
    size_t count, cap;
};

struct world {
    struct policy_set policies;
    struct inventory inventory;
    struct policy_context ctx;
    struct policy_state *state;
    struct policy_decisions out;
    struct rows table; /* the rows written so far, change by change, as medic serve does */
};

static void rows_release(struct rows *r)
{
    for (size_t i = 0; i < r->count; i++) {
        free(r->items[i].key);
        free(r->items[i].value);
    }
    free(r->items);
    memset(r, 0, sizeof(*r));
}

/* Puts, replaces or (value NULL) deletes a row; kind NULL deletes all. */
static int rows_put(void *arg, const char *kind, const char *key, const char *value, size_t len,
                    const struct policy_decision_ref *refs, size_t ref_count)
{
    struct rows *r = arg;
    (void)refs;
    assert_int_equal(ref_count, 0); /* nothing here binds decisions */
    if (!kind) {
        rows_release(r);
        return 0;
    }
    char k[1024];
    snprintf(k, sizeof(k), "%s %s", kind, key);
    size_t i = 0;
    while (i < r->count && strcmp(r->items[i].key, k) != 0)
        i++;
    if (i < r->count) {
        free(r->items[i].value);
        if (!value) {
            free(r->items[i].key);
            r->items[i] = r->items[--r->count];
            return 0;
        }
    } else {
        if (!value)
            return 0;
        if (r->count == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 64;
            r->items = realloc(r->items, r->cap * sizeof(*r->items));
            assert_non_null(r->items);
        }
        r->items[r->count++].key = strdup(k);
    }
    r->items[i].value = strndup(value, len);
    return 0;
}

static int row_order(const void *a, const void *b)
{
    return strcmp(((const struct row *)a)->key, ((const struct row *)b)->key);
}

/* The rows written change by change are the state's rows, every one. */
static void check_rows(struct world *w)
{
    assert_int_equal(policy_state_changes(w->state, rows_put, &w->table), 0);
    assert_false(policy_state_changed(w->state));
    struct rows whole = {0};
    assert_int_equal(policy_state_rows(w->state, rows_put, &whole), 0);
    qsort(w->table.items, w->table.count, sizeof(struct row), row_order);
    qsort(whole.items, whole.count, sizeof(struct row), row_order);
    for (size_t i = 0; i < whole.count && i < w->table.count; i++) {
        assert_string_equal(w->table.items[i].key, whole.items[i].key);
        assert_string_equal(w->table.items[i].value, whole.items[i].value);
    }
    assert_int_equal(w->table.count, whole.count);
    rows_release(&whole);
}

static const char *const node_labels[] = {"node", "Hostname", "instance"};
static const char *const notifiers[] = {"oncall"};

static const char base_policies[] =
    "policies:\n"
    "  - name: xid-fell-off-bus\n"
    "    match: '{alertname=\"GPUXidError\", xid=~\"79|48\"}'\n"
    "    cooldown: 6h\n"
    "    max_actions_per_node: { count: 3, window: 24h }\n"
    "    steps:\n"
    "      - action: drain\n"
    "        reason: 'Xid {{ $labels.xid }} on GPU {{ $labels.gpu }}'\n"
    "      - after: 10m\n"
    "        action: ipmi_power_cycle\n"
    "      - after: 30m\n"
    "        action: notify\n"
    "        notifier: oncall\n"
    "    on_resolved:\n"
    "      - action: resume\n"
    "  - name: hot-gpu\n"
    "    match: '{alertname=\"GPUTemperatureHigh\"}'\n"
    "    when: { risk_at_least: 0.85, risk_unknown: skip }\n"
    "    steps:\n"
    "      - action: power_limit\n"
    "        watts: 300\n"
    "    on_resolved:\n"
    "      - action: restore_power_limit\n"
    "  - name: operator-drained\n"
    "    match: '{alertname=\"NodeBackFromRepair\"}'\n"
    "    steps:\n"
    "      - action: notify\n"
    "        notifier: oncall\n"
    "    on_resolved:\n"
    "      - action: resume\n";

/* A drain without cooldown, for the fleet caps. */
static const char caps_policies[] = "policies:\n"
                                    "  - name: drain-on-xid\n"
                                    "    match: '{alertname=\"GPUXidError\"}'\n"
                                    "    steps: [ { action: drain }, { after: 10m, action: "
                                    "ipmi_power_cycle } ]\n";

/* A decision's parameters as the audit log stores them (JSON). */
static const char *params_of(const struct policy_decision *d)
{
    static char text[32768];
    struct medic_buf b;
    medic_buf_init(&b, 0);
    assert_int_equal(medic_action_params_json(&d->action, &b), 0);
    snprintf(text, sizeof(text), "%s", b.data);
    medic_buf_release(&b);
    return text;
}

static void world_init_inventory(struct world *w, const char *policies_yaml,
                                 const char *safety_yaml, const char *inv, int live);

static void world_init(struct world *w, const char *policies_yaml, const char *safety_yaml,
                       size_t nodes, int live)
{
    char inv[65536] = "nodes:\n";
    for (size_t i = 1; i <= nodes; i++)
        snprintf(inv + strlen(inv), sizeof(inv) - strlen(inv),
                 "  - { name: gpu-node-%02zu, aliases: [gpu-node-%02zu.example.org] }\n", i, i);
    world_init_inventory(w, policies_yaml, safety_yaml, inv, live);
}

static void world_init_inventory(struct world *w, const char *policies_yaml,
                                 const char *safety_yaml, const char *inv, int live)
{
    memset(w, 0, sizeof(*w));
    char doc[8192];
    snprintf(doc, sizeof(doc), "%s%s", policies_yaml, safety_yaml ? safety_yaml : "");
    struct yaml_tree tree;
    struct medic_error err = {0};
    if (yaml_tree_parse("test.yaml", doc, strlen(doc), &tree, &err))
        fail_msg("%s", err.msg);
    if (policy_set_parse("test.yaml", yaml_tree_get(tree.root, "policies"),
                         yaml_tree_get(tree.root, "safety"), notifiers, 1, &w->policies, &err))
        fail_msg("%s", err.msg);
    yaml_tree_release(&tree);
    if (yaml_tree_parse("inv.yaml", inv, strlen(inv), &tree, &err) ||
        inventory_parse("inv.yaml", tree.root, &w->inventory, &err))
        fail_msg("%s", err.msg);
    yaml_tree_release(&tree);
    w->ctx = (struct policy_context){&w->policies, &w->inventory, node_labels, 3, live, NULL, 0,
                                     NULL,         NULL,          NULL,        0};
    w->state = policy_state_new();
    policy_state_track_changes(w->state);
    policy_decisions_init(&w->out);
}

static void world_release(struct world *w)
{
    policy_decisions_release(&w->out);
    policy_state_free(w->state);
    inventory_release(&w->inventory);
    policy_set_release(&w->policies);
    rows_release(&w->table);
}

/* An alert: labels as "name=value" strings, at most 8. */
struct test_alert {
    struct medic_label items[8];
    struct medic_labels labels;
    struct medic_labels annotations;
    struct policy_alert alert;
    char fingerprint[300];
};

static void make_alert(struct test_alert *t, const char *alertname, const char *instance,
                       const char *gpu, const char *xid, int64_t starts_at, double risk)
{
    memset(t, 0, sizeof(*t));
    size_t n = 0;
    /* sorted by name */
    t->items[n++] = (struct medic_label){"alertname", alertname};
    if (gpu)
        t->items[n++] = (struct medic_label){"gpu", gpu};
    if (instance)
        t->items[n++] = (struct medic_label){"instance", instance};
    if (xid)
        t->items[n++] = (struct medic_label){"xid", xid};
    t->labels = (struct medic_labels){t->items, n};
    snprintf(t->fingerprint, sizeof(t->fingerprint), "%s/%s/%s", alertname,
             instance ? instance : "-", gpu ? gpu : "-");
    t->alert = (struct policy_alert){
        t->fingerprint, MEDIC_STATUS_FIRING, &t->labels, &t->annotations, starts_at, risk, NULL};
}

static size_t evaluate(struct world *w, struct test_alert *t, enum medic_alert_status status,
                       int64_t now)
{
    size_t before = w->out.count;
    t->alert.status = status;
    assert_int_equal(policy_evaluate(&w->ctx, w->state, &t->alert, now, &w->out), 0);
    check_rows(w);
    return w->out.count - before;
}

static size_t tick(struct world *w, int64_t now)
{
    size_t before = w->out.count;
    assert_int_equal(policy_tick(&w->ctx, w->state, now, &w->out), 0);
    check_rows(w);
    return w->out.count - before;
}

/* Every awaited action succeeds now, as dispatch would report. */
static size_t succeed(struct world *w, int64_t now)
{
    size_t before = w->out.count;
    assert_int_equal(policy_assume_success(&w->ctx, w->state, now, &w->out), 0);
    check_rows(w);
    return w->out.count - before;
}

/* The awaited action of the last awaited decision on node ends with o and
 * detail, as the runner reports it; the decisions it led to. */
static size_t outcome_with(struct world *w, const char *node, enum medic_outcome o,
                           const char *detail, int64_t now)
{
    int64_t incident = 0;
    for (size_t i = w->out.count; i-- > 0 && !incident;)
        if (w->out.items[i].awaited && strcmp(w->out.items[i].node, node) == 0)
            incident = w->out.items[i].incident;
    assert_true(incident > 0);
    size_t before = w->out.count;
    struct policy_outcome x = {incident, 0, o, detail};
    assert_int_equal(policy_outcome(&w->ctx, w->state, &x, now, &w->out), 0);
    check_rows(w);
    return w->out.count - before;
}

static size_t outcome(struct world *w, const char *node, enum medic_outcome o, int64_t now)
{
    return outcome_with(w, node, o, "as the test says", now);
}

/* The state of node's latest incident, from the changes recorded. */
static const char *incident_state(struct world *w, const char *node)
{
    for (size_t i = w->out.change_count; i-- > 0;)
        if (strcmp(w->out.changes[i].node, node) == 0)
            return policy_incident_state_name(w->out.changes[i].to);
    return "none";
}

/* The state's rows, sorted, as text. */
static void rows_text(const struct policy_state *st, struct medic_buf *out)
{
    struct rows whole = {0};
    assert_int_equal(policy_state_rows(st, rows_put, &whole), 0);
    qsort(whole.items, whole.count, sizeof(struct row), row_order);
    for (size_t i = 0; i < whole.count; i++)
        medic_buf_printf(out, "%s %s\n", whole.items[i].key, whole.items[i].value);
    rows_release(&whole);
}

/* Rebuilds the state from the rows written change by change, as a
 * restart reads them back, at now; the rebuilt state's rows are the same.
 * A copy is too. */
static void restart(struct world *w, int64_t now)
{
    struct medic_buf saved, again, copied;
    medic_buf_init(&saved, 0);
    medic_buf_init(&again, 0);
    medic_buf_init(&copied, 0);
    check_rows(w);
    rows_text(w->state, &saved);
    struct policy_state *restored = policy_state_new(), *copy = NULL;
    struct medic_error err = {0};
    for (size_t i = 0; i < w->table.count; i++) {
        char kind[32];
        snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(w->table.items[i].key, " "),
                 w->table.items[i].key);
        if (policy_state_load_row(restored, kind, w->table.items[i].value,
                                  strlen(w->table.items[i].value), &err))
            fail_msg("%s", err.msg);
    }
    policy_state_loaded(restored);
    policy_state_track_changes(restored);
    rows_text(restored, &again);
    assert_int_equal(policy_state_copy(w->state, NULL, &copy, &err), 0);
    rows_text(copy, &copied);
    assert_string_equal(saved.data, copied.data);
    policy_state_free(copy);
    medic_buf_release(&copied);
    assert_string_equal(saved.data, again.data);
    medic_buf_release(&saved);
    medic_buf_release(&again);
    policy_state_free(w->state);
    w->state = restored;
    policy_state_restarted(w->state, now);
}

static const struct policy_decision *last(struct world *w, size_t back)
{
    assert_true(w->out.count > back);
    return &w->out.items[w->out.count - 1 - back];
}

#define expect(...) expect_at(__LINE__, __VA_ARGS__)
static void expect_at(int line, const struct policy_decision *d, const char *node,
                      const char *action, enum policy_verdict verdict, const char *reason_part)
{
    const char *got_action = d->has_action ? medic_action_name(d->action.kind) : "-";
    if (strcmp(d->node, node) != 0 || strcmp(got_action, action ? action : "-") != 0 ||
        d->verdict != verdict || (reason_part && !strstr(d->reason, reason_part)))
        fail_msg("line %d: decision %s %s %s '%s'; wanted %s %s %s '%s'", line, d->node, got_action,
                 policy_verdict_name(d->verdict), d->reason, node, action ? action : "-",
                 policy_verdict_name(verdict), reason_part ? reason_part : "");
}

/* The verify before a resume, decided at the resolve, passes at now. */
static void passes_verify(struct world *w, const char *node, int64_t now)
{
    expect(last(w, 0), node, "verify", VERDICT_EXECUTE, "verify_before_resume");
    assert_int_equal(outcome(w, node, MEDIC_OUTCOME_SUCCEEDED, now) > 0, 1);
}

static size_t count_action(struct world *w, size_t from, const char *node, const char *action,
                           enum policy_verdict verdict)
{
    size_t n = 0;
    for (size_t i = from; i < w->out.count; i++) {
        const struct policy_decision *d = &w->out.items[i];
        n += d->has_action && strcmp(d->node, node) == 0 &&
             strcmp(medic_action_name(d->action.kind), action) == 0 && d->verdict == verdict;
    }
    return n;
}

static size_t pause_fleet(struct world *w, int pause, const char *by, int64_t until, int64_t now,
                          int expect_rc)
{
    size_t before = w->out.count;
    struct policy_pause p = {pause, by, "rack 12 maintenance", until};
    char why[200];
    assert_int_equal(policy_pause(&w->ctx, w->state, &p, now, &w->out, why, sizeof(why)),
                     expect_rc);
    check_rows(w);
    return w->out.count - before;
}

static const char drain_resume_policies[] = "policies:\n"
                                            "  - name: drain-on-xid\n"
                                            "    match: '{alertname=\"GPUXidError\"}'\n"
                                            "    steps: [ { action: drain } ]\n"
                                            "    on_resolved: [ { action: resume } ]\n";

/* Stored state names action kinds and incident states: rows written by
 * an earlier medic (format 3, positions in the tables as they were) load
 * to the same state, which asks to be written again, with names. */
static void replace_in(char *text, const char *from, const char *to)
{
    char *at = strstr(text, from);
    assert_non_null(at);
    size_t from_len = strlen(from), to_len = strlen(to);
    memmove(at + to_len, at + from_len, strlen(at + from_len) + 1);
    memcpy(at, to, to_len);
}

static void test_state_rows_name_kinds(void **state)
{
    (void)state;
    struct world w;
    /* what a format-3 medic could write: no verify */
    world_init(&w,
               "policies:\n"
               "  - name: drain-on-xid\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    verify_before_resume: false\n"
               "    steps: [ { action: drain } ]\n"
               "    on_resolved: [ { action: resume } ]\n",
               NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01:9400", "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    succeed(&w, T0 + 1);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN), 1);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "undoing");
    struct rows now = {0};
    assert_int_equal(policy_state_rows(w.state, rows_put, &now), 0);
    struct policy_state *old = policy_state_new();
    struct medic_error err = {0};
    int incidents = 0;
    for (size_t i = 0; i < now.count; i++) {
        char value[8192];
        snprintf(value, sizeof(value), "%s", now.items[i].value);
        const char *kind = now.items[i].key; /* "KIND KEY" */
        char k[32];
        snprintf(k, sizeof(k), "%.*s", (int)strcspn(kind, " "), kind);
        if (strcmp(k, "incident") == 0) {
            incidents++;
            /* names in format 4; positions in format 3 */
            assert_non_null(strstr(value, "\"awaiting_kind\":\"drain\""));
            assert_non_null(strstr(value, "\"closing_as\":\"recovered\""));
            assert_non_null(strstr(value, "\"kind\":\"resume\""));
            replace_in(value, "\"awaiting_kind\":\"drain\"", "\"awaiting_kind\":3");
            replace_in(value, "\"closing_as\":\"recovered\"", "\"closing_as\":9");
            replace_in(value, "\"kind\":\"resume\"", "\"kind\":4");
        }
        if (strcmp(k, "engine") == 0)
            replace_in(value, "\"version\":4", "\"version\":3");
        if (policy_state_load_row(old, k, value, strlen(value), &err))
            fail_msg("%s: %s", k, err.msg);
    }
    assert_int_equal(incidents, 1);
    assert_true(policy_state_rows_outdated(old));
    assert_false(policy_state_rows_outdated(w.state));
    struct rows again = {0};
    assert_int_equal(policy_state_rows(old, rows_put, &again), 0);
    qsort(now.items, now.count, sizeof(struct row), row_order);
    qsort(again.items, again.count, sizeof(struct row), row_order);
    assert_int_equal(now.count, again.count);
    for (size_t i = 0; i < now.count; i++)
        assert_string_equal(now.items[i].value, again.items[i].value);
    /* a name medic does not know, or a position past format 3's table */
    for (size_t i = 0; i < now.count; i++) {
        if (strncmp(now.items[i].key, "incident ", 9) != 0)
            continue;
        static const char *const wrong[] = {"\"awaiting_kind\":\"reboot\"", "\"awaiting_kind\":6",
                                            "\"awaiting_kind\":-1"};
        for (size_t k = 0; k < 3; k++) {
            char value[8192];
            snprintf(value, sizeof(value), "%s", now.items[i].value);
            replace_in(value, "\"awaiting_kind\":\"drain\"", wrong[k]);
            struct policy_state *bad = policy_state_new();
            assert_int_equal(policy_state_load_row(bad, "incident", value, strlen(value), &err),
                             MEDIC_E_INVALID);
            assert_string_equal(err.msg, "engine state: 'awaiting_kind' names nothing medic knows");
            policy_state_free(bad);
        }
    }
    rows_release(&now);
    rows_release(&again);
    policy_state_free(old);
    world_release(&w);
}

/* A decision is bound to its incident before the audit log gives it an
 * id: the incident's row names it by its index in the round (a reference
 * the writer fills in), and once resolved the incident knows the id,
 * without its row counting as changed again. */
struct captured_refs {
    char value[4096];
    struct policy_decision_ref refs[4];
    size_t count, rows;
};

static int capture_refs(void *arg, const char *kind, const char *key, const char *value, size_t len,
                        const struct policy_decision_ref *refs, size_t ref_count)
{
    (void)key;
    struct captured_refs *c = arg;
    c->rows++;
    if (!kind || !value || strcmp(kind, "incident") != 0 ||
        !memmem(value, len, "gpu-node-01", strlen("gpu-node-01")))
        return 0;
    snprintf(c->value, sizeof(c->value), "%.*s", (int)len, value);
    for (size_t i = 0; i < ref_count && c->count < 4; i++)
        c->refs[c->count++] = refs[i];
    return 0;
}

struct awaited_ids {
    int64_t sum;
    int count;
};

static void collect_awaiting(void *arg, int64_t incident, int64_t decision)
{
    (void)incident;
    struct awaited_ids *a = arg;
    a->sum += decision;
    a->count++;
}

static void test_decisions_bound_before_their_ids(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a, other;
    make_alert(&other, "GPUXidError", "gpu-node-02:9400", "0", "79", T0, 0.9);
    make_alert(&a, "GPUXidError", "gpu-node-01:9400", "0", "79", T0, 0.9);
    /* another node's drain first: this one is not the round's first decision */
    assert_int_equal(evaluate(&w, &other, MEDIC_STATUS_FIRING, T0), 1);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    size_t index = w.out.count - 1;
    assert_true(w.out.items[index].awaited);
    policy_bind_decisions(w.state, &w.out);
    assert_true(policy_state_changed(w.state));
    struct captured_refs c = {.count = 0};
    assert_int_equal(policy_state_changes(w.state, capture_refs, &c), 0);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.refs[0].index, index);
    char token[32];
    snprintf(token, sizeof(token), "\"-%zu\"", index + 1);
    assert_int_equal(c.refs[0].len, strlen(token));
    assert_memory_equal(c.value + c.refs[0].offset, token, strlen(token));
    struct awaited_ids awaited = {0};
    policy_awaiting(w.state, collect_awaiting, &awaited);
    assert_int_equal(awaited.count, 2); /* both drains, neither known by id yet */
    assert_int_equal(awaited.sum, 0);
    int64_t ids[8] = {0};
    for (size_t i = 0; i < w.out.count && i < 8; i++)
        ids[i] = 500 + (int64_t)i;
    policy_resolve_decisions(w.state, &w.out, ids);
    assert_false(policy_state_changed(w.state));
    assert_int_equal(index, 1);
    awaited = (struct awaited_ids){0};
    policy_awaiting(w.state, collect_awaiting, &awaited);
    assert_int_equal(awaited.count, 2); /* decision 0 (gpu-node-02) and 1 (gpu-node-01) */
    assert_int_equal(awaited.sum, 500 + 501);
    world_release(&w);
}

static void test_escalation_ladder_and_resume(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01:9400", "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, "step 1");
    assert_true(last(&w, 0)->awaited);
    assert_string_equal(params_of(last(&w, 0)),
                        "{\"reason\":\"Xid 79 on GPU 0 (medic policy xid-fell-off-bus)\"}");
    assert_string_equal(incident_state(&w, "gpu-node-01"), "draining");
    assert_int_equal(succeed(&w, T0 + 1), 0);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "drained");
    /* Alertmanager repeats the notification: nothing new is due */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 2 * MIN), 0);
    /* the scheduler: the power cycle is due at 10 minutes, checked against
     * Slurm when it runs since the incident drained the node */
    assert_int_equal(tick(&w, T0 + 9 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 10 * MIN), 1);
    expect(last(&w, 0), "gpu-node-01", "ipmi_power_cycle", VERDICT_EXECUTE, "step 2");
    assert_true(last(&w, 0)->require_drained);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "cycling");
    assert_int_equal(tick(&w, T0 + 11 * MIN), 0);
    assert_int_equal(succeed(&w, T0 + 11 * MIN), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    /* resolved before the notify step: medic resumes what it drained */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 20 * MIN), 1);
    passes_verify(&w, "gpu-node-01", T0 + 20 * MIN);
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, "alerts are gone");
    assert_string_equal(incident_state(&w, "gpu-node-01"), "undoing");
    assert_int_equal(policy_disrupted_nodes(w.state), 1); /* until the resume succeeds */
    succeed(&w, T0 + 20 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "recovered");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_int_equal(policy_open_incidents(w.state), 0);
    assert_int_equal(tick(&w, T0 + 60 * MIN), 0); /* nothing left to escalate */
    world_release(&w);
}

/* A step runs only after the one before it succeeded: steps due at once
 * run in order, each waiting for the last; a failed drain stops the
 * ladder (no power cycle with jobs running) and tells on-call. */
static void test_power_cycle_waits_for_the_drain(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-02", "1", "48", T0, NAN);
    /* first seen 31 minutes after it started: only the drain is decided */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 31 * MIN), 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, NULL);
    assert_int_equal(tick(&w, T0 + 32 * MIN), 0);
    /* the drain succeeds: the power cycle follows, then the notify */
    assert_int_equal(succeed(&w, T0 + 33 * MIN), 2);
    expect(last(&w, 1), "gpu-node-02", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    expect(last(&w, 0), "gpu-node-02", "notify", VERDICT_EXECUTE, NULL);
    assert_string_equal(params_of(last(&w, 0)), "{\"notifier\":\"oncall\"}");
    world_release(&w);

    world_init(&w, base_policies, "safety: { storm: { notifier: oncall } }\n", 40, 1);
    make_alert(&a, "GPUXidError", "gpu-node-03", "1", "48", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    /* scontrol exits 1: the incident fails, on-call hears, and the power
     * cycle never comes */
    assert_int_equal(outcome(&w, "gpu-node-03", MEDIC_OUTCOME_FAILED, T0 + MIN), 1);
    expect(last(&w, 0), "gpu-node-03", "notify", VERDICT_EXECUTE, "medic stopped incident");
    assert_string_equal(incident_state(&w, "gpu-node-03"), "failed");
    assert_int_equal(policy_disrupted_nodes(w.state), 0); /* the failed drain holds no slot */
    assert_int_equal(tick(&w, T0 + 10 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 40 * MIN), 0);
    /* the resolve closes it; there is no drain to undo */
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 41 * MIN);
    expect(last(&w, 0), "gpu-node-03", "resume", VERDICT_SUPPRESSED, "holds no drain");
    assert_string_equal(incident_state(&w, "gpu-node-03"), "recovered");
    world_release(&w);

    /* an operator resumed the node by hand: the power cycle is refused when
     * Slurm is read before it runs, and the incident stops there */
    world_init(&w, base_policies, "safety: { storm: { notifier: oncall } }\n", 40, 1);
    make_alert(&a, "GPUXidError", "gpu-node-04", "1", "48", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + 10 * MIN);
    expect(last(&w, 0), "gpu-node-04", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    assert_int_equal(outcome(&w, "gpu-node-04", MEDIC_OUTCOME_REFUSED, T0 + 10 * MIN), 1);
    assert_string_equal(incident_state(&w, "gpu-node-04"), "failed");
    assert_int_equal(tick(&w, T0 + 40 * MIN), 0); /* the notify step is not taken either */
    world_release(&w);
}

/* After a restart nothing disruptive runs before an alert of the
 * incident is seen again, or safety.restart_grace (5m) has passed: then
 * the due step is decided from the stored state, its guards checked
 * again. */
static void test_restart_waits_for_a_fresh_alert(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-05", "0", "79", T0, NAN);
    make_alert(&b, "GPUXidError", "gpu-node-06", "0", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    restart(&w, T0 + 12 * MIN); /* down across the power cycles' time */
    assert_int_equal(tick(&w, T0 + 12 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 13 * MIN), 0);
    /* seen again: node-05's step runs at once */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 14 * MIN), 1);
    expect(last(&w, 0), "gpu-node-05", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    assert_null(strstr(last(&w, 0)->reason, "restart_grace"));
    /* what the page shows of node-06: its step waits for the alert, or
     * for the grace's end */
    struct medic_table t;
    assert_int_equal(policy_open_incidents_table(&w.ctx, w.state, "gpu-node-06", 10, &t), 0);
    assert_int_equal(t.nrows, 1);
    int shown = 0;
    for (size_t c = 0; c < t.ncols; c++)
        if (strcmp(t.names[c], "next_step") == 0) {
            assert_non_null(strstr(t.cells[c], "medic restarted: it waits for its alert"));
            assert_non_null(strstr(t.cells[c], "until 2026-11-22T08:17:00"));
            shown = 1;
        }
    assert_true(shown);
    medic_table_release(&t);
    /* node-06's alert is not re-sent: at the grace's end the step is
     * decided from the stored state, and says so */
    assert_int_equal(tick(&w, T0 + 17 * MIN - 1), 0);
    assert_int_equal(tick(&w, T0 + 17 * MIN), 1);
    expect(last(&w, 0), "gpu-node-06", "ipmi_power_cycle", VERDICT_EXECUTE,
           "decided from the stored state");
    world_release(&w);
}

/* A resolve within safety.restart_grace undoes instead (Alertmanager's
 * retry of a resolve sent while medic was down); after a restart past
 * safety.max_alert_age, the step the grace lets through is refused as
 * stale, never run. */
static void test_restart_grace_resolve_and_stale(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, "safety: { restart_grace: 1m }\n", 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-05", "0", "79", T0, NAN);
    make_alert(&b, "GPUXidError", "gpu-node-06", "0", "79", T0 + 14 * MIN, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    restart(&w, T0 + 12 * MIN);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 12 * MIN + 30 * MEDIC_NS_PER_SEC),
                     1);
    passes_verify(&w, "gpu-node-05", T0 + 12 * MIN + 30 * MEDIC_NS_PER_SEC);
    expect(last(&w, 0), "gpu-node-05", "resume", VERDICT_EXECUTE, NULL);
    assert_int_equal(tick(&w, T0 + 14 * MIN), 0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 14 * MIN);
    succeed(&w, T0 + 14 * MIN);
    restart(&w, T0 + 3 * 60 * MIN);
    size_t n = tick(&w, T0 + 3 * 60 * MIN + MIN);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++)
        assert_false(last(&w, i)->disruptive && last(&w, i)->verdict == VERDICT_EXECUTE);
    expect(last(&w, n - 1), "gpu-node-06", "ipmi_power_cycle", VERDICT_SUPPRESSED, "max_alert_age");
    world_release(&w);
}

/* A person's answer to the pending step on node (by node, as `medic
 * policy test` names it); its result. approve: 1 approve, 0 deny, -1 deny
 * and undo what the incident holds. */
static int answer(struct world *w, const char *node, int approve, const char *by, int64_t now,
                  size_t *made)
{
    size_t before = w->out.count;
    struct policy_approval a = {0, 0, node, approve > 0, by, "checked the node", approve < 0};
    char why[400];
    int rc = policy_approve(&w->ctx, w->state, &a, now, &w->out, why, sizeof(why));
    check_rows(w);
    *made = w->out.count - before;
    return rc;
}

/* Approve mode: a disruptive step is decided pending, with what medic
 * would do; it runs only once approved, named in its reason; approving
 * twice finds nothing; a notify step never waits. */
static void test_approval_runs_the_step_once(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    w.ctx.external_url = "https://medic.example.org";
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 2);
    expect(last(&w, 1), "gpu-node-01", "drain", VERDICT_PENDING, "waits for a person's approval");
    assert_non_null(
        strstr(last(&w, 1)->reason, "medic runs exactly drain {\"reason\":\"Xid 79 on GPU 0"));
    assert_non_null(strstr(last(&w, 1)->reason, "on node 'gpu-node-01'"));
    /* on-call hears, with the page to answer on */
    expect(last(&w, 0), "gpu-node-01", "-", VERDICT_SUPPRESSED, "waits for your approval");
    assert_non_null(strstr(last(&w, 0)->reason, "https://medic.example.org/nodes/gpu-node-01"));
    assert_string_equal(incident_state(&w, "gpu-node-01"), "pending");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_int_equal(tick(&w, T0 + 5 * MIN), 0); /* nothing moves while a person is asked */
    size_t made = 0;
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 6 * MIN, &made), 0);
    assert_int_equal(made, 1);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, "approved by alice");
    assert_true(last(&w, 0)->awaited);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "draining");
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 6 * MIN, &made), MEDIC_E_NOTFOUND);
    assert_int_equal(made, 0);
    succeed(&w, T0 + 7 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "drained");
    /* the power cycle comes due at 10m: pending again */
    assert_int_equal(tick(&w, T0 + 10 * MIN), 2);
    expect(last(&w, 1), "gpu-node-01", "ipmi_power_cycle", VERDICT_PENDING, NULL);
    world_release(&w);
}

/* Denied: it never runs, the ladder stops there and the incident goes
 * back to where it was; unanswered, it expires after approval_timeout
 * (30m) and never runs late; a resolve withdraws it. */
static void test_denied_expired_withdrawn(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b, c;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    make_alert(&c, "GPUXidError", "gpu-node-03", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &c, MEDIC_STATUS_FIRING, T0);
    size_t made = 0;
    assert_int_equal(answer(&w, "gpu-node-01", 0, "bob", T0 + MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED, "denied by bob: checked");
    assert_string_equal(incident_state(&w, "gpu-node-01"), "open");
    /* withdrawn */
    assert_int_equal(evaluate(&w, &c, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN), 1);
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_SUPPRESSED, "withdrawn");
    assert_int_equal(answer(&w, "gpu-node-03", 1, "alice", T0 + 3 * MIN, &made), MEDIC_E_NOTFOUND);
    /* node-02 expires at 30m, not before; node-01's later disruptive
     * steps are not taken (the denial stopped its ladder) */
    size_t n = tick(&w, T0 + 30 * MIN - 1);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(last(&w, i)->node, "gpu-node-01");
        assert_false(last(&w, i)->verdict == VERDICT_EXECUTE && last(&w, i)->disruptive);
    }
    n = tick(&w, T0 + 30 * MIN);
    int expired = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        assert_false(d->verdict == VERDICT_EXECUTE && d->disruptive);
        if (strcmp(d->node, "gpu-node-02") == 0 && strstr(d->reason, "expired"))
            expired++;
    }
    assert_int_equal(expired, 1);
    assert_int_equal(answer(&w, "gpu-node-02", 1, "alice", T0 + 31 * MIN, &made), MEDIC_E_NOTFOUND);
    assert_int_equal(tick(&w, T0 + 60 * MIN), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

/* An approval right after a restart waits like any disruptive step for
 * the alert to be seen again (or restart_grace): Alertmanager's retried
 * resolve then withdraws it instead of a needless drain; an alert seen
 * again lets the approved drain run without asking again. */
static void test_approval_after_restart_waits_for_the_alert(void **state)
{
    (void)state;
    struct world w;
    size_t made = 0;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    restart(&w, T0 + 2 * MIN);
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 2 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED, "held: step 1 approved");
    assert_non_null(strstr(last(&w, 0)->reason, "medic restarted"));
    assert_int_equal(answer(&w, "gpu-node-02", 1, "alice", T0 + 2 * MIN, &made), 0);
    size_t from = w.out.count;
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN + 1); /* the retried resolve */
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 2 * MIN + 1);   /* seen again */
    tick(&w, T0 + 2 * MIN + 2);
    assert_int_equal(count_action(&w, from, "gpu-node-01", "drain", VERDICT_EXECUTE), 0);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "drain", VERDICT_EXECUTE), 1);
    world_release(&w);
}

/* A drain decided before a pause began, still queued when it did, is
 * refused by its runner before its first command (MEDIC_HELD_PREFIX): the
 * step is held, not dropped, and decided again once the pause ends; an
 * approved one runs then without asking again. */
static void test_queued_step_held_by_a_later_pause(void **state)
{
    (void)state;
    struct world w;
    size_t made = 0;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, NULL);
    pause_fleet(&w, 1, "ops", MEDIC_TIME_UNSET, T0 + 1, 0);
    outcome_with(&w, "gpu-node-01", MEDIC_OUTCOME_REFUSED,
                 MEDIC_HELD_PREFIX "a person paused medic after it was decided; nothing was sent",
                 T0 + 2);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "open");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_int_equal(tick(&w, T0 + MIN), 0); /* still paused */
    /* approve mode: an approved drain held the same way */
    w.ctx.approve = 1;
    pause_fleet(&w, 0, "ops", MEDIC_TIME_UNSET, T0 + 2 * MIN, 0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 2 * MIN);
    size_t from = w.out.count;
    tick(&w, T0 + 2 * MIN);
    /* node-01's drain decided again: it was decided in live mode, approve
     * mode now asks */
    assert_int_equal(count_action(&w, from, "gpu-node-01", "drain", VERDICT_PENDING), 1);
    assert_int_equal(answer(&w, "gpu-node-02", 1, "alice", T0 + 3 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, "approved by alice");
    pause_fleet(&w, 1, "ops", MEDIC_TIME_UNSET, T0 + 3 * MIN + 1, 0);
    outcome_with(&w, "gpu-node-02", MEDIC_OUTCOME_REFUSED,
                 MEDIC_HELD_PREFIX "a person paused medic after it was decided; nothing was sent",
                 T0 + 3 * MIN + 2);
    pause_fleet(&w, 0, "ops", MEDIC_TIME_UNSET, T0 + 4 * MIN, 0);
    from = w.out.count;
    tick(&w, T0 + 4 * MIN);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "drain", VERDICT_EXECUTE), 1);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "drain", VERDICT_PENDING), 0);
    world_release(&w);
}

/* after_from: previous: a step counts from when the one before it ended.
 * A power cycle approved late is followed by its verify 5m after the
 * cycle's outcome, not at once (5m after the alert, long past); across a
 * restart too. The first step cannot count from a previous one. */
static void test_after_from_previous(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps:\n"
                                   "      - { action: drain, approval: none }\n"
                                   "      - { after: 1m, action: ipmi_power_cycle }\n"
                                   "      - { after: 5m, after_from: previous, action: verify }\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world w;
    size_t made = 0;
    world_init(&w, policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + MIN);
    expect(last(&w, 1), "gpu-node-01", "ipmi_power_cycle", VERDICT_PENDING, NULL);
    assert_non_null(strstr(last(&w, 0)->reason, "then step 3: verify, 5m after this step ends"));
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 20 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-01", "ipmi_power_cycle", VERDICT_EXECUTE, "approved by alice");
    outcome(&w, "gpu-node-01", MEDIC_OUTCOME_SUCCEEDED, T0 + 21 * MIN);
    assert_int_equal(tick(&w, T0 + 22 * MIN), 0); /* 5m after the alert is long past: not yet */
    restart(&w, T0 + 23 * MIN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 23 * MIN);
    assert_int_equal(tick(&w, T0 + 26 * MIN - 1), 0);
    assert_int_equal(tick(&w, T0 + 26 * MIN), 1);
    expect(last(&w, 0), "gpu-node-01", "verify", VERDICT_EXECUTE, NULL);
    world_release(&w);
    /* the first step has nothing before it */
    struct yaml_tree tree;
    struct medic_error err = {0};
    struct policy_set set;
    static const char bad[] = "policies:\n"
                              "  - name: x\n"
                              "    match: '{alertname=\"A\"}'\n"
                              "    steps: [ { action: drain, after_from: previous } ]\n";
    assert_int_equal(yaml_tree_parse("p.yaml", bad, strlen(bad), &tree, &err), 0);
    assert_int_not_equal(policy_set_parse("p.yaml", yaml_tree_get(tree.root, "policies"), NULL,
                                          notifiers, 1, &set, &err),
                         0);
    assert_non_null(strstr(err.msg, "after_from: previous needs a step before it"));
    yaml_tree_release(&tree);
}

/* A denial holds the node for a person: the drained node stays drained
 * when its alert resolves (no verify, no resume) until a person releases
 * it; a denial with undo gives it back at once, and the incident ends when
 * its alert goes. */
static void test_denial_holds_the_node(void **state)
{
    (void)state;
    struct world w;
    char why[300];
    size_t made = 0;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps:\n"
                                   "      - { action: drain, approval: none }\n"
                                   "      - { after: 10m, action: ipmi_power_cycle }\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    world_init(&w, policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-03", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1); /* both drained, unattended */
    tick(&w, T0 + 10 * MIN);
    expect(last(&w, 1), "gpu-node-03", "ipmi_power_cycle", VERDICT_PENDING, NULL);
    /* gpu-node-02: denied ("rebooting it by hand"): held for a person */
    assert_int_equal(answer(&w, "gpu-node-02", 0, "bob", T0 + 11 * MIN, &made), 0);
    assert_string_equal(incident_state(&w, "gpu-node-02"), "quarantined");
    size_t from = w.out.count;
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 20 * MIN);
    succeed(&w, T0 + 21 * MIN);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "resume", VERDICT_EXECUTE), 0);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "verify", VERDICT_EXECUTE), 0);
    assert_int_equal(policy_quarantined_nodes(w.state), 1);
    struct policy_release r = {"gpu-node-02", "bob", "rebooted with the vendor"};
    assert_int_equal(policy_release(&w.ctx, w.state, &r, T0 + 30 * MIN, &w.out, why, sizeof(why)),
                     0);
    check_rows(&w);
    expect(last(&w, 0), "gpu-node-02", "resume", VERDICT_EXECUTE, "released by bob");
    /* gpu-node-03: denied with undo: resumed now, the ladder stopped */
    from = w.out.count;
    assert_int_equal(answer(&w, "gpu-node-03", -1, "carol", T0 + 32 * MIN, &made), 0);
    assert_int_equal(count_action(&w, from, "gpu-node-03", "resume", VERDICT_EXECUTE), 1);
    succeed(&w, T0 + 32 * MIN + 1); /* both resumes */
    assert_string_equal(incident_state(&w, "gpu-node-03"), "open");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    from = w.out.count;
    tick(&w, T0 + 40 * MIN);
    assert_int_equal(count_action(&w, from, "gpu-node-03", "drain", VERDICT_EXECUTE), 0);
    evaluate(&w, &b, MEDIC_STATUS_RESOLVED, T0 + 41 * MIN);
    succeed(&w, T0 + 42 * MIN);
    assert_int_equal(policy_open_incidents(w.state), 0);
    world_release(&w);
}

/* At approval every guard runs again: a storm that began meanwhile
 * holds the approved step with its reason (it runs once the storm has
 * passed, not asked again); per policy, approval: none runs in
 * approve mode at once and approval: required waits in live mode; dry-run
 * never asks. */
static void test_approval_guards_and_policies(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: ask\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    approval: required\n"
                                   "    approval_timeout: 10m\n"
                                   "    steps: [ { action: drain } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n"
                                   "  - name: trusted\n"
                                   "    match: '{alertname=\"GPUTemperatureHigh\"}'\n"
                                   "    approval: none\n"
                                   "    steps: [ { action: power_limit, watts: 300 } ]\n"
                                   "    on_resolved: [ { action: restore_power_limit } ]\n"
                                   "  - name: noise\n"
                                   "    match: '{alertname=\"Noise\"}'\n"
                                   "    steps: [ { action: notify, notifier: oncall } ]\n";
    struct world w;
    world_init(&w, policies, "safety: { storm: { max_alerting_nodes: 3, notifier: oncall } }\n", 40,
               1);
    struct test_alert x, hot, noise[3];
    make_alert(&x, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&hot, "GPUTemperatureHigh", "gpu-node-02", "0", NULL, T0, 0.9);
    assert_int_equal(evaluate(&w, &x, MEDIC_STATUS_FIRING, T0), 2);
    expect(last(&w, 1), "gpu-node-01", "drain", VERDICT_PENDING, "approval_timeout 10m");
    expect(last(&w, 0), "gpu-node-01", "notify", VERDICT_EXECUTE, "waits for your approval");
    w.ctx.approve = 1;
    assert_int_equal(evaluate(&w, &hot, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "gpu-node-02", "power_limit", VERDICT_EXECUTE, NULL);
    /* a storm begins: four nodes alerting */
    char name[3][16];
    for (int i = 0; i < 3; i++) {
        snprintf(name[i], sizeof(name[i]), "gpu-node-%02d", 10 + i);
        make_alert(&noise[i], "Noise", name[i], "0", NULL, T0, 0.9);
        evaluate(&w, &noise[i], MEDIC_STATUS_FIRING, T0 + MIN);
    }
    assert_true(policy_storm_active(w.state));
    size_t made = 0;
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 2 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED,
           "held: step 1 approved by alice");
    assert_non_null(strstr(last(&w, 0)->reason, "storm"));
    assert_string_equal(incident_state(&w, "gpu-node-01"), "open");
    /* nothing runs while the storm lasts, also after a restart */
    assert_int_equal(tick(&w, T0 + 3 * MIN), 0);
    restart(&w, T0 + 3 * MIN);
    evaluate(&w, &x, MEDIC_STATUS_FIRING, T0 + 3 * MIN); /* seen again after the restart */
    for (int i = 0; i < 3; i++)
        evaluate(&w, &noise[i], MEDIC_STATUS_RESOLVED, T0 + 4 * MIN);
    /* the storm passes: the approved drain runs, nobody is asked again */
    size_t n = tick(&w, T0 + 10 * MIN); /* the approval holds until 12m */
    int drained = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        if (d->verdict == VERDICT_PENDING)
            fail_msg("pending: %s %s", d->node, d->reason);
        if (d->has_action && d->action.kind == MEDIC_ACTION_DRAIN &&
            d->verdict == VERDICT_EXECUTE) {
            assert_non_null(strstr(d->reason, "approved by alice"));
            assert_non_null(strstr(d->reason, "held until the guard cleared"));
            drained++;
        }
    }
    assert_int_equal(drained, 1);
    world_release(&w);
    /* dry-run: the step is decided dry_run, nobody is asked */
    world_init(&w, policies, NULL, 40, 0);
    w.ctx.approve = 1;
    assert_int_equal(evaluate(&w, &x, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_DRY_RUN, NULL);
    world_release(&w);
}

/* Over the caps at approval time: a step that was within them when it
 * became pending is held with the caps' reason when the fleet filled
 * meanwhile, and runs once a slot frees while the approval holds; an
 * approval whose time ran out before that is asked again, never run late. */
static void test_approval_refused_over_the_caps(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies,
               "safety: { max_disruptive_in_flight: 1, storm: { max_alerting_nodes: 20,"
               " notifier: oncall } }\n",
               40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0); /* both pending: nothing in flight yet */
    size_t made = 0;
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, "approved by alice");
    /* node-01's drain in flight fills max_disruptive_in_flight 1 */
    assert_int_equal(answer(&w, "gpu-node-02", 1, "alice", T0 + 2 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED, "held: step 1 approved");
    assert_non_null(strstr(last(&w, 0)->reason, "max_disruptive_in_flight"));
    assert_int_equal(tick(&w, T0 + 3 * MIN), 0); /* still full: nothing */
    /* node-01's drain fails: its slot frees, node-02's approved drain runs */
    outcome(&w, "gpu-node-01", MEDIC_OUTCOME_FAILED, T0 + 4 * MIN);
    size_t n = tick(&w, T0 + 5 * MIN);
    assert_true(n >= 1);
    int ran = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(last(&w, i)->node, "gpu-node-02") == 0) {
            expect(last(&w, i), "gpu-node-02", "drain", VERDICT_EXECUTE,
                   "approved by alice (checked the node), held until the guard cleared");
            ran++;
        }
    assert_int_equal(ran, 1);
    world_release(&w);

    /* the approval runs out while the slot is taken: asked again */
    world_init(&w, base_policies,
               "safety: { max_disruptive_in_flight: 1, storm: { max_alerting_nodes: 20,"
               " notifier: oncall } }\n",
               40, 1);
    w.ctx.approve = 1;
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    answer(&w, "gpu-node-01", 1, "alice", T0 + MIN, &made);
    answer(&w, "gpu-node-02", 1, "alice", T0 + 2 * MIN, &made);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED, "until 2026-11-22T08:32:00");
    outcome(&w, "gpu-node-01", MEDIC_OUTCOME_FAILED, T0 + 33 * MIN);
    n = tick(&w, T0 + 34 * MIN);
    ran = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(last(&w, i)->node, "gpu-node-02") == 0 && last(&w, i)->has_action &&
            last(&w, i)->action.kind == MEDIC_ACTION_DRAIN) {
            expect(last(&w, i), "gpu-node-02", "drain", VERDICT_PENDING, NULL);
            ran++;
        }
    assert_int_equal(ran, 1);
    world_release(&w);
}

/* A pending step survives a restart and still expires on time; the
 * pending decision's id names it once committed. */
static void test_pending_survives_restart(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    /* the round's decisions committed as ids 41 to 44 (each pending step
     * and its notice) */
    int64_t ids[] = {41, 42, 43, 44};
    struct policy_decisions round = w.out;
    assert_int_equal(round.count, 4);
    policy_bind_decisions(w.state, &round);
    policy_resolve_decisions(w.state, &round, ids);
    check_rows(&w);
    restart(&w, T0 + 5 * MIN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 5 * MIN); /* seen again since the restart */
    struct policy_approval by_id = {43, 0, NULL, 1, "carol", NULL, 0};
    char why[400];
    size_t before = w.out.count;
    assert_int_equal(
        policy_approve(&w.ctx, w.state, &by_id, T0 + 6 * MIN, &w.out, why, sizeof(why)), 0);
    assert_int_equal(w.out.count, before + 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, "approved by carol (no reason");
    struct policy_approval unknown = {7, 0, NULL, 1, "carol", NULL, 0};
    assert_int_equal(
        policy_approve(&w.ctx, w.state, &unknown, T0 + 6 * MIN, &w.out, why, sizeof(why)),
        MEDIC_E_NOTFOUND);
    assert_non_null(strstr(why, "decision 7"));
    check_rows(&w);
    /* as medic serve runs it, on-call's notice waits for the pending
     * decision's id, then names it and the step's page */
    w.ctx.decision_ids = 1;
    w.ctx.external_url = "https://medic.example.org";
    struct test_alert c;
    make_alert(&c, "GPUXidError", "gpu-node-03", "5", "79", T0 + 6 * MIN, 0.9);
    before = w.out.count;
    assert_int_equal(evaluate(&w, &c, MEDIC_STATUS_FIRING, T0 + 6 * MIN), 1); /* no notice yet */
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_PENDING, NULL);
    struct policy_decisions one = {&w.out.items[before], 1, 1, 0, 0, NULL, 0, 0};
    int64_t id77 = 77;
    policy_bind_decisions(w.state, &one);
    policy_resolve_decisions(w.state, &one, &id77);
    check_rows(&w);
    assert_int_equal(tick(&w, T0 + 6 * MIN + 1), 1);
    expect(last(&w, 0), "gpu-node-03", NULL, VERDICT_SUPPRESSED, "waits for your approval");
    assert_non_null(strstr(last(&w, 0)->reason, "`medic approve 77 --reason TEXT`"));
    assert_non_null(strstr(last(&w, 0)->reason, "https://medic.example.org/approvals/77"));
    assert_non_null(strstr(last(&w, 0)->reason, "drain {\"reason\":\"Xid 79 on GPU 5"));
    assert_non_null(strstr(last(&w, 0)->reason, "then step 2: ipmi_power_cycle, 10m after"));
    assert_int_equal(tick(&w, T0 + 6 * MIN + 2), 0); /* told once */
    w.ctx.decision_ids = 0;
    assert_int_equal(tick(&w, T0 + 30 * MIN - 1), 0);
    size_t n = tick(&w, T0 + 30 * MIN), expired = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        assert_false(d->verdict == VERDICT_EXECUTE && d->disruptive);
        if (strcmp(d->node, "gpu-node-01") == 0 && strstr(d->reason, "expired")) {
            expect(d, "gpu-node-01", "drain", VERDICT_SUPPRESSED, "approval_timeout 30m");
            expired++;
        }
    }
    assert_int_equal(expired, 1);
    world_release(&w);
}

/* A pause holds every disruptive step fleet-wide with its reason, never an
 * undo: a node drained before it is resumed during it, and the drain
 * under way when it began finishes; it survives a restart, and the held
 * steps are decided once it ends (by a person, or at its --until time),
 * on-call told at both ends. */
static void test_pause_holds_disruption_never_undo(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies,
               "safety: { max_disruptive_in_flight: 10, max_disrupted_fraction: 1,\n"
               "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n",
               40, 1);
    struct test_alert a, b, c;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0 + MIN, 0.9);
    make_alert(&c, "GPUXidError", "gpu-node-03", "0", "79", T0 + MIN, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0);                                 /* node-01 drained */
    evaluate(&w, &c, MEDIC_STATUS_FIRING, T0 + MIN); /* node-03's drain under way */
    assert_int_equal(pause_fleet(&w, 1, "ops", MEDIC_TIME_UNSET, T0 + 2 * MIN, 0), 1);
    expect(last(&w, 0), "", "notify", VERDICT_EXECUTE, "paused by ops (rack 12 maintenance)");
    /* a new alert's drain is held with the pause's reason */
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 3 * MIN), 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED,
           "held: paused by ops: rack 12 maintenance");
    /* the drain under way finishes; node-01's power cycle (due at 10m) is
     * held; node-01's resolve still resumes it */
    assert_int_equal(outcome(&w, "gpu-node-03", MEDIC_OUTCOME_SUCCEEDED, T0 + 4 * MIN), 0);
    assert_string_equal(incident_state(&w, "gpu-node-03"), "drained");
    size_t n = tick(&w, T0 + 11 * MIN);
    for (size_t i = 0; i < n; i++)
        assert_false(last(&w, i)->disruptive && last(&w, i)->verdict == VERDICT_EXECUTE);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 12 * MIN), 1);
    passes_verify(&w, "gpu-node-01", T0 + 12 * MIN);
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, NULL);
    /* it survives a restart */
    restart(&w, T0 + 13 * MIN);
    struct policy_pause_state ps;
    assert_int_equal(policy_paused(w.state, &ps), 1);
    assert_string_equal(ps.by, "ops");
    /* its own person sets its end */
    assert_int_equal(pause_fleet(&w, 1, "ops", T0 + 15 * MIN, T0 + 13 * MIN, 0), 1);
    expect(last(&w, 0), "", "notify", VERDICT_EXECUTE, "pause renewed");
    /* another person's shorter pause never cuts it short: both are kept,
     * the later end wins */
    assert_int_equal(pause_fleet(&w, 1, "dave", T0 + 14 * MIN, T0 + 13 * MIN, 0), 1);
    expect(last(&w, 0), "", "notify", VERDICT_EXECUTE, "pause renewed by ops, dave");
    assert_non_null(strstr(last(&w, 0)->reason, "until 2026-11-22T08:15:00"));
    assert_int_equal(tick(&w, T0 + 14 * MIN + 1), 0);
    assert_int_equal(policy_paused(w.state, &ps), 1);
    /* its time runs out: on-call told, the held drain decided again */
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 14 * MIN); /* seen again after the restart */
    n = tick(&w, T0 + 15 * MIN);
    int ended = 0, drained = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        ended += d->has_action && d->action.kind == MEDIC_ACTION_NOTIFY &&
                 strstr(d->reason, "pause ended (its time ran out") != NULL;
        drained += strcmp(d->node, "gpu-node-02") == 0 && d->verdict == VERDICT_EXECUTE &&
                   d->action.kind == MEDIC_ACTION_DRAIN;
    }
    assert_int_equal(ended, 1);
    assert_int_equal(drained, 1);
    assert_int_equal(policy_paused(w.state, &ps), 0);
    assert_int_equal(pause_fleet(&w, 0, "ops", MEDIC_TIME_UNSET, T0 + 16 * MIN, MEDIC_E_NOTFOUND),
                     0);
    world_release(&w);
}

/* Approve mode: an approval that comes while paused is held with the
 * pause's reason and runs once the pause ends; nothing becomes pending
 * while paused. */
static void test_pause_refuses_approvals(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    pause_fleet(&w, 1, "ops", MEDIC_TIME_UNSET, T0 + MIN, 0);
    size_t made = 0;
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 2 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED, "held: step 1 approved");
    assert_non_null(strstr(last(&w, 0)->reason, "paused by ops"));
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 3 * MIN), 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED, "held: paused by ops");
    pause_fleet(&w, 0, "ops", MEDIC_TIME_UNSET, T0 + 4 * MIN, 0);
    size_t n = tick(&w, T0 + 4 * MIN);
    int ran = 0, offered = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        if (!d->has_action || d->action.kind != MEDIC_ACTION_DRAIN)
            continue;
        if (strcmp(d->node, "gpu-node-01") == 0) {
            expect(d, "gpu-node-01", "drain", VERDICT_EXECUTE, "approved by alice");
            ran++;
        } else {
            expect(d, "gpu-node-02", "drain", VERDICT_PENDING, NULL); /* now offered */
            offered++;
        }
    }
    assert_int_equal(ran, 1);
    assert_int_equal(offered, 1);
    world_release(&w);
}

/* Invariant 1: no disruptive action outside the inventory; the target is
 * the inventory's node, found by name or alias, never the raw label. */
static void test_invariant_inventory(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "rogue-host:9400", "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "rogue-host", "drain", VERDICT_SUPPRESSED,
           "node 'rogue-host' is not in the inventory");
    assert_false(last(&w, 0)->in_inventory);
    struct test_alert none;
    make_alert(&none, "GPUXidError", NULL, "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &none, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "", "drain", VERDICT_SUPPRESSED, "names no node");
    /* an alias resolves to the inventory name */
    struct test_alert alias;
    make_alert(&alias, "GPUXidError", "gpu-node-03.example.org:9400", "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &alias, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_EXECUTE, NULL);
    assert_true(last(&w, 0)->in_inventory);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    world_release(&w);
}

/* Invariant 2: retries, HA copies and repeats never repeat an action. */
static void test_invariant_no_action_twice(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-04", "0", "79", T0, 0.9);
    size_t executes = 0;
    for (int i = 0; i < 50; i++) {
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + i * MIN / 2);
        tick(&w, T0 + i * MIN / 2);
        succeed(&w, T0 + i * MIN / 2);
    }
    for (size_t i = 0; i < w.out.count; i++)
        if (w.out.items[i].verdict == VERDICT_EXECUTE && w.out.items[i].has_action &&
            w.out.items[i].action.kind == MEDIC_ACTION_DRAIN)
            executes++;
    assert_int_equal(executes, 1);
    assert_int_equal(w.out.count, 2); /* drain at 0, power cycle at 10m; notify at 30m not yet */
    world_release(&w);
}

/* One incident per node and policy: a node's 8 GPU alerts give one drain,
 * and the node is resumed only when the last of them resolved. */
static void test_one_incident_per_node(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: gpu\n"
                                   "    match: '{alertname=~\"GPUXidError|GPUDoubleBitECC\"}'\n"
                                   "    steps: [ { action: drain }, { after: 1m, action: "
                                   "ipmi_power_cycle } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    static const char *const names[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    struct test_alert gpus[8];
    size_t decided = 0;
    for (int g = 0; g < 8; g++) {
        make_alert(&gpus[g], g % 2 ? "GPUDoubleBitECC" : "GPUXidError", "gpu-node-06", names[g],
                   "79", T0, NAN);
        decided += evaluate(&w, &gpus[g], MEDIC_STATUS_FIRING, T0 + g);
    }
    assert_int_equal(decided, 1);
    expect(last(&w, 0), "gpu-node-06", "drain", VERDICT_EXECUTE, NULL);
    assert_int_equal(succeed(&w, T0 + MIN), 1); /* one power cycle, not eight */
    assert_int_equal(succeed(&w, T0 + MIN), 0);
    assert_int_equal(policy_open_incidents(w.state), 1);
    /* GPU 0 resolves while GPU 1's Xid still fires: no resume */
    assert_int_equal(evaluate(&w, &gpus[0], MEDIC_STATUS_RESOLVED, T0 + 2 * MIN), 0);
    for (int g = 1; g < 7; g++)
        assert_int_equal(evaluate(&w, &gpus[g], MEDIC_STATUS_RESOLVED, T0 + 3 * MIN), 0);
    assert_int_equal(evaluate(&w, &gpus[7], MEDIC_STATUS_RESOLVED, T0 + 4 * MIN), 1);
    passes_verify(&w, "gpu-node-06", T0 + 4 * MIN);
    expect(last(&w, 0), "gpu-node-06", "resume", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* Caps per topology group (safety.group_caps): a rack holds one disrupted
 * node, a partition a quarter of its nodes, a hostlist none; each is held
 * like the fleet caps, and /metrics' usage counts what each group holds. */
static void test_group_caps(void **state)
{
    (void)state;
    static const char inv[] = "nodes:\n"
                              "  - { name: gpu-node-01, labels: { rack: r1, partition: p } }\n"
                              "  - { name: gpu-node-02, labels: { rack: r1, partition: p } }\n"
                              "  - { name: gpu-node-03, labels: { rack: r1, partition: p } }\n"
                              "  - { name: gpu-node-04, labels: { rack: r1, partition: p } }\n"
                              "  - { name: gpu-node-05, labels: { rack: r2, partition: p } }\n"
                              "  - { name: gpu-node-06, labels: { rack: r3, partition: p } }\n"
                              "  - { name: gpu-node-07, labels: { partition: p } }\n"
                              "  - { name: gpu-node-08, labels: { partition: p } }\n";
    struct world w;
    world_init_inventory(&w, caps_policies,
                         "safety: { max_disruptive_in_flight: 10, max_disrupted_fraction: 1,\n"
                         "  group_caps: [ { label: rack, max_disrupted: 1 },\n"
                         "                { label: partition, max_disrupted_fraction: 0.25 } ] }\n",
                         inv, 1);
    static const struct {
        const char *node;
        enum policy_verdict verdict;
        const char *reason;
    } steps[] = {
        {"gpu-node-01", VERDICT_EXECUTE, NULL},
        {"gpu-node-02", VERDICT_SUPPRESSED,
         "held: group cap: 1 of the 4 nodes of rack=r1 already disrupted (safety.group_caps entry "
         "1: at most 1)"},
        {"gpu-node-05", VERDICT_EXECUTE, NULL},
        {"gpu-node-06", VERDICT_SUPPRESSED,
         "group cap: 2 of the 8 nodes of partition=p already disrupted (safety.group_caps entry "
         "2: at most 2)"},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        struct test_alert a;
        make_alert(&a, "GPUXidError", steps[i].node, "0", "79", T0, 0.9);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + (int64_t)i * MEDIC_NS_PER_SEC);
        expect(last(&w, 0), steps[i].node, "drain", steps[i].verdict, steps[i].reason);
    }
    struct policy_group_use use[8];
    size_t n = policy_group_usage(w.state, &w.policies.safety, &w.inventory, use, 8);
    assert_int_equal(n, 3);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        seen |= (strcmp(use[i].group, "r1") == 0 && use[i].disrupted == 1 && use[i].limit == 1)
                << 0;
        seen |= (strcmp(use[i].group, "r2") == 0 && use[i].disrupted == 1 && use[i].limit == 1)
                << 1;
        seen |=
            (strcmp(use[i].label, "partition") == 0 && use[i].disrupted == 2 && use[i].limit == 2)
            << 2;
    }
    assert_int_equal(seen, 7);
    world_release(&w);
    /* a hostlist as the group; a node outside every group is not held */
    world_init_inventory(&w, caps_policies,
                         "safety: { max_disruptive_in_flight: 10, max_disrupted_fraction: 1,\n"
                         "  group_caps: [ { nodes: 'gpu-node-0[7-8]', max_disrupted: 0 } ] }\n",
                         inv, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-07", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-07", "drain", VERDICT_SUPPRESSED,
           "group cap: 0 of the 2 nodes of nodes gpu-node-0[7-8] already disrupted");
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* The held steps' notice: steps held by the caps are told to on-call in
 * one message per safety.held_notice, each incident once; `off` tells
 * nothing. */
static void test_held_notice_batched(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies,
               "safety: { max_disruptive_in_flight: 1, max_disrupted_fraction: 1,\n"
               "          storm: { notifier: oncall }, held_notice: 15m }\n",
               40, 1);
    static const char *const nodes[] = {"gpu-node-01", "gpu-node-02", "gpu-node-03"};
    for (int i = 0; i < 3; i++) {
        struct test_alert a;
        make_alert(&a, "GPUXidError", nodes[i], "0", "79", T0, 0.9);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + i * MEDIC_NS_PER_SEC);
    }
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_SUPPRESSED, "held: fleet cap");
    assert_int_equal(tick(&w, T0 + 5 * MEDIC_NS_PER_SEC), 1);
    const struct policy_decision *d = last(&w, 0);
    expect(d, "", "notify", VERDICT_EXECUTE, "held steps notice: 2 incident(s)");
    const char *m = d->action.u.notify.message;
    assert_non_null(strstr(m, "medic held or suppressed disruptive steps on 2 node(s)"));
    assert_non_null(strstr(m, "- gpu-node-02 (policy drain-on-xid"));
    assert_non_null(strstr(m, "- gpu-node-03 (policy drain-on-xid"));
    assert_null(strstr(m, "gpu-node-01"));
    /* a hold within the interval waits for the next notice, which names
     * it alone; the ones told already are not told again */
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-04", "0", "79", T0 + MIN, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + MIN);
    assert_int_equal(tick(&w, T0 + 2 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 16 * MIN), 1);
    m = last(&w, 0)->action.u.notify.message;
    assert_non_null(strstr(m, "on 1 node(s)"));
    assert_non_null(strstr(m, "- gpu-node-04"));
    assert_null(strstr(m, "gpu-node-02"));
    assert_int_equal(tick(&w, T0 + 40 * MIN), 0);
    world_release(&w);
    /* off: nothing told */
    world_init(&w, drain_resume_policies,
               "safety: { max_disruptive_in_flight: 1, max_disrupted_fraction: 1,\n"
               "          storm: { notifier: oncall }, held_notice: off }\n",
               40, 1);
    for (int i = 0; i < 2; i++) {
        make_alert(&a, "GPUXidError", nodes[i], "0", "79", T0, 0.9);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    }
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED, "held: fleet cap");
    assert_int_equal(tick(&w, T0 + MIN), 0);
    world_release(&w);
}

/* A window that recurs on a local clock: Sundays 08:30-10:00 in Berlin
 * (07:30-09:00 UTC in November) holds the drain until 10:00 there, then it
 * runs; the same hours on a weekday hold nothing; one across midnight
 * holds after it. */
static void test_recurring_maintenance_window(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies,
               "safety:\n  max_disrupted_fraction: 1\n  max_alert_age: 2h\n  maintenance:\n"
               "    - { nodes: 'gpu-node-0[1-2]', every: 'sunday 08:30-10:00',\n"
               "        timezone: Europe/Berlin, reason: 'weekly firmware' }\n"
               "    - { nodes: gpu-node-03, every: 'weekday 08:30-10:00' }\n"
               "    - { nodes: gpu-node-04, every: 'sat,sun 23:00-09:30' }\n",
               40, 1);
    /* T0 is Sunday 2026-11-22 08:00 UTC: 09:00 in Berlin */
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED,
           "held: node 'gpu-node-01' is in a maintenance window until 2026-11-22T09:00:00.000Z: "
           "weekly firmware");
    make_alert(&a, "GPUXidError", "gpu-node-03", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_EXECUTE, NULL); /* a Sunday */
    make_alert(&a, "GPUXidError", "gpu-node-04", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-04", "drain", VERDICT_SUPPRESSED,
           "maintenance window until 2026-11-22T09:30:00.000Z");
    /* 10:01 in Berlin: the Sunday window has ended, the drain runs */
    assert_true(tick(&w, T0 + 61 * MIN) >= 1);
    int drained = 0;
    for (size_t i = 0; i < w.out.count; i++)
        drained += strcmp(w.out.items[i].node, "gpu-node-01") == 0 &&
                   w.out.items[i].verdict == VERDICT_EXECUTE;
    assert_int_equal(drained, 1);
    world_release(&w);
}

/* Invariant 3: never more disrupted nodes than the caps, counted from
 * what happened: a failed drain frees its slot. */
static void test_invariant_fleet_caps(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, caps_policies,
               "safety: { max_disruptive_in_flight: 3, max_disrupted_fraction: 0.05 }\n", 40, 1);
    /* 40 nodes at 5%: 2 nodes; in flight 3: the fraction binds first */
    for (int i = 1; i <= 5; i++) {
        char node[32];
        snprintf(node, sizeof(node), "gpu-node-%02d", i);
        struct test_alert a;
        make_alert(&a, "GPUXidError", node, "0", "79", T0, 0.9);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + i * MEDIC_NS_PER_SEC);
        assert_true(policy_disrupted_nodes(w.state) <= 2);
        if (i <= 2)
            expect(last(&w, 0), node, "drain", VERDICT_EXECUTE, NULL);
        else
            expect(last(&w, 0), node, "drain", VERDICT_SUPPRESSED,
                   "fleet cap: 3 of 40 nodes would be disrupted (max_disrupted_fraction 0.05)");
    }
    world_release(&w);
    /* with a larger fleet the in-flight cap binds */
    world_init(&w,
               "policies:\n"
               "  - name: drain-on-xid\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    steps: [ { action: drain }, { after: 10m, action: ipmi_power_cycle } ]\n"
               "    on_resolved: [ { action: resume } ]\n",
               "safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 0.5,\n"
               "          storm: { notifier: oncall } }\n",
               40, 1);
    for (int i = 1; i <= 4; i++) {
        char node[32];
        snprintf(node, sizeof(node), "gpu-node-%02d", i);
        struct test_alert a;
        make_alert(&a, "GPUXidError", node, "0", "79", T0, 0.9);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
        if (i > 2)
            expect(last(&w, 0), node, "drain", VERDICT_SUPPRESSED,
                   "held: fleet cap: 2 nodes already disrupted by repairs in flight "
                   "(max_disruptive_in_flight 2)");
    }
    assert_int_equal(policy_disrupted_nodes(w.state), 2);
    /* a second alert on a node already disrupted joins its incident */
    struct test_alert again;
    make_alert(&again, "GPUXidError", "gpu-node-01", "5", "48", T0, 0.9);
    assert_int_equal(evaluate(&w, &again, MEDIC_STATUS_FIRING, T0), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 2);
    succeed(&w, T0 + 1);
    /* the held drains stay held while the caps are full, and on-call hears
     * of them once (the held steps' notice); the drained nodes get their
     * power cycle */
    assert_int_equal(tick(&w, T0 + 10 * MIN), 3);
    expect(last(&w, 2), "", "notify", VERDICT_EXECUTE,
           "held steps notice: 2 incident(s) with a disruptive step held or suppressed");
    assert_non_null(
        strstr(last(&w, 2)->action.u.notify.message, "- gpu-node-03 (policy drain-on-xid"));
    assert_non_null(strstr(last(&w, 2)->action.u.notify.message,
                           "step 1 (drain) held: fleet cap: 2 nodes already disrupted"));
    for (size_t i = 0; i < 2; i++) {
        const struct policy_decision *d = last(&w, i);
        assert_true(strcmp(d->node, "gpu-node-01") == 0 || strcmp(d->node, "gpu-node-02") == 0);
        expect(d, d->node, "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    }
    succeed(&w, T0 + 11 * MIN);
    assert_int_equal(tick(&w, T0 + 12 * MIN), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 2);
    /* gpu-node-01 is resumed: its slot goes to the first held drain, and
     * only to it (the caps set the rate) */
    struct test_alert first;
    make_alert(&first, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &first, MEDIC_STATUS_RESOLVED, T0 + 13 * MIN);
    evaluate(&w, &again, MEDIC_STATUS_RESOLVED, T0 + 13 * MIN);
    passes_verify(&w, "gpu-node-01", T0 + 13 * MIN);
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, NULL);
    assert_int_equal(tick(&w, T0 + 13 * MIN + 1), 0); /* full until the resume succeeds */
    succeed(&w, T0 + 13 * MIN + 2);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    assert_int_equal(tick(&w, T0 + 14 * MIN), 1);
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_EXECUTE, "step 1");
    /* drained, its power cycle (overdue) follows at once */
    assert_int_equal(succeed(&w, T0 + 14 * MIN), 1);
    expect(last(&w, 0), "gpu-node-03", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 15 * MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 2);
    /* gpu-node-04 is still held when its alert grows older than
     * max_alert_age: then it is dropped, with the reason, never run late */
    struct test_alert second;
    make_alert(&second, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &second, MEDIC_STATUS_RESOLVED, T0 + 61 * MIN);
    succeed(&w, T0 + 61 * MIN);
    assert_int_equal(tick(&w, T0 + 62 * MIN), 2);
    expect(last(&w, 1), "gpu-node-04", "drain", VERDICT_SUPPRESSED, "stale alerts never disrupt");
    expect(last(&w, 0), "gpu-node-04", "ipmi_power_cycle", VERDICT_SUPPRESSED,
           "the ladder stopped");
    assert_int_equal(tick(&w, T0 + 63 * MIN), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    world_release(&w);
    /* a drain that fails frees its slot for the next node */
    world_init(&w, caps_policies,
               "safety: { max_disruptive_in_flight: 1, max_disrupted_fraction: 1 }\n", 40, 1);
    struct test_alert one, two;
    make_alert(&one, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&two, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &one, MEDIC_STATUS_FIRING, T0);
    outcome(&w, "gpu-node-01", MEDIC_OUTCOME_FAILED, T0 + 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    evaluate(&w, &two, MEDIC_STATUS_FIRING, T0 + 2);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
}
/* Invariant 4: a storm holds disruptive actions and tells on-call once. */
static void test_invariant_storm(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies,
               "safety:\n  max_disruptive_in_flight: 100\n  max_disrupted_fraction: 1\n"
               "  storm: { max_alerting_nodes: 3, window: 5m, notifier: oncall }\n",
               40, 1);
    w.ctx.external_url = "https://medic.example.org";
    size_t notices = 0;
    for (int i = 1; i <= 6; i++) {
        char node[32];
        snprintf(node, sizeof(node), "gpu-node-%02d", i);
        struct test_alert a;
        make_alert(&a, "GPUXidError", node, "0", "79", T0, 0.9);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + i * MEDIC_NS_PER_SEC);
        if (i <= 3) {
            expect(last(&w, 0), node, "drain", VERDICT_EXECUTE, NULL);
        } else {
            char reason[96];
            snprintf(reason, sizeof(reason), "storm: %d nodes alerting within 5m (max 3)", i);
            expect(last(&w, 0), node, "drain", VERDICT_SUPPRESSED, reason);
        }
    }
    for (size_t i = 0; i < w.out.count; i++)
        if (strstr(w.out.items[i].reason, "storm started")) {
            notices++;
            assert_int_equal(w.out.items[i].action.kind, MEDIC_ACTION_NOTIFY);
            assert_int_equal(w.out.items[i].verdict, VERDICT_EXECUTE);
            /* one message for the storm: how many nodes, which alerts, where to look */
            const char *m = w.out.items[i].action.u.notify.message;
            assert_non_null(
                strstr(m, "4 nodes alerting within 5m (max 3): GPUXidError on 4 nodes"));
            assert_non_null(strstr(m, "on-call page: https://medic.example.org/"));
        }
    assert_int_equal(notices, 1);
    assert_true(policy_storm_active(w.state));
    /* 5 minutes without new alerting nodes: the storm passes, on-call is
     * told, and the drains it held are decided again while their alerts
     * are fresh */
    assert_int_equal(tick(&w, T0 + 6 * MIN), 4);
    assert_non_null(strstr(last(&w, 3)->reason, "storm ended"));
    assert_false(policy_storm_active(w.state));
    assert_non_null(strstr(last(&w, 3)->action.u.notify.message, "the storm passed"));
    for (size_t i = 0; i < 3; i++)
        expect(last(&w, i), last(&w, i)->node, "drain", VERDICT_EXECUTE, "step 1");
    assert_int_equal(policy_disrupted_nodes(w.state), 6);
    /* a new alert now acts again */
    struct test_alert after;
    make_alert(&after, "GPUXidError", "gpu-node-30", "0", "79", T0 + 6 * MIN, 0.9);
    evaluate(&w, &after, MEDIC_STATUS_FIRING, T0 + 6 * MIN);
    expect(last(&w, 0), "gpu-node-30", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* Invariant 5: dry-run is the default mode; a dry_run policy never acts. */
static void test_invariant_dry_run(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 0);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_DRY_RUN, "medic is in dry-run mode");
    /* the state follows as in live mode, so caps show in a dry run */
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    world_release(&w);
    static const char dry_policy[] = "policies:\n"
                                     "  - name: careful\n"
                                     "    match: '{alertname=\"GPUXidError\"}'\n"
                                     "    dry_run: true\n"
                                     "    steps: [ { action: drain } ]\n";
    world_init(&w, dry_policy, NULL, 40, 1);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_DRY_RUN, "the policy is dry_run");
    world_release(&w);
}

/* Invariant 6: medic resumes only what it drained, restores only what it
 * limited. */
static void test_invariant_only_undo_own(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert op;
    make_alert(&op, "NodeBackFromRepair", "gpu-node-07", NULL, NULL, T0, NAN);
    evaluate(&w, &op, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-07", "notify", VERDICT_EXECUTE, NULL);
    evaluate(&w, &op, MEDIC_STATUS_RESOLVED, T0 + MIN);
    expect(last(&w, 0), "gpu-node-07", "resume", VERDICT_SUPPRESSED,
           "holds no drain on node 'gpu-node-07'");
    /* power limits: restored only after medic limited */
    struct test_alert hot;
    make_alert(&hot, "GPUTemperatureHigh", "gpu-node-08", "2", NULL, T0, 0.9);
    evaluate(&w, &hot, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-08", "power_limit", VERDICT_EXECUTE, NULL);
    assert_string_equal(params_of(last(&w, 0)), "{\"watts\":300}");
    succeed(&w, T0 + 1);
    evaluate(&w, &hot, MEDIC_STATUS_RESOLVED, T0 + MIN);
    expect(last(&w, 0), "gpu-node-08", "restore_power_limit", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* The strictest power limit holds: a weaker one never raises it, and when
 * the strictest goes the next strictest comes back before the original. */
static void test_strictest_power_limit(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: strict\n"
                                   "    match: '{alertname=\"GPUTemperatureHigh\"}'\n"
                                   "    steps: [ { action: power_limit, watts: 200 } ]\n"
                                   "    on_resolved: [ { action: restore_power_limit } ]\n"
                                   "  - name: mild\n"
                                   "    match: '{alertname=\"GPUPowerHigh\"}'\n"
                                   "    steps: [ { action: power_limit, watts: 300 } ]\n"
                                   "    on_resolved: [ { action: restore_power_limit } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    struct test_alert hot, power;
    make_alert(&hot, "GPUTemperatureHigh", "gpu-node-09", "0", NULL, T0, NAN);
    make_alert(&power, "GPUPowerHigh", "gpu-node-09", "0", NULL, T0, NAN);
    evaluate(&w, &hot, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-09", "power_limit", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 1);
    evaluate(&w, &power, MEDIC_STATUS_FIRING, T0 + 2);
    expect(last(&w, 0), "gpu-node-09", "power_limit", VERDICT_SUPPRESSED, "already held at 200 W");
    assert_string_equal(incident_state(&w, "gpu-node-09"), "limited");
    /* the strict one goes: back to 300 W, not to the original */
    evaluate(&w, &hot, MEDIC_STATUS_RESOLVED, T0 + MIN);
    expect(last(&w, 0), "gpu-node-09", "power_limit", VERDICT_EXECUTE, NULL);
    assert_string_equal(params_of(last(&w, 0)), "{\"watts\":300}");
    succeed(&w, T0 + MIN);
    evaluate(&w, &power, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN);
    expect(last(&w, 0), "gpu-node-09", "restore_power_limit", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 2 * MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

/* Two alerts of one node under one policy: the first resolution does not
 * put it back in service, the last one does. */
static void test_resume_waits_for_the_last_alert(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: gpu\n"
                                   "    match: '{alertname=~\"GPUXidError|GPUDoubleBitECC\"}'\n"
                                   "    steps: [ { action: drain } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n"
                                   "  - name: ecc-too\n"
                                   "    match: '{alertname=\"GPUDoubleBitECC\"}'\n"
                                   "    steps: [ { action: drain } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    struct test_alert xid, ecc;
    make_alert(&xid, "GPUXidError", "gpu-node-06", "0", "79", T0, NAN);
    make_alert(&ecc, "GPUDoubleBitECC", "gpu-node-06", "3", NULL, T0 + MIN, NAN);
    evaluate(&w, &xid, MEDIC_STATUS_FIRING, T0);
    assert_int_equal(evaluate(&w, &ecc, MEDIC_STATUS_FIRING, T0 + MIN), 0); /* same incident */
    succeed(&w, T0 + MIN);
    assert_int_equal(evaluate(&w, &xid, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    evaluate(&w, &ecc, MEDIC_STATUS_RESOLVED, T0 + 3 * MIN);
    passes_verify(&w, "gpu-node-06", T0 + 3 * MIN);
    expect(last(&w, 0), "gpu-node-06", "resume", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 3 * MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

/* An alert that stops being re-sent (its resolve was lost) expires: its
 * incident closes as expired, undoes what it did, and frees its slot. */
static void test_lost_resolve_expires(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies,
               "safety: { alert_expiry: 1h, max_disruptive_in_flight: 1, "
               "max_disrupted_fraction: 1 }\n",
               40, 1);
    struct test_alert a, b, c;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    /* re-sent with a new startsAt and no resolve between: the same alert */
    make_alert(&b, "GPUXidError", "gpu-node-01", "0", "79", T0 + 30 * MIN, NAN);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 30 * MIN), 0);
    make_alert(&c, "GPUXidError", "gpu-node-02", "0", "79", T0 + 40 * MIN, NAN);
    evaluate(&w, &c, MEDIC_STATUS_FIRING, T0 + 40 * MIN);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED, "fleet cap");
    /* the held drain's notice, which no notifier carries here */
    assert_int_equal(tick(&w, T0 + 89 * MIN), 1);
    expect(last(&w, 0), "", NULL, VERDICT_SUPPRESSED,
           "held steps notice: 1 incident(s) with a disruptive step held or suppressed; no "
           "safety.storm.notifier to tell");
    assert_int_equal(tick(&w, T0 + 91 * MIN), 1);
    passes_verify(&w, "gpu-node-01", T0 + 91 * MIN);
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 91 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "expired");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

/* A set of policies parsed from text, for reloads. */
static void parse_set(const char *doc, struct policy_set *out)
{
    struct yaml_tree tree;
    struct medic_error err = {0};
    if (yaml_tree_parse("r.yaml", doc, strlen(doc), &tree, &err) ||
        policy_set_parse("r.yaml", yaml_tree_get(tree.root, "policies"), NULL, notifiers, 1, out,
                         &err))
        fail_msg("%s", err.msg);
    yaml_tree_release(&tree);
}

/* A world in which medic drained gpu-node-01 for the Xid alert a, under
 * drain_resume_policies: the start of each reload scenario. */
static void drained_node_world(struct world *w, struct test_alert *a)
{
    world_init(w, drain_resume_policies, NULL, 40, 1);
    make_alert(a, "GPUXidError", "gpu-node-01", "0", "79", T0, NAN);
    evaluate(w, a, MEDIC_STATUS_FIRING, T0);
    succeed(w, T0 + 1);
}

/* A reload that removes a policy closes its incidents explicitly: what
 * medic holds for them is undone, with a decision that says why. */
static void test_reload_closes_orphans(void **state)
{
    (void)state;
    struct world w;
    struct test_alert a;
    drained_node_world(&w, &a);
    struct policy_set renamed;
    parse_set("policies:\n"
              "  - name: drain-on-xid-v2\n"
              "    match: '{alertname=\"GPUNeverSeen\"}'\n"
              "    steps: [ { action: drain } ]\n",
              &renamed);
    w.ctx.policies = &renamed;
    /* its alert still fires: on-call hears before the node is resumed */
    assert_int_equal(tick(&w, T0 + MIN), 2);
    expect(last(&w, 1), "gpu-node-01", "-", VERDICT_SUPPRESSED, "still fire on node 'gpu-node-01'");
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, "no longer configured");
    succeed(&w, T0 + MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "closed");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    w.ctx.policies = &w.policies;
    policy_set_release(&renamed);
    world_release(&w);
}

/* A reload that removes the policy of a step waiting for approval
 * withdraws it (recorded), and what the incident holds is undone; the
 * answer that comes after finds nothing to run. */
static void test_reload_withdraws_a_pending_step(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    size_t made = 0;
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + MIN, &made), 0);
    succeed(&w, T0 + MIN); /* drained */
    assert_int_equal(tick(&w, T0 + 10 * MIN), 2);
    expect(last(&w, 1), "gpu-node-01", "ipmi_power_cycle", VERDICT_PENDING, NULL);
    struct policy_set other;
    parse_set("policies:\n"
              "  - name: something-else\n"
              "    match: '{alertname=\"GPUNeverSeen\"}'\n"
              "    steps: [ { action: drain } ]\n",
              &other);
    w.ctx.policies = &other;
    size_t n = tick(&w, T0 + 11 * MIN);
    int withdrawn = 0, resumed = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        assert_false(d->verdict == VERDICT_EXECUTE && d->has_action &&
                     d->action.kind == MEDIC_ACTION_IPMI_POWER_CYCLE);
        withdrawn += d->verdict == VERDICT_SUPPRESSED && strstr(d->reason, "withdrawn") != NULL;
        resumed +=
            d->verdict == VERDICT_EXECUTE && d->has_action && d->action.kind == MEDIC_ACTION_RESUME;
    }
    assert_int_equal(withdrawn, 1);
    assert_int_equal(resumed, 1);
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + 12 * MIN, &made), MEDIC_E_NOTFOUND);
    w.ctx.policies = &w.policies;
    policy_set_release(&other);
    world_release(&w);
}

/* What runs is what the person approved: at a repeat offender the step
 * becomes the quarantine drain; the pending decision and its approval are
 * that drain, never the power cycle the policy's step names. */
static void test_approved_quarantine_drain_runs_as_offered(void **state)
{
    (void)state;
    struct world w;
    world_init(&w,
               "policies:\n"
               "  - name: cycle\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    steps: [ { action: ipmi_power_cycle } ]\n",
               "safety: { quarantine: { incidents: 2, window: 1h } }\n", 40, 1);
    w.ctx.approve = 1;
    struct test_alert a, b;
    size_t made = 0;
    make_alert(&a, "GPUXidError", "gpu-node-03", "1", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    answer(&w, "gpu-node-03", 1, "alice", T0 + MIN, &made);
    expect(last(&w, 0), "gpu-node-03", "ipmi_power_cycle", VERDICT_EXECUTE, "approved by alice");
    succeed(&w, T0 + 2 * MIN);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 3 * MIN);
    /* the node's second incident within 1h: a repeat offender */
    make_alert(&b, "GPUXidError", "gpu-node-03", "1", "79", T0 + 10 * MIN, NAN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 10 * MIN);
    expect(last(&w, 1), "gpu-node-03", "drain", VERDICT_PENDING, "medic quarantine");
    restart(&w, T0 + 11 * MIN); /* the offer survives a restart */
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 11 * MIN);
    assert_int_equal(answer(&w, "gpu-node-03", 1, "alice", T0 + 12 * MIN, &made), 0);
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_EXECUTE, "approved by alice");
    assert_non_null(strstr(params_of(last(&w, 0)), "medic quarantine: repeat offender"));
    outcome(&w, "gpu-node-03", MEDIC_OUTCOME_SUCCEEDED, T0 + 13 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-03"), "quarantined");
    world_release(&w);
}

/* A reload that changes the step a person is asked about: the approval
 * runs nothing (the person approved a drain, not a power cycle), says so,
 * and the step as configured now is offered again. */
static void test_approval_after_reload_runs_nothing_changed(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    w.ctx.approve = 1;
    struct test_alert a;
    size_t made = 0;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 1), "gpu-node-01", "drain", VERDICT_PENDING, NULL);
    struct policy_set other;
    parse_set("policies:\n"
              "  - name: drain-on-xid\n"
              "    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps: [ { action: ipmi_power_cycle } ]\n"
              "    on_resolved: [ { action: resume } ]\n",
              &other);
    w.ctx.policies = &other;
    assert_int_equal(answer(&w, "gpu-node-01", 1, "alice", T0 + MIN, &made), 0);
    assert_int_equal(made, 1);
    expect(last(&w, 0), "gpu-node-01", "ipmi_power_cycle", VERDICT_SUPPRESSED,
           "changed since it was offered (offered: drain ");
    assert_non_null(strstr(last(&w, 0)->reason, "now: ipmi_power_cycle"));
    size_t n = tick(&w, T0 + 2 * MIN);
    int offered = 0;
    for (size_t i = 0; i < n; i++) {
        const struct policy_decision *d = last(&w, i);
        assert_false(d->verdict == VERDICT_EXECUTE && d->disruptive);
        offered += d->verdict == VERDICT_PENDING && d->action.kind == MEDIC_ACTION_IPMI_POWER_CYCLE;
    }
    assert_int_equal(offered, 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    w.ctx.policies = &w.policies;
    policy_set_release(&other);
    world_release(&w);
}

/* A step's own approval overrides its policy's: in live mode the drain
 * runs unattended and the power cycle of the same incident waits for a
 * person; in approve mode a step with approval: none runs at once. */
static void test_approval_per_step(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps:\n"
                                   "      - { action: drain, approval: none }\n"
                                   "      - { after: 10m, action: ipmi_power_cycle, approval: "
                                   "required }\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    for (int approve = 0; approve <= 1; approve++) {
        struct world w;
        world_init(&w, policies, NULL, 40, 1);
        w.ctx.approve = approve;
        struct test_alert a;
        make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
        assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
        expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, "step 1");
        succeed(&w, T0 + MIN);
        assert_int_equal(tick(&w, T0 + 10 * MIN), 2);
        expect(last(&w, 1), "gpu-node-01", "ipmi_power_cycle", VERDICT_PENDING, NULL);
        world_release(&w);
    }
    /* approval on a step that never disrupts is an error at its place */
    struct yaml_tree tree;
    struct medic_error err = {0};
    struct policy_set set;
    static const char bad[] =
        "policies:\n"
        "  - name: x\n"
        "    match: '{alertname=\"A\"}'\n"
        "    steps: [ { action: notify, notifier: oncall, approval: none } ]\n";
    assert_int_equal(yaml_tree_parse("p.yaml", bad, strlen(bad), &tree, &err), 0);
    assert_int_not_equal(policy_set_parse("p.yaml", yaml_tree_get(tree.root, "policies"), NULL,
                                          notifiers, 1, &set, &err),
                         0);
    assert_non_null(strstr(err.msg, "p.yaml:4:"));
    assert_non_null(strstr(err.msg, "approval: only a disruptive step"));
    yaml_tree_release(&tree);
}

/* Node names have one bound: the inventory refuses a name or alias over
 * MEDIC_NODE_NAME_MAX bytes, and an alert whose node label is longer names
 * no node (it says so), never the node whose name is its first 127 bytes. */
static void test_long_node_label_names_no_node(void **state)
{
    (void)state;
    char a_name[MEDIC_NODE_NAME_MAX + 1], b_label[MEDIC_NODE_NAME_MAX + 8], inv[1024];
    memset(a_name, 'a', MEDIC_NODE_NAME_MAX);
    a_name[MEDIC_NODE_NAME_MAX] = '\0';
    snprintf(b_label, sizeof(b_label), "%s-node-b", a_name);
    snprintf(inv, sizeof(inv), "nodes:\n  - { name: %s }\n", a_name);
    struct world w;
    world_init_inventory(&w, drain_resume_policies, NULL, inv, 1);
    struct test_alert b;
    make_alert(&b, "GPUXidError", b_label, "0", "79", T0, 0.9);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0), 1);
    assert_false(last(&w, 0)->in_inventory);
    assert_false(last(&w, 0)->verdict == VERDICT_EXECUTE);
    assert_non_null(strstr(last(&w, 0)->reason, "over 127 bytes"));
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
    /* the inventory's bound */
    snprintf(inv, sizeof(inv), "nodes:\n  - { name: x, aliases: [%s] }\n", b_label);
    struct yaml_tree tree;
    struct inventory inventory;
    struct medic_error err = {0};
    assert_int_equal(yaml_tree_parse("inv.yaml", inv, strlen(inv), &tree, &err), 0);
    assert_int_not_equal(inventory_parse("inv.yaml", tree.root, &inventory, &err), 0);
    assert_non_null(strstr(err.msg, "inv.yaml:2:"));
    assert_non_null(strstr(err.msg, "at most 127 bytes"));
    yaml_tree_release(&tree);
}

/* A stand-in for the engine's reader of Slurm's maintenance reservations:
 * *arg is what it answers (1 in maintenance, 0 not, -1 not known). */
static int fake_slurm_maint(void *arg, const char *slurm_node, int64_t *read_at)
{
    (void)slurm_node;
    *read_at = MEDIC_TIME_UNSET;
    return *(int *)arg;
}

/* safety.maintenance_from_slurm fails closed: while Slurm's reservations
 * are not known (never read, or slurmctld unreachable for long), a
 * disruptive step on a Slurm node is held with the reason, and decided
 * once they are; a node without a Slurm node is not held by it. */
static void test_slurm_maintenance_unknown_holds(void **state)
{
    (void)state;
    struct world w;
    world_init_inventory(&w, drain_resume_policies,
                         "safety: { max_disrupted_fraction: 1, maintenance_from_slurm: true }\n",
                         "nodes:\n  - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n"
                         "  - { name: gpu-node-02 }\n",
                         1);
    int answer = -1;
    w.ctx.slurm_maint = fake_slurm_maint;
    w.ctx.slurm_arg = &answer;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED,
           "Slurm's maintenance reservations are not known");
    assert_non_null(strstr(last(&w, 0)->reason, "held:"));
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, NULL);
    assert_int_equal(tick(&w, T0 + MIN), 0); /* still not known: nothing */
    answer = 1;                              /* read: in maintenance */
    assert_int_equal(tick(&w, T0 + 2 * MIN), 0);
    answer = 0; /* the reservation ended */
    assert_int_equal(tick(&w, T0 + 3 * MIN), 1);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
    /* without safety.maintenance_from_slurm nothing is asked of Slurm */
    world_init_inventory(&w, drain_resume_policies, "safety: { max_disrupted_fraction: 1 }\n",
                         "nodes:\n  - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n", 1);
    answer = -1;
    w.ctx.slurm_maint = fake_slurm_maint;
    w.ctx.slurm_arg = &answer;
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* A stand-in for the engine's view of Slurm's nodes: every node shows
 * state and reason; known -1: the view is not known. */
struct fake_slurm {
    int known;
    const char *state, *reason;
};

static int fake_slurm_node(void *arg, const char *slurm_node, char *state, size_t state_size,
                           char *reason, size_t reason_size)
{
    const struct fake_slurm *f = arg;
    (void)slurm_node;
    snprintf(state, state_size, "%s", f->state);
    snprintf(reason, reason_size, "%s", f->reason);
    return f->known;
}

#define MEDIC_REASON "GPUXidError on gpu-node-01 (medic policy xid) [medic@2026-11-22T08:00:01]"

/* What medic records as its drain is what Slurm shows: a read of Slurm
 * that shows medic's drain keeps it; one that shows the node resumed by
 * someone (or drained again with another reason) lets it go: the node no
 * longer counts as disrupted (a held step elsewhere takes its slot), the
 * ladder stops, on-call hears; a read begun before the drain was confirmed,
 * a view not known and an action in flight change nothing; a quarantined
 * node stays quarantined, holding nothing. */
static void test_reconcile_drains_with_slurm(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps: [ { action: drain }, { after: 10m, action: "
                                   "ipmi_power_cycle } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world w;
    world_init_inventory(&w, policies,
                         "safety: { max_disrupted_fraction: 0.5, storm: { notifier: oncall } }\n",
                         "nodes:\n  - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n"
                         "  - { name: gpu-node-02, slurm: { node: gpu-node-02 } }\n",
                         1);
    struct fake_slurm slurm = {1, "IDLE+DRAIN", MEDIC_REASON};
    w.ctx.slurm_node = fake_slurm_node;
    w.ctx.slurm_arg = &slurm;
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    outcome_with(&w, "gpu-node-01", MEDIC_OUTCOME_SUCCEEDED,
                 "drained: State=IDLE+DRAIN Reason=\"" MEDIC_REASON "\"", T0 + 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    /* the fleet cap (one node) holds gpu-node-02's drain */
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 2);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED, "held:");
    size_t before = w.out.count, changes = w.out.change_count;
    /* Slurm shows medic's drain: nothing changes */
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 5, T0 + 6, &w.out), 0);
    /* a read begun before the drain was confirmed, or a view not known:
     * nothing, whatever it shows */
    slurm.state = "IDLE";
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0, T0 + 6, &w.out), 0);
    slurm.known = -1;
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 5, T0 + 6, &w.out), 0);
    assert_int_equal(w.out.count, before);
    assert_int_equal(w.out.change_count, changes);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    /* someone resumed gpu-node-01: medic lets its drain go, and says so */
    slurm.known = 1;
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 5, T0 + 6, &w.out), 0);
    check_rows(&w);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "open");
    assert_non_null(strstr(w.out.changes[w.out.change_count - 1].cause,
                           "Slurm shows node gpu-node-01 in service (State=IDLE): someone "
                           "resumed it: medic holds no drain there now"));
    expect(last(&w, 0), "gpu-node-01", "notify", VERDICT_EXECUTE,
           "medic's drain of node 'gpu-node-01' is gone");
    /* once read again nothing more is said */
    before = w.out.count;
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 7, T0 + 8, &w.out), 0);
    assert_int_equal(w.out.count, before);
    /* the slot is free: the held drain of gpu-node-02 is decided again */
    tick(&w, T0 + MIN);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, NULL);
    /* gpu-node-01's ladder stopped: no power cycle of a node an operator took */
    tick(&w, T0 + 11 * MIN);
    for (size_t i = 0; i < w.out.count; i++)
        assert_false(w.out.items[i].verdict == VERDICT_EXECUTE && w.out.items[i].has_action &&
                     w.out.items[i].action.kind == MEDIC_ACTION_IPMI_POWER_CYCLE &&
                     strcmp(w.out.items[i].node, "gpu-node-01") == 0);
    /* gpu-node-02's drain in flight: nothing, whatever Slurm showed */
    before = w.out.count;
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 2 * MIN, T0 + 2 * MIN, &w.out),
                     0);
    assert_int_equal(w.out.count, before);
    /* confirmed, then drained again by someone else: let go too */
    outcome_with(&w, "gpu-node-02", MEDIC_OUTCOME_SUCCEEDED,
                 "drained: State=IDLE+DRAIN Reason=\"mine (medic policy xid) [m@t]\"",
                 T0 + 3 * MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    slurm.state = "IDLE+DRAIN";
    slurm.reason = "bad DIMM [alice@2026-11-22T08:05:00]";
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 4 * MIN, T0 + 4 * MIN, &w.out),
                     0);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_non_null(strstr(w.out.changes[w.out.change_count - 1].cause,
                           "drained again by someone else (State=IDLE+DRAIN Reason=bad DIMM"));
    world_release(&w);
    /* dry-run holds no drain in Slurm: nothing is reconciled */
    world_init_inventory(&w, policies, NULL,
                         "nodes:\n  - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n", 0);
    slurm = (struct fake_slurm){1, "IDLE", ""};
    w.ctx.slurm_node = fake_slurm_node;
    w.ctx.slurm_arg = &slurm;
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    before = w.out.count;
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 5, T0 + 6, &w.out), 0);
    assert_int_equal(w.out.count, before);
    world_release(&w);
}

/* A step waiting for a person on a node someone resumed is withdrawn when
 * medic lets its drain go: approving it later runs nothing. */
static void test_reconcile_withdraws_a_waiting_step(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps:\n"
                                   "      - { action: drain }\n"
                                   "      - { after: 10m, action: ipmi_power_cycle, approval: "
                                   "required }\n";
    struct world w;
    world_init_inventory(&w, policies,
                         "safety: { max_disrupted_fraction: 1, storm: { notifier: oncall } }\n",
                         "nodes:\n  - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n", 1);
    struct fake_slurm slurm = {1, "IDLE", ""};
    w.ctx.slurm_node = fake_slurm_node;
    w.ctx.slurm_arg = &slurm;
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    outcome_with(&w, "gpu-node-01", MEDIC_OUTCOME_SUCCEEDED,
                 "drained: State=IDLE+DRAIN Reason=\"" MEDIC_REASON "\"", T0 + 1);
    tick(&w, T0 + 10 * MIN);
    int64_t pending = 0;
    for (size_t i = 0; i < w.out.count; i++)
        if (w.out.items[i].verdict == VERDICT_PENDING)
            pending = (int64_t)i + 1;
    assert_true(pending > 0);
    assert_int_equal(
        policy_reconcile_drains(&w.ctx, w.state, T0 + 10 * MIN + 1, T0 + 10 * MIN + 2, &w.out), 0);
    check_rows(&w);
    int64_t oldest;
    assert_int_equal(policy_pending_approvals(w.state, &oldest), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

/* A quarantined node whose drain someone undid stays quarantined (a person
 * releases it), holding nothing: it does not count as disrupted. */
static void test_reconcile_keeps_a_quarantine(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps: [ { action: drain } ]\n";
    struct world w;
    world_init_inventory(&w, policies,
                         "safety: { max_disrupted_fraction: 1, storm: { notifier: oncall } }\n",
                         "nodes:\n  - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n", 1);
    struct fake_slurm slurm = {1, "IDLE", ""};
    w.ctx.slurm_node = fake_slurm_node;
    w.ctx.slurm_arg = &slurm;
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    outcome_with(&w, "gpu-node-01", MEDIC_OUTCOME_SUCCEEDED,
                 "drained: State=IDLE+DRAIN Reason=\"" MEDIC_REASON "\"", T0 + 1);
    /* resolved: the policy does not resume, so the node is held for a person */
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "quarantined");
    assert_int_equal(policy_quarantined_nodes(w.state), 1);
    assert_int_equal(policy_reconcile_drains(&w.ctx, w.state, T0 + 2 * MIN, T0 + 2 * MIN, &w.out),
                     0);
    check_rows(&w);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "quarantined");
    assert_non_null(strstr(w.out.changes[w.out.change_count - 1].cause,
                           "the node stays quarantined until a person releases it"));
    expect(last(&w, 0), "gpu-node-01", "notify", VERDICT_EXECUTE, "it stays quarantined");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    /* the release ends it, with nothing to undo */
    char why[512];
    struct policy_release r = {"gpu-node-01", "alice", "checked"};
    assert_int_equal(policy_release(&w.ctx, w.state, &r, T0 + 3 * MIN, &w.out, why, sizeof(why)),
                     0);
    assert_int_equal(policy_quarantined_nodes(w.state), 0);
    world_release(&w);
}

/* The same drain-then-cycle policy under any name, for renames. */
#define XID_POLICY(NAME)                                                                           \
    "policies:\n"                                                                                  \
    "  - name: " NAME "\n"                                                                         \
    "    match: '{alertname=\"GPUXidError\"}'\n"                                                   \
    "    cooldown: 1h\n"                                                                           \
    "    steps: [ { action: drain }, { after: 10m, action: ipmi_power_cycle } ]\n"                 \
    "    on_resolved: [ { action: resume } ]\n"

/* A reload that renames a policy (the same policy under a new name): its
 * incidents go on under the new name; nothing is resumed while the alert
 * fires, the ladder goes on where it was, the cooldown recorded under the
 * old name still holds, and the resolve resumes the node. */
static void test_reload_follows_a_renamed_policy(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, XID_POLICY("drain-on-xid"), NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    struct policy_set renamed;
    parse_set(XID_POLICY("xid-v2"), &renamed);
    w.ctx.policies = &renamed;
    assert_int_equal(tick(&w, T0 + MIN), 0); /* no resume while it fires */
    assert_string_equal(incident_state(&w, "gpu-node-01"), "drained");
    assert_string_equal(w.out.changes[w.out.change_count - 1].policy, "xid-v2");
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    /* the ladder goes on: the power cycle at 10 minutes, under the new name */
    assert_int_equal(tick(&w, T0 + 10 * MIN), 1);
    expect(last(&w, 0), "gpu-node-01", "ipmi_power_cycle", VERDICT_EXECUTE, "policy xid-v2 step 2");
    succeed(&w, T0 + 10 * MIN);
    /* the same state after a restart */
    restart(&w, T0 + 11 * MIN);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 12 * MIN);
    passes_verify(&w, "gpu-node-01", T0 + 12 * MIN);
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, "policy xid-v2");
    succeed(&w, T0 + 12 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "recovered");
    /* a new alert within the cooldown the old name recorded is held */
    make_alert(&b, "GPUXidError", "gpu-node-01", "1", "79", T0 + 13 * MIN, NAN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 13 * MIN);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_SUPPRESSED, "cooldown");
    w.ctx.policies = &w.policies;
    policy_set_release(&renamed);
    world_release(&w);
}

/* A reload whose policy takes the alert but would not resume the node
 * (no on_resolved) does not take the incident over: that would strand
 * the node. It is closed, with on-call told. */
static void test_reload_never_strands_through_a_rename(void **state)
{
    (void)state;
    struct world w;
    struct test_alert a;
    drained_node_world(&w, &a);
    struct policy_set other;
    parse_set("policies:\n  - name: tell\n    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps: [ { action: notify, notifier: oncall } ]\n",
              &other);
    w.ctx.policies = &other;
    assert_int_equal(tick(&w, T0 + MIN), 2);
    expect(last(&w, 1), "gpu-node-01", "-", VERDICT_SUPPRESSED, "a reload removed policy");
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, "no longer configured");
    w.ctx.policies = &w.policies;
    policy_set_release(&other);
    world_release(&w);
}

/* The inventory renames a node to its FQDN and keeps the old name as an
 * alias: its incident follows, the resolve (labelled with the old name)
 * resumes it, and the cap slot is let go. */
static void test_reload_follows_a_renamed_node(void **state)
{
    (void)state;
    struct world w;
    struct test_alert a;
    drained_node_world(&w, &a);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    static const char inv[] = "nodes:\n"
                              "  - { name: gpu-node-01.example.org, aliases: [gpu-node-01] }\n"
                              "  - { name: gpu-node-02 }\n";
    struct yaml_tree tree;
    struct medic_error err = {0};
    struct inventory renamed;
    if (yaml_tree_parse("inv.yaml", inv, strlen(inv), &tree, &err) ||
        inventory_parse("inv.yaml", tree.root, &renamed, &err))
        fail_msg("%s", err.msg);
    yaml_tree_release(&tree);
    /* a reload: a new inventory comes with a new set of policies */
    struct policy_set same;
    parse_set(drain_resume_policies, &same);
    w.ctx.inventory = &renamed;
    w.ctx.policies = &same;
    assert_int_equal(tick(&w, T0 + MIN), 0);
    assert_string_equal(incident_state(&w, "gpu-node-01.example.org"), "drained");
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN);
    passes_verify(&w, "gpu-node-01.example.org", T0 + 2 * MIN);
    expect(last(&w, 0), "gpu-node-01.example.org", "resume", VERDICT_EXECUTE, "alerts are gone");
    succeed(&w, T0 + 2 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-01.example.org"), "recovered");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    w.ctx.inventory = &w.inventory;
    w.ctx.policies = &w.policies;
    policy_set_release(&same);
    inventory_release(&renamed);
    world_release(&w);
}

/* on_resolved undoes everything the ladder did: a resume and a restore,
 * both decided at the resolve. */
static void test_on_resolved_undoes_two_things(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: hot-and-drained\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps: [ { action: power_limit, watts: 250 }, { after: 1m, "
                                   "action: drain } ]\n"
                                   "    on_resolved: [ { action: resume }, { action: "
                                   "restore_power_limit } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-03", "0", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-03", "power_limit", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 1);
    assert_int_equal(tick(&w, T0 + MIN), 1);
    expect(last(&w, 0), "gpu-node-03", "drain", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + MIN);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN), 1);
    passes_verify(&w, "gpu-node-03", T0 + 2 * MIN);
    expect(last(&w, 1), "gpu-node-03", "resume", VERDICT_EXECUTE, "alerts are gone");
    expect(last(&w, 0), "gpu-node-03", "restore_power_limit", VERDICT_EXECUTE, "alerts are gone");
    assert_string_equal(incident_state(&w, "gpu-node-03"), "undoing");
    succeed(&w, T0 + 2 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-03"), "recovered");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

/* An alert whose startsAt is a little ahead of medic's clock (a skew
 * between hosts) starts its ladder now, and the incident's opening says
 * why; one far ahead (one of the clocks is wrong) holds its disruptive
 * steps with the reason until the clocks agree, then is judged by the
 * start it said: fresh, it runs; stale by then, it never disrupts. */
static void test_future_starts_at(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-10", "0", "79", T0 + 2 * MIN, NAN);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "gpu-node-10", "drain", VERDICT_EXECUTE, NULL);
    assert_non_null(strstr(w.out.changes[0].cause, "is in the future"));
    succeed(&w, T0);
    assert_int_equal(tick(&w, T0 + 10 * MIN), 1); /* the power cycle on time */
    world_release(&w);
    /* 3 h ahead: held, and said */
    world_init(&w, base_policies, "safety: { max_alert_age: 1h }\n", 40, 1);
    make_alert(&a, "GPUXidError", "gpu-node-10", "0", "79", T0 + 3 * 60 * MIN, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-10", "drain", VERDICT_SUPPRESSED,
           "3h ahead of medic's clock: one of the two clocks is wrong");
    assert_int_equal(tick(&w, T0 + MIN), 0); /* still ahead: nothing new */
    /* medic's clock reaches it (NTP set it right): fresh by what it said */
    tick(&w, T0 + 3 * 60 * MIN + 30 * MEDIC_NS_PER_SEC);
    expect(last(&w, 0), "gpu-node-10", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
    /* an alert that said it started 2 h ago by a clock that was right,
     * reaching a medic whose clock is 3 h slow: held; once medic's clock
     * is right, it is stale and never disrupts */
    world_init(&w, base_policies, "safety: { max_alert_age: 1h }\n", 40, 1);
    make_alert(&a, "GPUXidError", "gpu-node-11", "0", "79", T0 + 60 * MIN, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 - 2 * 60 * MIN);
    expect(last(&w, 0), "gpu-node-11", "drain", VERDICT_SUPPRESSED, "ahead of medic's clock");
    tick(&w, T0 + 3 * 60 * MIN);
    int stale = 0;
    for (size_t i = 0; i < w.out.count; i++)
        stale |= w.out.items[i].verdict == VERDICT_SUPPRESSED &&
                 strstr(w.out.items[i].reason, "older than max_alert_age 1h") != NULL;
    assert_true(stale);
    for (size_t i = 0; i < w.out.count; i++)
        assert_false(w.out.items[i].verdict == VERDICT_EXECUTE && w.out.items[i].has_action &&
                     w.out.items[i].action.kind == MEDIC_ACTION_DRAIN);
    world_release(&w);
}

/* A clock 3 h fast takes a fresh alert for a stale one; once medic's
 * clock is set right, the ladder it stopped is decided again (a truly
 * stale alert stays suppressed). */
static void test_clock_set_right_decides_again(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, "safety: { max_alert_age: 1h }\n", 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-12", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-13", "0", "79", T0 - 5 * 60 * MIN, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 3 * 60 * MIN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 3 * 60 * MIN);
    for (size_t i = 0; i < w.out.count; i++)
        assert_false(w.out.items[i].verdict == VERDICT_EXECUTE && w.out.items[i].has_action &&
                     w.out.items[i].action.kind == MEDIC_ACTION_DRAIN);
    size_t before = w.out.count;
    policy_clock_set_right(w.state, -3 * 60 * MIN, T0 + MIN, &w.out);
    check_rows(&w);
    assert_non_null(strstr(w.out.changes[w.out.change_count - 1].cause,
                           "suppressed as stale on the wrong clock, is decided again"));
    tick(&w, T0 + MIN);
    int drained12 = 0, drained13 = 0;
    for (size_t i = before; i < w.out.count; i++) {
        const struct policy_decision *d = &w.out.items[i];
        int drain =
            d->verdict == VERDICT_EXECUTE && d->has_action && d->action.kind == MEDIC_ACTION_DRAIN;
        drained12 |= drain && strcmp(d->node, "gpu-node-12") == 0;
        drained13 |= drain && strcmp(d->node, "gpu-node-13") == 0;
    }
    assert_true(drained12);  /* a minute old on the right clock */
    assert_false(drained13); /* five hours old: stale still */
    world_release(&w);
}

/* A notify step's {{ $previous }} says what came of the step before it:
 * a denial, or the outcome of what ran; never "drained" after a denied
 * drain. */
static void test_notify_says_what_came_before(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps:\n"
                                   "      - { action: drain, approval: required }\n"
                                   "      - { after: 1m, action: notify, notifier: oncall, "
                                   "message: 'then: {{ $previous }}' }\n";
    struct world w;
    world_init(&w, policies, "safety: { max_disrupted_fraction: 1 }\n", 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    size_t made;
    assert_int_equal(answer(&w, "gpu-node-01", 0, "bob", T0 + 10 * MEDIC_NS_PER_SEC, &made), 0);
    assert_int_equal(answer(&w, "gpu-node-02", 1, "alice", T0 + 10 * MEDIC_NS_PER_SEC, &made), 0);
    outcome_with(&w, "gpu-node-02", MEDIC_OUTCOME_SUCCEEDED, "drained: State=IDLE+DRAIN",
                 T0 + 11 * MEDIC_NS_PER_SEC);
    tick(&w, T0 + MIN);
    const char *said01 = NULL, *said02 = NULL;
    for (size_t i = 0; i < w.out.count; i++) {
        const struct policy_decision *d = &w.out.items[i];
        if (d->has_action && d->action.kind == MEDIC_ACTION_NOTIFY && d->action.u.notify.message &&
            strncmp(d->action.u.notify.message, "then: ", 6) == 0) {
            if (strcmp(d->node, "gpu-node-01") == 0)
                said01 = d->action.u.notify.message;
            else
                said02 = d->action.u.notify.message;
        }
    }
    assert_non_null(said01);
    assert_non_null(said02);
    assert_non_null(strstr(said01, "then: drain not run: step 1 denied by bob"));
    assert_non_null(strstr(said02, "then: drain succeeded: drained: State=IDLE+DRAIN"));
    world_release(&w);
}

/* Invariant 7: stale alerts never disrupt. */
static void test_invariant_stale(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, "safety: { max_alert_age: 1h }\n", 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 61 * MIN);
    expect(last(&w, 2), "gpu-node-01", "drain", VERDICT_SUPPRESSED,
           "the alert started 61m ago, older than max_alert_age 1h");
    expect(last(&w, 1), "gpu-node-01", "ipmi_power_cycle", VERDICT_SUPPRESSED, "ladder stopped");
    expect(last(&w, 0), "gpu-node-01", "notify", VERDICT_EXECUTE, NULL); /* on-call hears */
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    world_release(&w);
}

static void test_cooldown_and_budget(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: ecc\n"
                                   "    match: '{alertname=\"GPUDoubleBitECC\"}'\n"
                                   "    cooldown: 1h\n"
                                   "    max_actions_per_node: { count: 2, window: 24h }\n"
                                   "    steps: [ { action: drain } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    int64_t t = T0;
    struct test_alert a;
    make_alert(&a, "GPUDoubleBitECC", "gpu-node-05", "0", NULL, t, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, t);
    expect(last(&w, 0), "gpu-node-05", "drain", VERDICT_EXECUTE, NULL);
    succeed(&w, t);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, t + 10 * MIN);
    succeed(&w, t + 10 * MIN);
    /* a new incident 30 minutes later: inside the cooldown */
    make_alert(&a, "GPUDoubleBitECC", "gpu-node-05", "0", NULL, t + 30 * MIN, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, t + 30 * MIN);
    expect(last(&w, 0), "gpu-node-05", "drain", VERDICT_SUPPRESSED,
           "cooldown: policy ecc acted on node 'gpu-node-05' 30m ago (cooldown 1h)");
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, t + 40 * MIN);
    /* after the cooldown: allowed, the second action of the day */
    make_alert(&a, "GPUDoubleBitECC", "gpu-node-05", "0", NULL, t + 2 * 60 * MIN, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, t + 2 * 60 * MIN);
    expect(last(&w, 0), "gpu-node-05", "drain", VERDICT_EXECUTE, NULL);
    succeed(&w, t + 2 * 60 * MIN);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, t + 3 * 60 * MIN);
    succeed(&w, t + 3 * 60 * MIN);
    /* the third within 24h: over the budget */
    make_alert(&a, "GPUDoubleBitECC", "gpu-node-05", "0", NULL, t + 5 * 60 * MIN, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, t + 5 * 60 * MIN);
    expect(last(&w, 0), "gpu-node-05", "drain", VERDICT_SUPPRESSED,
           "budget: 2 actions on node 'gpu-node-05' within 1d (max 2)");
    world_release(&w);
}
static void test_matching_risk_and_no_match(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies, NULL, 40, 1);
    struct test_alert low, unknown, other;
    make_alert(&low, "GPUTemperatureHigh", "gpu-node-01", "0", NULL, T0, 0.42);
    evaluate(&w, &low, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-01", NULL, VERDICT_NO_MATCH,
           "policy hot-gpu: risk 0.42 below 0.85");
    assert_int_equal(evaluate(&w, &low, MEDIC_STATUS_FIRING, T0 + MIN), 0); /* once */
    make_alert(&unknown, "GPUTemperatureHigh", "gpu-node-02", "0", NULL, T0, NAN);
    evaluate(&w, &unknown, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-02", NULL, VERDICT_NO_MATCH, "skips alerts of unknown risk");
    make_alert(&other, "GPUXidError", "gpu-node-03", "0", "13", T0, 0.99); /* xid 13 */
    evaluate(&w, &other, MEDIC_STATUS_FIRING, T0);
    /* the closest policy is named, with the first of its matchers that
     * failed and why */
    expect(last(&w, 0), "gpu-node-03", NULL, VERDICT_NO_MATCH,
           "no policy matches the alert's labels; the closest is policy xid-fell-off-bus, whose "
           "matcher xid=~\"79|48\" fails: its xid is \"13\"");
    /* an exporter that sends no xid label (dcgm-exporter's alerts carry the
     * Xid in a value, not a label) */
    struct test_alert bare;
    make_alert(&bare, "GPUXidError", "gpu-node-04", "0", NULL, T0, 0.99);
    evaluate(&w, &bare, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-04", NULL, VERDICT_NO_MATCH,
           "whose matcher xid=~\"79|48\" fails: the alert has no label xid");
    struct test_alert stranger;
    make_alert(&stranger, "DiskFull", "gpu-node-05", "0", NULL, T0, 0.99);
    evaluate(&w, &stranger, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-05", NULL, VERDICT_NO_MATCH,
           "no policy matches the alert's labels");
    assert_null(strstr(last(&w, 0)->reason, "closest")); /* no policy matched any of its labels */
    world_release(&w);
}

static void test_maintenance_window(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies,
               "safety:\n  maintenance:\n    - { nodes: 'gpu-node-0[1-4]', start: "
               "'2026-11-22T07:00:00Z', end: '2026-11-22T09:00:00Z', reason: 'firmware' }\n",
               40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-02", "0", "79", T0, 0.9);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_SUPPRESSED,
           "maintenance window until 2026-11-22T09:00:00.000Z: firmware");
    make_alert(&b, "GPUXidError", "gpu-node-12", "0", "79", T0, 0.9);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-12", "drain", VERDICT_EXECUTE, NULL);
    succeed(&w, T0);
    /* the window holds gpu-node-02's drain while it lasts (on-call hears
     * of it once, in the held steps' notice), and across a restart; once
     * it ends, the drain (its alert re-fired, so fresh) is decided again */
    assert_int_equal(tick(&w, T0 + 30 * MIN), 2); /* the notice, gpu-node-12's power cycle */
    expect(last(&w, 1), "", NULL, VERDICT_SUPPRESSED, "held steps notice: 1 incident(s)");
    expect(last(&w, 0), "gpu-node-12", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 30 * MIN);
    restart(&w, T0 + 31 * MIN);
    make_alert(&a, "GPUXidError", "gpu-node-02", "0", "79", T0 + 50 * MIN, 0.9);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 50 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 59 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 60 * MIN), 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, "step 1");
    world_release(&w);
}

static void test_continue(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: tell\n"
                                   "    match: '{alertname=~\"GPU.*\"}'\n"
                                   "    continue: true\n"
                                   "    steps: [ { action: notify, notifier: oncall, message: "
                                   "'{{ $labels.alertname }} on {{ $node }} risk {{ $risk }}' } ]\n"
                                   "  - name: drain-it\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps: [ { action: drain } ]\n"
                                   "  - name: never\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps: [ { action: drain } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-09", "0", "79", T0, 0.5);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 2);
    expect(last(&w, 1), "gpu-node-09", "notify", VERDICT_EXECUTE, NULL);
    assert_string_equal(params_of(last(&w, 1)),
                        "{\"notifier\":\"oncall\",\"message\":\"GPUXidError on gpu-node-09 risk "
                        "0.50\"}");
    assert_string_equal(last(&w, 0)->policy, "drain-it");
    world_release(&w);
}

/* The state survives a restart: saved, loaded, and the ladder goes on
 * where it was, without repeating a step. */
/* A state an earlier medic saved as one document (version 2) is imported
 * whole: its incident still holds the drain, its node counts against the
 * caps, its resolved alert still keeps a late copy from reopening it; and
 * it is written out as rows. */
static void test_import_single_document(void **state)
{
    (void)state;
    static const char doc[] =
        "{\"version\":2,\"storm_active\":false,\"next_incident\":\"8\",\"incidents\":[{"
        "\"id\":\"7\",\"key\":\"gpu-node-01\\txid-fell-off-bus\",\"node\":\"gpu-node-01\","
        "\"policy\":\"xid-fell-off-bus\",\"state\":\"drained\",\"alertname\":\"GPUXidError\","
        "\"opened_at\":\"1795334400000000000\",\"fresh_after\":\"-9223372036854775808\","
        "\"in_inventory\":1,\"next_step\":1,\"awaiting\":0,\"awaiting_kind\":0,"
        "\"awaiting_watts\":0,\"acted\":1,\"halted\":0,\"drained\":1,\"limit_watts\":0,"
        "\"closing\":0,\"closing_as\":0,\"awaiting_decision\":\"0\",\"halted_by\":\"\","
        "\"closing_cause\":\"\",\"risk\":null,\"labels\":{\"alertname\":\"GPUXidError\"},"
        "\"annotations\":{},\"undo\":[],\"members\":[{\"identity\":\"f1/abc\","
        "\"fingerprint\":\"f1\",\"starts_at\":\"1795334400000000000\","
        "\"last_seen\":\"1795334400000000000\"}]}],"
        "\"unmatched\":[{\"fingerprint\":\"f9/def\",\"starts_at\":\"1795334400000000000\","
        "\"last_seen\":\"1795334400000000000\"}],"
        "\"nodes\":[{\"name\":\"gpu-node-01\",\"drained_by_medic\":1,\"limited_by_medic\":0,"
        "\"acting\":0,\"last_alerting\":\"1795334400000000000\",\"history\":[{\"policy\":"
        "\"xid-fell-off-bus\",\"time\":\"1795334400000000000\",\"incident\":\"7\"}]}],"
        "\"resolved\":[{\"identity\":\"f2/123\",\"starts_at\":\"1795334400000000000\","
        "\"at\":\"1795334460000000000\",\"noted\":0}]}";
    struct policy_state *st = NULL;
    struct medic_error err = {0};
    if (policy_state_import(doc, sizeof(doc) - 1, &st, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(policy_open_incidents(st), 1);
    assert_int_equal(policy_disrupted_nodes(st), 1);
    policy_state_track_changes(st);
    policy_state_changed_all(st);
    struct rows table = {0};
    assert_int_equal(policy_state_changes(st, rows_put, &table), 0);
    /* engine, incident, node, resolved, unmatched */
    assert_int_equal(table.count, 5);
    qsort(table.items, table.count, sizeof(struct row), row_order);
    assert_string_equal(table.items[1].key, "incident 7");
    assert_non_null(strstr(table.items[1].value, "\"state\":\"drained\""));
    assert_string_equal(table.items[3].key, "resolved f2/123");
    assert_string_equal(table.items[4].key, "unmatched f9/def 1795334400000000000");
    rows_release(&table);
    policy_state_free(st);
}

static void test_state_survives_restart(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, base_policies,
               "safety: { storm: { max_alerting_nodes: 1, notifier: oncall } }\n", 40, 1);
    struct test_alert a, b, hot;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, 0.9);
    make_alert(&b, "GPUXidError", "rogue", "0", "13", T0, 0.9); /* unmatched */
    make_alert(&hot, "GPUTemperatureHigh", "gpu-node-02", "1", NULL, T0, 0.99);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &hot, MEDIC_STATUS_FIRING, T0 + 1);
    restart(&w, T0 + MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 1); /* node-02 was held by the storm */
    assert_true(policy_storm_active(w.state));
    /* repeats after the restart decide nothing new */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + MIN), 0);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + MIN), 0);
    /* the ladder continues: the storm passes, the power cycle is due, and
     * node-02's drain the storm held (its alert not re-sent within
     * safety.restart_grace) is decided from the stored state */
    assert_int_equal(tick(&w, T0 + 10 * MIN), 3);
    expect(last(&w, 0), "gpu-node-02", "power_limit", VERDICT_EXECUTE, "restart_grace");
    succeed(&w, T0 + 10 * MIN);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 20 * MIN);
    passes_verify(&w, "gpu-node-01", T0 + 20 * MIN);
    expect(last(&w, 0), "gpu-node-01", "resume", VERDICT_EXECUTE, NULL);
    /* a state of an older medic, and garbage, are refused with a message */
    struct policy_state *restored = NULL;
    struct medic_error err = {0};
    assert_int_equal(policy_state_import("{\"version\":1}", 13, &restored, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "version 1"));
    assert_int_equal(policy_state_import("nope", 4, &restored, &err), MEDIC_E_INVALID);
    restored = policy_state_new();
    assert_int_equal(policy_state_load_row(restored, "engine", "{\"version\":2}", 13, &err),
                     MEDIC_E_INVALID);
    assert_int_equal(policy_state_load_row(restored, "incident", "[", 1, &err), MEDIC_E_INVALID);
    assert_int_equal(policy_state_load_row(restored, "nonsense", "{}", 2, &err), MEDIC_E_INVALID);
    policy_state_free(restored);
    /* a snapshot (the dry-run API's copy) cut short is refused, never half
     * a state */
    struct medic_buf rows;
    medic_buf_init(&rows, 0);
    assert_int_equal(policy_state_snapshot(w.state, &rows), 0);
    assert_int_equal(policy_state_from_snapshot(rows.data, rows.len, &restored, &err), 0);
    policy_state_free(restored);
    restored = NULL;
    assert_int_equal(policy_state_from_snapshot(rows.data, rows.len - 3, &restored, &err),
                     MEDIC_E_INVALID);
    assert_null(restored);
    assert_non_null(strstr(err.msg, "cut"));
    medic_buf_release(&rows);
    world_release(&w);
}

/* Two alerts with one fingerprint (a buggy exporter, a hash collision)
 * stay two: each node is drained, and one node's resolve resumes only it. */
static void test_fingerprint_is_not_identity(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, NAN);
    make_alert(&b, "GPUXidError", "gpu-node-02", "0", "79", T0, NAN);
    snprintf(b.fingerprint, sizeof(b.fingerprint), "%s", a.fingerprint); /* the same */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    expect(last(&w, 0), "gpu-node-01", "drain", VERDICT_EXECUTE, NULL);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 1), 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 2);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_RESOLVED, T0 + 2 * MIN), 1);
    passes_verify(&w, "gpu-node-02", T0 + 2 * MIN);
    expect(last(&w, 0), "gpu-node-02", "resume", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 2 * MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 1); /* gpu-node-01 still held */
    world_release(&w);
}

/* A firing copy of an alert that already resolved (another Alertmanager
 * replica's older view, or a resolve that overtook its firing) never
 * reopens it, also after a restart; it is recorded once, as no_match. */
static void test_resolved_is_not_reopened(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "0", "79", T0, NAN);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0), 1);
    succeed(&w, T0);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + MIN), 1); /* resume */
    succeed(&w, T0 + MIN);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + MIN + 14), 1);
    expect(last(&w, 0), "gpu-node-01", "-", VERDICT_NO_MATCH, "does not reopen it");
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 2 * MIN), 0); /* once */
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    /* a resolve that arrives before its firing copy */
    make_alert(&b, "GPUXidError", "gpu-node-02", "1", "79", T0 + 3 * MIN, NAN);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_RESOLVED, T0 + 4 * MIN), 0);
    restart(&w, T0 + 4 * MIN); /* ...survives a restart */
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 4 * MIN + 1), 1);
    expect(last(&w, 0), "gpu-node-02", "-", VERDICT_NO_MATCH, "does not reopen it");
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    /* a new firing of the same alert (a new startsAt) is a new alert */
    make_alert(&b, "GPUXidError", "gpu-node-02", "1", "79", T0 + 10 * MIN, NAN);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 10 * MIN), 1);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* A tick visits only the incidents with something due (a step, an
 * expiry) or changed since; it must decide exactly what visiting every
 * incident decides. Two worlds take the same random events: one whose
 * policy set the engine cannot tell apart from another (generation 0: a
 * full visit every tick, the reference), one whose set it can. A reload
 * to a set without a policy happens midway in both. */
static uint64_t rand_next(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static void same_decisions(const struct world *a, const struct world *b)
{
    assert_int_equal(a->out.count, b->out.count);
    for (size_t i = 0; i < a->out.count; i++) {
        const struct policy_decision *x = &a->out.items[i], *y = &b->out.items[i];
        assert_string_equal(x->node, y->node);
        assert_int_equal(x->has_action, y->has_action);
        assert_int_equal(x->has_action ? x->action.kind : 0, y->has_action ? y->action.kind : 0);
        assert_int_equal(x->verdict, y->verdict);
        assert_string_equal(x->reason, y->reason);
    }
    assert_int_equal(a->out.change_count, b->out.change_count);
}

static void test_tick_visits_what_is_due(void **state)
{
    (void)state;
    static const char safety[] = "safety: { alert_expiry: 50m, max_disruptive_in_flight: 4, "
                                 "max_disrupted_fraction: 0.5 }\n";
    static const char *const names[] = {"GPUXidError", "GPUTemperatureHigh", "NodeBackFromRepair"};
    static const char reloaded[] = "policies:\n"
                                   "  - name: xid-fell-off-bus\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps: [ { action: drain }, { after: 20m, action: "
                                   "ipmi_power_cycle } ]\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world ref, w;
    world_init(&ref, base_policies, safety, 12, 1);
    world_init(&w, base_policies, safety, 12, 1);
    ref.policies.generation = 0;
    assert_true(w.policies.generation != 0);
    struct test_alert alerts[12][4][3];
    struct policy_set again[2];
    int64_t now = T0;
    uint64_t seed = 7;
    size_t ticks_deciding = 0;
    for (int step = 0; step < 3000; step++) {
        if (step == 1500) { /* both reload: hot-gpu and operator-drained go */
            for (int k = 0; k < 2; k++) {
                struct yaml_tree tree;
                struct medic_error err = {0};
                if (yaml_tree_parse("r.yaml", reloaded, strlen(reloaded), &tree, &err) ||
                    policy_set_parse("r.yaml", yaml_tree_get(tree.root, "policies"),
                                     yaml_tree_get(tree.root, "safety"), notifiers, 1, &again[k],
                                     &err))
                    fail_msg("%s", err.msg);
                yaml_tree_release(&tree);
            }
            again[0].generation = 0;
            ref.ctx.policies = &again[0];
            w.ctx.policies = &again[1];
        }
        now += (int64_t)(rand_next(&seed) % 6) * MIN;
        uint64_t what = rand_next(&seed) % 10;
        int node = (int)(rand_next(&seed) % 12), gpu = (int)(rand_next(&seed) % 4);
        int kind = (int)(rand_next(&seed) % 3);
        struct test_alert *a = &alerts[node][gpu][kind];
        char instance[32], g[8];
        snprintf(instance, sizeof(instance), "gpu-node-%02d", node + 1);
        snprintf(g, sizeof(g), "%d", gpu);
        if (what < 5 || what == 5) {
            int64_t starts = now - (int64_t)(rand_next(&seed) % 30) * MIN;
            make_alert(a, names[kind], instance, g, kind == 0 ? "79" : NULL, starts,
                       kind == 1 ? 0.9 : NAN);
            enum medic_alert_status s = what < 5 ? MEDIC_STATUS_FIRING : MEDIC_STATUS_RESOLVED;
            assert_int_equal(evaluate(&ref, a, s, now), evaluate(&w, a, s, now));
        } else if (what == 6) {
            assert_int_equal(succeed(&ref, now), succeed(&w, now));
        } else {
            size_t n = tick(&ref, now);
            assert_int_equal(n, tick(&w, now));
            ticks_deciding += n > 0;
        }
        same_decisions(&ref, &w);
    }
    /* the random events reached ticks that decided (steps, expiries) */
    assert_true(ticks_deciding > 20);
    struct medic_buf x, y;
    medic_buf_init(&x, 0);
    medic_buf_init(&y, 0);
    rows_text(ref.state, &x);
    rows_text(w.state, &y);
    assert_string_equal(x.data, y.data);
    medic_buf_release(&x);
    medic_buf_release(&y);
    ref.ctx.policies = &ref.policies;
    w.ctx.policies = &w.policies;
    policy_set_release(&again[0]);
    policy_set_release(&again[1]);
    world_release(&ref);
    world_release(&w);
}

/* ---- the repair loop: reset first, fall back, verify, quarantine ---- */

static const char repair_policies[] =
    "policies:\n"
    "  - name: xid-reset-first\n"
    "    match: '{alertname=\"GPUXidError\"}'\n"
    "    steps:\n"
    "      - action: drain\n"
    "      - { after: 1m, action: gpu_reset }\n"
    "      - { after: 2m, action: ipmi_power_cycle, if_failed: true }\n"
    "      - { after: 3m, action: verify, within: 5m }\n"
    "    on_resolved: [ { action: resume } ]\n"
    "  - name: dbe-held\n"
    "    match: '{alertname=\"GPUDoubleBitECC\"}'\n"
    "    steps: [ { action: drain } ]\n";

/* A reset that fails leads to exactly one power cycle; one that succeeds
 * skips the fallback; the reset names the alert's GPU. */
static void test_reset_fails_then_one_power_cycle(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, repair_policies, NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-01", "3", "79", T0, NAN);
    make_alert(&b, "GPUXidError", "gpu-node-02", "5", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    assert_int_equal(tick(&w, T0 + MIN), 2);
    expect(last(&w, 1), "gpu-node-01", "gpu_reset", VERDICT_EXECUTE, "step 2");
    assert_string_equal(params_of(last(&w, 1)), "{\"gpu\":\"3\"}");
    assert_string_equal(incident_state(&w, "gpu-node-01"), "resetting");
    size_t from = w.out.count;
    outcome(&w, "gpu-node-01", MEDIC_OUTCOME_FAILED, T0 + MIN + 1);
    outcome(&w, "gpu-node-02", MEDIC_OUTCOME_SUCCEEDED, T0 + MIN + 1);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "open");
    assert_string_equal(incident_state(&w, "gpu-node-02"), "reset");
    tick(&w, T0 + 2 * MIN);
    tick(&w, T0 + 2 * MIN + 1);
    assert_int_equal(count_action(&w, from, "gpu-node-01", "ipmi_power_cycle", VERDICT_EXECUTE), 1);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "ipmi_power_cycle", VERDICT_EXECUTE), 0);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "ipmi_power_cycle", VERDICT_SUPPRESSED),
                     1); /* recorded as not needed */
    assert_string_equal(incident_state(&w, "gpu-node-01"), "cycling");
    assert_string_equal(incident_state(&w, "gpu-node-02"), "reset");
    /* the power cycle fails too: no third try, on-call hears */
    outcome(&w, "gpu-node-01", MEDIC_OUTCOME_FAILED, T0 + 2 * MIN + 2);
    assert_string_equal(incident_state(&w, "gpu-node-01"), "failed");
    assert_int_equal(tick(&w, T0 + 10 * MIN), 1); /* gpu-node-02's verify */
    expect(last(&w, 0), "gpu-node-02", "verify", VERDICT_EXECUTE, "step 4");
    assert_int_equal(last(&w, 0)->action.u.verify.within, 300);
    assert_int_equal(count_action(&w, from, "gpu-node-01", "ipmi_power_cycle", VERDICT_EXECUTE), 1);
    world_release(&w);
}

/* A node that does not pass its health check is quarantined, not resumed:
 * on-call is told once; the resolve undoes nothing; a person's release
 * resumes it, and its disruptive steps run again. */
static void test_failed_verify_quarantines_until_released(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, repair_policies,
               "safety: { storm: { max_alerting_nodes: 20, window: 5m, "
               "notifier: oncall } }\n",
               40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-04", "3", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);       /* drained */
    tick(&w, T0 + MIN);        /* gpu_reset */
    succeed(&w, T0 + MIN + 1); /* reset */
    tick(&w, T0 + 3 * MIN);    /* power cycle not needed; verify */
    expect(last(&w, 0), "gpu-node-04", "verify", VERDICT_EXECUTE, NULL);
    size_t from = w.out.count;
    outcome(&w, "gpu-node-04", MEDIC_OUTCOME_FAILED, T0 + 8 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-04"), "quarantined");
    expect(last(&w, 0), "gpu-node-04", "notify", VERDICT_EXECUTE, "quarantined node 'gpu-node-04'");
    assert_non_null(strstr(last(&w, 0)->reason, "medic node release gpu-node-04"));
    assert_non_null(strstr(last(&w, 0)->reason, "GPU 3"));
    assert_int_equal(w.out.count - from, 1);
    /* the resolve and time change nothing: the node waits for a person */
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 9 * MIN), 0);
    assert_int_equal(tick(&w, T0 + 30 * 24 * 60 * MIN), 0);
    restart(&w, T0 + 31 * 24 * 60 * MIN);
    assert_string_equal(incident_state(&w, "gpu-node-04"), "quarantined");
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    /* another GPU's Xid joins the quarantined incident, said and not acted on */
    struct test_alert b;
    make_alert(&b, "GPUXidError", "gpu-node-04", "5", "79", T0 + 31 * 24 * 60 * MIN - 1, NAN);
    assert_int_equal(evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 31 * 24 * 60 * MIN - 1), 1);
    expect(last(&w, 0), "gpu-node-04", NULL, VERDICT_SUPPRESSED, "is quarantined (incident 1)");
    /* a new alert on it: nothing disruptive */
    struct test_alert c;
    make_alert(&c, "GPUDoubleBitECC", "gpu-node-04", "1", NULL, T0 + 31 * 24 * 60 * MIN, NAN);
    evaluate(&w, &c, MEDIC_STATUS_FIRING, T0 + 31 * 24 * 60 * MIN);
    expect(last(&w, 0), "gpu-node-04", "drain", VERDICT_SUPPRESSED, "is quarantined since");
    /* released: resumed, the incident ends released */
    char why[300];
    struct policy_release r = {"gpu-node-04.example.org", "alice", "GPU 3 replaced"};
    int64_t at = T0 + 32 * 24 * 60 * MIN;
    assert_int_equal(policy_release(&w.ctx, w.state, &r, at, &w.out, why, sizeof(why)), 0);
    check_rows(&w);
    expect(last(&w, 0), "gpu-node-04", "resume", VERDICT_EXECUTE, "released by alice: GPU 3");
    succeed(&w, at + 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_int_equal(policy_release(&w.ctx, w.state, &r, at + 2, &w.out, why, sizeof(why)),
                     MEDIC_E_NOTFOUND);
    assert_non_null(strstr(why, "is not quarantined"));
    world_release(&w);
}

/* Two policies on one alert (drain unattended, power-cycle and verify):
 * one failure, however many policies took it. */
static const char split_policies[] = "policies:\n"
                                     "  - name: xid79-drain\n"
                                     "    match: '{alertname=\"GPUXidError\"}'\n"
                                     "    continue: true\n"
                                     "    steps: [ { action: drain } ]\n"
                                     "    on_resolved: [ { action: resume } ]\n"
                                     "  - name: xid79-cycle\n"
                                     "    match: '{alertname=\"GPUXidError\"}'\n"
                                     "    steps:\n"
                                     "      - { after: 10m, action: ipmi_power_cycle }\n"
                                     "      - { after: 11m, action: verify, within: 5m }\n"
                                     "    on_resolved: [ { action: resume } ]\n";

/* Quarantine is a state of the node: when one policy's incident
 * quarantined it, another policy's resolve never resumes it; that
 * incident's drain stays until a person releases the node, and the release
 * gives it back once. */
static void test_quarantine_is_the_nodes(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, split_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-02", "3", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-02", "drain", VERDICT_EXECUTE, "policy xid79-drain");
    succeed(&w, T0 + 1);
    tick(&w, T0 + 10 * MIN);
    expect(last(&w, 0), "gpu-node-02", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 10 * MIN + 1);
    tick(&w, T0 + 11 * MIN);
    expect(last(&w, 0), "gpu-node-02", "verify", VERDICT_EXECUTE, NULL);
    outcome(&w, "gpu-node-02", MEDIC_OUTCOME_FAILED, T0 + 16 * MIN);
    assert_int_equal(policy_quarantined_nodes(w.state), 1);
    /* the resolve: neither incident resumes the node */
    size_t from = w.out.count;
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 20 * MIN);
    tick(&w, T0 + 21 * MIN);
    succeed(&w, T0 + 22 * MIN); /* whatever was awaited */
    tick(&w, T0 + 23 * MIN);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "resume", VERDICT_EXECUTE), 0);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "verify", VERDICT_EXECUTE), 0);
    assert_string_equal(incident_state(&w, "gpu-node-02"), "quarantined");
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    restart(&w, T0 + 24 * MIN);
    assert_int_equal(tick(&w, T0 + 48 * 60 * MIN), 0);
    /* released: one resume, and every incident ends released */
    char why[300];
    struct policy_release r = {"gpu-node-02", "alice", "GPU 3 replaced"};
    from = w.out.count;
    assert_int_equal(
        policy_release(&w.ctx, w.state, &r, T0 + 49 * 60 * MIN, &w.out, why, sizeof(why)), 0);
    check_rows(&w);
    assert_int_equal(count_action(&w, from, "gpu-node-02", "resume", VERDICT_EXECUTE), 1);
    succeed(&w, T0 + 49 * 60 * MIN + 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_int_equal(policy_open_incidents(w.state), 0);
    world_release(&w);
}

/* Repeat offenders count the node's failures: one alert that two policies
 * took is one, so safety.quarantine { incidents: 2 } quarantines at the
 * second real failure, not at the first. */
static void test_repeat_offender_counts_failures(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, split_policies, "safety: { quarantine: { incidents: 2, window: 7d } }\n", 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUXidError", "gpu-node-05", "3", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + 10 * MIN);
    expect(last(&w, 0), "gpu-node-05", "ipmi_power_cycle", VERDICT_EXECUTE, "step 1");
    succeed(&w, T0 + 10 * MIN + 1);
    tick(&w, T0 + 11 * MIN);
    succeed(&w, T0 + 12 * MIN); /* verified */
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 20 * MIN);
    for (int i = 0; i < 4; i++)
        succeed(&w, T0 + 21 * MIN + i);
    assert_int_equal(policy_quarantined_nodes(w.state), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    /* the second failure: a repeat offender */
    make_alert(&b, "GPUXidError", "gpu-node-05", "3", "79", T0 + 60 * MIN, NAN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 60 * MIN);
    expect(last(&w, 0), "gpu-node-05", "drain", VERDICT_EXECUTE, "node's 2nd failure");
    world_release(&w);
}

#define OPERATORS_DRAIN                                                                            \
    MEDIC_DRAIN_FOUND_PREFIX " (State=IDLE+DRAIN Reason=bad DIMM [ops@2026-11-22T07:00:00]): an "  \
                             "operator's drain, left as it is"

/* What medic records as its disruption is what it did: a drain that found
 * an operator's drain holds nothing (no resume, not counted against the
 * caps), a quarantine on such a node says whose drain it is, and once the
 * operator resumed the node the next repeat offence drains it for real
 * instead of being "quarantined at once" on a drain medic never made. */
static void test_operators_drain_is_not_medics(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, "safety: { quarantine: { incidents: 2, window: 7d } }\n",
               40, 1);
    struct test_alert a, b, c;
    char why[300];
    make_alert(&a, "GPUXidError", "gpu-node-07", "1", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-07", "drain", VERDICT_EXECUTE, NULL);
    outcome_with(&w, "gpu-node-07", MEDIC_OUTCOME_SUCCEEDED, OPERATORS_DRAIN, T0 + 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    size_t from = w.out.count;
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 10 * MIN);
    assert_int_equal(count_action(&w, from, "gpu-node-07", "resume", VERDICT_EXECUTE), 0);
    assert_int_equal(count_action(&w, from, "gpu-node-07", "verify", VERDICT_EXECUTE), 0);
    /* the second failure: the quarantine drain finds the operator's drain */
    make_alert(&b, "GPUXidError", "gpu-node-07", "1", "79", T0 + 60 * MIN, NAN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 60 * MIN);
    expect(last(&w, 0), "gpu-node-07", "drain", VERDICT_EXECUTE, "quarantined once it is drained");
    outcome_with(&w, "gpu-node-07", MEDIC_OUTCOME_SUCCEEDED, OPERATORS_DRAIN, T0 + 60 * MIN + 1);
    assert_string_equal(incident_state(&w, "gpu-node-07"), "quarantined");
    assert_non_null(strstr(last(&w, 0)->reason, "drained already, not by medic"));
    assert_non_null(strstr(last(&w, 0)->reason, "bad DIMM"));
    /* the release has nothing of medic's to undo */
    struct policy_release r = {"gpu-node-07", "alice", "checked"};
    from = w.out.count;
    assert_int_equal(policy_release(&w.ctx, w.state, &r, T0 + 70 * MIN, &w.out, why, sizeof(why)),
                     0);
    check_rows(&w);
    assert_int_equal(count_action(&w, from, "gpu-node-07", "resume", VERDICT_EXECUTE), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    /* the operator resumed the node; a third failure: medic drains it */
    make_alert(&c, "GPUXidError", "gpu-node-07", "1", "79", T0 + 80 * MIN, NAN);
    evaluate(&w, &c, MEDIC_STATUS_FIRING, T0 + 80 * MIN);
    expect(last(&w, 0), "gpu-node-07", "drain", VERDICT_EXECUTE, "quarantined once it is drained");
    outcome_with(&w, "gpu-node-07", MEDIC_OUTCOME_SUCCEEDED,
                 MEDIC_DRAIN_DETAIL_PREFIX "State=IDLE+DRAIN" MEDIC_DRAIN_DETAIL_REASON
                                           "medic quarantine [root@2026-11-22T09:20:00]\"",
                 T0 + 80 * MIN + 1);
    assert_string_equal(incident_state(&w, "gpu-node-07"), "quarantined");
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    world_release(&w);
}

/* gpu-node-08 drained at T0 and its alert resolved: its resume, decided
 * after a verify, ends with outcome (detail). medic's drain stays: the node
 * is held for a person and counted, and a release at T0 + 20 min resumes
 * it. */
static void resume_ends_held(struct world *w, enum medic_outcome outcome, const char *detail)
{
    struct test_alert a;
    char why[300];
    make_alert(&a, "GPUXidError", "gpu-node-08", "1", "79", T0, NAN);
    evaluate(w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(w, T0 + 1);
    evaluate(w, &a, MEDIC_STATUS_RESOLVED, T0 + 10 * MIN);
    passes_verify(w, "gpu-node-08", T0 + 10 * MIN + 1);
    expect(last(w, 0), "gpu-node-08", "resume", VERDICT_EXECUTE, NULL);
    outcome_with(w, "gpu-node-08", outcome, detail, T0 + 11 * MIN);
    assert_string_equal(incident_state(w, "gpu-node-08"), "quarantined");
    assert_int_equal(policy_disrupted_nodes(w->state), 1);
    assert_int_equal(policy_quarantined_nodes(w->state), 1);
    struct policy_release r = {"gpu-node-08", "alice", "checked"};
    assert_int_equal(
        policy_release(&w->ctx, w->state, &r, T0 + 20 * MIN, &w->out, why, sizeof(why)), 0);
    check_rows(w);
    expect(last(w, 0), "gpu-node-08", "resume", VERDICT_EXECUTE, "released by alice");
    succeed(w, T0 + 20 * MIN + 1);
    assert_int_equal(policy_disrupted_nodes(w->state), 0);
    assert_int_equal(policy_open_incidents(w->state), 0);
}

/* A resume that was tried and failed (slurmctld away) leaves medic's drain
 * in place: the node is held for a person, counted, and a release resumes
 * it; a resume refused because a person drained the node again lets go of
 * medic's drain (the caps no longer count it). */
static void test_failed_resume_holds_refused_lets_go(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    struct test_alert b;
    resume_ends_held(&w, MEDIC_OUTCOME_FAILED, "scontrol: Unable to contact slurm controller");
    /* refused: someone else's drain now */
    make_alert(&b, "GPUXidError", "gpu-node-08", "1", "79", T0 + 60 * MIN, NAN);
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0 + 60 * MIN);
    succeed(&w, T0 + 60 * MIN + 1);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    evaluate(&w, &b, MEDIC_STATUS_RESOLVED, T0 + 70 * MIN);
    passes_verify(&w, "gpu-node-08", T0 + 70 * MIN + 1);
    outcome_with(&w, "gpu-node-08", MEDIC_OUTCOME_REFUSED,
                 "drained again by someone else since medic's drain", T0 + 71 * MIN);
    assert_int_equal(policy_disrupted_nodes(w.state), 0);
    assert_int_equal(policy_quarantined_nodes(w.state), 0);
    assert_int_equal(policy_open_incidents(w.state), 0);
    world_release(&w);
}

/* A resume its fence did not send (the replica could not show it still
 * held the lease: nothing reached Slurm) is not a drain someone else took:
 * medic's drain stays, the node is held for a person, and a release
 * resumes it. */
static void test_fenced_resume_keeps_the_drain(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    resume_ends_held(&w, MEDIC_OUTCOME_REFUSED,
                     MEDIC_FENCED_PREFIX "this replica cannot show it still holds the lease (this "
                                         "replica is not the leader); the step is left to the "
                                         "leader");
    world_release(&w);
}

/* A verify after a power cycle asks for evidence of the repair: a boot
 * after the time the cycle was decided (booted_after), also the verify
 * before the resume; a verify after a drain alone asks for none. */
static void test_verify_after_a_cycle_asks_for_a_boot(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, split_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-02", "3", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + 10 * MIN);
    expect(last(&w, 0), "gpu-node-02", "ipmi_power_cycle", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + 10 * MIN + 5);
    restart(&w, T0 + 10 * MIN + 6); /* kept across a restart */
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + 10 * MIN + 6);
    tick(&w, T0 + 11 * MIN);
    expect(last(&w, 0), "gpu-node-02", "verify", VERDICT_EXECUTE, NULL);
    assert_non_null(
        strstr(params_of(last(&w, 0)), "\"booted_after\":\"2026-11-22T08:10:00.000Z\""));
    world_release(&w);
    /* a power cycle that never happened (interrupted by a takeover): the
     * verify before the resume asks for no boot */
    world_init(&w, split_policies, NULL, 40, 1);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + 10 * MIN);
    outcome(&w, "gpu-node-02", MEDIC_OUTCOME_INTERRUPTED, T0 + 10 * MIN + 5);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 20 * MIN);
    size_t verifies = 0;
    for (size_t i = 0; i < w.out.count; i++)
        if (w.out.items[i].has_action && w.out.items[i].action.kind == MEDIC_ACTION_VERIFY) {
            assert_null(strstr(params_of(&w.out.items[i]), "booted_after"));
            verifies++;
        }
    assert_int_equal(verifies, 1);
    world_release(&w);
    /* a drain and its verify: nothing was rebooted, no boot asked */
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + MIN);
    expect(last(&w, 0), "gpu-node-02", "verify", VERDICT_EXECUTE, NULL);
    assert_null(strstr(params_of(last(&w, 0)), "booted_after"));
    world_release(&w);
}

/* A verify after a GPU reset asks for evidence that the alert's GPU was
 * enumerated after the reset was sent; a reset that failed asks none. */
static void test_verify_after_a_reset_asks_for_the_gpu(void **state)
{
    (void)state;
    static const char policies[] = "policies:\n"
                                   "  - name: xid-reset\n"
                                   "    match: '{alertname=\"GPUXidError\"}'\n"
                                   "    steps:\n"
                                   "      - { action: drain }\n"
                                   "      - { after: 1m, action: gpu_reset }\n"
                                   "      - { after: 2m, action: verify, within: 5m }\n"
                                   "    on_resolved: [ { action: resume } ]\n";
    struct world w;
    world_init(&w, policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-02", "3", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + MIN);
    expect(last(&w, 0), "gpu-node-02", "gpu_reset", VERDICT_EXECUTE, NULL);
    succeed(&w, T0 + MIN + 5);
    restart(&w, T0 + MIN + 6); /* kept across a restart */
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0 + MIN + 6);
    tick(&w, T0 + 2 * MIN);
    expect(last(&w, 0), "gpu-node-02", "verify", VERDICT_EXECUTE, NULL);
    const char *params = params_of(last(&w, 0));
    assert_non_null(strstr(params, "\"reset_after\":\"2026-11-22T08:01:00.000Z\""));
    assert_non_null(strstr(params, "\"reset_gpu\":\"3\""));
    assert_null(strstr(params, "booted_after"));
    world_release(&w);
    /* the reset failed: if_failed aside, the ladder stops; nothing to prove */
    world_init(&w, policies, NULL, 40, 1);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    tick(&w, T0 + MIN);
    outcome(&w, "gpu-node-02", MEDIC_OUTCOME_INTERRUPTED, T0 + MIN + 5);
    evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + 3 * MIN);
    size_t verifies = 0;
    for (size_t i = 0; i < w.out.count; i++)
        if (w.out.items[i].has_action && w.out.items[i].action.kind == MEDIC_ACTION_VERIFY) {
            assert_null(strstr(params_of(&w.out.items[i]), "reset_after"));
            verifies++;
        }
    assert_int_equal(verifies, 1);
    world_release(&w);
}

/* Verify before return: a resolve does not resume a disrupted node until
 * it passes; a node that comes back with a GPU missing is quarantined. */
static void test_resume_waits_for_a_health_check(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, NULL, 40, 1);
    struct test_alert a;
    make_alert(&a, "GPUXidError", "gpu-node-07", "0", "79", T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    succeed(&w, T0 + 1);
    assert_int_equal(evaluate(&w, &a, MEDIC_STATUS_RESOLVED, T0 + MIN), 1);
    expect(last(&w, 0), "gpu-node-07", "verify", VERDICT_EXECUTE, "verify_before_resume");
    assert_string_equal(incident_state(&w, "gpu-node-07"), "verifying");
    /* medic stopped while it looked: it looks again, it never quarantines for that */
    assert_int_equal(outcome(&w, "gpu-node-07", MEDIC_OUTCOME_INTERRUPTED, T0 + 2 * MIN), 1);
    expect(last(&w, 0), "gpu-node-07", "verify", VERDICT_EXECUTE, "cut short");
    assert_string_equal(incident_state(&w, "gpu-node-07"), "verifying");
    assert_int_equal(outcome(&w, "gpu-node-07", MEDIC_OUTCOME_FAILED, T0 + 11 * MIN), 1);
    expect(last(&w, 0), "gpu-node-07", NULL, VERDICT_SUPPRESSED, "did not pass its health");
    assert_string_equal(incident_state(&w, "gpu-node-07"), "quarantined");
    assert_int_equal(count_action(&w, 0, "gpu-node-07", "resume", VERDICT_EXECUTE), 0);
    world_release(&w);
}

/* A node whose incidents reach safety.quarantine is quarantined: its third
 * incident's drain keeps it for a person instead of another ladder. */
static void test_repeat_offender_quarantined(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, drain_resume_policies, "safety: { quarantine: { incidents: 3, window: 7d } }\n",
               40, 1);
    struct test_alert a[3];
    for (int i = 0; i < 3; i++) {
        int64_t t = T0 + i * 60 * MIN;
        make_alert(&a[i], "GPUXidError", "gpu-node-09", "2", i == 1 ? "48" : "79", t, NAN);
        evaluate(&w, &a[i], MEDIC_STATUS_FIRING, t);
        if (i < 2) {
            expect(last(&w, 0), "gpu-node-09", "drain", VERDICT_EXECUTE, "step 1");
            succeed(&w, t + 1);
            evaluate(&w, &a[i], MEDIC_STATUS_RESOLVED, t + 10 * MIN);
            passes_verify(&w, "gpu-node-09", t + 10 * MIN);
            succeed(&w, t + 10 * MIN + 1);
            assert_string_equal(incident_state(&w, "gpu-node-09"), "recovered");
        }
    }
    expect(last(&w, 0), "gpu-node-09", "drain", VERDICT_EXECUTE, "quarantined once it is drained");
    assert_non_null(strstr(last(&w, 0)->reason,
                           "3rd failure with repairs (drain, power cycle, GPU reset) within 7d"));
    outcome(&w, "gpu-node-09", MEDIC_OUTCOME_SUCCEEDED, T0 + 120 * MIN + 1);
    assert_string_equal(incident_state(&w, "gpu-node-09"), "quarantined");
    assert_non_null(strstr(last(&w, 0)->reason, "3 failure(s) with repairs"));
    /* its resolve does not resume it */
    assert_int_equal(evaluate(&w, &a[2], MEDIC_STATUS_RESOLVED, T0 + 130 * MIN), 0);
    assert_int_equal(policy_disrupted_nodes(w.state), 1);
    world_release(&w);
}

/* A policy that drains and does not resume holds the node for a person:
 * quarantined when its alert resolves, not "recovered" for ever. Caps:
 * quarantined nodes count against max_disrupted_fraction, never against
 * max_disruptive_in_flight. */
static void test_held_nodes_and_the_caps(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, repair_policies,
               "safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 0.1 }\n", 30, 1);
    struct test_alert d[4];
    char node[32];
    for (int i = 0; i < 2; i++) {
        snprintf(node, sizeof(node), "gpu-node-%02d", 11 + i);
        make_alert(&d[i], "GPUDoubleBitECC", node, "0", NULL, T0 + i * MIN, NAN);
        evaluate(&w, &d[i], MEDIC_STATUS_FIRING, T0 + i * MIN);
        expect(last(&w, 0), node, "drain", VERDICT_EXECUTE, NULL);
        succeed(&w, T0 + i * MIN + 1);
        evaluate(&w, &d[i], MEDIC_STATUS_RESOLVED, T0 + i * MIN + 2);
        assert_string_equal(incident_state(&w, node), "quarantined");
        expect(last(&w, 0), node, NULL, VERDICT_SUPPRESSED, "held for a person");
    }
    /* two quarantined nodes, max_disruptive_in_flight 2: repairs still run */
    assert_int_equal(policy_disrupted_nodes(w.state), 2);
    make_alert(&d[2], "GPUXidError", "gpu-node-13", "0", "79", T0 + 5 * MIN, NAN);
    evaluate(&w, &d[2], MEDIC_STATUS_FIRING, T0 + 5 * MIN);
    expect(last(&w, 0), "gpu-node-13", "drain", VERDICT_EXECUTE, NULL);
    /* but 3 of 30 nodes is the fraction's cap (0.1): a fourth is held */
    make_alert(&d[3], "GPUXidError", "gpu-node-14", "0", "79", T0 + 6 * MIN, NAN);
    evaluate(&w, &d[3], MEDIC_STATUS_FIRING, T0 + 6 * MIN);
    expect(last(&w, 0), "gpu-node-14", "drain", VERDICT_SUPPRESSED,
           "quarantined nodes count here until a person releases them");
    /* a release frees a slot: the held drain runs */
    char why[200];
    struct policy_release r = {"gpu-node-11", "bob", "reseated"};
    assert_int_equal(policy_release(&w.ctx, w.state, &r, T0 + 7 * MIN, &w.out, why, sizeof(why)),
                     0);
    succeed(&w, T0 + 7 * MIN + 1);
    assert_string_equal(incident_state(&w, "gpu-node-11"), "released");
    tick(&w, T0 + 7 * MIN + 2);
    expect(last(&w, 0), "gpu-node-14", "drain", VERDICT_EXECUTE, NULL);
    world_release(&w);
}

/* when.recovery_action: a policy takes an alert only when the driver
 * recommends one of its recovery actions for the alert's GPU; others fall
 * through to the next policy, and an unknown one is skipped unless
 * recovery_unknown: act. */
static void test_recovery_action_selects_the_policy(void **state)
{
    (void)state;
    struct world w;
    world_init(&w,
               "policies:\n"
               "  - name: reset-recommended\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    when: { recovery_action: [gpu_reset, drain_and_reset] }\n"
               "    steps: [ { action: drain }, { after: 1m, action: gpu_reset } ]\n"
               "  - name: reboot-recommended\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    when: { recovery_action: [node_reboot], recovery_unknown: act }\n"
               "    steps: [ { action: drain }, { after: 1m, action: ipmi_power_cycle } ]\n"
               "  - name: other\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    steps: [ { action: notify, notifier: oncall } ]\n",
               "safety: { max_disruptive_in_flight: 4, max_disrupted_fraction: 0.5 }\n", 40, 1);
    struct test_alert a[4];
    const char *recovery[] = {"gpu_reset", "none", NULL, "node_reboot"};
    for (int i = 0; i < 4; i++) {
        char node[32];
        snprintf(node, sizeof(node), "gpu-node-%02d", 31 + i);
        make_alert(&a[i], "GPUXidError", node, "2", "79", T0, NAN);
        a[i].alert.recovery = recovery[i];
        assert_int_equal(evaluate(&w, &a[i], MEDIC_STATUS_FIRING, T0), 1);
    }
    expect(last(&w, 3), "gpu-node-31", "drain", VERDICT_EXECUTE, "policy reset-recommended");
    expect(last(&w, 2), "gpu-node-32", "notify", VERDICT_EXECUTE, "policy other");
    expect(last(&w, 1), "gpu-node-33", "drain", VERDICT_EXECUTE, "policy reboot-recommended");
    expect(last(&w, 0), "gpu-node-34", "drain", VERDICT_EXECUTE, "policy reboot-recommended");
    /* an alert that matches no policy's recovery says why */
    world_release(&w);
    world_init(&w,
               "policies:\n"
               "  - name: reset-recommended\n"
               "    match: '{alertname=\"GPUXidError\"}'\n"
               "    when: { recovery_action: [gpu_reset] }\n"
               "    steps: [ { action: drain } ]\n",
               NULL, 40, 1);
    make_alert(&a[0], "GPUXidError", "gpu-node-35", "2", "79", T0, NAN);
    a[0].alert.recovery = "none";
    make_alert(&a[1], "GPUXidError", "gpu-node-36", "2", "79", T0, NAN);
    evaluate(&w, &a[0], MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-35", NULL, VERDICT_NO_MATCH,
           "policy reset-recommended: the driver recommends none, not one it takes");
    evaluate(&w, &a[1], MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-36", NULL, VERDICT_NO_MATCH,
           "the driver recommends nothing medic could read (recovery_unknown: skip)");
    world_release(&w);
}

/* gpus: alert limits the alert's GPU only; an alert without a GPU gets
 * "alert" in its parameters (the executor refuses it), never every GPU. */
static void test_power_limit_on_the_alerts_gpu(void **state)
{
    (void)state;
    struct world w;
    world_init(&w,
               "policies:\n"
               "  - name: hot-gpu\n"
               "    match: '{alertname=\"GPUTemperatureHigh\"}'\n"
               "    steps: [ { action: power_limit, watts: 300, gpus: alert } ]\n"
               "    on_resolved: [ { action: restore_power_limit } ]\n",
               NULL, 40, 1);
    struct test_alert a, b;
    make_alert(&a, "GPUTemperatureHigh", "gpu-node-37", "3", NULL, T0, NAN);
    make_alert(&b, "GPUTemperatureHigh", "gpu-node-38", NULL, NULL, T0, NAN);
    evaluate(&w, &a, MEDIC_STATUS_FIRING, T0);
    expect(last(&w, 0), "gpu-node-37", "power_limit", VERDICT_EXECUTE, NULL);
    assert_string_equal(params_of(last(&w, 0)), "{\"watts\":300,\"gpus\":[3]}");
    evaluate(&w, &b, MEDIC_STATUS_FIRING, T0);
    assert_string_equal(params_of(last(&w, 0)), "{\"watts\":300,\"gpus\":\"alert\"}");
    /* power limits are no repairs: a third hot incident in a day quarantines nothing */
    for (int i = 1; i <= 3; i++) {
        int64_t t = T0 + i * 60 * MIN;
        succeed(&w, t - 1);
        evaluate(&w, &a, MEDIC_STATUS_RESOLVED, t);
        succeed(&w, t);
        make_alert(&a, "GPUTemperatureHigh", "gpu-node-37", "3", NULL, t + 1, NAN);
        evaluate(&w, &a, MEDIC_STATUS_FIRING, t + 1);
        expect(last(&w, 0), "gpu-node-37", "power_limit", VERDICT_EXECUTE, "step 1");
    }
    world_release(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escalation_ladder_and_resume),
        cmocka_unit_test(test_decisions_bound_before_their_ids),
        cmocka_unit_test(test_state_rows_name_kinds),
        cmocka_unit_test(test_power_cycle_waits_for_the_drain),
        cmocka_unit_test(test_restart_waits_for_a_fresh_alert),
        cmocka_unit_test(test_restart_grace_resolve_and_stale),
        cmocka_unit_test(test_reset_fails_then_one_power_cycle),
        cmocka_unit_test(test_failed_verify_quarantines_until_released),
        cmocka_unit_test(test_resume_waits_for_a_health_check),
        cmocka_unit_test(test_repeat_offender_quarantined),
        cmocka_unit_test(test_held_nodes_and_the_caps),
        cmocka_unit_test(test_recovery_action_selects_the_policy),
        cmocka_unit_test(test_power_limit_on_the_alerts_gpu),
        cmocka_unit_test(test_approval_runs_the_step_once),
        cmocka_unit_test(test_denied_expired_withdrawn),
        cmocka_unit_test(test_approval_guards_and_policies),
        cmocka_unit_test(test_pending_survives_restart),
        cmocka_unit_test(test_approval_refused_over_the_caps),
        cmocka_unit_test(test_pause_holds_disruption_never_undo),
        cmocka_unit_test(test_pause_refuses_approvals),
        cmocka_unit_test(test_invariant_inventory),
        cmocka_unit_test(test_invariant_no_action_twice),
        cmocka_unit_test(test_one_incident_per_node),
        cmocka_unit_test(test_invariant_fleet_caps),
        cmocka_unit_test(test_group_caps),
        cmocka_unit_test(test_held_notice_batched),
        cmocka_unit_test(test_recurring_maintenance_window),
        cmocka_unit_test(test_invariant_storm),
        cmocka_unit_test(test_fingerprint_is_not_identity),
        cmocka_unit_test(test_resolved_is_not_reopened),
        cmocka_unit_test(test_invariant_dry_run),
        cmocka_unit_test(test_invariant_only_undo_own),
        cmocka_unit_test(test_strictest_power_limit),
        cmocka_unit_test(test_invariant_stale),
        cmocka_unit_test(test_future_starts_at),
        cmocka_unit_test(test_clock_set_right_decides_again),
        cmocka_unit_test(test_notify_says_what_came_before),
        cmocka_unit_test(test_resume_waits_for_the_last_alert),
        cmocka_unit_test(test_lost_resolve_expires),
        cmocka_unit_test(test_reload_closes_orphans),
        cmocka_unit_test(test_reload_withdraws_a_pending_step),
        cmocka_unit_test(test_approved_quarantine_drain_runs_as_offered),
        cmocka_unit_test(test_approval_after_reload_runs_nothing_changed),
        cmocka_unit_test(test_approval_per_step),
        cmocka_unit_test(test_slurm_maintenance_unknown_holds),
        cmocka_unit_test(test_reconcile_drains_with_slurm),
        cmocka_unit_test(test_reconcile_keeps_a_quarantine),
        cmocka_unit_test(test_reconcile_withdraws_a_waiting_step),
        cmocka_unit_test(test_denial_holds_the_node),
        cmocka_unit_test(test_after_from_previous),
        cmocka_unit_test(test_queued_step_held_by_a_later_pause),
        cmocka_unit_test(test_approval_after_restart_waits_for_the_alert),
        cmocka_unit_test(test_long_node_label_names_no_node),
        cmocka_unit_test(test_quarantine_is_the_nodes),
        cmocka_unit_test(test_repeat_offender_counts_failures),
        cmocka_unit_test(test_verify_after_a_cycle_asks_for_a_boot),
        cmocka_unit_test(test_verify_after_a_reset_asks_for_the_gpu),
        cmocka_unit_test(test_operators_drain_is_not_medics),
        cmocka_unit_test(test_failed_resume_holds_refused_lets_go),
        cmocka_unit_test(test_fenced_resume_keeps_the_drain),
        cmocka_unit_test(test_reload_follows_a_renamed_policy),
        cmocka_unit_test(test_reload_never_strands_through_a_rename),
        cmocka_unit_test(test_reload_follows_a_renamed_node),
        cmocka_unit_test(test_on_resolved_undoes_two_things),
        cmocka_unit_test(test_tick_visits_what_is_due),
        cmocka_unit_test(test_cooldown_and_budget),
        cmocka_unit_test(test_matching_risk_and_no_match),
        cmocka_unit_test(test_maintenance_window),
        cmocka_unit_test(test_continue),
        cmocka_unit_test(test_state_survives_restart),
        cmocka_unit_test(test_import_single_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

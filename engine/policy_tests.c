/* SPDX-License-Identifier: Apache-2.0 */
/* `medic policy test`: a test file's timeline of alerts, answers and
 * outcomes played through the policy engine, and every decision compared
 * with the expected ones (docs/policies.md, "medic policy test"). */
#include "engine_policy_tests.h"
#include "action.h"
#include "config.h"
#include "engine_evaluate.h"
#include "timeutil.h"
#include "yaml_fields.h"
#include "yaml_tree.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TEST_EPOCH (INT64_C(1767225600) * MEDIC_NS_PER_SEC)
static int64_t test_epoch = DEFAULT_TEST_EPOCH;
#define TEST_EPOCH test_epoch

#define MAX_LABELS 64

struct test_event {
    int64_t t;
    int outcome; /* an action's outcome, not an alert: its enum medic_outcome; -1: an alert */
    int answer;  /* a person's answer to a pending step: 1 approve, 0 deny; -1: none */
    const char *by, *reason;
    const char *node;
    int action;      /* enum medic_action_kind */
    int64_t started; /* how long before t the alert started (its first event only) */
    enum medic_alert_status status;
    struct medic_label labels[MAX_LABELS];
    struct medic_labels set;
    double risk;
    const char *recovery; /* the driver's recovery action for the alert's GPU; NULL: unknown */
    int line;
};

struct test_expect {
    int64_t t;
    const char *node, *action, *verdict, *policy, *reason;
    int line;
    int met;
};

static int compare_labels(const void *a, const void *b)
{
    return strcmp(((const struct medic_label *)a)->name, ((const struct medic_label *)b)->name);
}

static const char *scalar(const struct yaml_tree_node *map, const char *key)
{
    const struct yaml_tree_node *v = yaml_tree_get(map, key);
    return v && v->kind == YAML_TREE_SCALAR ? v->value : NULL;
}

static int parse_offset(struct yaml_fields *f, const struct yaml_tree_node *item, int64_t *out)
{
    const struct yaml_tree_node *t = yaml_tree_get(item, "t");
    if (!t)
        return yaml_fields_fail(f, item, "needs t, an offset from the test's start (0s, 12m)");
    return yaml_fields_duration(f, t, "t", out);
}

static int parse_outcome(struct yaml_fields *f, const struct yaml_tree_node *item,
                         struct test_event *e)
{
    static const char *const keys[] = {"t", "outcome", "node", "action", NULL};
    int rc = yaml_fields_known_keys(f, item, "an outcome", keys);
    if (rc)
        return rc;
    const char *outcome = scalar(item, "outcome");
    e->node = scalar(item, "node");
    const char *action = scalar(item, "action");
    e->outcome = outcome ? medic_outcome_parse(outcome) : -1;
    e->action = action ? medic_action_parse_kind(action) : -1;
    if (e->outcome < 0)
        return yaml_fields_fail(f, item,
                                "outcome: expected succeeded, failed, timed_out, refused or "
                                "interrupted");
    if (!e->node || e->action < 0)
        return yaml_fields_fail(f, item, "an outcome needs node and action (drain, ...)");
    return 0;
}

static int parse_answer(struct yaml_fields *f, const struct yaml_tree_node *item,
                        struct test_event *e)
{
    static const char *const keys[] = {"t", "approve", "deny", "by", "reason", NULL};
    int rc = yaml_fields_known_keys(f, item, "an approval", keys);
    if (rc)
        return rc;
    e->answer = yaml_tree_get(item, "approve") != NULL;
    e->node = scalar(item, e->answer ? "approve" : "deny");
    e->by = scalar(item, "by");
    e->reason = scalar(item, "reason");
    if (!e->node || (yaml_tree_get(item, "approve") && yaml_tree_get(item, "deny")))
        return yaml_fields_fail(f, item, "an answer is approve: NODE or deny: NODE, with by");
    if (!e->by)
        return yaml_fields_fail(f, item, "an answer needs by: who answered");
    return 0;
}

static int parse_events(struct yaml_fields *f, const struct yaml_tree_node *list,
                        struct test_event *events, size_t *count)
{
    static const char *const keys[] = {"t",       "status",   "labels", "risk",
                                       "started", "recovery", NULL};
    int rc = yaml_fields_sequence(f, list, "alerts");
    for (size_t i = 0; rc == 0 && i < list->count; i++) {
        const struct yaml_tree_node *item = list->items[i];
        struct test_event *e = &events[i];
        memset(e, 0, sizeof(*e));
        e->risk = NAN;
        e->outcome = -1;
        e->answer = -1;
        e->line = item->line;
        if ((rc = yaml_fields_mapping(f, item, "alert")) || (rc = parse_offset(f, item, &e->t)))
            return rc;
        if (i > 0 && e->t < events[i - 1].t)
            return yaml_fields_fail(f, item, "alerts: list them in time order");
        if (yaml_tree_get(item, "outcome")) {
            if ((rc = parse_outcome(f, item, e)))
                return rc;
            (*count)++;
            continue;
        }
        if (yaml_tree_get(item, "approve") || yaml_tree_get(item, "deny")) {
            if ((rc = parse_answer(f, item, e)))
                return rc;
            (*count)++;
            continue;
        }
        if ((rc = yaml_fields_known_keys(f, item, "an alert", keys)))
            return rc;
        const char *status = scalar(item, "status");
        if (!status || (strcmp(status, "firing") && strcmp(status, "resolved")))
            return yaml_fields_fail(f, item, "status: expected firing or resolved");
        e->status = strcmp(status, "firing") == 0 ? MEDIC_STATUS_FIRING : MEDIC_STATUS_RESOLVED;
        const struct yaml_tree_node *labels = yaml_tree_get(item, "labels");
        if (!labels || labels->kind != YAML_TREE_MAPPING || labels->count == 0 ||
            labels->count > MAX_LABELS)
            return yaml_fields_fail(f, item, "labels: expected a mapping of 1 to %d labels",
                                    MAX_LABELS);
        for (size_t k = 0; k < labels->count; k++) {
            if ((rc = yaml_fields_scalar(f, labels->items[k], labels->keys[k])))
                return rc;
            e->labels[k] = (struct medic_label){labels->keys[k], labels->items[k]->value};
        }
        qsort(e->labels, labels->count, sizeof(e->labels[0]), compare_labels);
        e->set = (struct medic_labels){e->labels, labels->count};
        const struct yaml_tree_node *started = yaml_tree_get(item, "started");
        if (started && (rc = yaml_fields_duration(f, started, "started", &e->started)))
            return rc;
        const struct yaml_tree_node *risk = yaml_tree_get(item, "risk");
        if (risk && (rc = yaml_fields_number(f, risk, "risk", 0, 1, &e->risk)))
            return rc;
        const struct yaml_tree_node *recovery = yaml_tree_get(item, "recovery");
        if (recovery && ((rc = yaml_fields_scalar(f, recovery, "recovery")) ||
                         medic_recovery_parse(recovery->value) < 0))
            return rc ? rc
                      : yaml_fields_fail(f, recovery,
                                         "recovery: one of none, gpu_reset, node_reboot, "
                                         "drain_p2p, drain_and_reset, bus_reset");
        e->recovery = recovery ? recovery->value : NULL;
        (*count)++;
    }
    return rc;
}

static int parse_expects(struct yaml_fields *f, const struct yaml_tree_node *list,
                         struct test_expect *expects, size_t *count)
{
    static const char *const keys[] = {"t", "node", "action", "verdict", "policy", "reason", NULL};
    static const char *const verdicts[] = {"execute",  "dry_run", "suppressed",
                                           "no_match", "error",   "pending"};
    int rc = yaml_fields_sequence(f, list, "expect");
    for (size_t i = 0; rc == 0 && i < list->count; i++) {
        const struct yaml_tree_node *item = list->items[i];
        struct test_expect *x = &expects[i];
        memset(x, 0, sizeof(*x));
        x->line = item->line;
        if ((rc = yaml_fields_mapping(f, item, "expectation")) ||
            (rc = yaml_fields_known_keys(f, item, "an expectation", keys)) ||
            (rc = parse_offset(f, item, &x->t)))
            return rc;
        x->node = scalar(item, "node");
        x->action = scalar(item, "action");
        x->verdict = scalar(item, "verdict");
        x->policy = scalar(item, "policy");
        x->reason = scalar(item, "reason");
        if (!x->verdict)
            return yaml_fields_fail(f, item, "expectation: needs a verdict");
        int known = 0;
        for (int v = 0; v < VERDICT_COUNT; v++)
            known |= strcmp(x->verdict, verdicts[v]) == 0;
        if (!known)
            return yaml_fields_fail(
                f, yaml_tree_get(item, "verdict"),
                "verdict: expected execute, dry_run, suppressed, no_match, error or pending");
        (*count)++;
    }
    return rc;
}

/* `ignore: [notify, ...]`: action kinds whose decisions the test need not
 * expect (they still match an expectation that names them). */
static int parse_ignore(struct yaml_fields *f, const struct yaml_tree_node *list, unsigned *ignore)
{
    if (!list)
        return 0;
    int rc = yaml_fields_sequence(f, list, "ignore");
    for (size_t i = 0; rc == 0 && i < list->count; i++) {
        const struct yaml_tree_node *item = list->items[i];
        int kind = item->kind == YAML_TREE_SCALAR ? medic_action_parse_kind(item->value) : -1;
        if (kind < 0)
            return yaml_fields_fail(f, item, "ignore: a list of action names (notify, drain, ...)");
        *ignore |= 1u << kind;
    }
    return rc;
}

static int expect_matches(const struct test_expect *x, const struct policy_decision *d)
{
    const char *action = d->has_action ? medic_action_name(d->action.kind) : NULL;
    if (d->time != TEST_EPOCH + x->t || strcmp(x->verdict, policy_verdict_name(d->verdict)) != 0)
        return 0;
    if (x->node && strcmp(x->node, d->node) != 0)
        return 0;
    if ((x->action == NULL) != (action == NULL) || (action && strcmp(x->action, action) != 0))
        return 0;
    if (x->policy && strcmp(x->policy, d->policy) != 0)
        return 0;
    if (x->reason && !strstr(d->reason, x->reason))
        return 0;
    return 1;
}

static void format_offset(int64_t t, char *out, size_t size)
{
    int64_t s = t / MEDIC_NS_PER_SEC;
    if (s % 3600 == 0 && s)
        snprintf(out, size, "%lldh", (long long)(s / 3600));
    else if (s % 60 == 0 && s)
        snprintf(out, size, "%lldm", (long long)(s / 60));
    else
        snprintf(out, size, "%llds", (long long)s);
}

static void print_expect(char sign, const struct test_expect *x)
{
    char t[24];
    format_offset(x->t, t, sizeof(t));
    printf("    %c t=%-6s %-14s %-20s %-10s%s%s%s%s  (line %d)\n", sign, t, x->node ? x->node : "*",
           x->action ? x->action : "-", x->verdict, x->policy ? " policy=" : "",
           x->policy ? x->policy : "", x->reason ? " reason~" : "", x->reason ? x->reason : "",
           x->line);
}

static void print_decision(char sign, const struct policy_decision *d)
{
    char t[24];
    format_offset(d->time - TEST_EPOCH, t, sizeof(t));
    printf("    %c t=%-6s %-14s %-20s %-10s policy=%s: %s\n", sign, t, d->node,
           d->has_action ? medic_action_name(d->action.kind) : "-", policy_verdict_name(d->verdict),
           d->policy[0] ? d->policy : "-", d->reason);
}

/* The decision incident waits for: the last awaited one of it. */
static const struct policy_decision *awaited_decision(const struct policy_decisions *out,
                                                      int64_t incident)
{
    for (size_t i = out->count; i-- > 0;)
        if (out->items[i].awaited && out->items[i].incident == incident)
            return &out->items[i];
    return NULL;
}

struct pending {
    int64_t incident[256];
    size_t count;
};

static void collect(void *arg, int64_t incident, int64_t decision)
{
    (void)decision;
    struct pending *p = arg;
    if (p->count < 256)
        p->incident[p->count++] = incident;
}

/* Ends awaited actions: the one event `at` names (when it is an outcome)
 * with its outcome; every other one succeeds unless an outcome event after
 * `at` names it (then it stays in flight). */
static void settle(const struct policy_context *ctx, struct policy_state *st,
                   const struct test_event *events, size_t event_count, size_t at, int64_t now,
                   struct policy_decisions *out)
{
    for (int round = 0; round < 64; round++) {
        struct pending p = {.count = 0};
        policy_awaiting(st, collect, &p);
        int settled = 0;
        for (size_t k = 0; k < p.count; k++) {
            const struct policy_decision *d = awaited_decision(out, p.incident[k]);
            if (!d)
                continue;
            int outcome = MEDIC_OUTCOME_SUCCEEDED, later = 0;
            for (size_t i = at; i < event_count; i++) {
                const struct test_event *e = &events[i];
                if (e->outcome < 0 || strcmp(e->node, d->node) != 0 ||
                    e->action != (int)d->action.kind)
                    continue;
                if (i == at && e->outcome >= 0)
                    outcome = e->outcome;
                else
                    later = 1;
                break;
            }
            if (later)
                continue;
            struct policy_outcome o = {p.incident[k], 0, (enum medic_outcome)outcome,
                                       "from the test"};
            policy_outcome(ctx, st, &o, now, out);
            settled = 1;
        }
        if (!settled)
            return;
    }
}

/* Runs one test; returns 1 when it passes. */
static int run_test(const struct medic_config *config, const char *name,
                    const struct test_event *events, size_t event_count,
                    struct test_expect *expects, size_t expect_count, unsigned ignore)
{
    /* in dry-run no action runs, so none has an outcome to give */
    for (size_t i = 0; !medic_mode_acts(config->mode) && i < event_count; i++)
        if (events[i].outcome >= 0) {
            printf("FAIL %s [%s]\n    line %d: an outcome event, but the test runs in dry-run, "
                   "where no action runs and none has an outcome: run it live (mode: live, "
                   "beside config: or in the file)\n",
                   name, medic_mode_name(config->mode), events[i].line);
            return 0;
        }
    struct policy_context ctx;
    engine_context_from_config(config, &ctx);
    struct policy_state *st = policy_state_new();
    struct policy_decisions out;
    policy_decisions_init(&out);
    /* an alert instance starts at its first firing event */
    char starts_fp[256][17];
    int64_t starts_at[256];
    size_t starts = 0;
    char unanswered[600] = ""; /* an answer that found no step pending */
    for (size_t i = 0; st && i < event_count; i++) {
        const struct test_event *e = &events[i];
        int64_t now = TEST_EPOCH + e->t;
        if (e->outcome >= 0) {
            policy_tick(&ctx, st, now, &out);
            settle(&ctx, st, events, event_count, i, now, &out);
            continue;
        }
        if (e->answer >= 0) {
            policy_tick(&ctx, st, now, &out);
            settle(&ctx, st, events, event_count, i, now, &out);
            struct policy_approval a = {0, 0, e->node, e->answer, e->by, e->reason, 0};
            char why[400];
            if (policy_approve(&ctx, st, &a, now, &out, why, sizeof(why)) == MEDIC_E_NOTFOUND &&
                !unanswered[0]) {
                char t[24];
                format_offset(e->t, t, sizeof(t));
                snprintf(unanswered, sizeof(unanswered), "    ! t=%-6s %s by %s (line %d): %s\n", t,
                         e->answer ? "approve" : "deny", e->by, e->line, why);
            }
            settle(&ctx, st, events, event_count, i, now, &out);
            continue;
        }
        char fp[17];
        medic_labels_fingerprint(&e->set, fp);
        size_t k;
        for (k = 0; k < starts && strcmp(starts_fp[k], fp) != 0; k++)
            ;
        if (k == starts && starts < 256) {
            snprintf(starts_fp[k], sizeof(starts_fp[k]), "%s", fp);
            starts_at[k] = now - e->started;
            starts++;
        }
        struct medic_labels none = {NULL, 0};
        struct policy_alert a = {fp,      e->status,  &e->set, &none, k < 256 ? starts_at[k] : now,
                                 e->risk, e->recovery};
        policy_tick(&ctx, st, now, &out);
        settle(&ctx, st, events, event_count, i, now, &out);
        policy_evaluate(&ctx, st, &a, now, &out);
        settle(&ctx, st, events, event_count, i, now, &out);
        if (e->status == MEDIC_STATUS_RESOLVED && k < starts) /* the next firing is new */
            starts_fp[k][0] = '\0';
    }
    int ok = st != NULL && !unanswered[0];
    int *used = calloc(out.count ? out.count : 1, sizeof(*used));
    for (size_t x = 0; used && x < expect_count; x++) {
        expects[x].met = 0;
        for (size_t d = 0; d < out.count && !expects[x].met; d++)
            if (!used[d] && expect_matches(&expects[x], &out.items[d]))
                used[d] = expects[x].met = 1;
        ok &= expects[x].met;
    }
    /* a decision of a kind the test ignores need not be expected */
    for (size_t d = 0; used && d < out.count; d++)
        if (!used[d] && (out.items[d].verdict == VERDICT_NO_MATCH ||
                         (out.items[d].has_action && (ignore >> out.items[d].action.kind) & 1)))
            used[d] = 2;
    for (size_t d = 0; used && d < out.count; d++)
        if (!used[d])
            ok = 0;
    if (!used)
        ok = 0;
    printf("%s %s [%s]\n", ok ? "PASS" : "FAIL", name, medic_mode_name(config->mode));
    fputs(unanswered, stdout);
    if (!ok && used) {
        printf("    decisions: '-' expected but not made, '+' made but not expected, ' ' as "
               "expected\n");
        for (size_t x = 0; x < expect_count; x++)
            if (!expects[x].met)
                print_expect('-', &expects[x]);
        for (size_t d = 0; d < out.count; d++)
            if (used[d] == 1)
                print_decision(' ', &out.items[d]);
            else if (!used[d])
                print_decision('+', &out.items[d]);
    }
    free(used);
    policy_decisions_release(&out);
    policy_state_free(st);
    return ok;
}

/* A file's `mode:` beside config (dry-run, live or approve) into *mode. */
static int parse_mode(struct yaml_fields *f, const struct yaml_tree_node *v, enum medic_mode *mode)
{
    static const char *const names[] = {"dry-run", "live", "approve"};
    for (int m = 0; v && v->kind == YAML_TREE_SCALAR && m < 3; m++)
        if (strcmp(v->value, names[m]) == 0) {
            *mode = (enum medic_mode)m;
            return 0;
        }
    return yaml_fields_fail(f, v, "mode: expected dry-run, live or approve");
}

int medic_policy_test_file(const char *path, int *passed, int *failed)
{
    static const char *const extra[] = {"config", "tests", "start", NULL};
    static const char *const test_keys[] = {"name", "alerts", "expect", "ignore", NULL};
    struct yaml_tree tree;
    struct medic_error err = {0};
    struct medic_config config;
    int rc = yaml_tree_load(path, &tree, &err);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        return rc;
    }
    struct yaml_fields f = {path, &err};
    const struct yaml_tree_node *root = tree.root;
    const struct yaml_tree_node *tests = yaml_tree_get(root, "tests");
    const char *config_file = scalar(root, "config");
    const struct yaml_tree_node *start = yaml_tree_get(root, "start");
    test_epoch = DEFAULT_TEST_EPOCH;
    if (start && (start->kind != YAML_TREE_SCALAR ||
                  medic_time_parse_rfc3339(start->value, strlen(start->value), &test_epoch)))
        rc = yaml_fields_fail(&f, start,
                              "start: an RFC 3339 time the tests' offsets count from "
                              "(2026-11-22T07:30:00Z)");
    if (rc == 0 && (!root || root->kind != YAML_TREE_MAPPING || !tests)) {
        rc = yaml_fields_fail(&f, root, "a policy test file is a mapping with tests");
    } else if (rc == 0 && config_file) {
        char resolved[4096];
        const char *slash = strrchr(path, '/');
        if (config_file[0] != '/' && slash)
            snprintf(resolved, sizeof(resolved), "%.*s/%s", (int)(slash - path), path, config_file);
        else
            snprintf(resolved, sizeof(resolved), "%s", config_file);
        /* beside config: the mode the tests run in, and when they start */
        for (size_t i = 0; i < root->count && rc == 0; i++)
            if (strcmp(root->keys[i], "config") && strcmp(root->keys[i], "tests") &&
                strcmp(root->keys[i], "mode") && strcmp(root->keys[i], "start")) {
                struct yaml_tree_node at = {.line = root->key_lines[i], .col = root->key_cols[i]};
                rc = yaml_fields_fail(&f, &at,
                                      "'%s' cannot stand beside config (only mode and start can): "
                                      "put it in %s",
                                      root->keys[i], config_file);
            }
        enum medic_mode mode = MEDIC_MODE_DRY_RUN;
        const struct yaml_tree_node *m = yaml_tree_get(root, "mode");
        if (rc == 0 && m)
            rc = parse_mode(&f, m, &mode);
        if (rc == 0 && (rc = medic_config_load(resolved, &config, &err)) == 0 && m)
            config.mode = mode;
    } else if (rc == 0) {
        rc = medic_config_from_tree(path, root, extra, &config, &err);
    }
    if (rc == 0 && (rc = yaml_fields_sequence(&f, tests, "tests")) != 0)
        medic_config_release(&config);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        yaml_tree_release(&tree);
        return rc;
    }
    for (size_t i = 0; rc == 0 && i < tests->count; i++) {
        const struct yaml_tree_node *t = tests->items[i];
        const struct yaml_tree_node *alerts = yaml_tree_get(t, "alerts");
        const struct yaml_tree_node *expect = yaml_tree_get(t, "expect");
        const char *name = scalar(t, "name");
        if ((rc = yaml_fields_mapping(&f, t, "test")) ||
            (rc = yaml_fields_known_keys(&f, t, "a test", test_keys)))
            break;
        if (!name || !alerts || !expect) {
            rc = yaml_fields_fail(&f, t, "a test needs name, alerts and expect");
            break;
        }
        struct test_event *events = calloc(alerts->count + 1, sizeof(*events));
        struct test_expect *expects = calloc(expect->count + 1, sizeof(*expects));
        size_t event_count = 0, expect_count = 0;
        if (!events || !expects)
            rc = medic_error_set(&err, MEDIC_E_NOMEM, "out of memory");
        if (rc == 0)
            rc = parse_events(&f, alerts, events, &event_count);
        if (rc == 0)
            rc = parse_expects(&f, expect, expects, &expect_count);
        unsigned ignore = 0;
        if (rc == 0)
            rc = parse_ignore(&f, yaml_tree_get(t, "ignore"), &ignore);
        if (rc == 0) {
            if (run_test(&config, name, events, event_count, expects, expect_count, ignore))
                (*passed)++;
            else
                (*failed)++;
        }
        free(events);
        free(expects);
    }
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    medic_config_release(&config);
    yaml_tree_release(&tree);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "commands.h"
#include "options.h"
#include "config.h"
#include "engine_evaluate.h"
#include "payload.h"
#include "policy_engine.h"
#include "table.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic replay --config FILE --db PATH|URL [--since T] [--until T]\n"
    "                    [--format table|json]\n"
    "\n"
    "Re-evaluates the notifications recorded in the audit log between --since\n"
    "and --until (default: the last 7 days) under the configuration FILE, from an\n"
    "empty state, and prints every decision that would change: a verdict, a\n"
    "policy or a reason that differs, a decision that would be new, one that\n"
    "would be gone. A summary counts how many recorded executes would become\n"
    "suppressions, and the reverse. Nothing is written: the database is opened\n"
    "read-only. This is how to check a policy change against last month.\n"
    "\n"
    "Each notification is evaluated at the time medic received it; the\n"
    "scheduler runs before each one and once more at --until, so escalation\n"
    "steps come due as they would have, to within the gaps between\n"
    "notifications. Verdicts follow FILE's mode.\n"
    "\n",
    NULL,
};

/* One side's decision, reduced to what identifies and compares it. */
struct replay_row {
    char key[400]; /* fingerprint or node, action, alertname; then its occurrence */
    char time[40], node[128], alertname[128], action[32];
    char policy[65], reason[512];
    enum policy_verdict verdict;
    size_t match; /* the other side's row with the same key, + 1; 0: none */
};

struct replay_side {
    struct replay_row *rows;
    size_t count, cap;
};

static struct replay_row *add_row(struct replay_side *s)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct replay_row *r = realloc(s->rows, cap * sizeof(*r));
        if (!r)
            return NULL;
        s->rows = r;
        s->cap = cap;
    }
    struct replay_row *r = &s->rows[s->count++];
    memset(r, 0, sizeof(*r));
    return r;
}

/* Who (the fingerprint, else the node), the action and the alert name: what
 * a decision is matched on; number_keys adds its occurrence. */
static void make_key(struct replay_row *r, const char *fingerprint)
{
    snprintf(r->key, sizeof(r->key) - 12, "%s|%s|%s",
             fingerprint && *fingerprint ? fingerprint : r->node, r->action, r->alertname);
}

static const struct replay_row *sorted_rows;

/* By key, then in the order the decisions were made. */
static int by_key(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, k = *(const size_t *)b;
    int c = strcmp(sorted_rows[i].key, sorted_rows[k].key);
    return c ? c : (i > k) - (i < k);
}

/* The side's rows' indexes sorted by key; NULL when out of memory. */
static size_t *sort_side(const struct replay_side *s)
{
    size_t *order = malloc((s->count ? s->count : 1) * sizeof(*order));
    if (!order)
        return NULL;
    for (size_t i = 0; i < s->count; i++)
        order[i] = i;
    sorted_rows = s->rows;
    qsort(order, s->count, sizeof(*order), by_key);
    return order;
}

/* Each key gets "#n", its n-th decision of that key on this side, so that
 * the n-th old and the n-th new decision of an alert's action compare. */
static int number_keys(struct replay_side *s)
{
    size_t *order = sort_side(s);
    if (!order)
        return -1;
    char previous[400] = "";
    int n = 0;
    for (size_t i = 0; i < s->count; i++) {
        struct replay_row *r = &s->rows[order[i]];
        n = strcmp(r->key, previous) == 0 ? n + 1 : 0;
        snprintf(previous, sizeof(previous), "%s", r->key);
        size_t len = strlen(r->key);
        snprintf(r->key + len, sizeof(r->key) - len, "#%d", n);
    }
    free(order);
    return 0;
}

/* Pairs the rows of both sides with the same key (unique on each side
 * once numbered), in one walk over both sorted. */
static int match_sides(struct replay_side *old, struct replay_side *new)
{
    size_t *o = sort_side(old), *n = o ? sort_side(new) : NULL;
    if (!n) {
        free(o);
        return -1;
    }
    for (size_t i = 0, k = 0; i < old->count && k < new->count;) {
        int c = strcmp(old->rows[o[i]].key, new->rows[n[k]].key);
        if (c == 0) {
            old->rows[o[i]].match = n[k] + 1;
            new->rows[n[k]].match = o[i] + 1;
        }
        i += c <= 0;
        k += c >= 0;
    }
    free(o);
    free(n);
    return 0;
}

static void copy(char *to, size_t size, const char *from)
{
    snprintf(to, size, "%s", from ? from : "");
}

struct replay {
    struct policy_context ctx;
    struct policy_state *state;
    struct policy_decisions out;
    struct receiver_limits limits;
};

static int replay_notification(void *arg, int64_t id, int64_t received_at, int duplicate,
                               const char *body, size_t len)
{
    (void)id;
    struct replay *r = arg;
    struct medic_notification n;
    struct medic_error err = {0};
    medic_notification_init(&n);
    r->limits.max_body_bytes = len + 1;
    if (receiver_payload_parse(body, len, &r->limits, &n, &err) == 0) {
        engine_evaluate_notification(&r->ctx, r->state, &n, duplicate, NULL, NULL, NAN, received_at,
                                     &r->out);
        /* nothing runs in a replay: each awaited action is taken to succeed */
        policy_assume_success(&r->ctx, r->state, received_at, &r->out);
    }
    medic_notification_release(&n);
    return 0;
}

static void print_change(const char *what, const struct replay_row *old,
                         const struct replay_row *new, struct medic_table *t)
{
    const struct replay_row *any = old ? old : new;
    const char *values[] = {what,
                            any->time,
                            any->node[0] ? any->node : NULL,
                            any->alertname[0] ? any->alertname : NULL,
                            any->action[0] ? any->action : NULL,
                            old ? old->policy : NULL,
                            old ? policy_verdict_name(old->verdict) : NULL,
                            new ? new->policy : NULL,
                            new ? policy_verdict_name(new->verdict) : NULL,
                            old ? old->reason : NULL,
                            new ? new->reason : NULL};
    medic_table_add_row(t, values);
}

int medic_cmd_replay(int argc, char **argv)
{
    const char *config_path = NULL, *db = NULL;
    int64_t now = medic_time_now();
    int64_t since = now - 7 * 86400 * MEDIC_NS_PER_SEC, until = now;
    int format = MEDIC_FORMAT_TABLE;
    const struct cli_option options[] = {
        CLI_OPT_STRING("config", &config_path, "FILE", "the configuration to try (required)"),
        CLI_OPT_STRING("db", &db, "PATH|URL",
                       "the audit log: the SQLite file or a postgresql:// URL (required)"),
        CLI_OPT_TIME_BOUND("since", &since, "T",
                           "from T on: RFC 3339 or a duration ago (90m, 2h, 7d); default 7d"),
        CLI_OPT_TIME_BOUND("until", &until, "T", "before T (default now)"),
        CLI_OPT_FORMAT("format", &format, 0, "table (default) or json"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("replay", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!config_path || !db || rest != argc)
        return cli_usage_error("replay", &help, options, "--config and --db are required");
    struct medic_config config;
    struct medic_error err = {0};
    if (medic_config_load(config_path, &config, &err)) {
        fprintf(stderr, "medic replay: %s\n", err.msg);
        return 1;
    }
    struct audit_reader *reader = NULL;
    struct replay r = {0};
    struct replay_side old = {0}, new = {0};
    struct medic_table recorded = {0}, changes = {0};
    int status = 1;
    engine_context_from_config(&config, &r.ctx);
    r.state = policy_state_new();
    policy_decisions_init(&r.out);
    receiver_limits_default(&r.limits);
    r.limits.max_alerts = (size_t)-1;
    if (!r.state || audit_reader_open(db, &reader, &err) ||
        audit_walk_notifications(reader, since, until, replay_notification, &r, &err))
        goto out;
    policy_tick(&r.ctx, r.state, until, &r.out);
    struct audit_filter f;
    audit_filter_init(&f);
    f.since = since;
    f.until = until;
    f.limit = 1000000;
    if (audit_query(reader, AUDIT_DECISIONS, &f, &recorded, &err))
        goto out;
    /* recorded decisions come newest first: walk them oldest first */
    static const char *const wanted[] = {"created_at", "node",    "alertname", "policy",
                                         "action",     "verdict", "reason",    "fingerprint"};
    int col[8];
    for (size_t k = 0; k < 8; k++) {
        col[k] = -1;
        for (size_t c = 0; c < recorded.ncols; c++)
            if (strcmp(recorded.names[c], wanted[k]) == 0)
                col[k] = (int)c;
        if (col[k] < 0) {
            medic_error_set(&err, MEDIC_E_STORE, "the log's decisions have no column %s",
                            wanted[k]);
            goto out;
        }
    }
    for (size_t i = recorded.nrows; i-- > 0;) {
        char **c = recorded.cells + i * recorded.ncols;
        struct replay_row *row = add_row(&old);
        if (!row)
            goto out;
        copy(row->time, sizeof(row->time), c[col[0]]);
        copy(row->node, sizeof(row->node), c[col[1]]);
        copy(row->alertname, sizeof(row->alertname), c[col[2]]);
        copy(row->policy, sizeof(row->policy), c[col[3]]);
        copy(row->action, sizeof(row->action), c[col[4]]);
        if (policy_verdict_parse(c[col[5]], &row->verdict)) {
            medic_error_set(&err, MEDIC_E_STORE,
                            "a recorded decision's verdict '%s' is not one this medic knows "
                            "(written by a newer one?)",
                            c[col[5]] ? c[col[5]] : "");
            goto out;
        }
        copy(row->reason, sizeof(row->reason), c[col[6]]);
        make_key(row, c[col[7]]);
    }
    for (size_t i = 0; i < r.out.count; i++) {
        const struct policy_decision *d = &r.out.items[i];
        struct replay_row *row = add_row(&new);
        if (!row)
            goto out;
        medic_time_format(d->time, row->time, sizeof(row->time));
        copy(row->node, sizeof(row->node), d->node);
        copy(row->alertname, sizeof(row->alertname), d->alertname);
        copy(row->policy, sizeof(row->policy), d->policy);
        copy(row->action, sizeof(row->action),
             d->has_action ? medic_action_name(d->action.kind) : "");
        row->verdict = d->verdict;
        copy(row->reason, sizeof(row->reason), d->reason);
        make_key(row, d->fingerprint);
    }
    if (number_keys(&old) || number_keys(&new) || match_sides(&old, &new))
        goto out;
    static const char *const names[] = {"change",      "time",       "node",        "alertname",
                                        "action",      "old_policy", "old_verdict", "new_policy",
                                        "new_verdict", "old_reason", "new_reason"};
    if (medic_table_init(&changes, 11, names, NULL))
        goto out;
    size_t exec_to_supp = 0, supp_to_exec = 0, same = 0, changed = 0, added = 0, gone = 0;
    for (size_t i = 0; i < new.count; i++) {
        const struct replay_row *n = &new.rows[i];
        const struct replay_row *o = n->match ? &old.rows[n->match - 1] : NULL;
        if (!o) {
            added++;
            print_change("new", NULL, n, &changes);
            continue;
        }
        int live_old = o->verdict == VERDICT_EXECUTE || o->verdict == VERDICT_DRY_RUN;
        int live_new = n->verdict == VERDICT_EXECUTE || n->verdict == VERDICT_DRY_RUN;
        if (live_old && n->verdict == VERDICT_SUPPRESSED)
            exec_to_supp++;
        if (o->verdict == VERDICT_SUPPRESSED && live_new)
            supp_to_exec++;
        if (o->verdict == n->verdict && strcmp(o->policy, n->policy) == 0 &&
            strcmp(o->reason, n->reason) == 0) {
            same++;
            continue;
        }
        changed++;
        print_change("changed", o, n, &changes);
    }
    for (size_t k = 0; k < old.count; k++)
        if (!old.rows[k].match) {
            gone++;
            print_change("gone", &old.rows[k], NULL, &changes);
        }
    struct medic_buf buf;
    medic_buf_init(&buf, (size_t)1 << 30);
    char since_text[40], until_text[40];
    medic_time_format(since, since_text, sizeof(since_text));
    medic_time_format(until, until_text, sizeof(until_text));
    if (format == MEDIC_FORMAT_JSON) {
        medic_buf_printf(&buf,
                         "{\"since\":\"%s\",\"until\":\"%s\",\"recorded\":%zu,\"replayed\":%zu,"
                         "\"unchanged\":%zu,\"changed\":%zu,\"new\":%zu,\"gone\":%zu,"
                         "\"execute_to_suppressed\":%zu,\"suppressed_to_execute\":%zu,"
                         "\"changes\":",
                         since_text, until_text, old.count, new.count, same, changed, added, gone,
                         exec_to_supp, supp_to_exec);
        medic_table_render(&changes, MEDIC_FORMAT_JSON, &buf);
        medic_buf_puts(&buf, "}\n");
    } else {
        if (changes.nrows)
            medic_table_render(&changes, MEDIC_FORMAT_TABLE, &buf);
        medic_buf_printf(&buf,
                         "%s%s .. %s: %zu decisions recorded, %zu replayed under %s\n"
                         "  unchanged %zu, changed %zu, new %zu, gone %zu\n"
                         "  executes (or dry runs) that become suppressed: %zu\n"
                         "  suppressed that become executes (or dry runs): %zu\n",
                         changes.nrows ? "\n" : "", since_text, until_text, old.count, new.count,
                         config_path, same, changed, added, gone, exec_to_supp, supp_to_exec);
    }
    if (buf.len)
        fwrite(buf.data, 1, buf.len, stdout);
    medic_buf_release(&buf);
    status = 0;
out:
    if (status)
        fprintf(stderr, "medic replay: %s\n", err.msg[0] ? err.msg : "out of memory");
    medic_table_release(&recorded);
    medic_table_release(&changes);
    free(old.rows);
    free(new.rows);
    audit_reader_free(reader);
    policy_decisions_release(&r.out);
    policy_state_free(r.state);
    medic_config_release(&config);
    return status;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "commands.h"
#include "options.h"
#include "config.h"
#include "engine_evaluate.h"
#include "payload.h"
#include "table.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
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
    "\n"
    "Times are RFC 3339 or a duration ago (90m, 2h, 7d). --db is the SQLite file\n"
    "or a postgresql:// URL.\n";

/* One side's decision, reduced to what identifies and compares it. */
struct replay_row {
    char key[400]; /* fingerprint or node, action, occurrence */
    char time[40], node[128], alertname[128], action[32];
    char policy[65], verdict[16], reason[512];
    int used;
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

/* key = who (fingerprint, else node) + action + n-th such decision */
static void make_key(struct replay_side *s, struct replay_row *r, const char *fingerprint)
{
    char base[380];
    snprintf(base, sizeof(base), "%s|%s|%s", fingerprint && *fingerprint ? fingerprint : r->node,
             r->action, r->alertname);
    int n = 0;
    for (size_t i = 0; i + 1 < s->count; i++)
        if (strncmp(s->rows[i].key, base, strlen(base)) == 0 && s->rows[i].key[strlen(base)] == '#')
            n++;
    snprintf(r->key, sizeof(r->key), "%s#%d", base, n);
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
                            old ? old->verdict : NULL,
                            new ? new->policy : NULL,
                            new ? new->verdict : NULL,
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
        CLI_OPT_STRING("config", &config_path), CLI_OPT_STRING("db", &db),
        CLI_OPT_TIME_BOUND("since", &since),    CLI_OPT_TIME_BOUND("until", &until),
        CLI_OPT_FORMAT("format", &format, 0),   CLI_OPT_END,
    };
    int rest, parsed = cli_parse("replay", usage, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!config_path || !db || rest != argc) {
        fprintf(stderr, "medic replay: --config and --db are required\n\n%s", usage);
        return 2;
    }
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
    for (size_t i = recorded.nrows; i-- > 0;) {
        char **c = recorded.cells + i * recorded.ncols;
        struct replay_row *row = add_row(&old);
        if (!row)
            goto out;
        /* columns: id created_at node alertname policy step action verdict reason risk params
         * notification_id alert_id model_hash config_hash fingerprint */
        copy(row->time, sizeof(row->time), c[1]);
        copy(row->node, sizeof(row->node), c[2]);
        copy(row->alertname, sizeof(row->alertname), c[3]);
        copy(row->policy, sizeof(row->policy), c[4]);
        copy(row->action, sizeof(row->action), c[6]);
        copy(row->verdict, sizeof(row->verdict), c[7]);
        copy(row->reason, sizeof(row->reason), c[8]);
        make_key(&old, row, c[15]);
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
        copy(row->verdict, sizeof(row->verdict), policy_verdict_name(d->verdict));
        copy(row->reason, sizeof(row->reason), d->reason);
        make_key(&new, row, d->fingerprint);
    }
    static const char *const names[] = {"change",      "time",       "node",        "alertname",
                                        "action",      "old_policy", "old_verdict", "new_policy",
                                        "new_verdict", "old_reason", "new_reason"};
    if (medic_table_init(&changes, 11, names, NULL))
        goto out;
    size_t exec_to_supp = 0, supp_to_exec = 0, same = 0, changed = 0, added = 0, gone = 0;
    for (size_t i = 0; i < new.count; i++) {
        struct replay_row *n = &new.rows[i], *o = NULL;
        for (size_t k = 0; k < old.count && !o; k++)
            if (!old.rows[k].used && strcmp(old.rows[k].key, n->key) == 0)
                o = &old.rows[k];
        if (!o) {
            added++;
            print_change("new", NULL, n, &changes);
            continue;
        }
        o->used = n->used = 1;
        int live_old = strcmp(o->verdict, "execute") == 0 || strcmp(o->verdict, "dry_run") == 0;
        int live_new = strcmp(n->verdict, "execute") == 0 || strcmp(n->verdict, "dry_run") == 0;
        if (live_old && strcmp(n->verdict, "suppressed") == 0)
            exec_to_supp++;
        if (strcmp(o->verdict, "suppressed") == 0 && live_new)
            supp_to_exec++;
        if (strcmp(o->verdict, n->verdict) == 0 && strcmp(o->policy, n->policy) == 0 &&
            strcmp(o->reason, n->reason) == 0) {
            same++;
            continue;
        }
        changed++;
        print_change("changed", o, n, &changes);
    }
    for (size_t k = 0; k < old.count; k++)
        if (!old.rows[k].used) {
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

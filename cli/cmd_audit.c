/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "buf.h"
#include "commands.h"
#include "options.h"
#include "policy_engine.h"
#include "table.h"
#include "timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_help help = {
    "usage: medic audit notifications|alerts|decisions|actions|incidents|changes|\n"
    "                   approvals|pauses|quarantined [FILTERS] [--db PATH|URL]\n"
    "                   [--format table|json|csv]\n"
    "       medic audit timeline --node N [--since T] [--until T] [--limit N]\n"
    "                   [--db PATH|URL] [--format table|json|csv]\n"
    "       medic audit verify [--db PATH|URL] [--archive FILE]\n"
    "       medic audit archive --before T --out FILE [--db PATH|URL]\n"
    "       medic audit payload ID [--db PATH|URL]\n"
    "       medic audit migrate --from PATH --to postgresql://USER:PASSWORD@HOST/DB\n"
    "       medic audit lease --db postgresql://... [--force-takeover REASON]\n"
    "\n"
    "Queries the audit log that medic serve writes, newest first. The database is\n"
    "opened read-only, so this works while the daemon runs.\n"
    "\n"
    "incidents lists each incident (one per node and policy, opened by its first\n"
    "alert) as it is now: its state and the cause of its last change. changes\n"
    "lists every state change with its cause and the decision behind it.\n"
    "approvals lists people's answers to steps waiting for approval (who, why,\n"
    "and what came of each); pauses their pauses of the fleet and their ends.\n"
    "quarantined lists the incidents whose node waits for a person (a failed\n"
    "health check, a repeat offender, a drain no policy undoes), with the cause:\n"
    "what an RMA ticket needs; `medic node release NODE` gives one back.\n"
    "\n",
    "timeline tells what happened to one node, oldest first: its alerts, the\n"
    "decisions about it, its incidents' changes and the actions on it (the newest\n"
    "--limit rows of all four, merged in time order).\n"
    "\n"
    "payload prints notification ID's body exactly as Alertmanager sent it.\n"
    "\n"
    "verify recomputes the SHA-256 chains over decisions, actions and incident\n"
    "changes and names the first row that was changed, removed or reordered; exit\n"
    "status 1 when broken. Its --db may be a postgresql:// URL. With --archive\n"
    "FILE it verifies that archive against the log: its chains up to the hashes\n"
    "the log kept for it, and every other row it holds.\n"
    "\n"
    "archive moves the rows older than --before (at least an hour ago) that\n"
    "nothing newer refers to into FILE, a new SQLite audit log that the queries\n"
    "read with --db FILE, and takes them out of the log while the daemon writes.\n"
    "The log keeps where each chain was cut, so it still verifies alone.\n"
    "\n"
    "migrate copies an SQLite audit log (stop medic serve first) into an empty\n"
    "PostgreSQL database, creating medic's schema there, in one transaction, then\n"
    "verifies the hash chains there; for several replicas sharing one log.\n"
    "\n"
    "lease shows the leader's lease when replicas share a PostgreSQL log: who holds\n"
    "it, its epoch, whether it is live, and the holder's configuration hash. A\n"
    "replica whose configuration differs from the holder's does not take the lease\n"
    "when it expires. --force-takeover REASON lets the next replica take it anyway\n"
    "(once): the reason, the database user and the time are recorded in the lease,\n"
    "and kept as its last forced takeover once used.\n"
    "\n"
    "Times are UTC. Notifications and alerts are filtered by when medic received\n"
    "them; decisions and actions by when they were recorded.\n",
};

static int run_lease(const char *db, const char *force)
{
    struct medic_error err = {0};
    if (force && audit_lease_force(db, force, &err)) {
        fprintf(stderr, "medic audit lease: %s\n", err.msg);
        return err.code == MEDIC_E_INVALID ? 2 : 1;
    }
    struct audit_lease lease;
    if (audit_lease_read(db, &lease, &err)) {
        fprintf(stderr, "medic audit lease: %s\n", err.msg);
        return err.code == MEDIC_E_INVALID ? 2 : 1;
    }
    printf("holder:       %s\n"
           "epoch:        %lld\n"
           "state:        %s\n"
           "config_hash:  %s\n"
           "forced:       %s\n"
           "last forced:  %s\n",
           lease.holder, (long long)lease.epoch,
           lease.live ? "live" : "expired (the next replica to renew takes it)",
           lease.config_hash[0] ? lease.config_hash : "(none published)",
           lease.forced[0] ? lease.forced : "(no)",
           lease.last_forced[0] ? lease.last_forced : "(never)");
    return 0;
}

static int run_payload(const char *db, const char *id_text)
{
    char *end;
    long long id = strtoll(id_text, &end, 10);
    if (*end || id <= 0) {
        fprintf(stderr, "medic audit payload: '%s' is not a notification id\n", id_text);
        return 2;
    }
    struct audit_reader *reader = NULL;
    struct medic_error err = {0};
    struct medic_buf out;
    medic_buf_init(&out, (size_t)1 << 30);
    int rc = audit_reader_open(db, &reader, &err);
    if (rc == 0)
        rc = audit_read_payload(reader, id, &out, &err);
    audit_reader_free(reader);
    if (rc)
        fprintf(stderr, "medic audit payload: %s\n", err.msg);
    else if (out.len)
        fwrite(out.data, 1, out.len, stdout);
    medic_buf_release(&out);
    return rc ? 1 : 0;
}

static int report_verified(const struct audit_verify_result *res);

static int run_verify(const char *db)
{
    struct medic_error err = {0};
    struct audit_verify_result res;
    struct audit_reader *reader = NULL;
    if (audit_reader_open(db, &reader, &err) || audit_verify(reader, &res, &err)) {
        fprintf(stderr, "medic audit verify: %s\n", err.msg);
        audit_reader_free(reader);
        return 1;
    }
    audit_reader_free(reader);
    return report_verified(&res);
}

static int run_verify_archive(const char *db, const char *file)
{
    struct medic_error err = {0};
    struct audit_verify_result res;
    struct audit_reader *reader = NULL;
    int64_t record = 0;
    if (audit_reader_open(db, &reader, &err) ||
        audit_verify_archive(reader, file, &res, &record, &err)) {
        fprintf(stderr, "medic audit verify: %s\n", err.msg);
        audit_reader_free(reader);
        return 1;
    }
    audit_reader_free(reader);
    if (res.ok)
        printf("archive %s is the log's archive %lld:\n", file, (long long)record);
    return report_verified(&res);
}

static void progress_line(const char *line)
{
    fprintf(stderr, "medic audit migrate: %s\n", line);
}

static void archive_line(const char *line)
{
    fprintf(stderr, "medic audit archive: %s\n", line);
}

static int run_archive(const char *db, int64_t before, const char *out)
{
    if (!before || !out) {
        fprintf(stderr, "medic audit archive: needs --before T (RFC 3339, or 90d: that long "
                        "ago) and --out FILE (a new file)\n");
        return 2;
    }
    struct audit_archive_options o = {.before = before, .out = out, .progress = archive_line};
    struct audit_archived a;
    struct medic_error err = {0};
    if (audit_archive(db, &o, &a, &err)) {
        fprintf(stderr, "medic audit archive: %s\n", err.msg);
        return err.code == MEDIC_E_INVALID ? 2 : 1;
    }
    if (a.resumed)
        printf("finished the earlier archive's removal first\n");
    if (!a.record) {
        printf("nothing older than --before can move: no archive written\n");
        return 0;
    }
    printf("archive %lld in %s: %lld notifications, %lld alerts, %lld decisions, %lld actions, "
           "%lld incident changes, %lld requests\n",
           (long long)a.record, out, a.counts[0], a.counts[1], a.counts[2], a.counts[3],
           a.counts[4], a.counts[5]);
    return 0;
}

static int run_migrate(const char *from, const char *to)
{
    if (!from || !to || !audit_location_is_shared(to) || audit_location_is_shared(from)) {
        fprintf(stderr, "medic audit migrate: needs --from PATH (an SQLite audit log) and --to "
                        "postgresql://USER:PASSWORD@HOST:PORT/DB\n");
        return 2;
    }
    struct medic_error err = {0};
    struct audit_migrated m;
    if (audit_migrate(from, to, progress_line, &m, &err)) {
        fprintf(stderr, "medic audit migrate: %s (nothing was copied)\n", err.msg);
        return 1;
    }
    printf("copied:");
    for (size_t t = 0; t < AUDIT_MIGRATED_TABLES; t++)
        printf("%s %lld %s", t ? "," : "", m.rows[t], audit_migrated_tables[t]);
    printf("\n");
    return report_verified(&m.verified);
}

static int report_verified(const struct audit_verify_result *res)
{
    if (!res->ok && res->broken_id == 0) /* no one row: the archive's other rows */
        printf("archive broken: %s: %s\n", res->broken_table, res->why);
    if (!res->ok && res->broken_id)
        printf("chain broken: %s row %lld: %s\n", res->broken_table, (long long)res->broken_id,
               res->why);
    if (!res->ok)
        return 1;
    printf("ok: %lld decisions, %lld actions and %lld incident changes, hash chains intact\n",
           (long long)res->decisions_checked, (long long)res->actions_checked,
           (long long)res->changes_checked);
    return 0;
}

static int parse_state(const char *arg, void *value)
{
    if (policy_incident_state_parse(arg) < 0)
        return -1;
    *(const char **)value = arg;
    return 0;
}

static int parse_id(const char *arg, void *value)
{
    char *end;
    long long v = strtoll(arg, &end, 10);
    if (!*arg || *end || v <= 0)
        return -1;
    *(int64_t *)value = v;
    return 0;
}

#define STATES_LIST                                                                                \
    "open, pending, draining, drained, limiting, limited, cycling, cycled, resetting, reset, "     \
    "verifying, verified, failed, quarantined, undoing, recovered, expired, closed, released"
#define STATES "an incident's state (" STATES_LIST ")"

int medic_cmd_audit(int argc, char **argv)
{
    const char *from = NULL, *to = NULL, *force = NULL, *columns = NULL, *out_file = NULL,
               *archive = NULL;
    int64_t before = 0;
    struct audit_filter filter;
    audit_filter_init(&filter);
    const char *db = "./medic.db";
    int format = MEDIC_FORMAT_TABLE;
    const struct cli_option options[] = {
        CLI_OPT_GROUP("Filters:"),
        CLI_OPT_STRING("node", &filter.node, "N", "alerts, decisions or actions about node N"),
        CLI_OPT_STRING("alertname", &filter.alertname, "A", "alert name"),
        CLI_OPT_STRING("policy", &filter.policy, "P", "policy that decided (decisions, actions)"),
        CLI_OPT_STRING("verdict", &filter.verdict, "V",
                       "execute, dry_run, suppressed or no_match (decisions, actions)"),
        CLI_OPT_STRING("status", &filter.status, "S",
                       "firing or resolved (notifications, alerts); an action's result "
                       "(pending, succeeded, failed, timed_out, refused, interrupted)"),
        CLI_OPT_CALLBACK("state", &filter.state, parse_state, STATES, "S",
                         "an incident's state (incidents, changes): " STATES_LIST),
        CLI_OPT_CALLBACK("incident", &filter.incident, parse_id, "an incident's number", "ID",
                         "one incident (incidents, changes)"),
        CLI_OPT_CALLBACK("decision", &filter.decision, parse_id, "a decision's number", "ID",
                         "one decision (decisions), its action's rows (actions)"),
        CLI_OPT_FLAG("waiting", &filter.waiting,
                     "decisions: only the steps still waiting for a person (pending, not "
                     "answered, withdrawn or expired since)"),
        CLI_OPT_TIME_BOUND("since", &filter.since, "T",
                           "from T on; T is RFC 3339 (2026-11-21T22:00:00Z) or relative (90m, "
                           "2h, 7d: that long ago)"),
        CLI_OPT_TIME_BOUND("until", &filter.until, "T", "before T"),
        CLI_OPT_INT("limit", &filter.limit, 1, 1000000, "N", "at most N rows (default 100)"),
        CLI_OPT_GROUP("Options:"),
        CLI_OPT_STRING("db", &db, "PATH|URL",
                       "the audit database (default ./medic.db), or a "
                       "postgresql://USER:PASSWORD@HOST:PORT/DB one"),
        CLI_OPT_FORMAT("format", &format, 1, "table (default), json (one JSON array) or csv"),
        CLI_OPT_STRING("columns", &columns, "A,B",
                       "only these columns, in this order (all: every one; a decisions table "
                       "shows id, created_at, node, policy, step, action, verdict and reason "
                       "unless told)"),
        CLI_OPT_STRING("archive", &archive, "FILE", "verify: the archive to verify"),
        CLI_OPT_TIME_BOUND("before", &before, "T",
                           "archive: move the rows older than T (at least an hour ago)"),
        CLI_OPT_STRING("out", &out_file, "FILE", "archive: the new archive file"),
        CLI_OPT_STRING("from", &from, "PATH", "migrate: the SQLite audit log to copy"),
        CLI_OPT_STRING("to", &to, "URL", "migrate: the empty PostgreSQL database"),
        CLI_OPT_STRING("force-takeover", &force, "REASON",
                       "lease: let the next replica take an expired lease although its "
                       "configuration differs from the last holder's"),
        CLI_OPT_END,
    };
    int rest, parsed = cli_parse("audit", &help, argc, argv, 1, options, &rest);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (rest < argc && strcmp(argv[rest], "payload") == 0 && rest == argc - 2)
        return run_payload(db, argv[rest + 1]);
    if (rest != argc - 1)
        return cli_usage_error("audit", &help, options,
                               rest >= argc ? "say what to query" : "one query at a time");
    const char *what = argv[rest];
    if (strcmp(what, "verify") == 0)
        return archive ? run_verify_archive(db, archive) : run_verify(db);
    if (strcmp(what, "archive") == 0)
        return run_archive(db, before, out_file);
    if (strcmp(what, "migrate") == 0)
        return run_migrate(from, to);
    if (strcmp(what, "lease") == 0)
        return run_lease(db, force);
    if (force) {
        fprintf(stderr, "medic audit: --force-takeover goes with medic audit lease\n");
        return 2;
    }
    int timeline = strcmp(what, "timeline") == 0;
    int quarantined = strcmp(what, "quarantined") == 0;
    if (quarantined && filter.state) {
        fprintf(stderr, "medic audit quarantined: its state is quarantined; no --state\n");
        return 2;
    }
    if (quarantined)
        filter.state = "quarantined";
    int kind = audit_kind_parse(quarantined ? "incidents" : what);
    if (kind < 0 && !timeline)
        return cli_usage_error("audit", &help, options, "unknown query '%s'", what);
    if (timeline && (filter.alertname || filter.policy || filter.verdict || filter.status ||
                     filter.state || filter.incident)) {
        fprintf(stderr,
                "medic audit timeline: it takes --node, --since, --until and --limit; "
                "filter one kind of row with medic audit alerts|decisions|actions|changes\n");
        return 2;
    }
    struct audit_reader *reader = NULL;
    struct medic_error err = {0};
    struct medic_table table;
    if (audit_reader_open(db, &reader, &err) ||
        (timeline ? audit_timeline(reader, filter.node, filter.since, filter.until, filter.limit,
                                   &table, &err)
                  : audit_query(reader, (enum audit_kind)kind, &filter, &table, &err))) {
        fprintf(stderr, "medic audit: %s\n", err.msg);
        audit_reader_free(reader);
        return err.code == MEDIC_E_INVALID ? 2 : 1;
    }
    audit_reader_free(reader);
    /* a table fits a terminal: the decisions' columns a person reads
     * first, unless --columns says otherwise ("all": every one) */
    if (!columns && format == MEDIC_FORMAT_TABLE && kind == AUDIT_DECISIONS && !timeline)
        columns = "id,created_at,node,policy,step,action,verdict,reason";
    char why[600];
    if (columns && strcmp(columns, "all") != 0 &&
        medic_table_select(&table, columns, why, sizeof(why))) {
        fprintf(stderr, "medic audit: --columns: %s\n", why);
        medic_table_release(&table);
        return 2;
    }
    struct medic_buf out;
    medic_buf_init(&out, (size_t)1 << 30);
    int rc = medic_table_render(&table, (enum medic_table_format)format, &out);
    if (rc == 0 && out.len)
        fwrite(out.data, 1, out.len, stdout);
    if (rc == 0 && format == MEDIC_FORMAT_TABLE && table.nrows == 0)
        fprintf(stderr, timeline ? "(nothing about node %s)\n" : "(no %s match)\n",
                timeline ? filter.node : what);
    medic_table_release(&table);
    medic_buf_release(&out);
    return rc ? 1 : 0;
}

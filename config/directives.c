/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's directives in one typed table: name, type, bounds,
 * default and doc. The table drives the loader (which keys exist, how each
 * value is read and bounded, in which order), and the reference in
 * docs/configuration.md (`medic check config --reference`). Sections with a
 * structure of their own (auth, tls, inventory, notifiers) have a loader of
 * their own and rows that document their keys. */
#include "audit.h"
#include "loader.h"
#include "log.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum directive_type {
    D_LISTEN,    /* char *: HOST:PORT */
    D_MODE,      /* enum medic_mode */
    D_LOG_LEVEL, /* int */
    D_STRING,    /* char * */
    D_PATH,      /* char *: relative to the configuration file */
    D_HTTP_URL,  /* char *: http:// or https:// */
    D_DURATION,  /* int64_t ns within min..max (max 0: none) */
    D_SIZE,      /* size_t within min..max; KiB and MiB suffixes */
    D_CUSTOM,    /* read by load() */
    D_DOC,       /* a key read by its section's loader; documented here */
};

struct directive {
    const char *section; /* NULL: top level */
    const char *key;
    enum directive_type type;
    size_t offset; /* in struct medic_config */
    int64_t min, max;
    const char *min_text, *max_text; /* bounds as medic.yaml writes them */
    const char *fallback;            /* the default, as medic.yaml writes it */
    const char *doc;
    int (*load)(struct loader *l, const struct yaml_tree_node *n);
};

#define AT(field) offsetof(struct medic_config, field)
#define MS(n) ((int64_t)(n)*MEDIC_NS_PER_MS)
#define SEC(n) ((int64_t)(n)*MEDIC_NS_PER_SEC)

static int load_listen(struct loader *l, const struct yaml_tree_node *n);
static int load_mode(struct loader *l, const struct yaml_tree_node *n);
static int load_audit_path(struct loader *l, const struct yaml_tree_node *n)
{
    free(l->config->audit_path);
    l->config->audit_path = NULL;
    l->config->audit_path_set = 1;
    return yaml_fields_string(&l->f, n, "path", &l->config->audit_path);
}

static int load_audit_url(struct loader *l, const struct yaml_tree_node *n)
{
    struct medic_config *c = l->config;
    if (c->audit_path_set)
        return yaml_fields_fail(&l->f, n, "url: audit.path is set too; keep one of them");
    char *url = NULL;
    int rc = yaml_fields_string(&l->f, n, "url", &url);
    if (rc == 0 && !audit_location_is_shared(url))
        rc = yaml_fields_fail(&l->f, n, "url: expected postgresql://USER:PASSWORD@HOST:PORT/DB");
    if (rc) {
        free(url);
        return rc;
    }
    free(c->audit_path);
    c->audit_path = url;
    return 0;
}

static int load_log_level(struct loader *l, const struct yaml_tree_node *n);
static int load_credentials_file(struct loader *l, const struct yaml_tree_node *n);
static int load_model_path(struct loader *l, const struct yaml_tree_node *n);
static int load_fleet_interval(struct loader *l, const struct yaml_tree_node *n);
static int load_tls(struct loader *l, const struct yaml_tree_node *n);
static int load_audit_path(struct loader *l, const struct yaml_tree_node *n);
static int load_audit_url(struct loader *l, const struct yaml_tree_node *n);

/* In the order they are read: credentials before what names them, the
 * model after Prometheus, notifiers before the policies (read after the
 * table, with safety and policy_files). */
static const struct directive directives[] = {
    {NULL, "listen", D_LISTEN, AT(listen), 0, 0, NULL, NULL, "`127.0.0.1:9799`",
     "`HOST:PORT`; `[::1]:9799` for IPv6", load_listen},
    {NULL, "mode", D_MODE, AT(mode), 0, 0, NULL, NULL, "`dry-run`",
     "`dry-run`, `approve` or `live`. `approve` acts like `live` but holds each disruptive "
     "step for a person's approval (a policy's `approval` may say otherwise). `medic serve`, "
     "`medic check config` and a reload refuse `live` and `approve` unless the webhook has "
     "authentication, and refuse disruptive policies there without `safety.storm.notifier` "
     "(errors at the `mode:` or `safety:` line)",
     load_mode},
    {NULL, "log_level", D_LOG_LEVEL, AT(log_level), 0, 0, NULL, NULL, "`info`",
     "`debug`, `info`, `warn`, `error`", load_log_level},
    {NULL, "external_url", D_HTTP_URL, AT(external_url), 0, 0, NULL, NULL, "none",
     "medic's URL as on-call reaches it (`https://medic.example.org`): messages to on-call "
     "link to what medic decided",
     NULL},
    {"audit", "path", D_CUSTOM, 0, 0, 0, NULL, NULL, "`./medic.db`",
     "the SQLite database; created and migrated at start", load_audit_path},
    {"audit", "url", D_CUSTOM, 0, 0, 0, NULL, NULL, "none",
     "`postgresql://USER:PASSWORD@HOST:PORT/DB` instead of `path`: the audit log in PostgreSQL, "
     "which several replicas share ([ha.md](ha.md)); schema created and migrated at start",
     load_audit_url},
    {"audit", "busy_timeout", D_DURATION, AT(audit_busy_timeout), 0, SEC(8), "0s", "8s", "`5s`",
     "how long a commit waits for a lock held by another process before the request gets 503; "
     "at most 8s, below the 10 s a shutdown waits for webhooks in flight",
     NULL},
    {"audit", "max_pending", D_SIZE, AT(audit_max_pending), 1, 1000000, "1", "1000000", "`4096`",
     "write requests queued for the audit writer before new ones get 503", NULL},
    {"audit", "writers", D_SIZE, AT(audit_writers), 1, 17, "1", "17",
     "1 and a quarter of the cores, at most 5",
     "connections that write a PostgreSQL audit log: one writes decisions, actions and incident "
     "changes in their order, the others store notifications side by side (each Alertmanager "
     "group on one of them, in order); 1: that one stores them too. SQLite has one writer",
     NULL},
    {"ha", "replica", D_STRING, AT(ha_replica), 0, 0, NULL, NULL, "this host's `HOSTNAME-PID`",
     "this replica's name in the lease; unique among the replicas sharing `audit.url`", NULL},
    {"ha", "lease", D_DURATION, AT(ha_lease), SEC(1), SEC(300), "1s", "300s", "`5s`",
     "how long a leader's lease lasts unrenewed: another replica takes over this long after "
     "the leader stops renewing it (renewed every third of it)",
     NULL},
    {NULL, "auth", D_CUSTOM, 0, 0, 0, NULL, NULL, NULL, NULL, config__load_auth},
    {"auth", "webhook_bearer_token_file", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "file holding the token `POST /webhook` requires (`Authorization: Bearer ...`)", NULL},
    {"auth", "webhook_basic_auth", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "`{ username: U, password_file: F }`; either or both of bearer and basic may be set", NULL},
    {"auth", "read_bearer_token_file", D_DOC, 0, 0, 0, NULL, NULL, "none (live: the webhook's)",
     "guards `GET /metrics`, `GET /api/v1/*`, `POST /api/v1/dry-run` and the on-call page "
     "(`GET /`, `GET /nodes/NAME`); in live mode, when "
     "no read credentials are set, the webhook's guard them",
     NULL},
    {"auth", "read_basic_auth", D_DOC, 0, 0, 0, NULL, NULL, "none (live: the webhook's)",
     "as `read_bearer_token_file`, with basic auth", NULL},
    {"auth", "admin_bearer_token_file", D_DOC, 0, 0, 0, NULL, NULL, "none (live: the webhook's)",
     "guards `POST /-/reload` and the people's requests (`POST /api/v1/approvals/ID`, the pause, "
     "a release, the page's forms), and reads what the read credentials may; in live and "
     "approve mode, when no admin credentials are set, the webhook's guard the reload only: a "
     "person's request always needs an admin credential of its own or an approver's token, "
     "never the webhook's and never none",
     NULL},
    {"auth", "admin_basic_auth", D_DOC, 0, 0, 0, NULL, NULL, "none (live: the webhook's)",
     "as `admin_bearer_token_file`, with basic auth", NULL},
    {"auth", "approvers", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "`[{ name: alice, token_file: F }, ...]`: people who may answer steps waiting for approval "
     "(`POST /api/v1/approvals/ID`, `medic approve`), each with a bearer token of their own, so "
     "that the audit log records who answered; the admin credentials answer too, as `admin` or "
     "their basic-auth user",
     NULL},
    {"limits", "max_body_bytes", D_SIZE, AT(limits.max_body_bytes), 1024,
     RECEIVER_WIDEST_BODY_BYTES, "1KiB", "64MiB", "`1MiB`", "larger bodies get 413", NULL},
    {"limits", "max_alerts", D_SIZE, AT(limits.max_alerts), 1, RECEIVER_WIDEST_ALERTS, "1",
     "100000", "`1000`", "alerts in one notification", NULL},
    {"limits", "max_labels", D_SIZE, AT(limits.max_labels), 1, RECEIVER_WIDEST_LABELS, "1", "1024",
     "`64`", "labels or annotations in one set", NULL},
    {"limits", "max_label_value_bytes", D_SIZE, AT(limits.max_label_value_bytes), 16,
     RECEIVER_WIDEST_VALUE_BYTES, "16", "1MiB", "`4096`", "one label value", NULL},
    {"limits", "max_annotation_value_bytes", D_SIZE, AT(limits.max_annotation_value_bytes), 16,
     RECEIVER_WIDEST_VALUE_BYTES, "16", "1MiB", "`16384`", "one annotation value", NULL},
    {"limits", "max_connections", D_SIZE, AT(max_connections), 1, 65536, "1", "65536", "`512`",
     "concurrent HTTP connections", NULL},
    {"limits", "max_connections_per_address", D_SIZE, AT(max_connections_per_address), 1, 65536,
     "1", "65536", "`64`",
     "concurrent HTTP connections from one client address; more are closed at once, so that one "
     "client cannot take every connection",
     NULL},
    {"limits", "request_timeout", D_DURATION, AT(request_timeout), SEC(1), SEC(600), "1s", "600s",
     "`10s`",
     "a request's header and body must arrive within this, however the client paces its bytes; "
     "a connection past it is closed (`medic_http_request_deadline_closed_total`)",
     NULL},
    {NULL, "credentials_file", D_CUSTOM, 0, 0, 0, NULL, NULL, "none",
     "secrets for BMCs, agents and notifiers ([actions.md](actions.md)); refused unless mode "
     "0600 or 0400; `medic check config` warns when the inventory has a BMC or agent "
     "credentials and none is set",
     load_credentials_file},
    {NULL, "inventory", D_CUSTOM, 0, 0, 0, NULL, NULL, NULL, NULL, config__load_inventory},
    {"inventory", "node_labels", D_DOC, 0, 0, 0, NULL, NULL, "`[node, Hostname, instance]`",
     "the first label present names an alert's node; a `:port` suffix (and IPv6 brackets) is "
     "removed",
     NULL},
    {"inventory", "file", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "the inventory as a file (relative to this one); see below", NULL},
    {"inventory", "nodes", D_DOC, 0, 0, 0, NULL, NULL, "none", "the inventory inline; see below",
     NULL},
    {"prometheus", "url", D_HTTP_URL, AT(prometheus_url), 0, 0, NULL, NULL, "none",
     "where the model's telemetry is read; without it alerts are not scored", NULL},
    {"prometheus", "timeout", D_DURATION, AT(prometheus_timeout), MS(10), SEC(60), "10ms", "60s",
     "`2s`",
     "the time budget of one round's risk lookups; past it risks are unknown, with the reason",
     NULL},
    {"model", "path", D_CUSTOM, 0, 0, 0, NULL, NULL, "the built-in model",
     "a safetensors model file ([model.md](model.md)); needs `prometheus.url`", load_model_path},
    {"model", "fleet_interval", D_CUSTOM, 0, 0, 0, NULL, NULL, "`30s`",
     "with `prometheus.url`, score every GPU Prometheus knows this often (and as each step of "
     "the model's window begins, when this is shorter than the step), for "
     "`medic_gpu_failure_risk` and for alerts, which then take their GPU's risk without asking "
     "Prometheus; a cycle may take this long (or `prometheus.timeout` if longer). At least 1s, "
     "or `off`: each alert's round then fetches its GPUs' whole windows itself",
     load_fleet_interval},
    {"slurm", "conf", D_PATH, AT(slurm_conf), 0, 0, NULL, NULL, "Slurm's default",
     "`SLURM_CONF` for scontrol; `medic check config` warns when it cannot be read on its host",
     NULL},
    {"slurm", "scontrol", D_STRING, AT(scontrol), 0, 0, NULL, NULL, "`scontrol`",
     "the program for drain and resume; `medic check config` warns about a path that cannot be "
     "run on its host",
     NULL},
    {"slurm", "read_interval", D_DURATION, AT(slurm_read_interval), SEC(1), SEC(600), "1s", "600s",
     "`30s`",
     "how often medic reads Slurm's nodes (one `scontrol show nodes`, on a thread of its own), "
     "outside dry-run or with `safety.maintenance_from_slurm`: for maintenance reservations, and "
     "to reconcile the drains medic holds with what Slurm shows (a drain someone resumed or "
     "replaced is let go: [policies.md](policies.md#node-states-above-the-incidents)); while a "
     "read fails, every 5 s; a list older than three intervals is not used",
     NULL},
    {NULL, "notifiers", D_CUSTOM, 0, 0, 0, NULL, NULL, "none",
     "`NAME: { type, url, from, to, routing_key, credentials }`; type is `webhook`, `slack`, "
     "`pagerduty` or `smtp` ([actions.md](actions.md)); a secret `url` or `routing_key` may "
     "stay in the credentials file, under the notifier's `credentials` (see Secrets below)",
     config__load_notifiers},
    {"engine", "tick_interval", D_DURATION, AT(engine_tick_interval), MS(10), SEC(3600), "10ms",
     "1h", "`5s`", "how often the escalation scheduler runs", NULL},
    {NULL, "safety", D_DOC, 0, 0, 0, NULL, NULL, "see policies.md",
     "caps, storm breaker, stale alerts, maintenance windows ([policies.md](policies.md))", NULL},
    {"safety", "max_disruptive_in_flight", D_DOC, 0, 0, 0, NULL, NULL, "`2`",
     "nodes medic holds disrupted at once, fleet-wide (drained, power-limited, or with a "
     "disruptive action in flight); a step over it is held until a node is given back",
     NULL},
    {"safety", "max_disrupted_fraction", D_DOC, 0, 0, 0, NULL, NULL, "`0.05`",
     "the same cap as a fraction of the inventory's nodes (at least one node)", NULL},
    {"safety", "storm.max_alerting_nodes", D_DOC, 0, 0, 0, NULL, NULL, "`20`",
     "more nodes alerting within `storm.window` is a storm: disruptive steps are held, on-call "
     "is told once when it starts and once when it passes",
     NULL},
    {"safety", "storm.window", D_DOC, 0, 0, 0, NULL, NULL, "`5m`",
     "the window the storm breaker counts alerting nodes in", NULL},
    {"safety", "storm.notifier", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "the notifier on-call hears from medic itself through (storms, stopped incidents, "
     "interrupted actions); required with live disruptive policies",
     NULL},
    {"safety", "max_alert_age", D_DOC, 0, 0, 0, NULL, NULL, "`1h`",
     "an alert that started longer ago never triggers a disruptive step (a held step is dropped "
     "then)",
     NULL},
    {"safety", "alert_expiry", D_DOC, 0, 0, 0, NULL, NULL, "`12h`",
     "an alert not re-sent this long is taken as resolved (its resolve was lost); keep it above "
     "every route's `repeat_interval`",
     NULL},
    {"safety", "restart_grace", D_DOC, 0, 0, 0, NULL, NULL, "`5m`",
     "after a start or a takeover, a due disruptive step waits this long for an alert of its "
     "incident to be seen again (Alertmanager's retries bring a resolve sent while medic was "
     "down); then it is decided from the stored state, every guard checked again",
     NULL},
    {"safety", "maintenance", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "windows `{ nodes: HOSTLIST, start: TIME, end: TIME, reason: TEXT }` (RFC 3339 times; "
     "nodes a Slurm hostlist of inventory names, `gpu-[0001-0100,0200]`, or `~REGEX` for an "
     "anchored regular expression), or recurring ones `{ nodes, every: 'sunday 02:00-06:00', "
     "timezone: Europe/Berlin, reason }` (days sunday..saturday, comma-separated, or day or "
     "weekday; UTC unless a zone is named): disruptive steps on those nodes are held while a "
     "window lasts; `medic check config` warns about a window that covers no inventory node",
     NULL},
    {"safety", "quarantine", D_DOC, 0, 0, 0, NULL, NULL, "`{ incidents: 3, window: 7d }`",
     "a node whose incidents with repairs (a drain, power cycle or GPU reset; power limits do "
     "not count) reach `incidents` within `window` is "
     "quarantined: drained and left for a person (`medic node release`), on-call told once "
     "with its history; `off` turns it off. Quarantined nodes count against "
     "`max_disrupted_fraction`, not against `max_disruptive_in_flight`",
     NULL},
    {"safety", "health", D_DOC, 0, 0, 0, NULL, NULL,
     "`{ missing_gpus: 0, recovery_actions: [none], allow_pending_remap: false, "
     "allow_pending_retirement: false, slurm: true, bmc: true }`",
     "what a health check (a `verify` step, and the check before a resume) accepts: GPUs of the "
     "inventory's `gpus` that may be missing, the driver's recommended recovery actions that "
     "pass, whether a pending row remapping or page retirement passes (a failed remapping never "
     "does), and whether Slurm must say the node responds and its BMC that its power is on; "
     "`medic check config` warns about each loosening",
     NULL},
    {"safety", "group_caps", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "caps per topology group: `[{ label: rack, max_disrupted: 1 }, { label: partition, "
     "max_disrupted_fraction: 0.1 }, { nodes: HOSTLIST, max_disrupted: 1 }]`. `label` makes one "
     "group of each value of an inventory label (every rack its own), `nodes` one group of a "
     "Slurm hostlist; a disruptive step is held while its node's group already has as many "
     "disrupted nodes as the cap allows (the smaller of `max_disrupted` and the fraction of the "
     "group's inventory nodes, rounded down), as the fleet caps hold it; quarantined nodes count. "
     "Shown on the page and as `medic_group_disrupted_nodes`; `medic check config` warns about "
     "an entry that covers no node and a fraction that allows no node in a small group",
     NULL},
    {"safety", "maintenance_from_slurm", D_DOC, 0, 0, 0, NULL, NULL, "`false`",
     "Slurm as a source of maintenance: a node Slurm has in a maintenance reservation "
     "(`Flags=MAINT`, state `MAINT`) is in maintenance for medic too, its disruptive steps held "
     "as in a window; Slurm is asked every `slurm.read_interval` on a thread of its own "
     "(`scontrol -o show nodes`), a failed read keeps the last list, and "
     "`medic_slurm_maintenance_nodes` counts them. It fails closed: before the first read, or "
     "once the last success is over three intervals old, "
     "every disruptive step on a node with a Slurm node is held (and Slurm asked every 5 s)",
     NULL},
    {"safety", "held_notice", D_DOC, 0, 0, 0, NULL, NULL, "`15m`",
     "on-call hears of disruptive steps a fleet or group cap, a maintenance window, a cooldown "
     "or a budget held or suppressed (a broken node left in service) through "
     "`safety.storm.notifier`, batched: at most one message per this interval, listing each "
     "such incident once and why; a storm and a person's pause are told on their own. `off`: "
     "never",
     NULL},
    {NULL, "policies", D_DOC, 0, 0, 0, NULL, NULL, "the built-in policies",
     "[policies.md](policies.md); a file's policies replace the built-in ones", NULL},
    {"policies[]", "name", D_DOC, 0, 0, 0, NULL, NULL, "required",
     "letters, digits, `-`, `_`, `.`; unique across all files", NULL},
    {"policies[]", "match", D_DOC, 0, 0, 0, NULL, NULL, "required",
     "Alertmanager matchers (`{alertname=\"GPUXidError\", xid=~\"79|48\"}`), regexes anchored",
     NULL},
    {"policies[]", "when.risk_at_least", D_DOC, 0, 0, 0, NULL, NULL, "`0`",
     "the model's failure risk (0..1) needed to take the alert", NULL},
    {"policies[]", "when.risk_unknown", D_DOC, 0, 0, 0, NULL, NULL, "`act`",
     "`act` or `skip` when the risk could not be computed", NULL},
    {"policies[]", "when.recovery_action", D_DOC, 0, 0, 0, NULL, NULL, "any",
     "the driver's recommended recovery actions the policy takes (`none`, `gpu_reset`, "
     "`node_reboot`, `drain_p2p`, `drain_and_reset`, `bus_reset`), for the alert's GPU as the "
     "node's `medic agent` reports it; others fall through to the next policy",
     NULL},
    {"policies[]", "when.recovery_unknown", D_DOC, 0, 0, 0, NULL, NULL, "`skip`",
     "`act` or `skip` when the recovery action could not be read (no agent, a slow one)", NULL},
    {"policies[]", "cooldown", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "after this policy acted on a node, a new alert on that node is suppressed this long", NULL},
    {"policies[]", "max_actions_per_node", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "`{ count: N, window: DURATION }`: at most N disruptive actions of this policy per node "
     "within the window",
     NULL},
    {"policies[]", "steps", D_DOC, 0, 0, 0, NULL, NULL, "required",
     "1 to 16 steps `{ after: DURATION, action: NAME, PARAMETERS }`, each later than the one "
     "before; actions and their parameters: `medic policy actions`. `if_failed: true` on a "
     "step: it runs only when the step before it (an awaited one) did not succeed, and is "
     "recorded as not needed otherwise (`gpu_reset`, then `ipmi_power_cycle` if it failed). "
     "`approval: required|none` on a disruptive step overrides its policy's `approval` (drain "
     "unattended, power-cycle after a person's yes). `after_from: previous` on a step: its "
     "`after` counts from when the step before it ended (its outcome), not from the alert's "
     "start",
     NULL},
    {"policies[]", "verify_before_resume", D_DOC, 0, 0, 0, NULL, NULL, "`true`",
     "a resume of a node the incident disrupted waits for a health check (`verify`) to pass; "
     "a node that does not pass is quarantined, not resumed",
     NULL},
    {"policies[]", "on_resolved", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "steps decided when every alert of the incident resolved: `resume`, "
     "`restore_power_limit`, `notify` (no `after`)",
     NULL},
    {"policies[]", "continue", D_DOC, 0, 0, 0, NULL, NULL, "`false`",
     "keep evaluating the next policies after this one took the alert", NULL},
    {"policies[]", "dry_run", D_DOC, 0, 0, 0, NULL, NULL, "`false`",
     "this policy only ever decides `dry_run`, even in live mode", NULL},
    {"policies[]", "approval", D_DOC, 0, 0, 0, NULL, NULL, "as `mode` says",
     "`required`: a person approves each disruptive step first, also in `mode: live`; `none`: "
     "never asked, also in `mode: approve` (dry-run never asks); a step's own `approval` "
     "overrides it. A step waiting is decided `pending`; an approval runs exactly the action "
     "offered, or nothing",
     NULL},
    {"policies[]", "approval_timeout", D_DOC, 0, 0, 0, NULL, NULL, "`30m`",
     "a pending step not approved this long after it was decided expires, and never runs late",
     NULL},
    {NULL, "policy_files", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "more policy files, relative to this one", NULL},
    {NULL, "tls", D_CUSTOM, 0, 0, 0, NULL, NULL, NULL, NULL, load_tls},
    {"tls", "cert_file", D_DOC, 0, 0, 0, NULL, NULL, "none",
     "PEM certificate (chain); with `key_file`, medic serves HTTPS only", NULL},
    {"tls", "key_file", D_DOC, 0, 0, 0, NULL, NULL, "none", "PEM key, mode 0600", NULL},
};

#define DIRECTIVE_COUNT (sizeof(directives) / sizeof(directives[0]))

static void *field_at(struct loader *l, const struct directive *d)
{
    return (char *)l->config + d->offset;
}

/* ---- the loaders of single directives ---- */

static int load_listen(struct loader *l, const struct yaml_tree_node *n)
{
    int rc = yaml_fields_string(&l->f, n, "listen", &l->config->listen);
    const char *colon = rc ? NULL : strrchr(l->config->listen, ':');
    if (rc == 0 && (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
                    atoi(colon + 1) > 65535))
        rc = yaml_fields_fail(&l->f, n, "listen: expected HOST:PORT, got '%s'", l->config->listen);
    return rc;
}

static int load_mode(struct loader *l, const struct yaml_tree_node *n)
{
    struct medic_config *c = l->config;
    c->mode_line = n->line;
    c->mode_col = n->col;
    int rc = yaml_fields_scalar(&l->f, n, "mode");
    if (rc == 0 && strcmp(n->value, "dry-run") == 0)
        c->mode = MEDIC_MODE_DRY_RUN;
    else if (rc == 0 && strcmp(n->value, "live") == 0)
        c->mode = MEDIC_MODE_LIVE;
    else if (rc == 0 && strcmp(n->value, "approve") == 0)
        c->mode = MEDIC_MODE_APPROVE;
    else if (rc == 0)
        rc = yaml_fields_fail(&l->f, n, "mode: expected 'dry-run', 'approve' or 'live', got '%s'",
                              n->value);
    return rc;
}

const char *medic_mode_name(enum medic_mode m)
{
    return m == MEDIC_MODE_LIVE ? "live" : m == MEDIC_MODE_APPROVE ? "approve" : "dry-run";
}

static int load_log_level(struct loader *l, const struct yaml_tree_node *n)
{
    int rc = yaml_fields_scalar(&l->f, n, "log_level");
    if (rc == 0 && (l->config->log_level = medic_log_parse_level(n->value)) < 0)
        rc = yaml_fields_fail(&l->f, n, "log_level: expected debug, info, warn or error");
    return rc;
}

/* A path in the configuration, made relative to the file's own folder. */
static int read_path(struct loader *l, const struct yaml_tree_node *n, const char *key, char **out)
{
    char *text = NULL;
    int rc = yaml_fields_string(&l->f, n, key, &text);
    if (rc == 0 && !(*out = config__resolve_path(l->f.file, text)))
        rc = medic_error_set(l->f.err, MEDIC_E_NOMEM, "out of memory");
    free(text);
    return rc;
}

static int load_credentials_file(struct loader *l, const struct yaml_tree_node *n)
{
    struct medic_config *c = l->config;
    struct medic_error cerr = {0};
    int rc = read_path(l, n, "credentials_file", &c->credentials_file);
    if (rc == 0 && credentials_load(c->credentials_file, &c->credentials, &cerr))
        rc = yaml_fields_fail(&l->f, n, "credentials_file: %s", cerr.msg);
    return rc;
}

static int load_model_path(struct loader *l, const struct yaml_tree_node *n)
{
    struct medic_config *c = l->config;
    struct medic_error merr = {0};
    int rc = read_path(l, n, "path", &c->model_path);
    if (rc == 0 && (model_load(c->model_path, &c->model, &merr) ||
                    features_from_metadata(&c->model.file, c->model.D, &c->features, &merr)))
        rc = yaml_fields_fail(&l->f, n, "path: %s", merr.msg);
    return rc;
}

static int load_fleet_interval(struct loader *l, const struct yaml_tree_node *n)
{
    int64_t *v = &l->config->fleet_interval;
    if (n && n->kind == YAML_TREE_SCALAR && n->value && strcmp(n->value, "off") == 0) {
        *v = 0;
        return 0;
    }
    int rc = yaml_fields_duration(&l->f, n, "fleet_interval", v);
    if (rc == 0 && *v < SEC(1))
        rc = yaml_fields_fail(&l->f, n, "fleet_interval: at least 1s, or off");
    return rc;
}

static int load_tls(struct loader *l, const struct yaml_tree_node *n)
{
    static const char *const keys[] = {"cert_file", "key_file", NULL};
    int rc = yaml_fields_mapping(&l->f, n, "tls");
    if (rc == 0)
        rc = yaml_fields_known_keys(&l->f, n, "tls", keys);
    const struct yaml_tree_node *cert = rc ? NULL : yaml_tree_get(n, "cert_file");
    const struct yaml_tree_node *key = rc ? NULL : yaml_tree_get(n, "key_file");
    if (rc == 0 && (!cert || !key))
        rc = yaml_fields_fail(&l->f, n, "tls: needs both cert_file and key_file");
    if (rc == 0)
        rc = config__load_pem(l, cert, "cert_file", &l->config->tls_cert_pem);
    if (rc == 0)
        rc = config__read_secret(l, key, "key_file", &l->config->tls_key_pem);
    return rc;
}

/* One directive's value, by its type. */
static int load_value(struct loader *l, const struct directive *d, const struct yaml_tree_node *n)
{
    int rc;
    switch (d->type) {
    case D_STRING:
        return yaml_fields_string(&l->f, n, d->key, (char **)field_at(l, d));
    case D_PATH:
        return read_path(l, n, d->key, (char **)field_at(l, d));
    case D_HTTP_URL:
        rc = yaml_fields_string(&l->f, n, d->key, (char **)field_at(l, d));
        if (rc == 0 && strncmp(*(char **)field_at(l, d), "http", 4) != 0)
            rc = yaml_fields_fail(&l->f, n, "%s: expected http:// or https://", d->key);
        return rc;
    case D_DURATION: {
        int64_t *v = field_at(l, d);
        rc = yaml_fields_duration(&l->f, n, d->key, v);
        if (rc == 0 && d->max && (*v < d->min || *v > d->max))
            rc = yaml_fields_fail(&l->f, n, "%s: between %s and %s", d->key, d->min_text,
                                  d->max_text);
        else if (rc == 0 && *v < d->min)
            rc = yaml_fields_fail(&l->f, n, "%s: at least %s", d->key, d->min_text);
        return rc;
    }
    case D_SIZE:
        return yaml_fields_size(&l->f, n, d->key, (size_t)d->min, (size_t)d->max,
                                (size_t *)field_at(l, d));
    case D_LISTEN:
    case D_MODE:
    case D_LOG_LEVEL:
    case D_CUSTOM:
        return d->load(l, n);
    case D_DOC:
        return 0;
    }
    MEDIC_BUG("a directive of no type");
}

/* A section read row by row (not by a loader of its own). */
static int table_section(const char *name)
{
    int rows = 0;
    for (size_t i = 0; i < DIRECTIVE_COUNT; i++) {
        const struct directive *d = &directives[i];
        if (!d->section && strcmp(d->key, name) == 0)
            return 0; /* a whole-section loader */
        rows += d->section && strcmp(d->section, name) == 0;
    }
    return rows > 0;
}

/* Every key is a directive (or one of extra_keys), every table section a
 * mapping of its own directives only. */
static int check_keys(struct loader *l, const struct yaml_tree_node *root,
                      const char *const *extra_keys)
{
    for (size_t i = 0; i < root->count; i++) {
        const char *key = root->keys[i];
        int known = 0;
        for (size_t k = 0; k < DIRECTIVE_COUNT && !known; k++)
            known =
                strcmp(directives[k].section ? directives[k].section : directives[k].key, key) == 0;
        for (const char *const *e = extra_keys; e && *e && !known; e++)
            known = strcmp(key, *e) == 0;
        struct yaml_tree_node at = {.line = root->key_lines[i], .col = root->key_cols[i]};
        if (!known)
            return yaml_fields_fail(&l->f, &at, "unknown key '%s'", key);
        if (!table_section(key))
            continue;
        const struct yaml_tree_node *section = root->items[i];
        int rc = yaml_fields_mapping(&l->f, section, key);
        if (rc)
            return rc;
        for (size_t s = 0; s < section->count; s++) {
            int ok = 0;
            for (size_t k = 0; k < DIRECTIVE_COUNT && !ok; k++)
                ok = directives[k].section && strcmp(directives[k].section, key) == 0 &&
                     strcmp(directives[k].key, section->keys[s]) == 0;
            struct yaml_tree_node sat = {.line = section->key_lines[s],
                                         .col = section->key_cols[s]};
            if (!ok)
                return yaml_fields_fail(&l->f, &sat, "unknown key '%s' in %s", section->keys[s],
                                        key);
        }
    }
    return 0;
}

int config__load_directives(struct loader *l, const struct yaml_tree_node *root,
                            const char *const *extra_keys)
{
    int rc = yaml_fields_mapping(&l->f, root, "the configuration");
    if (rc == 0)
        rc = check_keys(l, root, extra_keys);
    for (size_t i = 0; i < DIRECTIVE_COUNT && rc == 0; i++) {
        const struct directive *d = &directives[i];
        if (d->type == D_DOC || (d->section && !table_section(d->section)))
            continue;
        const struct yaml_tree_node *n =
            d->section ? yaml_tree_get(yaml_tree_get(root, d->section), d->key)
                       : yaml_tree_get(root, d->key);
        if (n)
            rc = load_value(l, d, n);
    }
    return rc;
}

/* A default the table states as one literal (`5s`), not in words. */
static int literal_default(const struct directive *d, char *out, size_t size)
{
    const char *f = d->fallback;
    size_t len = f ? strlen(f) : 0;
    if (d->type == D_DOC || len < 3 || f[0] != '`' || f[len - 1] != '`' ||
        memchr(f + 1, '`', len - 2) || len - 2 >= size)
        return 0;
    memcpy(out, f + 1, len - 2);
    out[len - 2] = 0;
    return 1;
}

int config__apply_defaults(struct medic_config *config, struct medic_error *err)
{
    struct loader l = {{"(the directive table)", err}, config, NULL};
    int rc = 0;
    for (size_t i = 0; i < DIRECTIVE_COUNT && rc == 0; i++) {
        const struct directive *d = &directives[i];
        char literal[128];
        if (!literal_default(d, literal, sizeof(literal)))
            continue;
        struct yaml_tree_node n = {.kind = YAML_TREE_SCALAR, .value = literal};
        rc = load_value(&l, d, &n);
    }
    config->audit_path_set = 0; /* the default path leaves audit.url free to replace it */
    return rc;
}

int medic_config_reference(struct medic_buf *out)
{
    medic_buf_puts(out, "| key | default | |\n|---|---|---|\n");
    for (size_t i = 0; i < DIRECTIVE_COUNT; i++) {
        const struct directive *d = &directives[i];
        if (!d->doc)
            continue; /* a section whose keys have rows of their own */
        medic_buf_printf(out, "| `%s%s%s` | %s | %s", d->section ? d->section : "",
                         d->section ? "." : "", d->key, d->fallback, d->doc);
        if (d->min_text && d->max_text)
            medic_buf_printf(out, " (%s..%s)", d->min_text, d->max_text);
        else if (d->min_text)
            medic_buf_printf(out, " (at least %s)", d->min_text);
        medic_buf_puts(out, " |\n");
    }
    return out->error;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's directives in one typed table: each key's type,
 * where its value goes, its bounds, its default, when a change takes
 * effect and its doc line. The table drives the loader (which keys exist,
 * how each value is read and bounded, in which order), the defaults, and
 * the reference in docs/configuration.md and medic.yaml(5) (`medic check
 * config --reference`), whose defaults and bounds are printed from the
 * typed values medic runs with, never written a second time. Sections with
 * a structure of their own (auth, tls, inventory, notifiers, safety,
 * policies) have a loader of their own and rows that document their keys
 * (with their typed defaults where one value says them). */
#include "directives.h"
#include "audit.h"
#include "log.h"
#include "timeutil.h"
#include "yaml_tree.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(field) offsetof(struct medic_config, field)
#define MS(n) ((int64_t)(n)*MEDIC_NS_PER_MS)
#define SEC(n) ((int64_t)(n)*MEDIC_NS_PER_SEC)

/* The rows' parts. A key with a value of one type at a field of struct
 * medic_config, read by the table (ROW); a key read by its row's load()
 * (KEY, or ROW with FN); a key its section's loader reads, documented
 * here (DOC; DOC_TYPED with the field its default is shown from). A
 * typed row without DEFAULT_ takes the default its module's *_default()
 * set (the receiver's limits, the audit store's options, the safety
 * settings): the reference shows it from there, never restated here. */
#define ROW(sec, name, t, field) .section = (sec), .key = (name), .type = (t), .at = AT(field)
#define KEY(sec, name) .section = (sec), .key = (name)
#define DOC(sec, name) .section = (sec), .key = (name), .read = READ_SECTION
#define DOC_TYPED(sec, name, t, field) DOC(sec, name), .type = (t), .at = AT(field)
#define FN(fn) .read = READ_FN, .load = (fn)
#define BOUNDS(lo, hi) .min = (lo), .max = (hi)
#define DEFAULT_NUMBER(n) .has_default = 1, .number = (n)
#define DEFAULT_TEXT(s) .has_default = 1, .text = (s)
#define SHOWN(fn) .show = (fn)
#define SAID(w) .words = (w)
#define AT_RESTART .at_restart = 1

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
const struct directive config__directives[] = {
    {ROW(NULL, "listen", D_STRING, listen), FN(load_listen), DEFAULT_TEXT("127.0.0.1:9799"),
     AT_RESTART, .doc = "`HOST:PORT`; `[::1]:9799` for IPv6"},
    {ROW(NULL, "mode", D_MODE, mode), FN(load_mode), DEFAULT_NUMBER(MEDIC_MODE_DRY_RUN),
     .doc =
         "`dry-run`, `approve` or `live`. `approve` acts like `live` but holds each disruptive "
         "step for a person's approval (a policy's `approval` may say otherwise). `medic serve`, "
         "`medic check config` and a reload refuse `live` and `approve` unless the webhook has "
         "authentication, and refuse disruptive policies there without `safety.storm.notifier` "
         "(errors at the `mode:` or `safety:` line)"},
    {ROW(NULL, "log_level", D_LOG_LEVEL, log_level), FN(load_log_level),
     DEFAULT_NUMBER(MEDIC_LOG_INFO), .doc = "`debug`, `info`, `warn`, `error`"},
    {ROW(NULL, "external_url", D_HTTP_URL, external_url),
     .doc = "medic's URL as on-call reaches it (`https://medic.example.org`): messages to on-call "
            "link to what medic decided"},
    {ROW("audit", "path", D_STRING, audit_path), FN(load_audit_path), DEFAULT_TEXT("./medic.db"),
     AT_RESTART, .doc = "the SQLite database; created and migrated at start"},
    {KEY("audit", "url"), FN(load_audit_url), AT_RESTART,
     .doc = "`postgresql://USER:PASSWORD@HOST:PORT/DB` instead of `path`: the audit log in "
            "PostgreSQL, "
            "which several replicas share ([ha.md](ha.md)); schema created and migrated at start"},
    {ROW("audit", "busy_timeout", D_DURATION, audit_busy_timeout), BOUNDS(0, SEC(8)), AT_RESTART,
     .doc =
         "how long a commit waits for a lock held by another process before the request gets 503, "
         "below the 10 s a shutdown waits for webhooks in flight"},
    {ROW("audit", "max_pending", D_COUNT, audit_max_pending), BOUNDS(1, 1000000), AT_RESTART,
     .doc = "write requests queued for the audit writer before new ones get 503"},
    {ROW("audit", "writers", D_COUNT, audit_writers), BOUNDS(1, 17),
     SAID("1 and a quarter of the cores, at most 5"), AT_RESTART,
     .doc =
         "connections that write a PostgreSQL audit log: one writes decisions, actions and "
         "incident "
         "changes in their order, the others store notifications side by side (each Alertmanager "
         "group on one of them, in order); 1: that one stores them too. SQLite has one writer"},
    {ROW("ha", "replica", D_STRING, ha_replica), SAID("this host's `HOSTNAME-PID`"), AT_RESTART,
     .doc = "this replica's name in the lease; unique among the replicas sharing `audit.url`"},
    {ROW("ha", "lease", D_DURATION, ha_lease), BOUNDS(SEC(1), SEC(300)), DEFAULT_NUMBER(SEC(5)),
     AT_RESTART,
     .doc = "how long a leader's lease lasts unrenewed: another replica takes over this long after "
            "the leader stops renewing it (renewed every third of it)"},
    {KEY(NULL, "auth"), FN(config__load_auth)},
    {DOC("auth", "webhook_bearer_token_file"),
     .doc = "file holding the token `POST /webhook` requires (`Authorization: Bearer ...`)"},
    {DOC("auth", "webhook_basic_auth"),
     .doc = "`{ username: U, password_file: F }`; either or both of bearer and basic may be set"},
    {DOC("auth", "read_bearer_token_file"), SAID("none (live: the webhook's)"),
     .doc = "guards `GET /metrics`, `GET /api/v1/*`, `POST /api/v1/dry-run` and the on-call page "
            "(`GET /`, `GET /nodes/NAME`); in live mode, when "
            "no read credentials are set, the webhook's guard them"},
    {DOC("auth", "read_basic_auth"), SAID("none (live: the webhook's)"),
     .doc = "as `read_bearer_token_file`, with basic auth"},
    {DOC("auth", "admin_bearer_token_file"), SAID("none (live: the webhook's)"),
     .doc =
         "guards `POST /-/reload` and the people's requests (`POST /api/v1/approvals/ID`, the "
         "pause, "
         "a release, the page's forms), and reads what the read credentials may; in live and "
         "approve mode, when no admin credentials are set, the webhook's guard the reload only: a "
         "person's request always needs an admin credential of its own or an approver's token, "
         "never the webhook's and never none"},
    {DOC("auth", "admin_basic_auth"), SAID("none (live: the webhook's)"),
     .doc = "as `admin_bearer_token_file`, with basic auth"},
    {DOC("auth", "approvers"),
     .doc =
         "`[{ name: alice, token_file: F }, ...]`: people who may answer steps waiting for "
         "approval "
         "(`POST /api/v1/approvals/ID`, `medic approve`), each with a bearer token of their own, "
         "so "
         "that the audit log records who answered; the admin credentials answer too, as `admin` or "
         "their basic-auth user"},
    {ROW("limits", "max_body_bytes", D_BYTES, limits.max_body_bytes),
     BOUNDS(1024, RECEIVER_WIDEST_BODY_BYTES), .doc = "larger bodies get 413"},
    {ROW("limits", "max_alerts", D_COUNT, limits.max_alerts), BOUNDS(1, RECEIVER_WIDEST_ALERTS),
     .doc = "alerts in one notification"},
    {ROW("limits", "max_labels", D_COUNT, limits.max_labels), BOUNDS(1, RECEIVER_WIDEST_LABELS),
     .doc = "labels or annotations in one set"},
    {ROW("limits", "max_label_value_bytes", D_BYTES, limits.max_label_value_bytes),
     BOUNDS(16, RECEIVER_WIDEST_VALUE_BYTES), .doc = "one label value"},
    {ROW("limits", "max_annotation_value_bytes", D_BYTES, limits.max_annotation_value_bytes),
     BOUNDS(16, RECEIVER_WIDEST_VALUE_BYTES), .doc = "one annotation value"},
    {ROW("limits", "max_connections", D_COUNT, max_connections), BOUNDS(1, 65536),
     DEFAULT_NUMBER(512), AT_RESTART, .doc = "concurrent HTTP connections"},
    {ROW("limits", "max_connections_per_address", D_COUNT, max_connections_per_address),
     BOUNDS(1, 65536), DEFAULT_NUMBER(64), AT_RESTART,
     .doc = "concurrent HTTP connections from one client address; more are closed at once, so that "
            "one "
            "client cannot take every connection"},
    {ROW("limits", "request_timeout", D_DURATION, request_timeout), BOUNDS(SEC(1), SEC(600)),
     DEFAULT_NUMBER(SEC(10)), AT_RESTART,
     .doc =
         "a request's header and body must arrive within this, however the client paces its bytes; "
         "a connection past it is closed (`medic_http_request_deadline_closed_total`)"},
    {KEY(NULL, "credentials_file"), FN(load_credentials_file),
     .doc =
         "secrets for BMCs, agents and notifiers ([actions.md](actions.md)); refused unless mode "
         "0600 or 0400; `medic check config` warns when the inventory has a BMC or agent "
         "credentials and none is set"},
    {KEY(NULL, "inventory"), FN(config__load_inventory)},
    {DOC("inventory", "node_labels"), SHOWN(config__show_node_labels),
     .doc =
         "the first label present names an alert's node; a `:port` suffix (and IPv6 brackets) is "
         "removed"},
    {DOC("inventory", "file"), .doc = "the inventory as a file (relative to this one); see below"},
    {DOC("inventory", "nodes"), .doc = "the inventory inline; see below"},
    {ROW("prometheus", "url", D_HTTP_URL, prometheus_url),
     .doc = "where the model's telemetry is read; without it alerts are not scored"},
    {ROW("prometheus", "timeout", D_DURATION, prometheus_timeout), BOUNDS(MS(10), SEC(60)),
     DEFAULT_NUMBER(SEC(2)),
     .doc =
         "the time budget of one round's risk lookups; past it risks are unknown, with the reason"},
    {KEY("model", "path"), FN(load_model_path), SAID("the built-in model"),
     .doc = "a safetensors model file ([model.md](model.md)); needs `prometheus.url`"},
    {ROW("model", "fleet_interval", D_DURATION, fleet_interval), FN(load_fleet_interval),
     DEFAULT_NUMBER(SEC(30)),
     .doc =
         "with `prometheus.url`, score every GPU Prometheus knows this often (and as each step of "
         "the model's window begins, when this is shorter than the step), for "
         "`medic_gpu_failure_risk` and for alerts, which then take their GPU's risk without asking "
         "Prometheus; a cycle may take this long (or `prometheus.timeout` if longer). At least 1s, "
         "or `off`: each alert's round then fetches its GPUs' whole windows itself"},
    {ROW("slurm", "conf", D_PATH, slurm_conf), SAID("Slurm's default"),
     .doc = "`SLURM_CONF` for scontrol; `medic check config` warns when it cannot be read on its "
            "host"},
    {ROW("slurm", "scontrol", D_STRING, scontrol), DEFAULT_TEXT("scontrol"),
     .doc =
         "the program for drain and resume; `medic check config` warns about a path that cannot be "
         "run on its host"},
    {ROW("slurm", "read_interval", D_DURATION, slurm_read_interval), BOUNDS(SEC(1), SEC(600)),
     DEFAULT_NUMBER(SEC(30)),
     .doc =
         "how often medic reads Slurm's nodes (one `scontrol show nodes`, on a thread of its own), "
         "outside dry-run or with `safety.maintenance_from_slurm`: for maintenance reservations, "
         "and "
         "to reconcile the drains medic holds with what Slurm shows (a drain someone resumed or "
         "replaced is let go: [policies.md](policies.md#node-states-above-the-incidents)); while a "
         "read fails, every 5 s; a list older than three intervals is not used"},
    {KEY(NULL, "notifiers"), FN(config__load_notifiers),
     .doc =
         "`NAME: { type, url, from, to, routing_key, credentials }`; type is `webhook`, `slack`, "
         "`pagerduty` or `smtp` ([actions.md](actions.md)); a secret `url` or `routing_key` may "
         "stay in the credentials file, under the notifier's `credentials` (see Secrets below)"},
    {ROW("engine", "tick_interval", D_DURATION, engine_tick_interval), BOUNDS(MS(10), SEC(3600)),
     DEFAULT_NUMBER(SEC(5)), AT_RESTART, .doc = "how often the escalation scheduler runs"},
    {DOC(NULL, "safety"), SAID("see policies.md"),
     .doc = "caps, storm breaker, stale alerts, maintenance windows ([policies.md](policies.md))"},
    {DOC_TYPED("safety", "max_disruptive_in_flight", D_COUNT,
               policies.safety.max_disruptive_in_flight),
     .doc = "nodes medic holds disrupted at once, fleet-wide (drained, power-limited, or with a "
            "disruptive action in flight); a step over it is held until a node is given back"},
    {DOC_TYPED("safety", "max_disrupted_fraction", D_REAL, policies.safety.max_disrupted_fraction),
     .doc = "the same cap as a fraction of the inventory's nodes (at least one node)"},
    {DOC_TYPED("safety", "storm.max_alerting_nodes", D_COUNT,
               policies.safety.storm_max_alerting_nodes),
     .doc =
         "more nodes alerting within `storm.window` is a storm: disruptive steps are held, on-call "
         "is told once when it starts and once when it passes"},
    {DOC_TYPED("safety", "storm.window", D_DURATION, policies.safety.storm_window),
     .doc = "the window the storm breaker counts alerting nodes in"},
    {DOC_TYPED("safety", "storm.notifier", D_STRING, policies.safety.storm_notifier),
     .doc = "the notifier on-call hears from medic itself through (storms, stopped incidents, "
            "interrupted actions); required with live disruptive policies"},
    {DOC_TYPED("safety", "max_alert_age", D_DURATION, policies.safety.max_alert_age),
     .doc = "an alert that started longer ago never triggers a disruptive step (a held step is "
            "dropped "
            "then)"},
    {DOC_TYPED("safety", "alert_expiry", D_DURATION, policies.safety.alert_expiry),
     .doc = "an alert not re-sent this long is taken as resolved (its resolve was lost); keep it "
            "above "
            "every route's `repeat_interval`"},
    {DOC_TYPED("safety", "restart_grace", D_DURATION, policies.safety.restart_grace),
     .doc =
         "after a start or a takeover, a due disruptive step waits this long for an alert of its "
         "incident to be seen again (Alertmanager's retries bring a resolve sent while medic was "
         "down); then it is decided from the stored state, every guard checked again"},
    {DOC("safety", "maintenance"),
     .doc =
         "windows `{ nodes: HOSTLIST, start: TIME, end: TIME, reason: TEXT }` (RFC 3339 times; "
         "nodes a Slurm hostlist of inventory names, `gpu-[0001-0100,0200]`, or `~REGEX` for an "
         "anchored regular expression), or recurring ones `{ nodes, every: 'sunday 02:00-06:00', "
         "timezone: Europe/Berlin, reason }` (days sunday..saturday, comma-separated, or day or "
         "weekday; UTC unless a zone is named): disruptive steps on those nodes are held while a "
         "window lasts; `medic check config` warns about a window that covers no inventory node"},
    {DOC("safety", "quarantine"), SHOWN(config__show_quarantine),
     .doc =
         "a node whose incidents with repairs (a drain, power cycle or GPU reset; power limits do "
         "not count) reach `incidents` within `window` is "
         "quarantined: drained and left for a person (`medic node release`), on-call told once "
         "with its history; `off` turns it off. Quarantined nodes count against "
         "`max_disrupted_fraction`, not against `max_disruptive_in_flight`"},
    {DOC("safety", "health"), SHOWN(config__show_health),
     .doc =
         "what a health check (a `verify` step, and the check before a resume) accepts: GPUs of "
         "the "
         "inventory's `gpus` that may be missing, the driver's recommended recovery actions that "
         "pass, whether a pending row remapping or page retirement passes (a failed remapping "
         "never "
         "does), and whether Slurm must say the node responds and its BMC that its power is on; "
         "`medic check config` warns about each loosening"},
    {DOC("safety", "group_caps"),
     .doc =
         "caps per topology group: `[{ label: rack, max_disrupted: 1 }, { label: partition, "
         "max_disrupted_fraction: 0.1 }, { nodes: HOSTLIST, max_disrupted: 1 }]`. `label` makes "
         "one "
         "group of each value of an inventory label (every rack its own), `nodes` one group of a "
         "Slurm hostlist; a disruptive step is held while its node's group already has as many "
         "disrupted nodes as the cap allows (the smaller of `max_disrupted` and the fraction of "
         "the "
         "group's inventory nodes, rounded down), as the fleet caps hold it; quarantined nodes "
         "count. "
         "Shown on the page and as `medic_group_disrupted_nodes`; `medic check config` warns about "
         "an entry that covers no node and a fraction that allows no node in a small group"},
    {DOC_TYPED("safety", "maintenance_from_slurm", D_BOOL, policies.safety.maintenance_from_slurm),
     .doc =
         "Slurm as a source of maintenance: a node Slurm has in a maintenance reservation "
         "(`Flags=MAINT`, state `MAINT`) is in maintenance for medic too, its disruptive steps "
         "held "
         "as in a window; Slurm is asked every `slurm.read_interval` on a thread of its own "
         "(`scontrol -o show nodes`), a failed read keeps the last list, and "
         "`medic_slurm_maintenance_nodes` counts them. It fails closed: before the first read, or "
         "once the last success is over three intervals old, "
         "every disruptive step on a node with a Slurm node is held (and Slurm asked every 5 s)"},
    {DOC_TYPED("safety", "held_notice", D_DURATION, policies.safety.held_notice),
     .doc =
         "on-call hears of disruptive steps a fleet or group cap, a maintenance window, a cooldown "
         "or a budget held or suppressed (a broken node left in service) through "
         "`safety.storm.notifier`, batched: at most one message per this interval, listing each "
         "such incident once and why; a storm and a person's pause are told on their own. `off`: "
         "never"},
    {DOC(NULL, "policies"), SAID("the built-in policies"),
     .doc = "[policies.md](policies.md); a file's policies replace the built-in ones"},
    {DOC("policies[]", "name"), SAID("required"),
     .doc = "letters, digits, `-`, `_`, `.`; unique across all files"},
    {DOC("policies[]", "match"), SAID("required"),
     .doc =
         "Alertmanager matchers (`{alertname=\"GPUXidError\", xid=~\"79|48\"}`), regexes anchored"},
    {DOC("policies[]", "when.risk_at_least"), SAID("`0`"),
     .doc = "the model's failure risk (0..1) needed to take the alert"},
    {DOC("policies[]", "when.risk_unknown"), SAID("`act`"),
     .doc = "`act` or `skip` when the risk could not be computed"},
    {DOC("policies[]", "when.recovery_action"), SAID("any"),
     .doc =
         "the driver's recommended recovery actions the policy takes (`none`, `gpu_reset`, "
         "`node_reboot`, `drain_p2p`, `drain_and_reset`, `bus_reset`), for the alert's GPU as the "
         "node's `medic agent` reports it; others fall through to the next policy"},
    {DOC("policies[]", "when.recovery_unknown"), SAID("`skip`"),
     .doc = "`act` or `skip` when the recovery action could not be read (no agent, a slow one)"},
    {DOC("policies[]", "cooldown"),
     .doc = "after this policy acted on a node, a new alert on that node is suppressed this long"},
    {DOC("policies[]", "max_actions_per_node"),
     .doc =
         "`{ count: N, window: DURATION }`: at most N disruptive actions of this policy per node "
         "within the window"},
    {DOC("policies[]", "steps"), SAID("required"),
     .doc =
         "1 to 16 steps `{ after: DURATION, action: NAME, PARAMETERS }`, each later than the one "
         "before; actions and their parameters: `medic policy actions`. `if_failed: true` on a "
         "step: it runs only when the step before it (an awaited one) did not succeed, and is "
         "recorded as not needed otherwise (`gpu_reset`, then `ipmi_power_cycle` if it failed). "
         "`approval: required|none` on a disruptive step overrides its policy's `approval` (drain "
         "unattended, power-cycle after a person's yes). `after_from: previous` on a step: its "
         "`after` counts from when the step before it ended (its outcome), not from the alert's "
         "start"},
    {DOC("policies[]", "verify_before_resume"), SAID("`true`"),
     .doc =
         "a resume of a node the incident disrupted waits for a health check (`verify`) to pass; "
         "a node that does not pass is quarantined, not resumed"},
    {DOC("policies[]", "on_resolved"),
     .doc = "steps decided when every alert of the incident resolved: `resume`, "
            "`restore_power_limit`, `notify` (no `after`)"},
    {DOC("policies[]", "continue"), SAID("`false`"),
     .doc = "keep evaluating the next policies after this one took the alert"},
    {DOC("policies[]", "dry_run"), SAID("`false`"),
     .doc = "this policy only ever decides `dry_run`, even in live mode"},
    {DOC("policies[]", "approval"), SAID("as `mode` says"),
     .doc =
         "`required`: a person approves each disruptive step first, also in `mode: live`; `none`: "
         "never asked, also in `mode: approve` (dry-run never asks); a step's own `approval` "
         "overrides it. A step waiting is decided `pending`; an approval runs exactly the action "
         "offered, or nothing"},
    {DOC("policies[]", "approval_timeout"), SAID("`30m`"),
     .doc =
         "a pending step not approved this long after it was decided expires, and never runs late"},
    {DOC(NULL, "policy_files"), .doc = "more policy files, relative to this one"},
    {KEY(NULL, "tls"), FN(load_tls), AT_RESTART},
    {DOC("tls", "cert_file"), AT_RESTART,
     .doc = "PEM certificate (chain); with `key_file`, medic serves HTTPS only"},
    {DOC("tls", "key_file"), AT_RESTART, .doc = "PEM key, mode 0600"},
};

const size_t config__directive_count = sizeof(config__directives) / sizeof(config__directives[0]);

static void *field_at(struct loader *l, const struct directive *d)
{
    return (char *)l->config + d->at;
}

const void *config__field(const struct medic_config *c, const struct directive *d)
{
    return (const char *)c + d->at;
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

char *config__number_text(const struct directive *d, int64_t v, char *out, size_t size)
{
    if (d->type == D_DURATION)
        return medic_duration_format(v, out, size);
    if (d->type == D_BYTES && v >= 1024 * 1024 && v % (1024 * 1024) == 0)
        snprintf(out, size, "%lldMiB", (long long)(v / (1024 * 1024)));
    else if (d->type == D_BYTES && v >= 1024 && v % 1024 == 0)
        snprintf(out, size, "%lldKiB", (long long)(v / 1024));
    else
        snprintf(out, size, "%lld", (long long)v);
    return out;
}

/* One directive's value, read by its type. */
static int load_value(struct loader *l, const struct directive *d, const struct yaml_tree_node *n)
{
    if (d->read == READ_FN)
        return d->load(l, n);
    int rc;
    char lo[32], hi[32];
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
            rc = yaml_fields_fail(&l->f, n, "%s: between %s and %s", d->key,
                                  config__number_text(d, d->min, lo, sizeof(lo)),
                                  config__number_text(d, d->max, hi, sizeof(hi)));
        else if (rc == 0 && *v < d->min)
            rc = yaml_fields_fail(&l->f, n, "%s: at least %s", d->key,
                                  config__number_text(d, d->min, lo, sizeof(lo)));
        return rc;
    }
    case D_COUNT:
    case D_BYTES:
        return yaml_fields_size(&l->f, n, d->key, (size_t)d->min, (size_t)d->max,
                                (size_t *)field_at(l, d));
    case D_NONE:
    case D_REAL:
    case D_BOOL:
    case D_MODE:
    case D_LOG_LEVEL:
        break; /* read by a loader of their own */
    }
    MEDIC_BUG("a directive the table reads has a type it cannot read");
}

/* A section read row by row (not by a loader of its own). */
static int table_section(const char *name)
{
    int rows = 0;
    for (size_t i = 0; i < config__directive_count; i++) {
        const struct directive *d = &config__directives[i];
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
        for (size_t k = 0; k < config__directive_count && !known; k++)
            known = strcmp(config__directives[k].section ? config__directives[k].section
                                                         : config__directives[k].key,
                           key) == 0;
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
            for (size_t k = 0; k < config__directive_count && !ok; k++)
                ok = config__directives[k].section &&
                     strcmp(config__directives[k].section, key) == 0 &&
                     strcmp(config__directives[k].key, section->keys[s]) == 0;
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
    for (size_t i = 0; i < config__directive_count && rc == 0; i++) {
        const struct directive *d = &config__directives[i];
        if (d->read == READ_SECTION || (d->section && !table_section(d->section)))
            continue;
        const struct yaml_tree_node *n =
            d->section ? yaml_tree_get(yaml_tree_get(root, d->section), d->key)
                       : yaml_tree_get(root, d->key);
        if (n)
            rc = load_value(l, d, n);
    }
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* medic's configuration file (YAML): parsed into a fresh struct and
 * validated all-or-nothing; errors are "FILE:LINE:COL: message". Secrets
 * named by *_file keys are read at load time, so a reload re-reads them.
 *
 * The daemon runs on immutable snapshots: a loaded configuration is
 * published in a struct config_slot by swapping one reference-counted
 * pointer; every thread takes a reference for the work at hand (a round,
 * an action, a request) and drops it after, so no lock is ever held while
 * a thread talks to Prometheus, a BMC or the disk. */
#ifndef MEDIC_CONFIG_H
#define MEDIC_CONFIG_H

#include "buf.h"
#include "credentials.h"
#include "feature_spec.h"
#include "lstm.h"
#include "error.h"
#include "inventory.h"
#include "payload.h"
#include "policy.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* dry-run: acts on nothing; live: acts; approve: acts, with a person's
 * approval first for disruptive steps (a policy's approval may say
 * otherwise). */
enum medic_mode { MEDIC_MODE_DRY_RUN, MEDIC_MODE_LIVE, MEDIC_MODE_APPROVE };
/* Whether medic acts in mode m (live or approve). */
static inline int medic_mode_acts(enum medic_mode m)
{
    return m != MEDIC_MODE_DRY_RUN;
}
/* "dry-run", "live" or "approve". */
const char *medic_mode_name(enum medic_mode m);

/* Credentials for one class of endpoints; empty when not configured. */
struct medic_credentials {
    char *bearer_token;
    char *basic_username;
    char *basic_password;
};

/* auth.approvers: people who may answer steps waiting for approval, each
 * by a bearer token of their own (struct receiver_approver's layout). */
struct medic_approver {
    const char *name;
    const char *token;
};
#define MEDIC_MAX_APPROVERS 64

#define MEDIC_MAX_NODE_LABELS 16
#define MEDIC_MAX_NOTIFIERS 64
#define MEDIC_MAX_POLICY_FILES 64

enum medic_notifier_type {
    MEDIC_NOTIFIER_WEBHOOK,
    MEDIC_NOTIFIER_SLACK,
    MEDIC_NOTIFIER_PAGERDUTY,
    MEDIC_NOTIFIER_SMTP
};

/* Where notify steps send: a generic JSON webhook, a Slack-compatible
 * incoming webhook, PagerDuty's Events API v2, or mail over SMTP. */
struct medic_notifier {
    char *name;
    enum medic_notifier_type type;
    char *url;
    char *from;   /* smtp */
    char *to[16]; /* smtp */
    size_t to_count;
    char *routing_key; /* pagerduty; or the token of `credentials` */
    char *credentials; /* a name in the credentials file: token, or username/password */
};

struct medic_config {
    char *source; /* the file, or "(built-in defaults)" */
    char *listen; /* host:port */
    enum medic_mode mode;
    char *audit_path; /* a path, or a postgresql:// URL (audit.url) */
    int audit_path_set;
    int64_t audit_busy_timeout; /* ns */
    size_t audit_max_pending;
    size_t audit_writers; /* 0: as many as the machine's cores suggest */
    char *ha_replica;     /* NULL: HOSTNAME-PID */
    int64_t ha_lease;     /* ns */
    struct medic_credentials webhook_auth;
    struct medic_credentials read_auth;
    struct medic_credentials admin_auth;
    struct medic_approver approvers[MEDIC_MAX_APPROVERS];
    size_t approver_count;
    char *tls_cert_pem;
    char *tls_key_pem;
    struct receiver_limits limits;
    size_t max_connections;
    size_t max_connections_per_address;
    int64_t request_timeout; /* ns */
    char *node_labels[MEDIC_MAX_NODE_LABELS];
    size_t node_label_count;
    int log_level;
    char *inventory_file; /* NULL: no inventory, so no disruptive action */
    struct inventory inventory;
    struct medic_notifier notifiers[MEDIC_MAX_NOTIFIERS];
    size_t notifier_count;
    struct policy_set policies; /* inline and from policy_files */
    char *credentials_file;
    struct credentials credentials;
    char *slurm_conf;             /* SLURM_CONF for scontrol; NULL: Slurm's default */
    char *scontrol;               /* the scontrol program; NULL: "scontrol" in PATH */
    int64_t slurm_read_interval;  /* how often Slurm's nodes are read (engine_slurm_view) */
    int64_t engine_tick_interval; /* how often the escalation scheduler runs */
    char *model_path;             /* NULL: the built-in model */
    struct model model;           /* the file's, or the built-in one: always loaded */
    struct feature_spec features;
    int64_t fleet_interval;     /* ns, when prometheus_url is set; 0: off */
    char *external_url;         /* medic as on-call reaches it, for links in messages */
    char *prometheus_url;       /* where the model's telemetry is read */
    int64_t prometheus_timeout; /* ns, per query */
    char hash[65]; /* SHA-256 of the file's bytes, with the files it names ("" for the defaults) */
    /* SHA-256 of what decides, the same on every replica of one fleet: the
     * file's mode, engine, inventory, model, notifiers, policies,
     * prometheus and safety (as parsed, mapping keys in order) and the
     * files it names; not listen, ha, tls, audit, auth, limits, log_level
     * or slurm (paths on each host), which may differ from replica to
     * replica ("" for the defaults) */
    char policy_hash[65];
    int mode_line, mode_col;   /* where `mode:` was set (0: not in the file) */
    int storm_line, storm_col; /* where `safety:` was set */
    atomic_int refs;           /* references to a published snapshot */
};

/* Fills config with the embedded defaults: listen 127.0.0.1:9799, audit
 * ./medic.db, mode dry-run, node labels node, Hostname, instance, the
 * built-in policies and model. */
int medic_config_defaults(struct medic_config *config);

/* Loads path into config (a fresh struct). On error config is released
 * and err holds "FILE:LINE:COL: message". */
int medic_config_load(const char *path, struct medic_config *config, struct medic_error *err);

/* Loads a configuration from an already parsed document whose other keys
 * (extra_keys, NULL-terminated) belong to the caller, such as a policy test
 * file's `tests`. */
int medic_config_from_tree(const char *file, const struct yaml_tree_node *root,
                           const char *const *extra_keys, struct medic_config *config,
                           struct medic_error *err);

void medic_config_release(struct medic_config *config);

/* The rules for a configuration `medic serve` runs with, beyond validity
 * (serve, `medic check config` and a reload refuse what breaks them):
 * live mode needs authentication on the webhook (an unauthenticated
 * endpoint that can power-cycle a fleet is the failure to avoid), and live
 * mode with disruptive policies needs safety.storm.notifier (a storm
 * would hold actions and tell nobody). Errors are "FILE:LINE:COL: ...". */
int medic_config_check_serving(const struct medic_config *config, struct medic_error *err);

/* What is risky in a configuration that is valid and servable, each as a
 * sentence (FILE:LINE:COL: first when it has a place): a dry-run that live
 * mode would refuse, a max_disrupted_fraction that allows no node, a
 * disruptive step due only once its alert is stale, a disruptive policy
 * with neither cooldown nor per-node budget. */
#define MEDIC_CONFIG_MAX_WARNINGS 32
struct medic_config_warnings {
    char items[MEDIC_CONFIG_MAX_WARNINGS][400];
    size_t count;
};
void medic_config_warn(const struct medic_config *config, struct medic_config_warnings *out);

/* The credentials that guard the read API (/api/v1/..., /metrics, the
 * on-call page) and the admin endpoints (/-/reload): their own, or in live
 * mode the webhook's when none are set. */
const struct medic_credentials *medic_config_read_auth(const struct medic_config *config);
const struct medic_credentials *medic_config_admin_auth(const struct medic_config *config);

/* The reference of every directive (key, default, what it does, bounds)
 * as a Markdown table: what docs/configuration.md holds. */
int medic_config_reference(struct medic_buf *out);

/* The keys of the directive table whose value differs from running to
 * fresh (only those a reload leaves for the next restart, the table's "at
 * restart" rows, with restart_only), comma-separated into out; returns how
 * many. Keys without one value (auth, tls, inventory, notifiers, policies)
 * are not compared. */
int medic_config_changes(const struct medic_config *running, const struct medic_config *fresh,
                         int restart_only, struct medic_buf *out);

/* ---- snapshots ---- */

/* Moves a loaded configuration to the heap as a snapshot with one
 * reference (the caller's); NULL when out of memory (config released). */
struct medic_config *medic_config_snapshot(struct medic_config *config);
/* Takes another reference; returns config. */
const struct medic_config *medic_config_ref(const struct medic_config *config);
/* Drops a reference; the last one frees the snapshot. NULL is a no-op. */
void medic_config_unref(const struct medic_config *config);

/* Where the running snapshot is published. */
struct config_slot;

/* Takes ownership of the caller's reference to first. */
struct config_slot *config_slot_new(struct medic_config *first);
/* Drops the slot's reference. NULL is a no-op. */
void config_slot_free(struct config_slot *slot);
/* The current snapshot with a reference for the caller (medic_config_unref
 * it). The lock inside is held only to copy the pointer. */
const struct medic_config *config_slot_acquire(struct config_slot *slot);
/* Publishes fresh (taking the caller's reference); the old snapshot lives
 * on until its last user drops it. */
void config_slot_publish(struct config_slot *slot, struct medic_config *fresh);

#endif

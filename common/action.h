/* SPDX-License-Identifier: Apache-2.0 */
/* The actions medic takes, as typed data. One table of action kinds (name,
 * whether it takes capacity away from a node, what it does) and one table
 * of their parameters (key, type, field, doc) drive the policy parser, the
 * validation, the dispatch, the JSON written to the audit log and the
 * reference in docs/policies.md. A decided action is a tagged union: no
 * runner ever re-parses its parameters from text.
 *
 * Every action ends with one outcome from enum medic_outcome. */
#ifndef MEDIC_ACTION_H
#define MEDIC_ACTION_H

#include "buf.h"

#include <stddef.h>

/* X(ID, name, disruptive, doc) */
#define MEDIC_ACTION_KINDS(X)                                                                      \
    X(POWER_LIMIT, "power_limit", 1,                                                               \
      "caps the power of the node's GPUs through its medic agent (inventory `agent`)")             \
    X(RESTORE_POWER_LIMIT, "restore_power_limit", 0,                                               \
      "gives back the limits medic replaced; only on a node medic limited")                        \
    X(IPMI_POWER_CYCLE, "ipmi_power_cycle", 1,                                                     \
      "power-cycles the node through its BMC (IPMI over LAN, inventory `bmc`), then confirms "     \
      "the power state")                                                                           \
    X(DRAIN, "drain", 1, "drains the node in Slurm (inventory `slurm.node`)")                      \
    X(RESUME, "resume", 0, "resumes a node medic drained; an operator's drain is never undone")    \
    X(NOTIFY, "notify", 0, "tells a notifier (webhook, Slack, PagerDuty, SMTP)")                   \
    X(GPU_RESET, "gpu_reset", 1,                                                                   \
      "resets the alert's GPU (its `UUID` and `gpu` labels) through the node's medic agent; "      \
      "refused while processes compute on it, confirmed back before it succeeds")                  \
    X(VERIFY, "verify", 0,                                                                         \
      "waits until the node is healthy (its agent's GPU health, Slurm answering, the BMC's "       \
      "power on) and shows the repair happened: a boot since a power cycle, the GPU enumerated "   \
      "since a GPU reset; a node that does not pass within the time is quarantined")               \
    X(SLURM_REBOOT, "slurm_reboot", 1,                                                             \
      "reboots the drained node through Slurm (`scontrol reboot`, Slurm's RebootProgram; no BMC "  \
      "needed), confirmed by its new boot (BootTime or SlurmdStartTime); it stays drained")

enum medic_action_kind {
#define MEDIC_ACTION_ENUM(id, name, disruptive, doc) MEDIC_ACTION_##id,
    MEDIC_ACTION_KINDS(MEDIC_ACTION_ENUM)
#undef MEDIC_ACTION_ENUM
        MEDIC_ACTION_KIND_COUNT
};

#define MEDIC_ACTION_MAX_GPUS 64
/* Text parameters (a drain's reason, a notification's message) are cut at
 * this many bytes, at a UTF-8 character boundary, ending with
 * MEDIC_ACTION_TEXT_CUT_MARKER. */
#define MEDIC_ACTION_TEXT_MAX 16384
#define MEDIC_ACTION_TEXT_CUT_MARKER " [...cut by medic]"

struct medic_gpu_list {
    int items[MEDIC_ACTION_MAX_GPUS];
    size_t count;   /* 0: every GPU of the node (unless from_alert) */
    int from_alert; /* `gpus: alert`: the alert's GPU (its `gpu` label), set when decided */
};

/* A decided action. Text fields are owned (NULL when not set). */
struct medic_action {
    enum medic_action_kind kind;
    union {
        struct {
            int watts;
            struct medic_gpu_list gpus;
        } power_limit;
        struct {
            int power_on; /* power the node on if it stays off */
        } ipmi_power_cycle;
        struct {
            char *reason;
        } drain;
        struct {
            char *drained_as; /* Slurm's reason as medic's drain left it; NULL: unknown */
        } resume;
        struct {
            char *notifier;
            char *message;
        } notify;
        struct {
            char *gpu;  /* the alert's `gpu` label: an index, checked against the inventory */
            char *uuid; /* the alert's `UUID` label */
        } gpu_reset;
        struct {
            int within; /* seconds */
            /* after a power cycle: the node must show a boot after this
             * time (RFC 3339, UTC), else the verify fails; NULL: none asked */
            char *booted_after;
            /* after a GPU reset: that GPU (the alert's `gpu` label) must
             * have been enumerated again after reset_after (RFC 3339) */
            char *reset_after;
            char *reset_gpu;
        } verify;
        struct {
            int within; /* seconds */
        } slurm_reboot;
    } u;
};

enum medic_param_type {
    MEDIC_PARAM_INT,     /* int */
    MEDIC_PARAM_BOOL,    /* int, 0 or 1 */
    MEDIC_PARAM_GPUS,    /* struct medic_gpu_list */
    MEDIC_PARAM_NAME,    /* char *: a name from the configuration */
    MEDIC_PARAM_TEXT,    /* char *: expanded from a template, capped */
    MEDIC_PARAM_RECORD,  /* char *: set by medic from what it recorded, never by a policy */
    MEDIC_PARAM_SECONDS, /* int: a duration ("10m") in seconds */
};

/* The detail of a drain that succeeded: MEDIC_DRAIN_DETAIL_PREFIX "State=S"
 * MEDIC_DRAIN_DETAIL_REASON R '"', R being Slurm's reason exactly as
 * medic's drain left it, with Slurm's "[user@time]" stamp (quotes inside R
 * stay as they are: R ends at the detail's last character). The policy
 * engine keeps R, and the incident's resume runs only while the node
 * still shows exactly R. */
#define MEDIC_DRAIN_DETAIL_PREFIX "drained: "
#define MEDIC_DRAIN_DETAIL_REASON " Reason=\""
/* The detail of a drain that found the node drained by someone else and
 * left it: it succeeded, but the drain is not medic's (never resumed by
 * medic, never counted as medic's disruption). */
#define MEDIC_DRAIN_FOUND_PREFIX "already drained by someone else"
/* The detail of a disruptive action refused before its first command
 * because a guard that clears by itself came on after it was decided (a
 * person's pause, a storm): the step is held and decided again once the
 * guard clears, not dropped. */
#define MEDIC_HELD_PREFIX "held before it started: "
/* The detail of a command its fence did not send: this replica could not
 * show it still held the lease. Nothing reached the node; a resume so
 * refused leaves medic's drain where it was. */
#define MEDIC_FENCED_PREFIX "not sent: "

/* X(KIND, key, type, field, required, min, max, doc); field is the member
 * of struct medic_action that holds it; min and max bound an integer. */
#define MEDIC_ACTION_PARAMS(X)                                                                     \
    X(POWER_LIMIT, "watts", MEDIC_PARAM_INT, u.power_limit.watts, 1, 50, 2000,                     \
      "the limit in watts, 50 to 2000")                                                            \
    X(POWER_LIMIT, "gpus", MEDIC_PARAM_GPUS, u.power_limit.gpus, 0, 0, 255,                        \
      "GPU indexes to limit, or `alert`: the alert's GPU (its `gpu` label); every GPU of the "     \
      "node when absent")                                                                          \
    X(IPMI_POWER_CYCLE, "power_on", MEDIC_PARAM_BOOL, u.ipmi_power_cycle.power_on, 0, 0, 1,        \
      "power the node on if it is found off or stays off (default true)")                          \
    X(DRAIN, "reason", MEDIC_PARAM_TEXT, u.drain.reason, 0, 0, 0,                                  \
      "the reason Slurm shows (a template; default \"ALERTNAME on NODE\"); medic appends "         \
      "\"(medic policy NAME)\"")                                                                   \
    X(RESUME, "drained_as", MEDIC_PARAM_RECORD, u.resume.drained_as, 0, 0, 0,                      \
      "set by medic, not by a policy: the node's Slurm reason (with its [user@time] stamp) as "    \
      "medic's drain left it; the resume runs only while the node still shows exactly that")       \
    X(NOTIFY, "notifier", MEDIC_PARAM_NAME, u.notify.notifier, 1, 0, 0,                            \
      "a notifier defined under `notifiers`")                                                      \
    X(NOTIFY, "message", MEDIC_PARAM_TEXT, u.notify.message, 0, 0, 0,                              \
      "the text to send (a template)")                                                             \
    X(GPU_RESET, "gpu", MEDIC_PARAM_RECORD, u.gpu_reset.gpu, 0, 0, 0,                              \
      "set by medic, not by a policy: the alert's `gpu` label (dcgm-exporter's GPU index)")        \
    X(GPU_RESET, "uuid", MEDIC_PARAM_RECORD, u.gpu_reset.uuid, 0, 0, 0,                            \
      "set by medic, not by a policy: the alert's `UUID` label; the agent resets only that GPU")   \
    X(VERIFY, "within", MEDIC_PARAM_SECONDS, u.verify.within, 0, 10, 86400,                        \
      "how long the node has to pass (default 10m, 10s to 24h)")                                   \
    X(VERIFY, "booted_after", MEDIC_PARAM_RECORD, u.verify.booted_after, 0, 0, 0,                  \
      "set by medic, not by a policy: after a power cycle, when it was sent (RFC 3339); the "      \
      "node passes only with evidence that it booted since (Slurm's SlurmdStartTime or "           \
      "BootTime later than that, or the agent's boot time)")                                       \
    X(VERIFY, "reset_after", MEDIC_PARAM_RECORD, u.verify.reset_after, 0, 0, 0,                    \
      "set by medic, not by a policy: after a GPU reset, when it was sent (RFC 3339); the node "   \
      "passes only when its agent says the GPU was enumerated again since")                        \
    X(VERIFY, "reset_gpu", MEDIC_PARAM_RECORD, u.verify.reset_gpu, 0, 0, 0,                        \
      "set by medic, not by a policy: the GPU the reset was for (the alert's `gpu` label)")        \
    X(SLURM_REBOOT, "within", MEDIC_PARAM_SECONDS, u.slurm_reboot.within, 0, 60, 86400,            \
      "how long the node has to come back with a new boot (default 10m, 1m to 24h)")

struct medic_action_param {
    enum medic_action_kind kind;
    const char *key;
    enum medic_param_type type;
    size_t offset; /* in struct medic_action */
    int required;
    long min, max; /* MEDIC_PARAM_INT, and each index of MEDIC_PARAM_GPUS */
    const char *doc;
};

extern const struct medic_action_param medic_action_params[];
extern const size_t medic_action_param_count;

/* "power_limit", "drain", ... */
const char *medic_action_name(enum medic_action_kind kind);
/* What the action does, in a sentence (for docs and --help). */
const char *medic_action_doc(enum medic_action_kind kind);
/* The kind named name, or -1. */
int medic_action_parse_kind(const char *name);
/* 1 for the actions that take capacity away from a node (they pass the
 * safety guards): power_limit, ipmi_power_cycle, drain. */
int medic_action_disruptive(enum medic_action_kind kind);

#define MEDIC_VERIFY_DEFAULT_WITHIN 600
#define MEDIC_REBOOT_DEFAULT_WITHIN 600

/* Initialises a of kind with its defaults (power_on true, within 10m). */
void medic_action_init(struct medic_action *a, enum medic_action_kind kind);
/* Frees the text fields; a stays a valid action of its kind. */
void medic_action_release(struct medic_action *a);
/* Deep copy into a fresh to; MEDIC_E_NOMEM (to released) on failure. */
int medic_action_copy(struct medic_action *to, const struct medic_action *from);

/* Sets the text field of parameter key (a MEDIC_PARAM_TEXT or _NAME) to
 * text[0..len), cut to MEDIC_ACTION_TEXT_MAX bytes as described above. */
int medic_action_set_text(struct medic_action *a, const char *key, const char *text, size_t len);
/* The key of kind's MEDIC_PARAM_TEXT parameter (a drain's reason, a
 * notification's message), or NULL when it has none. */
const char *medic_action_text_key(enum medic_action_kind kind);
/* Pointer to the char * of a text or name parameter, NULL when a's kind has
 * no such parameter. */
char **medic_action_text_field(struct medic_action *a, const char *key);

/* Appends the parameters as one JSON object ({"watts":300,"gpus":[0,1]}).
 * On failure (the buffer's cap) out is left as it was. */
int medic_action_params_json(const struct medic_action *a, struct medic_buf *out);

/* Copies text[0..len) into out (a buffer of size bytes, size >
 * sizeof(MEDIC_ACTION_TEXT_CUT_MARKER)) cut at a UTF-8 boundary, with the
 * marker when it did not fit. Returns the length written. */
size_t medic_text_fit(char *out, size_t size, const char *text, size_t len);

/* The driver's recommended recovery actions (NVML's
 * nvmlDeviceGpuRecoveryAction_t), by their code: "none", "gpu_reset",
 * "node_reboot", "drain_p2p", "drain_and_reset", "bus_reset". */
#define MEDIC_RECOVERY_COUNT 6
extern const char *const medic_recovery_names[MEDIC_RECOVERY_COUNT];
/* The code of a recovery action's name, or -1. */
int medic_recovery_parse(const char *name);

/* What a health check (the verify step, and the check before a resume)
 * accepts as healthy: safety.health. */
struct medic_health_criteria {
    int missing_gpus;          /* GPUs of the inventory's gpus that may be missing; 0 */
    unsigned recovery_ok;      /* recovery actions (bits by code) that pass; none only */
    int remap_pending_ok;      /* a pending row remapping passes; 0 */
    int retirement_pending_ok; /* a pending page retirement passes; 0 */
    int slurm;                 /* Slurm must say the node responds; 1 */
    int bmc;                   /* the BMC must say power on; 1 */
};
void medic_health_criteria_default(struct medic_health_criteria *h);

/* How an action ended. */
#define MEDIC_OUTCOMES(X)                                                                          \
    X(SUCCEEDED, "succeeded", "the action was carried out and confirmed")                          \
    X(FAILED, "failed", "the action was tried and did not happen")                                 \
    X(TIMED_OUT, "timed_out", "the target did not answer in time; its state is unknown")           \
    X(REFUSED, "refused", "the action was not tried: a check before it said no")                   \
    X(INTERRUPTED, "interrupted", "medic stopped before the outcome was known; it is never rerun")

enum medic_outcome {
#define MEDIC_OUTCOME_ENUM(id, name, doc) MEDIC_OUTCOME_##id,
    MEDIC_OUTCOMES(MEDIC_OUTCOME_ENUM)
#undef MEDIC_OUTCOME_ENUM
        MEDIC_OUTCOME_COUNT
};

/* "succeeded", "failed", ... (the audit log's result column). */
const char *medic_outcome_name(enum medic_outcome outcome);
/* Parses an outcome's name; -1 when it names none. */
int medic_outcome_parse(const char *name);
/* A sentence saying what the outcome means. */
const char *medic_outcome_strerror(enum medic_outcome outcome);

#endif

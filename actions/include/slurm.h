/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm drain and resume with scontrol, started with posix_spawn and an argv
 * array (no shell), under a hard timeout, and confirmed by reading the
 * node's state back. medic marks its drains in the reason, and resumes only
 * nodes whose drain carries that mark: an operator's own drain is never
 * undone, nor overwritten. */
#ifndef MEDIC_ACTIONS_SLURM_H
#define MEDIC_ACTIONS_SLURM_H

#include "action.h"
#include "error.h"
#include "fence.h"
#include <stddef.h>
#include <stdint.h>

/* What medic's drain reasons contain (the policy engine appends it). */
#define SLURM_MEDIC_MARK "(medic policy "

struct slurm_options {
    const char *scontrol;             /* program, looked up in PATH; default "scontrol" */
    const char *slurm_conf;           /* SLURM_CONF for scontrol; NULL: Slurm's default */
    int timeout_ms;                   /* per scontrol run; default 10000 */
    const struct action_fence *fence; /* asked right before a drain is sent; NULL: none */
};

void slurm_options_default(struct slurm_options *o);

/* Runs scontrol with args (no shell; SLURM_CONF as o says); its output
 * (stdout and stderr) into out. Returns the exit status, -1 when it could
 * not run, -2 on timeout. */
int slurm_scontrol(const struct slurm_options *o, const char *const *args, char *out, size_t size);

/* A node as Slurm lists it (scontrol show nodes --json). */
struct slurm_node_info {
    char *name;
    char *partitions; /* comma-separated; "" when none */
    int gpus;         /* from its Gres (gpu:8, gpu:h100:4(S:0),gpu:h100:4(S:1)); 0: none */
    int maint;        /* its state says MAINT: a maintenance reservation holds it now */
    char *state;      /* "IDLE+DRAIN", "MIXED", ... (the JSON's state and flags joined by +) */
    char *reason;     /* its Reason ("" when none), with Slurm's [user@time] stamp */
    char *features;   /* its available features, comma-separated ("" when none) */
};
struct slurm_node_list {
    struct slurm_node_info *items;
    size_t count;
};
/* A switch of Slurm's topology (`scontrol show topology`, topology/tree). */
struct slurm_switch {
    char *name;
    int level;   /* 0: a leaf, its nodes attached to it */
    char *nodes; /* a Slurm hostlist */
};
struct slurm_switch_list {
    struct slurm_switch *items;
    size_t count;
};
/* Parses `scontrol show topology` output (NUL-terminated; at most 100,000
 * switches). No switches (no topology plugin): an empty list. */
int slurm_topology_parse(const char *text, struct slurm_switch_list *out, struct medic_error *err);
int slurm_topology_read(const struct slurm_options *o, struct slurm_switch_list *out,
                        struct medic_error *err);
void slurm_switch_list_release(struct slurm_switch_list *l);

/* Parses `scontrol show nodes --json` output (at most 256 MiB, 100,000
 * nodes). */
int slurm_nodes_parse(const char *json, size_t len, struct slurm_node_list *out,
                      struct medic_error *err);
/* Parses `scontrol -o show nodes` output (Slurm before 23.02): one node
 * a line, its NodeName, State, Gres and Partitions fields. text is
 * NUL-terminated. */
int slurm_nodes_parse_text(const char *text, struct slurm_node_list *out, struct medic_error *err);
/* Runs `scontrol show nodes --json` (or, where Slurm has no --json, the
 * one-line form) and parses it. */
int slurm_nodes_read(const struct slurm_options *o, struct slurm_node_list *out,
                     struct medic_error *err);
void slurm_node_list_release(struct slurm_node_list *l);
/* The GPUs a Gres string names: the counts of its gpu entries summed. */
int slurm_gres_gpus(const char *gres);

/* Drains node with reason (control characters are replaced, length capped).
 * A node an operator already drained is left as it is. */
enum medic_outcome slurm_drain(const struct slurm_options *o, const char *node, const char *reason,
                               char *detail, size_t size);

/* Resumes node when medic drained it; refuses a foreign drain. With
 * drained_as (Slurm's reason, stamp included, as medic's drain left it)
 * the node's reason must still be exactly that: a person who drained it
 * again, whatever text they kept, keeps it drained. Without it (a drain
 * recorded by an older medic) medic's mark in the reason is enough. */
enum medic_outcome slurm_resume(const struct slurm_options *o, const char *node,
                                const char *drained_as, char *detail, size_t size);

/* Whether node is drained in Slurm with no job left (what a power cycle
 * after a drain requires): succeeded when it is, refused when it is not
 * (resumed by someone, or jobs still running), failed or timed_out when
 * scontrol could not tell. */
enum medic_outcome slurm_check_drained(const struct slurm_options *o, const char *node,
                                       char *detail, size_t size);

/* Reboots node through Slurm (`scontrol reboot`: Slurm's RebootProgram
 * on the node): only a node drained with no job left (refused otherwise:
 * Slurm would return it to service after the reboot). Slurm keeps the
 * drain through the reboot and appends ": reboot issued" to its reason.
 * Waits up to within_s for the node to show a boot (BootTime or
 * SlurmdStartTime) after the request, looking every 2 s; stop (may be
 * NULL) waits ms between looks and returns nonzero when medic stops
 * (interrupted). Succeeded with detail "rebooted after Ns (...); " and a
 * drain's detail (MEDIC_DRAIN_DETAIL_PREFIX): Slurm's reason as the reboot
 * left it. Timed out when no boot came. */
enum medic_outcome slurm_reboot(const struct slurm_options *o, const char *node, int within_s,
                                int (*stop)(void *arg, int64_t ms), void *arg, char *detail,
                                size_t size);

/* Whether Slurm has a RebootProgram (`scontrol show config`), which
 * every `scontrol reboot` needs: 1 set, 0 not set, -1 unknown; detail
 * says what was read. */
int slurm_reboot_program(const struct slurm_options *o, char *detail, size_t size);

/* Reads the node: its State= and Reason= into state and reason ("" when
 * none). 0, or -1 with detail. */
int slurm_read_node(const struct slurm_options *o, const char *node, char *state, size_t state_size,
                    char *reason, size_t reason_size, char *detail, size_t size);

/* When the node last booted, as Slurm says: the later of its BootTime
 * (the kernel's) and SlurmdStartTime (slurmd's), read on this host's local
 * clock as Slurm prints them, into *started (ns since the epoch; 0 when
 * Slurm gives neither). 0, or -1 with detail. */
int slurm_node_started(const struct slurm_options *o, const char *node, int64_t *started,
                       char *detail, size_t size);
/* The node name slurm_may_update asks about: no Slurm node is called so. */
#define SLURM_PROBE_NODE "medic-preflight-no-such-node"

/* Whether Slurm takes node updates from whoever runs o's scontrol (root,
 * SlurmUser, AdminLevel Operator or Admin, or a sudo wrapper), changing
 * nothing: it resumes SLURM_PROBE_NODE, which does not exist. slurmctld
 * checks the rights before the name, so "Invalid node name" means allowed
 * and "Invalid user id" refused. 1 allowed, 0 refused, -1 unknown (detail
 * says what scontrol said). */
int slurm_may_update(const struct slurm_options *o, char *detail, size_t size);

/* Slurm's "2026-11-27T10:01:03" (local time) as ns since the epoch; -1
 * when it is not such a time (Slurm writes "None" or "Unknown"). */
int64_t slurm_time_parse(const char *text);

#endif

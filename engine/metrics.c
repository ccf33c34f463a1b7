/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_serve.h"
#include "lock.h"

#include <stdio.h>

struct group_read {
    const struct medic_config *config;
    struct policy_group_use *out;
    size_t max, count;
};

static int read_groups(void *arg, struct policy_state *st)
{
    struct group_read *g = arg;
    g->count =
        policy_group_usage(st, &g->config->policies.safety, &g->config->inventory, g->out, g->max);
    return 0;
}

size_t engine_group_usage(struct engine *e, const struct medic_config *config,
                          struct policy_group_use *out, size_t max)
{
    struct group_read g = {config, out, max, 0};
    struct medic_error err = {0};
    if (!config->policies.safety.group_cap_count || engine_with_state(e, read_groups, &g, &err))
        return 0;
    return g.count;
}

/* Each topology group with disrupted nodes, beside its cap. */
static void group_metrics(struct engine *engine, const struct medic_config *config,
                          struct medic_buf *b)
{
    struct policy_group_use use[64];
    size_t n = engine_group_usage(engine, config, use, 64);
    static const char *const names[] = {"medic_group_disrupted_nodes",
                                        "medic_group_max_disrupted_nodes"};
    static const char *const help[] = {
        "Nodes medic holds disrupted in a topology group of safety.group_caps (groups that hold "
        "one or more; label is the inventory label, or nodes for a hostlist).",
        "The nodes that group's cap lets medic hold disrupted at once."};
    for (int k = 0; k < 2; k++) {
        medic_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", names[k], help[k], names[k]);
        for (size_t i = 0; i < n; i++) {
            medic_buf_printf(b, "%s{label=\"", names[k]);
            engine_prometheus_label(b, use[i].label);
            medic_buf_puts(b, "\",group=\"");
            engine_prometheus_label(b, use[i].group);
            medic_buf_printf(b, "\"} %zu\n", k ? use[i].limit : use[i].disrupted);
        }
    }
}

static void pipeline_metrics(struct engine *engine, struct medic_buf *b)
{
    struct engine_pipeline_stats st;
    engine_stats(engine, &st);
    medic_buf_puts(b, "# HELP medic_decisions_total Policy engine decisions, by verdict.\n"
                      "# TYPE medic_decisions_total counter\n");
    for (int v = 0; v < VERDICT_COUNT; v++)
        medic_buf_printf(b, "medic_decisions_total{verdict=\"%s\"} %llu\n",
                         policy_verdict_name((enum policy_verdict)v), st.decisions[v]);
    medic_buf_printf(b,
                     "# HELP medic_engine_rounds_failed_total Engine rounds whose commit failed "
                     "(retried).\n"
                     "# TYPE medic_engine_rounds_failed_total counter\n"
                     "medic_engine_rounds_failed_total %llu\n"
                     "# HELP medic_engine_ticks_total Scheduler rounds: due ladder steps decided, "
                     "silent alerts expired.\n"
                     "# TYPE medic_engine_ticks_total counter\n"
                     "medic_engine_ticks_total %llu\n"
                     "# HELP medic_engine_notifications_evaluated_total Notifications the policy "
                     "engine evaluated and committed (duplicates too: their alerts are seen "
                     "again).\n"
                     "# TYPE medic_engine_notifications_evaluated_total counter\n"
                     "medic_engine_notifications_evaluated_total %llu\n"
                     "# HELP medic_wall_clock_steps_total Steps of the wall clock against the "
                     "engine's clock (1 s or more) seen by the engine.\n"
                     "# TYPE medic_wall_clock_steps_total counter\n"
                     "medic_wall_clock_steps_total %llu\n"
                     "# HELP medic_wall_clock_lead_seconds The wall clock less the engine's clock "
                     "(the wall clock at the engine's start, advanced by the monotonic clock): "
                     "the steps since medic started, which its intervals do not follow.\n"
                     "# TYPE medic_wall_clock_lead_seconds gauge\n"
                     "medic_wall_clock_lead_seconds %.3f\n"
                     "# HELP medic_disrupted_nodes Nodes drained, power-limited or being "
                     "power-cycled by medic.\n"
                     "# TYPE medic_disrupted_nodes gauge\n"
                     "medic_disrupted_nodes %d\n"
                     "# HELP medic_quarantined_nodes Disrupted nodes that wait for a person "
                     "(medic node release).\n"
                     "# TYPE medic_quarantined_nodes gauge\n"
                     "medic_quarantined_nodes %d\n"
                     "# HELP medic_open_incidents Incidents not yet recovered, expired or "
                     "closed.\n"
                     "# TYPE medic_open_incidents gauge\n"
                     "medic_open_incidents %d\n"
                     "# HELP medic_storm_active 1 while the storm breaker holds disruptive "
                     "actions.\n"
                     "# TYPE medic_storm_active gauge\n"
                     "medic_storm_active %d\n"
                     "# HELP medic_paused 1 while a person's pause holds every disruptive step "
                     "(medic pause).\n"
                     "# TYPE medic_paused gauge\n"
                     "medic_paused %d\n"
                     "# HELP medic_pending_approvals Disruptive steps waiting for a person's "
                     "approval (medic approve / deny).\n"
                     "# TYPE medic_pending_approvals gauge\n"
                     "medic_pending_approvals %d\n"
                     "# HELP medic_pending_approval_oldest_seconds How long the step waiting "
                     "longest for approval has waited (0 when none waits): alert on it well "
                     "before approval_timeout, when the step expires.\n"
                     "# TYPE medic_pending_approval_oldest_seconds gauge\n"
                     "medic_pending_approval_oldest_seconds %.3f\n",
                     st.rounds_failed, st.ticks, st.evaluated, st.clock_steps,
                     (double)st.wall_clock_lead / 1e9, st.disrupted_nodes, st.quarantined_nodes,
                     st.open_incidents, st.storm, st.paused, st.pending_approvals,
                     (double)st.pending_oldest_age / 1e9);
    /* the fleet caps the disruptions are held to, as configured now */
    const struct medic_config *config = config_slot_acquire(engine->configs);
    const struct policy_safety *s = &config->policies.safety;
    size_t fraction_nodes = policy_max_disrupted_nodes(s, config->inventory.count);
    medic_buf_printf(b,
                     "# HELP medic_safety_max_disruptive_in_flight Disruptive actions medic "
                     "runs at once, fleet-wide (safety.max_disruptive_in_flight).\n"
                     "# TYPE medic_safety_max_disruptive_in_flight gauge\n"
                     "medic_safety_max_disruptive_in_flight %zu\n"
                     "# HELP medic_safety_max_disrupted_nodes Nodes medic may hold disrupted at "
                     "once: safety.max_disrupted_fraction of the inventory.\n"
                     "# TYPE medic_safety_max_disrupted_nodes gauge\n"
                     "medic_safety_max_disrupted_nodes %zu\n",
                     s->max_disruptive_in_flight, fraction_nodes);
    group_metrics(engine, config, b);
    long maint = engine_slurm_view_maint_count(engine->slurm);
    if (maint >= 0)
        medic_buf_printf(b,
                         "# HELP medic_slurm_maintenance_nodes Nodes Slurm had in a maintenance "
                         "reservation at its last read (safety.maintenance_from_slurm).\n"
                         "# TYPE medic_slurm_maintenance_nodes gauge\n"
                         "medic_slurm_maintenance_nodes %ld\n",
                         maint);
    medic_buf_printf(b,
                     "# HELP medic_slurm_node_reads_total Reads of Slurm's nodes that succeeded "
                     "(every slurm.read_interval, outside dry-run or with "
                     "safety.maintenance_from_slurm): maintenance, and drains reconciled.\n"
                     "# TYPE medic_slurm_node_reads_total counter\n"
                     "medic_slurm_node_reads_total %llu\n",
                     (unsigned long long)engine_slurm_view_reads(engine->slurm));
    if (s->maintenance_from_slurm)
        medic_buf_printf(b,
                         "# HELP medic_slurm_maintenance_known Whether medic knows which nodes "
                         "Slurm has in a maintenance reservation (1); 0 before the first read or "
                         "when the last is over three slurm.read_interval old: disruptive steps on "
                         "Slurm nodes wait.\n"
                         "# TYPE medic_slurm_maintenance_known gauge\n"
                         "medic_slurm_maintenance_known %d\n",
                         maint >= 0);
    medic_config_unref(config);
}

static void audit_metrics(struct engine *e, struct medic_buf *b)
{
    struct audit_stats s;
    audit_store_stats(e->store, &s);
    medic_buf_puts(b, "# HELP medic_audit_commit_duration_seconds Time to commit one group of "
                      "audit writes (group commit).\n"
                      "# TYPE medic_audit_commit_duration_seconds histogram\n");
    for (int i = 0; i < AUDIT_COMMIT_BUCKETS; i++)
        medic_buf_printf(b, "medic_audit_commit_duration_seconds_bucket{le=\"%g\"} %llu\n",
                         audit_commit_buckets[i], (unsigned long long)s.commit_bucket_counts[i]);
    medic_buf_printf(b,
                     "medic_audit_commit_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                     "medic_audit_commit_duration_seconds_sum %.9f\n"
                     "medic_audit_commit_duration_seconds_count %llu\n"
                     "# HELP medic_audit_commit_failures_total Audit transactions that failed.\n"
                     "# TYPE medic_audit_commit_failures_total counter\n"
                     "medic_audit_commit_failures_total %llu\n"
                     "# HELP medic_audit_store_healthy 1 while the audit log commits; 0 from a "
                     "failed commit until the next successful one.\n"
                     "# TYPE medic_audit_store_healthy gauge\n"
                     "medic_audit_store_healthy %d\n"
                     "# HELP medic_audit_writes_total Write requests committed to the audit log.\n"
                     "# TYPE medic_audit_writes_total counter\n"
                     "medic_audit_writes_total %llu\n"
                     "# HELP medic_audit_queue_depth Write requests waiting for the audit writer.\n"
                     "# TYPE medic_audit_queue_depth gauge\n"
                     "medic_audit_queue_depth %zu\n"
                     "# HELP medic_audit_queue_capacity Write requests the queue holds before "
                     "answering 503.\n"
                     "# TYPE medic_audit_queue_capacity gauge\n"
                     "medic_audit_queue_capacity %zu\n"
                     "# HELP medic_audit_fenced_writes_total Decisions and action intents "
                     "refused because this replica did not hold the lease (several replicas).\n"
                     "# TYPE medic_audit_fenced_writes_total counter\n"
                     "medic_audit_fenced_writes_total %llu\n"
                     "# HELP medic_audit_checkpoints_total SQLite checkpoints of the audit "
                     "log's WAL: the bulk of its pages copied by the checkpointer thread, the "
                     "pages committed since by the writer.\n"
                     "# TYPE medic_audit_checkpoints_total counter\n"
                     "medic_audit_checkpoints_total{by=\"checkpointer\"} %llu\n"
                     "medic_audit_checkpoints_total{by=\"writer\"} %llu\n",
                     (unsigned long long)s.commits, s.commit_seconds_sum,
                     (unsigned long long)s.commits, (unsigned long long)s.commit_failures,
                     !s.unhealthy, (unsigned long long)s.requests_committed, s.queue_depth,
                     s.max_pending, (unsigned long long)s.fenced,
                     (unsigned long long)s.checkpoints_copied,
                     (unsigned long long)s.checkpoints_finished);
}

static void config_metrics(struct engine *e, struct medic_buf *b)
{
    const struct medic_config *c = config_slot_acquire(e->configs);
    int live = medic_mode_acts(c->mode);
    char hash[13];
    snprintf(hash, sizeof(hash), "%.12s", c->hash[0] ? c->hash : "builtin");
    medic_config_unref(c);
    medic_buf_printf(b,
                     "# HELP medic_config_reloads_total Configuration reloads, by result.\n"
                     "# TYPE medic_config_reloads_total counter\n"
                     "medic_config_reloads_total{result=\"success\"} %llu\n"
                     "medic_config_reloads_total{result=\"failure\"} %llu\n"
                     "# HELP medic_config_last_reload_successful Whether the last reload "
                     "succeeded.\n"
                     "# TYPE medic_config_last_reload_successful gauge\n"
                     "medic_config_last_reload_successful %d\n"
                     "# HELP medic_config_last_reload_success_timestamp_seconds When the "
                     "configuration was last loaded.\n"
                     "# TYPE medic_config_last_reload_success_timestamp_seconds gauge\n"
                     "medic_config_last_reload_success_timestamp_seconds %lld\n"
                     "# HELP medic_mode_live 1 when medic acts (live, or approve), 0 in "
                     "dry-run.\n"
                     "# TYPE medic_mode_live gauge\n"
                     "medic_mode_live %d\n"
                     "# HELP medic_build_info Build information; the value is always 1.\n"
                     "# TYPE medic_build_info gauge\n"
                     "medic_build_info{version=\"%s\",config_hash=\"%s\"} 1\n",
                     atomic_load(&e->reloads_ok), atomic_load(&e->reloads_failed),
                     atomic_load(&e->last_reload_ok), (long long)atomic_load(&e->last_reload_time),
                     live, MEDIC_VERSION, hash);
}

void engine_metrics(void *ctx, struct medic_buf *b)
{
    struct engine *e = ctx;
    audit_metrics(e, b);
    config_metrics(e, b);
    pipeline_metrics(e, b);
    medic_rwlock_rdlock(&e->role);
    if (e->dispatch)
        engine_dispatch_metrics(e->dispatch, b);
    medic_rwlock_unlock(&e->role);
    if (e->leader)
        engine_leader_metrics(e->leader, b);
    if (e->fleet)
        engine_fleet_metrics(e->fleet, b);
}

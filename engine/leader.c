/* SPDX-License-Identifier: Apache-2.0 */
#include "engine_leader.h"
#include "engine_oncall.h"
#include "lock.h"
#include "log.h"
#include "config.h"
#include "timeutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Renewal latency histogram bounds, seconds. */
#define LEASE_BUCKETS 8
static const double lease_buckets[LEASE_BUCKETS] = {0.001, 0.0025, 0.005, 0.01,
                                                    0.025, 0.05,   0.25,  1};

struct engine_leader {
    struct audit_lease_client *client;
    struct config_slot *configs; /* this replica's configuration, published beside the lease */
    char replica[64];
    int64_t lease; /* ns */
    struct audit_store *store;
    struct engine_leader_hooks hooks;
    pthread_t thread;
    struct medic_mutex lock; /* guards stopping and the counters below */
    pthread_cond_t cond;
    int stopping;
    int leading;
    int64_t epoch;
    int64_t renewed_at; /* monotonic ns of the last renewal sent that held */
    char holder[64];    /* who held the lease at the last renewal, and its epoch */
    int64_t holder_epoch;
    /* the holder's configuration differs from this replica's: it will not
     * take the lease when it expires (unless an operator forces it) */
    int config_differs;
    char holder_config[65];
    /* this host's wall clock less the database's, at the last look; a
     * replica off by more than ENGINE_LEADER_MAX_CLOCK_OFFSET neither leads
     * nor decides */
    int64_t clock_offset;
    int clock_off; /* said once in the log, until it is right again */
    /* while leading: the clock the policy engine decides on (the wall
     * clock when this replica began leading, advanced by the monotonic
     * clock), which a later step of the wall clock does not move */
    int64_t led_wall, led_mono;
    uint64_t renewals, failures, gains, losses;
    uint64_t buckets[LEASE_BUCKETS];
    double seconds_sum;
};

static void observe(struct engine_leader *l, double seconds, int failed)
{
    medic_mutex_lock(&l->lock);
    l->renewals++;
    l->failures += failed;
    l->seconds_sum += seconds;
    for (int i = 0; i < LEASE_BUCKETS; i++)
        if (seconds <= lease_buckets[i])
            l->buckets[i]++;
    medic_mutex_unlock(&l->lock);
}

static void set_leading(struct engine_leader *l, int leading, int64_t epoch)
{
    medic_mutex_lock(&l->lock);
    l->leading = leading;
    l->epoch = epoch;
    if (leading)
        l->gains++;
    else
        l->losses++;
    medic_mutex_unlock(&l->lock);
}

static void step_down(struct engine_leader *l, const char *why)
{
    char epoch[24];
    snprintf(epoch, sizeof(epoch), "%lld", (long long)l->epoch);
    /* fenced first: from here no decision or intent of this replica commits */
    audit_store_set_term(l->store, l->replica, 0);
    medic_log_warn("this replica no longer leads: policies and actions stop here", "replica",
                   l->replica, "epoch", epoch, "why", why, NULL);
    l->hooks.lose(l->hooks.arg);
    set_leading(l, 0, l->epoch);
}

/* The term could not start: this replica steps down and gives the lease up
 * at once, so that another may lead. */
static void give_up(struct engine_leader *l)
{
    int64_t epoch = l->epoch;
    struct medic_error err = {0};
    step_down(l, "the policy engine could not start");
    audit_lease_client_release(l->client, epoch, &err);
}

static void take_up(struct engine_leader *l, int64_t epoch)
{
    char e[24];
    snprintf(e, sizeof(e), "%lld", (long long)epoch);
    audit_store_set_term(l->store, l->replica, epoch);
    l->led_mono = medic_time_monotonic();
    l->led_wall = medic_time_now();
    set_leading(l, 1, epoch);
    medic_log_info("this replica leads: it decides and acts from now", "replica", l->replica,
                   "epoch", e, NULL);
    if (l->hooks.gain(l->hooks.arg, epoch) != 0)
        give_up(l);
}

/* The hash of what decides in this replica's configuration now
 * ("builtin" for the embedded defaults): replicas with the same decide
 * alike, whatever their own listen address or name. */
static void config_hash_now(struct engine_leader *l, char out[65])
{
    const struct medic_config *c = config_slot_acquire(l->configs);
    snprintf(out, 65, "%s", c->policy_hash[0] ? c->policy_hash : "builtin");
    medic_config_unref(c);
}

/* Notes who holds the lease and whether its configuration is this
 * replica's; says so in the log when that changes. */
static void compare_config(struct engine_leader *l, const struct audit_lease *lease,
                           const char *mine)
{
    int differs = !lease->ours && lease->config_hash[0] && strcmp(lease->config_hash, mine) != 0;
    medic_mutex_lock(&l->lock);
    snprintf(l->holder, sizeof(l->holder), "%s", lease->holder);
    l->holder_epoch = lease->epoch;
    int was = l->config_differs;
    l->config_differs = differs;
    snprintf(l->holder_config, sizeof(l->holder_config), "%s", lease->config_hash);
    medic_mutex_unlock(&l->lock);
    if (differs && !was)
        medic_log_warn("this replica's configuration differs from the leader's: it will not take "
                       "the lease until they match (or an operator forces it: medic audit lease "
                       "--force-takeover REASON)",
                       "replica", l->replica, "config_hash", mine, "leader", lease->holder,
                       "leader_config_hash", lease->config_hash, NULL);
    else if (was && !differs && !lease->ours)
        medic_log_info("this replica's configuration matches the leader's again", "replica",
                       l->replica, "config_hash", mine, NULL);
    if (lease->took_forced)
        medic_log_warn("this replica took the lease with a configuration that differs from the "
                       "last leader's, as an operator forced",
                       "replica", l->replica, "config_hash", mine, "forced", lease->last_forced,
                       NULL);
}

/* One renewal, and what it means for this replica's part. Returns 1 when
 * this replica just began leading: starting the engine took part of the
 * lease, so the next renewal comes at once. */
/* Whether this host's clock agrees with the database's within the bound.
 * A replica whose clock is off would take fresh alerts for stale ones (or
 * stale ones for fresh) and date its rows wrongly: it does not lead. A
 * database that cannot say keeps the last answer. */
static int clock_agrees(struct engine_leader *l)
{
    struct medic_error err = {0};
    int64_t db_now = 0, mono_at = 0;
    if (audit_lease_client_clock(l->client, &db_now, &mono_at, &err))
        return !l->clock_off;
    /* a leader's engine decides on the clock it took when it began (a
     * step of the wall clock since does not move it); a replica that does
     * not lead would start its engine on the wall clock */
    int64_t local = l->leading ? l->led_wall + (mono_at - l->led_mono)
                               : medic_time_now() - (medic_time_monotonic() - mono_at);
    int64_t offset = local - db_now;
    medic_mutex_lock(&l->lock);
    l->clock_offset = offset;
    medic_mutex_unlock(&l->lock);
    int off = offset > ENGINE_LEADER_MAX_CLOCK_OFFSET || offset < -ENGINE_LEADER_MAX_CLOCK_OFFSET;
    char seconds[32];
    snprintf(seconds, sizeof(seconds), "%.3f", (double)offset / 1e9);
    char message[512];
    if (off && !l->clock_off) {
        medic_log_error("this replica's wall clock is off from the database's: it neither leads "
                        "nor decides until it agrees (fix the host's time sync)",
                        "replica", l->replica, "offset_seconds", seconds, NULL);
        snprintf(message, sizeof(message),
                 "medic replica %s: its wall clock is %ss off from the database's (more than "
                 "%lds): it neither leads nor decides until its host's time sync fixes it",
                 l->replica, seconds, (long)(ENGINE_LEADER_MAX_CLOCK_OFFSET / MEDIC_NS_PER_SEC));
        engine_tell_oncall_async(l->configs, "", message);
    } else if (!off && l->clock_off) {
        medic_log_info("this replica's wall clock agrees with the database's again", "replica",
                       l->replica, "offset_seconds", seconds, NULL);
        snprintf(message, sizeof(message),
                 "medic replica %s: its wall clock agrees with the database's again (%ss off): "
                 "it may lead",
                 l->replica, seconds);
        engine_tell_oncall_async(l->configs, "", message);
    }
    l->clock_off = off;
    return !off;
}

static int renew(struct engine_leader *l)
{
    struct medic_error err = {0};
    if (!clock_agrees(l)) {
        if (l->leading) {
            int64_t epoch = l->epoch;
            step_down(l, "its wall clock is off from the database's");
            audit_lease_client_release(l->client, epoch, &err); /* another may lead at once */
        }
        return 0;
    }
    int64_t sent = medic_time_monotonic();
    char config[65];
    config_hash_now(l, config);
    struct audit_lease lease = {0};
    int rc = audit_lease_client_renew(l->client, config, l->lease / MEDIC_NS_PER_MS, &lease, &err);
    observe(l, (double)(medic_time_monotonic() - sent) / 1e9, rc != 0);
    if (rc == 0)
        compare_config(l, &lease, config);
    if (rc) {
        /* a lease this replica could not renew has expired by the time a
         * whole lease passed since the last renewal that held: step down
         * then (the database fences its writes already) */
        if (l->leading && medic_time_monotonic() - l->renewed_at >= l->lease) {
            char why[600];
            snprintf(why, sizeof(why), "cannot renew the lease: %s", err.msg);
            step_down(l, why);
        } else {
            medic_log_warn("cannot renew the lease", "replica", l->replica, "error", err.msg, NULL);
        }
        return 0;
    }
    if (lease.ours) {
        l->renewed_at = sent;
        if (l->leading && lease.epoch != l->epoch) /* it expired meanwhile: start afresh */
            step_down(l, "the lease expired before it was renewed");
        if (l->leading) {
            if (l->hooks.renewed && l->hooks.renewed(l->hooks.arg) != 0)
                give_up(l);
            return 0;
        }
        take_up(l, lease.epoch);
        return l->leading;
    }
    if (l->leading) {
        char why[160];
        snprintf(why, sizeof(why), "replica %s holds the lease (epoch %lld)", lease.holder,
                 (long long)lease.epoch);
        step_down(l, why);
    }
    return 0;
}

static void *leader_main(void *arg)
{
    struct engine_leader *l = arg;
    pthread_setname_np(pthread_self(), "medic-leader");
    medic_mutex_lock(&l->lock);
    while (!l->stopping) {
        medic_mutex_unlock(&l->lock);
        int again = renew(l);
        medic_mutex_lock(&l->lock);
        if (again)
            continue;
        struct timespec until = medic_time_deadline_in(l->lease / 3);
        while (!l->stopping && medic_cond_timedwait(&l->cond, &l->lock, &until) == 0)
            ;
    }
    medic_mutex_unlock(&l->lock);
    return NULL;
}

int engine_leader_start(const char *url, const char *replica, int64_t lease,
                        struct audit_store *store, struct config_slot *configs,
                        const struct engine_leader_hooks *hooks, struct engine_leader **out,
                        struct medic_error *err)
{
    struct engine_leader *l = calloc(1, sizeof(*l));
    if (!l)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = audit_lease_client_open(url, replica, &l->client, err);
    if (rc) {
        free(l);
        return rc;
    }
    l->configs = configs;
    snprintf(l->replica, sizeof(l->replica), "%s", replica);
    l->lease = lease;
    l->store = store;
    l->hooks = *hooks;
    medic_mutex_init(&l->lock, MEDIC_LOCK_LEADER);
    medic_cond_init(&l->cond);
    audit_store_set_term(store, replica, 0);
    if (pthread_create(&l->thread, NULL, leader_main, l) != 0) {
        medic_mutex_destroy(&l->lock);
        pthread_cond_destroy(&l->cond);
        audit_lease_client_free(l->client);
        free(l);
        return medic_error_set(err, MEDIC_E_NOMEM, "cannot start the leader thread");
    }
    *out = l;
    return 0;
}

void engine_leader_stop(struct engine_leader *l)
{
    if (!l)
        return;
    medic_mutex_lock(&l->lock);
    l->stopping = 1;
    pthread_cond_signal(&l->cond);
    medic_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    if (l->leading) {
        int64_t epoch = l->epoch;
        step_down(l, "shutting down");
        struct medic_error err = {0};
        if (audit_lease_client_release(l->client, epoch, &err) == 0)
            medic_log_info("lease released: another replica may lead at once", "replica",
                           l->replica, NULL);
    }
    audit_lease_client_free(l->client);
    medic_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l);
}

void engine_leader_describe(struct engine_leader *l, char *out, size_t size)
{
    medic_mutex_lock(&l->lock);
    if (l->leading)
        snprintf(out, size, "this replica (%s) leads, epoch %lld", l->replica, (long long)l->epoch);
    else if (l->holder[0])
        snprintf(out, size, "%s leads (epoch %lld); this replica (%s) stores webhooks only",
                 l->holder, (long long)l->holder_epoch, l->replica);
    else
        snprintf(out, size, "no leader known; this replica (%s) cannot reach the lease",
                 l->replica);
    size_t used = strlen(out);
    if (l->config_differs && used < size)
        snprintf(out + used, size - used,
                 "; its configuration differs from the leader's (%.12s): it will not take the "
                 "lease until they match, or an operator forces it",
                 l->holder_config);
    medic_mutex_unlock(&l->lock);
}

void engine_leader_metrics(struct engine_leader *l, struct medic_buf *b)
{
    medic_mutex_lock(&l->lock);
    medic_buf_printf(b,
                     "# HELP medic_ha_leader 1 while this replica holds the lease and acts.\n"
                     "# TYPE medic_ha_leader gauge\n"
                     "medic_ha_leader{replica=\"%s\"} %d\n"
                     "# HELP medic_ha_epoch The lease's term this replica last held.\n"
                     "# TYPE medic_ha_epoch gauge\n"
                     "medic_ha_epoch %lld\n"
                     "# HELP medic_ha_config_matches_leader 0 while this replica's "
                     "configuration differs from the lease holder's: it will not take the lease "
                     "then.\n"
                     "# TYPE medic_ha_config_matches_leader gauge\n"
                     "medic_ha_config_matches_leader %d\n"
                     "# HELP medic_ha_leadership_changes_total Times this replica began or "
                     "stopped leading.\n"
                     "# TYPE medic_ha_leadership_changes_total counter\n"
                     "medic_ha_leadership_changes_total{change=\"gained\"} %llu\n"
                     "medic_ha_leadership_changes_total{change=\"lost\"} %llu\n"
                     "# HELP medic_ha_lease_renew_failures_total Lease renewals that failed "
                     "(the database unreachable or erring).\n"
                     "# TYPE medic_ha_lease_renew_failures_total counter\n"
                     "medic_ha_lease_renew_failures_total %llu\n"
                     "# HELP medic_ha_lease_renew_duration_seconds Time one lease renewal "
                     "took.\n"
                     "# TYPE medic_ha_lease_renew_duration_seconds histogram\n",
                     l->replica, l->leading, (long long)l->epoch, !l->config_differs,
                     (unsigned long long)l->gains, (unsigned long long)l->losses,
                     (unsigned long long)l->failures);
    for (int i = 0; i < LEASE_BUCKETS; i++)
        medic_buf_printf(b, "medic_ha_lease_renew_duration_seconds_bucket{le=\"%g\"} %llu\n",
                         lease_buckets[i], (unsigned long long)l->buckets[i]);
    medic_buf_printf(b,
                     "medic_ha_lease_renew_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                     "medic_ha_lease_renew_duration_seconds_sum %.6f\n"
                     "medic_ha_lease_renew_duration_seconds_count %llu\n"
                     "# HELP medic_ha_clock_offset_seconds This host's wall clock less the "
                     "database's, at the last look; beyond 10 s either way the replica neither "
                     "leads nor decides.\n"
                     "# TYPE medic_ha_clock_offset_seconds gauge\n"
                     "medic_ha_clock_offset_seconds %.3f\n",
                     (unsigned long long)l->renewals, l->seconds_sum,
                     (unsigned long long)l->renewals, (double)l->clock_offset / 1e9);
    medic_mutex_unlock(&l->lock);
}

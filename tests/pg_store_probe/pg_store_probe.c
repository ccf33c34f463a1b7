/* SPDX-License-Identifier: Apache-2.0 */
/* A TEST PROBE for the audit store's fencing on PostgreSQL (audit.h,
 * audit_store_set_term), not part of medic: it opens the store on URL and
 * writes, in order, with the term set as each line says, printing one line
 * per write, "STEP RESULT", RESULT being "ok" or the error's name:
 *
 *   pg_store_probe URL
 *
 * tests/integration/test_ha_lease.py checks the lines: decisions and
 * intents are refused (fenced) without a term, with a wrong epoch and after
 * the lease expired, and written with the current one; notifications and
 * outcomes are written whatever the term. */
#include "audit.h"
#include "pg/pg.h"
#include "timeutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define REPLICA "probe-a"

static struct audit_store *store;
static int64_t decision_id, intent_id;

static void say(const char *step, int rc, const struct medic_error *err)
{
    printf("%s %s%s%s\n", step,
           rc == 0                ? "ok"
           : rc == MEDIC_E_FENCED ? "fenced"
                                  : "error",
           rc && rc != MEDIC_E_FENCED ? " " : "", rc && rc != MEDIC_E_FENCED ? err->msg : "");
    fflush(stdout);
}

static void decide(const char *step)
{
    struct audit_decision_in in = {.created_at = medic_time_now(),
                                   .node = "probe-node",
                                   .alertname = "ProbeAlert",
                                   .policy = "probe",
                                   .step = 0,
                                   .action = "notify",
                                   .risk = NAN,
                                   .verdict = "execute",
                                   .reason = step};
    struct medic_error err = {0};
    int64_t id = 0;
    int rc = audit_record_decision(store, &in, &id, &err);
    if (rc == 0)
        decision_id = id;
    say(step, rc, &err);
}

static void act(const char *step, int outcome)
{
    struct audit_action_in in = {.created_at = medic_time_now(),
                                 .decision_id = decision_id,
                                 .intent_id = outcome ? intent_id : 0,
                                 .action = "notify",
                                 .node = "probe-node",
                                 .result = outcome ? "succeeded" : "pending",
                                 .duration_ms = -1};
    struct medic_error err = {0};
    int64_t id = 0;
    int rc = audit_record_action(store, &in, &id, &err);
    if (rc == 0 && !outcome)
        intent_id = id;
    say(step, rc, &err);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pg_store_probe URL\n");
        return 2;
    }
    struct medic_error err = {0};
    PGconn *c = NULL;
    struct audit_lease lease;
    if (audit_store_open(argv[1], NULL, &store, &err) || audit_pg_connect(argv[1], &c, &err)) {
        fprintf(stderr, "pg_store_probe: %s\n", err.msg);
        return 1;
    }
    decide("decision-without-term");
    if (audit_lease_renew(c, REPLICA, "probe", 60000, &lease, &err) || !lease.ours) {
        fprintf(stderr, "pg_store_probe: cannot take the lease: %s\n", err.msg);
        return 1;
    }
    audit_store_set_term(store, REPLICA, lease.epoch);
    decide("decision-with-term");
    act("intent-with-term", 0);
    audit_store_set_term(store, REPLICA, lease.epoch + 1);
    decide("decision-with-wrong-epoch");
    act("outcome-with-wrong-epoch", 1);
    audit_store_set_term(store, "probe-b", lease.epoch);
    decide("decision-as-other-replica");
    audit_store_set_term(store, REPLICA, lease.epoch);
    if (audit_lease_release(c, REPLICA, lease.epoch, &err)) {
        fprintf(stderr, "pg_store_probe: %s\n", err.msg);
        return 1;
    }
    decide("decision-after-release");
    act("intent-after-release", 0);
    struct medic_notification n;
    medic_notification_init(&n);
    n.group_key = "probe-group";
    n.status = MEDIC_STATUS_FIRING;
    const char body[] = "{}";
    struct audit_notification_in nin = {
        .notification = &n, .raw = body, .raw_len = 2, .received_at = medic_time_now()};
    struct audit_notification_result res;
    say("notification-after-release", audit_record_notification(store, &nin, &res, &err), &err);
    struct audit_stats stats;
    audit_store_stats(store, &stats);
    printf("fenced-count %llu\n", (unsigned long long)stats.fenced);
    audit_store_free(store);
    PQfinish(c);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* What a health check accepts (agent_health_judge against
 * safety.health): the defaults refuse each finding, and each criterion
 * lets its own finding pass and no other. */
#include "agent_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* A report like the agent's: count GPUs visible, GPU 1 with what is
 * given. */
static const char *report(int count, const char *recovery, int remap_pending, int remap_failure,
                          int retired)
{
    static char json[1024];
    snprintf(json, sizeof(json),
             "{\"gpu_count\":%d,\"gpus\":[{\"index\":0,\"recovery_action\":\"none\","
             "\"remapped_rows\":{\"pending\":false,\"failure\":false},"
             "\"retired_pages_pending\":false},{\"index\":1,\"recovery_action\":%s,"
             "\"remapped_rows\":{\"pending\":%s,\"failure\":%s},"
             "\"retired_pages_pending\":%s}]}",
             count, recovery, remap_pending ? "true" : "false", remap_failure ? "true" : "false",
             retired ? "true" : "false");
    return json;
}

static int judge(const char *json, const struct medic_health_criteria *h, char *detail)
{
    return agent_health_judge(json, strlen(json), 8, h, detail, 600);
}

static void test_defaults_refuse_each_finding(void **state)
{
    (void)state;
    struct medic_health_criteria h;
    medic_health_criteria_default(&h);
    assert_int_equal(h.missing_gpus, 0);
    assert_int_equal(h.recovery_ok, 1u); /* none only */
    assert_true(h.slurm && h.bmc && !h.remap_pending_ok && !h.retirement_pending_ok);
    char d[600];
    assert_int_equal(judge(report(8, "\"none\"", 0, 0, 0), &h, d), 1);
    assert_non_null(strstr(d, "as the inventory says"));
    /* a driver that does not offer the reading is not a finding */
    assert_int_equal(judge(report(8, "null", 0, 0, 0), &h, d), 1);
    assert_int_equal(judge(report(7, "\"none\"", 0, 0, 0), &h, d), 0);
    assert_non_null(strstr(d, "7 of 8 GPUs visible"));
    assert_int_equal(judge(report(8, "\"gpu_reset\"", 0, 0, 0), &h, d), 0);
    assert_non_null(strstr(d, "GPU 1: the driver recommends gpu_reset"));
    assert_int_equal(judge(report(8, "\"something_new\"", 0, 0, 0), &h, d), 0);
    assert_int_equal(judge(report(8, "\"none\"", 1, 0, 0), &h, d), 0);
    assert_non_null(strstr(d, "row remapping is pending"));
    assert_int_equal(judge(report(8, "\"none\"", 0, 0, 1), &h, d), 0);
    assert_non_null(strstr(d, "page retirement is pending"));
    assert_int_equal(judge("{\"gpus\":[]}", &h, d), -1);
}

static void test_each_criterion_passes_its_own_finding(void **state)
{
    (void)state;
    struct medic_health_criteria h;
    char d[600];
    medic_health_criteria_default(&h);
    h.missing_gpus = 1;
    assert_int_equal(judge(report(7, "\"none\"", 0, 0, 0), &h, d), 1);
    assert_non_null(strstr(d, "missing_gpus allows fewer"));
    assert_int_equal(judge(report(6, "\"none\"", 0, 0, 0), &h, d), 0);
    assert_int_equal(judge(report(7, "\"gpu_reset\"", 0, 0, 0), &h, d), 0);

    medic_health_criteria_default(&h);
    h.recovery_ok |= 1u << medic_recovery_parse("drain_p2p");
    assert_int_equal(judge(report(8, "\"drain_p2p\"", 0, 0, 0), &h, d), 1);
    assert_int_equal(judge(report(8, "\"gpu_reset\"", 0, 0, 0), &h, d), 0);

    medic_health_criteria_default(&h);
    h.remap_pending_ok = 1;
    assert_int_equal(judge(report(8, "\"none\"", 1, 0, 0), &h, d), 1);
    /* a failed remapping never passes: the GPU has no spare rows left */
    assert_int_equal(judge(report(8, "\"none\"", 1, 1, 0), &h, d), 0);
    assert_non_null(strstr(d, "row remapping failed"));
    assert_int_equal(judge(report(8, "\"none\"", 0, 0, 1), &h, d), 0);

    medic_health_criteria_default(&h);
    h.retirement_pending_ok = 1;
    assert_int_equal(judge(report(8, "\"none\"", 0, 0, 1), &h, d), 1);
    assert_int_equal(judge(report(8, "\"none\"", 1, 0, 1), &h, d), 0);
}

/* Evidence of a repair: a boot, or a GPU enumerated, later than the
 * repair; an earlier or missing time is no evidence. */
static void test_evidence_after_a_repair(void **state)
{
    (void)state;
    static const char json[] = "{\"booted_at\":\"2026-11-22T08:10:30Z\",\"gpu_count\":2,\"gpus\":["
                               "{\"index\":0,\"enumerated_at\":\"2026-11-22T08:00:00Z\"},"
                               "{\"index\":1,\"enumerated_at\":\"2026-11-22T08:12:00.250Z\"}]}";
    const int64_t cycle = INT64_C(1795335000) * 1000000000; /* 2026-11-22T08:10:00Z */
    char detail[300];
    assert_int_equal(agent_health_after(json, strlen(json), -1, cycle, detail, sizeof(detail)), 1);
    assert_non_null(strstr(detail, "the node booted at 2026-11-22T08:10:30Z, after"));
    assert_int_equal(agent_health_after(json, strlen(json), 1, cycle, detail, sizeof(detail)), 1);
    assert_non_null(strstr(detail, "GPU 1 enumerated at 2026-11-22T08:12:00.250Z, after"));
    assert_int_equal(agent_health_after(json, strlen(json), 0, cycle, detail, sizeof(detail)), 0);
    assert_non_null(strstr(detail, "GPU 0 enumerated at 2026-11-22T08:00:00Z, not since"));
    /* a GPU the report does not list, a report without times */
    assert_int_equal(agent_health_after(json, strlen(json), 5, cycle, detail, sizeof(detail)), -1);
    assert_int_equal(agent_health_after("{}", 2, -1, cycle, detail, sizeof(detail)), -1);
    assert_non_null(strstr(detail, "does not say"));
    assert_int_equal(agent_health_after("not json", 8, 0, cycle, detail, sizeof(detail)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_refuse_each_finding),
        cmocka_unit_test(test_each_criterion_passes_its_own_finding),
        cmocka_unit_test(test_evidence_after_a_repair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

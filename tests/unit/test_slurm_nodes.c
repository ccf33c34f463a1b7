/* SPDX-License-Identifier: Apache-2.0 */
/* Slurm's list of nodes as medic reads it: GPU counts from every form of
 * Gres, and the JSON of `scontrol show nodes --json` (Slurm 23.02 and
 * later; older ones are read in their one-line form, tested against real
 * slurmctld in integration/test_slurm). */
#include "slurm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static void test_gres(void **state)
{
    (void)state;
    assert_int_equal(slurm_gres_gpus("gpu:8"), 8);
    assert_int_equal(slurm_gres_gpus("gpu:h100:8"), 8);
    assert_int_equal(slurm_gres_gpus("gpu:h100:8(S:0-1)"), 8);
    assert_int_equal(slurm_gres_gpus("gpu:h100:4(S:0),gpu:h100:4(S:1)"), 8);
    assert_int_equal(slurm_gres_gpus("gpu:a100:4(S:0,1),shard:a100:32"), 4);
    assert_int_equal(slurm_gres_gpus("shard:8"), 0);
    assert_int_equal(slurm_gres_gpus(""), 0);
    assert_int_equal(slurm_gres_gpus("gpu:"), 0);
}

/* Slurm's times (BootTime, SlurmdStartTime) are the host's local time,
 * whole seconds; "None" and "Unknown" are no time. */
static void test_time_parse(void **state)
{
    (void)state;
    setenv("TZ", "Europe/Berlin", 1);
    tzset();
    /* 10:01:03 in Berlin in November is 09:01:03 UTC */
    assert_true(slurm_time_parse("2026-11-27T10:01:03") ==
                INT64_C(1795770063) * INT64_C(1000000000));
    assert_true(slurm_time_parse("2026-11-27T10:01:04") - slurm_time_parse("2026-11-27T10:01:03") ==
                INT64_C(1000000000));
    assert_true(slurm_time_parse("None") == -1);
    assert_true(slurm_time_parse("Unknown") == -1);
    assert_true(slurm_time_parse("2026-11-27T10:01:03Z") == -1);
    assert_true(slurm_time_parse("") == -1);
    unsetenv("TZ");
    tzset();
}

static void test_parse(void **state)
{
    (void)state;
    static const char json[] =
        "{\"meta\":{},\"nodes\":[{\"name\":\"gpu-0001\",\"partitions\":[\"train\",\"debug\"],"
        "\"gres\":\"gpu:h100:8(S:0-1)\"},{\"name\":\"login01\",\"partitions\":[],\"gres\":\"\"},"
        "{\"partitions\":[\"x\"]}]}";
    struct slurm_node_list l;
    struct medic_error err = {0};
    assert_int_equal(slurm_nodes_parse(json, strlen(json), &l, &err), 0);
    assert_int_equal(l.count, 2); /* a node without a name is left out */
    assert_string_equal(l.items[0].name, "gpu-0001");
    assert_string_equal(l.items[0].partitions, "train,debug");
    assert_int_equal(l.items[0].gpus, 8);
    assert_string_equal(l.items[1].partitions, "");
    assert_int_equal(l.items[1].gpus, 0);
    slurm_node_list_release(&l);
    assert_int_equal(slurm_nodes_parse("[1,2]", 5, &l, &err), MEDIC_E_INVALID);
    assert_non_null(strstr(err.msg, "scontrol show nodes --json"));
}

/* A node's state and reason, in both forms: the JSON's state (a list in
 * newer releases, a string with state_flags in older ones) joined as the
 * one-line form writes it, and the reason with its stamp. */
static void test_state_and_reason(void **state)
{
    (void)state;
    static const char json[] = "{\"nodes\":[{\"name\":\"a\",\"state\":[\"IDLE\",\"DRAIN\"],"
                               "\"reason\":\"Xid 79 (medic policy xid)\"},"
                               "{\"name\":\"b\",\"state\":\"mixed\",\"state_flags\":[\"MAINT\"]},"
                               "{\"name\":\"c\",\"state\":\"idle\"}]}";
    struct slurm_node_list l;
    struct medic_error err = {0};
    assert_int_equal(slurm_nodes_parse(json, strlen(json), &l, &err), 0);
    assert_int_equal(l.count, 3);
    assert_string_equal(l.items[0].state, "IDLE+DRAIN");
    assert_string_equal(l.items[0].reason, "Xid 79 (medic policy xid)");
    assert_string_equal(l.items[1].state, "MIXED+MAINT");
    assert_int_equal(l.items[1].maint, 1);
    assert_string_equal(l.items[1].reason, "");
    assert_string_equal(l.items[2].state, "IDLE");
    slurm_node_list_release(&l);
    static const char text[] =
        "NodeName=n1 Arch=x86_64 State=IDLE+DRAIN Partitions=gpu  BootTime=None "
        "Reason=Xid 79 on GPU 3 (medic policy xid) [root@2026-11-27T12:58:20]\n"
        "NodeName=n2 Arch=x86_64 State=ALLOCATED Partitions=gpu  BootTime=None\n";
    assert_int_equal(slurm_nodes_parse_text(text, &l, &err), 0);
    assert_int_equal(l.count, 2);
    assert_string_equal(l.items[0].state, "IDLE+DRAIN");
    assert_string_equal(l.items[0].reason,
                        "Xid 79 on GPU 3 (medic policy xid) [root@2026-11-27T12:58:20]");
    assert_string_equal(l.items[1].state, "ALLOCATED");
    assert_string_equal(l.items[1].reason, "");
    slurm_node_list_release(&l);
}

/* Slurm's topology, one switch a line; a node's features in both forms. */
static void test_topology_and_features(void **state)
{
    (void)state;
    static const char text[] = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu-[01-02]\n"
                               "SwitchName=spine Level=1 LinkSpeed=1 Nodes=gpu-[01-03] "
                               "Switches=leaf[1-2]\n";
    struct slurm_switch_list sw;
    struct medic_error err = {0};
    assert_int_equal(slurm_topology_parse(text, &sw, &err), 0);
    assert_int_equal(sw.count, 2);
    assert_string_equal(sw.items[0].name, "leaf1");
    assert_int_equal(sw.items[0].level, 0);
    assert_string_equal(sw.items[0].nodes, "gpu-[01-02]");
    assert_int_equal(sw.items[1].level, 1);
    slurm_switch_list_release(&sw);
    assert_int_equal(slurm_topology_parse("", &sw, &err), 0);
    assert_int_equal(sw.count, 0);
    slurm_switch_list_release(&sw);
    struct slurm_node_list l;
    static const char json[] = "{\"nodes\":[{\"name\":\"a\",\"features\":[\"rack=r01\","
                               "\"h100\"]},{\"name\":\"b\",\"features\":\"rack=r02\"}]}";
    assert_int_equal(slurm_nodes_parse(json, strlen(json), &l, &err), 0);
    assert_string_equal(l.items[0].features, "rack=r01,h100");
    assert_string_equal(l.items[1].features, "rack=r02");
    slurm_node_list_release(&l);
    static const char line[] = "NodeName=n1 AvailableFeatures=rack=r01 ActiveFeatures=rack=r01 "
                               "State=IDLE\nNodeName=n2 AvailableFeatures=(null) State=IDLE\n";
    assert_int_equal(slurm_nodes_parse_text(line, &l, &err), 0);
    assert_string_equal(l.items[0].features, "rack=r01");
    assert_string_equal(l.items[1].features, "");
    slurm_node_list_release(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gres),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_state_and_reason),
        cmocka_unit_test(test_topology_and_features),
        cmocka_unit_test(test_time_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

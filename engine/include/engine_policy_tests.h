/* SPDX-License-Identifier: Apache-2.0 */
/* The policy test runner (engine/policy_tests.c), for medic policy test. */
#ifndef MEDIC_ENGINE_POLICY_TESTS_H
#define MEDIC_ENGINE_POLICY_TESTS_H

/* Runs the tests of one file, printing PASS or FAIL for each and the
 * difference of a failure; counts them into passed and failed. 0, or an
 * error (printed) when the file cannot be run. */
int medic_policy_test_file(const char *path, int *passed, int *failed);

#endif

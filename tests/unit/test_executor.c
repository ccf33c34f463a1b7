/* SPDX-License-Identifier: Apache-2.0 */
/* The action executor: an intent that cannot be recorded because the audit
 * database is unreachable is tried again until it lands, and the action
 * then runs once; a refused intent never runs; stopping ends a retry. */
#include "executor.h"
#include "timeutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

struct world {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int fail_left; /* intents refused before one is accepted; -1: always */
    int fail_code; /* the code they fail with */
    int intents, runs, outcomes;
    int64_t outcome_intent;
};

static int hook_intent(void *ctx, const struct executor_job *job, int64_t *intent_id,
                       struct medic_error *err)
{
    (void)job;
    struct world *w = ctx;
    pthread_mutex_lock(&w->lock);
    int n = ++w->intents;
    int fail = w->fail_left != 0;
    if (w->fail_left > 0)
        w->fail_left--;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    if (fail)
        return medic_error_set(err, w->fail_code, "refused (try %d)", n);
    *intent_id = 1000 + n;
    return 0;
}

static enum medic_outcome hook_run(void *ctx, const struct executor_job *job, char *detail,
                                   size_t size)
{
    (void)job;
    struct world *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->runs++;
    pthread_mutex_unlock(&w->lock);
    snprintf(detail, size, "ran");
    return MEDIC_OUTCOME_SUCCEEDED;
}

static void hook_outcome(void *ctx, const struct executor_job *job, int64_t intent_id,
                         enum medic_outcome outcome, int64_t duration_ms, const char *detail)
{
    (void)job, (void)outcome, (void)duration_ms, (void)detail;
    struct world *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->outcomes++;
    w->outcome_intent = intent_id;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

static struct executor *start(struct world *w, int fail_left, int fail_code)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
    medic_cond_init(&w->changed);
    w->fail_left = fail_left;
    w->fail_code = fail_code;
    struct executor_hooks hooks = {w, hook_intent, hook_run, hook_outcome};
    struct executor *e = NULL;
    struct medic_error err = {0};
    assert_int_equal(executor_start(2, 8, &hooks, &e, &err), 0);
    struct executor_job job = {.decision_id = 7};
    medic_action_init(&job.action, MEDIC_ACTION_NOTIFY);
    snprintf(job.node, sizeof(job.node), "gpu-node-01");
    assert_int_equal(executor_submit(e, &job), 0);
    return e;
}

/* Waits (10 s at most) until *field reaches at least want. */
static int wait_for(struct world *w, const int *field, int want)
{
    int64_t deadline = medic_time_monotonic() + 10 * MEDIC_NS_PER_SEC;
    pthread_mutex_lock(&w->lock);
    while (*field < want && medic_time_monotonic() < deadline) {
        struct timespec t = medic_time_deadline_in(20 * MEDIC_NS_PER_MS);
        pthread_cond_timedwait(&w->changed, &w->lock, &t);
    }
    int got = *field;
    pthread_mutex_unlock(&w->lock);
    return got;
}

static void test_an_unreachable_database_delays_the_action_until_its_intent_lands(void **unused)
{
    (void)unused;
    struct world w;
    struct executor *e = start(&w, 3, MEDIC_E_STORE);
    assert_int_equal(wait_for(&w, &w.outcomes, 1), 1);
    executor_stop(e);
    assert_int_equal(w.intents, 4); /* three refused, the fourth landed */
    assert_int_equal(w.runs, 1);
    assert_int_equal(w.outcomes, 1);
    assert_int_equal(w.outcome_intent, 1004);
}

static void test_a_full_audit_queue_is_tried_again(void **unused)
{
    (void)unused;
    struct world w;
    struct executor *e = start(&w, 1, MEDIC_E_BUSY);
    assert_int_equal(wait_for(&w, &w.outcomes, 1), 1);
    executor_stop(e);
    assert_int_equal(w.intents, 2);
    assert_int_equal(w.runs, 1);
}

static void test_a_refused_intent_never_runs_and_is_not_tried_again(void **unused)
{
    (void)unused;
    int codes[] = {MEDIC_E_INVALID, MEDIC_E_FENCED, MEDIC_E_CLOSED};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        struct world w;
        struct executor *e = start(&w, -1, codes[i]);
        assert_int_equal(wait_for(&w, &w.intents, 1), 1);
        executor_stop(e); /* lets the job finish: no second try may follow */
        assert_int_equal(w.intents, 1);
        assert_int_equal(w.runs, 0);
        assert_int_equal(w.outcomes, 0);
    }
}

static void test_stopping_ends_a_retry_without_running(void **unused)
{
    (void)unused;
    struct world w;
    struct executor *e = start(&w, -1, MEDIC_E_STORE);
    assert_int_equal(wait_for(&w, &w.intents, 2), 2); /* it is retrying */
    int64_t before = medic_time_monotonic();
    executor_stop(e);
    int64_t took = medic_time_monotonic() - before;
    assert_true(took < 5 * MEDIC_NS_PER_SEC); /* not the whole retry window */
    assert_int_equal(w.runs, 0);
    assert_int_equal(w.outcomes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_unreachable_database_delays_the_action_until_its_intent_lands),
        cmocka_unit_test(test_a_full_audit_queue_is_tried_again),
        cmocka_unit_test(test_a_refused_intent_never_runs_and_is_not_tried_again),
        cmocka_unit_test(test_stopping_ends_a_retry_without_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's directive table (config/directives.c) against
 * itself: every default the reference prints as one value, written back
 * in a file, loads as exactly the defaults medic runs with (so the
 * printed default, its bounds' text and the parser agree, for the table's
 * own defaults and the modules' alike); a change of a key is named, and a
 * reload's changes that wait for a restart only for the rows that say so. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char path[64];

static int setup(void **state)
{
    (void)state;
    strcpy(path, "/tmp/medic-test-table-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return unlink(path);
}

static void load_text(const char *text, struct medic_config *c)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    struct medic_error err = {0};
    if (medic_config_load(path, c, &err))
        fail_msg("'%s' does not load: %s", text, err.msg);
}

/* key (a.b.c) = value as YAML flow mappings: "a: { b: { c: value } }". */
static void as_yaml(const char *key, const char *value, char *out, size_t size)
{
    size_t n = 0, depth = 0;
    for (const char *k = key; *k;) {
        size_t len = strcspn(k, ".");
        n += (size_t)snprintf(out + n, size - n, "%.*s: ", (int)len, k);
        k += len;
        if (*k == '.') {
            n += (size_t)snprintf(out + n, size - n, "{ ");
            depth++;
            k++;
        }
    }
    n += (size_t)snprintf(out + n, size - n, "%s", value);
    while (depth--)
        n += (size_t)snprintf(out + n, size - n, " }");
    snprintf(out + n, size - n, "\n");
}

static void test_printed_defaults_load_as_the_defaults(void **state)
{
    (void)state;
    struct medic_buf ref;
    medic_buf_init(&ref, 0);
    assert_int_equal(medic_config_reference(&ref), 0);
    struct medic_config defaults;
    assert_int_equal(medic_config_defaults(&defaults), 0);
    size_t tried = 0;
    for (char *line = strtok(ref.data, "\n"); line; line = strtok(NULL, "\n")) {
        char key[128], value[256];
        /* | `key` | `one value` | ... ; not a list, a mapping or a policy's */
        if (sscanf(line, "| `%127[^`]` | `%255[^`]` |", key, value) != 2 || value[0] == '[' ||
            value[0] == '{' || strncmp(key, "policies[]", 10) == 0 ||
            strncmp(key, "inventory.", 10) == 0)
            continue;
        char text[512];
        struct medic_config c, with_storm, *base = &defaults;
        if (strncmp(key, "safety.storm.", 13) == 0) {
            /* a storm's settings need its notifier: compared with it alone */
            static const char notifier[] =
                "notifiers: { n: { type: webhook, url: 'http://127.0.0.1:9/' } }\n";
            snprintf(text, sizeof(text), "%ssafety: { storm: { notifier: n } }\n", notifier);
            load_text(text, &with_storm);
            base = &with_storm;
            snprintf(text, sizeof(text), "%ssafety: { storm: { notifier: n, %s: %s } }\n", notifier,
                     key + 13, value);
        } else {
            as_yaml(key, value, text, sizeof(text));
        }
        load_text(text, &c);
        struct medic_buf diff;
        medic_buf_init(&diff, 0);
        if (medic_config_changes(base, &c, 0, &diff))
            fail_msg("%s: the printed default %s loads as another value (%s)", key, value,
                     diff.data);
        medic_buf_release(&diff);
        medic_config_release(&c);
        if (base != &defaults)
            medic_config_release(&with_storm);
        tried++;
    }
    /* listen, mode, log_level, audit.*, ha.lease, limits.*, prometheus,
     * model, slurm, engine, safety's values */
    assert_true(tried >= 25);
    medic_config_release(&defaults);
    medic_buf_release(&ref);
}

static void test_changes_named(void **state)
{
    (void)state;
    struct medic_config a, b;
    load_text("listen: 127.0.0.1:9799\n", &a);
    load_text("listen: 0.0.0.0:9799\nlimits: { max_alerts: 10 }\nlog_level: warn\n"
              "safety: { max_alert_age: 2h }\nengine: { tick_interval: 1s }\n",
              &b);
    struct medic_buf all, later;
    medic_buf_init(&all, 0);
    medic_buf_init(&later, 0);
    assert_int_equal(medic_config_changes(&a, &b, 0, &all), 5);
    assert_string_equal(all.data, "listen, log_level, limits.max_alerts, engine.tick_interval, "
                                  "safety.max_alert_age");
    /* a reload applies the limits, the log level and the alerts' age */
    assert_int_equal(medic_config_changes(&a, &b, 1, &later), 2);
    assert_string_equal(later.data, "listen, engine.tick_interval");
    medic_buf_release(&all);
    medic_buf_release(&later);
    medic_config_release(&a);
    medic_config_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_printed_defaults_load_as_the_defaults, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_changes_named, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

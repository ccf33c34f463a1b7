/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"
#include "buf.h"
#include "timeutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum medic_log_level log_threshold = MEDIC_LOG_INFO;

void medic_log_set_level(enum medic_log_level level)
{
    log_threshold = level;
}

static const char *const level_names[] = {"debug", "info", "warn", "error"};
#define LEVELS ((int)(sizeof(level_names) / sizeof(level_names[0])))

int medic_log_parse_level(const char *name)
{
    for (int i = 0; i < LEVELS; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

const char *medic_log_level_name(int level)
{
    return level >= 0 && level < LEVELS ? level_names[level] : "?";
}

static void log_value(struct medic_buf *b, const char *v)
{
    int quote = (*v == '\0');
    for (const char *p = v; *p && !quote; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p >= 0x7f)
            quote = 1;
    if (quote)
        medic_buf_json_string(b, v);
    else
        medic_buf_puts(b, v);
}

void medic_log(enum medic_log_level level, const char *msg, ...)
{
    if (level < log_threshold)
        return;
    char ts[40];
    medic_time_format(medic_time_now(), ts, sizeof(ts));
    struct medic_buf b;
    medic_buf_init(&b, 16384);
    medic_buf_printf(&b, "ts=%s level=%s msg=", ts, medic_log_level_name((int)level));
    medic_buf_json_string(&b, msg);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (!key)
            break;
        const char *value = va_arg(ap, const char *);
        medic_buf_printf(&b, " %s=", key);
        log_value(&b, value ? value : "");
    }
    va_end(ap);
    medic_buf_append(&b, "\n", 1);
    /* one write() per line keeps lines whole when threads log at once */
    if (b.data && write(STDERR_FILENO, b.data, b.len) < 0) {
        /* nowhere left to report a failed log write */
    }
    medic_buf_release(&b);
}

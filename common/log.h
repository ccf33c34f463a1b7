/* SPDX-License-Identifier: Apache-2.0 */
/* Structured logs in logfmt on stderr:
 *   ts=2026-11-22T08:50:00.123Z level=info msg="listening" addr=127.0.0.1:9799
 * Fields after the message are key/value string pairs ending with NULL;
 * values are quoted when they need it. Messages are lowercase. */
#ifndef MEDIC_LOG_H
#define MEDIC_LOG_H

enum medic_log_level { MEDIC_LOG_DEBUG, MEDIC_LOG_INFO, MEDIC_LOG_WARN, MEDIC_LOG_ERROR };

/* Sets the lowest level written (default info). */
void medic_log_set_level(enum medic_log_level level);
/* Parses "debug", "info", "warn" or "error"; returns -1 when unknown. */
int medic_log_parse_level(const char *name);
/* A level's name (debug, info, warn, error). */
const char *medic_log_level_name(int level);

void medic_log(enum medic_log_level level, const char *msg, ...) __attribute__((sentinel));

#define medic_log_debug(...) medic_log(MEDIC_LOG_DEBUG, __VA_ARGS__)
#define medic_log_info(...) medic_log(MEDIC_LOG_INFO, __VA_ARGS__)
#define medic_log_warn(...) medic_log(MEDIC_LOG_WARN, __VA_ARGS__)
#define medic_log_error(...) medic_log(MEDIC_LOG_ERROR, __VA_ARGS__)

#endif

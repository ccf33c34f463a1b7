/* SPDX-License-Identifier: Apache-2.0 */
/* Project-wide error vocabulary: functions return 0 on success or a negative
 * MEDIC_E_* code; medic_strerror() names it. A struct medic_error carries a
 * human message for the caller to log or send back. */
#ifndef MEDIC_ERROR_H
#define MEDIC_ERROR_H

#include <stddef.h>

enum {
    MEDIC_OK = 0,
    MEDIC_E_NOMEM = -1,    /* allocation failed */
    MEDIC_E_INVALID = -2,  /* malformed input; the message says what and where */
    MEDIC_E_LIMIT = -3,    /* input over a configured cap */
    MEDIC_E_IO = -4,       /* a file or socket operation failed */
    MEDIC_E_STORE = -5,    /* the audit database failed */
    MEDIC_E_BUSY = -6,     /* a queue is full; try again later */
    MEDIC_E_NOTFOUND = -7, /* the thing asked for does not exist */
    MEDIC_E_AUTH = -8,     /* credentials missing or wrong */
    MEDIC_E_CLOSED = -9,   /* the component is shutting down */
    MEDIC_E_FENCED = -10,  /* a replica's leadership ended: it may no longer act */
};

/* A message for humans, filled by the function that detected the problem. */
struct medic_error {
    int code;
    char msg[512];
};

/* Returns a static, lowercase description of a MEDIC_E_* code. */
const char *medic_strerror(int code);

/* Fills err (when not NULL) with code and a printf-style message; returns
 * code so that callers can write `return medic_error_set(err, ...)`. */
int medic_error_set(struct medic_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Puts "prefix: " (a file name, say) before err's message. */
void medic_error_prefix(struct medic_error *err, const char *prefix);

/* Aborts with file:line for a broken invariant (a bug, never bad input). */
#define MEDIC_BUG(msg) medic_bug(__FILE__, __LINE__, (msg))
void medic_bug(const char *file, int line, const char *msg) __attribute__((noreturn));

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *medic_strerror(int code)
{
    switch (code) {
    case MEDIC_OK:
        return "success";
    case MEDIC_E_NOMEM:
        return "out of memory";
    case MEDIC_E_INVALID:
        return "invalid input";
    case MEDIC_E_LIMIT:
        return "input over limit";
    case MEDIC_E_IO:
        return "i/o error";
    case MEDIC_E_STORE:
        return "audit store error";
    case MEDIC_E_BUSY:
        return "queue full";
    case MEDIC_E_NOTFOUND:
        return "not found";
    case MEDIC_E_AUTH:
        return "authentication failed";
    case MEDIC_E_CLOSED:
        return "shutting down";
    case MEDIC_E_FENCED:
        return "not the leader";
    default:
        return "unknown error";
    }
}

int medic_error_set(struct medic_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

void medic_error_prefix(struct medic_error *err, const char *prefix)
{
    if (!err)
        return;
    char why[sizeof(err->msg)];
    snprintf(why, sizeof(why), "%s", err->msg);
    snprintf(err->msg, sizeof(err->msg), "%.100s: %.400s", prefix, why);
}

void medic_bug(const char *file, int line, const char *msg)
{
    fprintf(stderr, "BUG at %s:%d: %s\n", file, line, msg);
    abort();
}

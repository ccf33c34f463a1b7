/* SPDX-License-Identifier: Apache-2.0 */
/* A copy of the policy engine's state through its rows in memory: what
 * POST /api/v1/dry-run and the on-call page read while the pipeline goes
 * on with the original. */
#include "engine_internal.h"
#include "buf.h"

#include <string.h>

/* A snapshot is each row's kind and value, each ended by a NUL (a value is
 * JSON, which holds none). */
static int snapshot_row(void *arg, const char *kind, const char *key, const char *value, size_t len,
                        const struct policy_decision_ref *refs, size_t ref_count)
{
    (void)key;
    (void)refs; /* a decision not resolved yet stays one in the copy */
    (void)ref_count;
    struct medic_buf *b = arg;
    return medic_buf_append(b, kind, strlen(kind) + 1) || medic_buf_append(b, value, len) ||
                   medic_buf_append(b, "", 1)
               ? MEDIC_E_NOMEM
               : 0;
}

int policy_state_snapshot(const struct policy_state *st, struct medic_buf *out)
{
    return policy_state_rows(st, snapshot_row, out);
}

int policy_state_from_snapshot(const char *rows, size_t len, struct policy_state **out,
                               struct medic_error *err)
{
    struct policy_state *copy = policy_state_new();
    if (!copy)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < len;) {
        const char *kind = rows + at;
        const char *value = memchr(kind, '\0', len - at);
        const char *end = value ? memchr(value + 1, '\0', len - (size_t)(value + 1 - rows)) : NULL;
        if (!end) {
            rc = medic_error_set(err, MEDIC_E_INVALID, "a snapshot of the engine state is cut");
            break;
        }
        value++;
        rc = policy_state_load_row(copy, kind, value, (size_t)(end - value), err);
        at = (size_t)(end + 1 - rows);
    }
    if (rc) {
        policy_state_free(copy);
        return rc;
    }
    policy_state_loaded(copy);
    *out = copy;
    return 0;
}

int policy_state_copy(const struct policy_state *st, struct medic_mutex *lock,
                      struct policy_state **out, struct medic_error *err)
{
    struct medic_buf rows;
    medic_buf_init(&rows, 0);
    if (lock)
        medic_mutex_lock(lock);
    int rc = policy_state_snapshot(st, &rows);
    if (lock)
        medic_mutex_unlock(lock);
    if (rc)
        rc = medic_error_set(err, rc, "cannot copy the engine state: %s", medic_strerror(rc));
    else
        rc = policy_state_from_snapshot(rows.data ? rows.data : "", rows.len, out, err);
    medic_buf_release(&rows);
    return rc;
}

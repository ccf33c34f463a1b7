/* SPDX-License-Identifier: Apache-2.0 */
#include "chain.h"
#include "schema.h"
#include "sha256.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char audit_decision_hashed_columns[] =
    "id, created_at, notification_id, alert_id, fingerprint, node, alertname, policy, step, "
    "action, params, risk, model_hash, verdict, reason, config_hash, prev_hash";
const char audit_change_hashed_columns[] =
    "id, created_at, incident, node, policy, from_state, state, cause, decision_id, prev_hash";
const char audit_action_hashed_columns[] =
    "id, created_at, decision_id, phase, intent_id, action, node, target, params, result, "
    "duration_ms, detail, prev_hash";

static void chain_null(struct medic_sha256 *h)
{
    medic_sha256_field(h, NULL);
}

static void chain_int(struct medic_sha256 *h, long long v)
{
    char num[40];
    snprintf(num, sizeof(num), "i%lld", v);
    medic_sha256_field(h, num);
}

static void chain_real(struct medic_sha256 *h, double v)
{
    char num[40];
    snprintf(num, sizeof(num), "r%.17g", v);
    medic_sha256_field(h, num);
}

static void chain_text(struct medic_sha256 *h, const char *v)
{
    medic_sha256_update(h, "t", 1);
    medic_sha256_field(h, v);
}

struct medic_sha256 *audit_chain_row_new(void)
{
    return medic_sha256_new();
}

void audit_chain_row_int(struct medic_sha256 *h, long long v)
{
    chain_int(h, v);
}

void audit_chain_row_id(struct medic_sha256 *h, long long id)
{
    if (id > 0)
        chain_int(h, id);
    else
        chain_null(h);
}

void audit_chain_row_real(struct medic_sha256 *h, double v)
{
    if (isnan(v))
        chain_null(h);
    else
        chain_real(h, v);
}

void audit_chain_row_text(struct medic_sha256 *h, const char *v)
{
    if (v)
        chain_text(h, v);
    else
        chain_null(h);
}

void audit_chain_row_finish(struct medic_sha256 *h, char out[65])
{
    medic_sha256_finish(h, out);
}

void audit_chain_hash_db_row(struct db_stmt *st, int n, char out[65])
{
    struct medic_sha256 *h = medic_sha256_new();
    for (int i = 0; i < n; i++) {
        switch (db_column_type(st, i)) {
        case DB_NULL:
            chain_null(h);
            break;
        case DB_INT:
            chain_int(h, (long long)db_column_int64(st, i));
            break;
        case DB_REAL:
            chain_real(h, db_column_double(st, i));
            break;
        default:
            chain_text(h, db_column_text(st, i));
            break;
        }
    }
    medic_sha256_finish(h, out);
}

void audit_chain_walk_start(struct audit_chain_walk *w, const char *table)
{
    audit_chain_walk_from(w, table, AUDIT_CHAIN_GENESIS);
}

void audit_chain_walk_from(struct audit_chain_walk *w, const char *table, const char *start)
{
    w->table = table;
    snprintf(w->prev, sizeof(w->prev), "%s", start);
    w->prev_id = 0;
    w->from_archive = strcmp(start, AUDIT_CHAIN_GENESIS) != 0;
}

int audit_chain_walk_row(struct audit_chain_walk *w, int64_t id, const char *row_prev,
                         const char *row_hash, const char *computed,
                         struct audit_verify_result *out)
{
    if (!row_prev || strcmp(row_prev, w->prev) != 0) {
        out->ok = 0;
        out->broken_table = w->table;
        out->broken_id = id;
        if (w->prev_id)
            snprintf(out->why, sizeof(out->why),
                     "prev_hash does not match the hash of row %lld (a row was removed, "
                     "reordered or changed)",
                     (long long)w->prev_id);
        else if (w->from_archive)
            snprintf(out->why, sizeof(out->why),
                     "the first row does not start where the last archive ends (rows were "
                     "removed)");
        else
            snprintf(out->why, sizeof(out->why),
                     "the first row does not start from the genesis hash (rows were removed)");
        return 1;
    }
    if (!row_hash || strcmp(row_hash, computed) != 0) {
        out->ok = 0;
        out->broken_table = w->table;
        out->broken_id = id;
        snprintf(out->why, sizeof(out->why),
                 "the row's content does not match its hash (the row was changed)");
        return 1;
    }
    snprintf(w->prev, sizeof(w->prev), "%s", row_hash);
    w->prev_id = id;
    return 0;
}

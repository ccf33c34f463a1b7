/* SPDX-License-Identifier: Apache-2.0 */
/* `medic audit verify`: recompute the SHA-256 chains of decisions,
 * actions and incident changes, and name the first row that breaks one,
 * in an SQLite or a PostgreSQL audit log. */
#include "chain.h"
#include "reader_internal.h"
#include "schema.h"

#include <stdio.h>
#include <string.h>

static int verify_table(struct db *d, const char *table, const char *columns, int64_t *checked,
                        struct audit_verify_result *out, struct medic_error *err)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT %s, hash FROM %s ORDER BY id", columns, table);
    struct db_stmt *st = NULL;
    if (db_prepare(d, sql, &st, err)) {
        medic_error_prefix(err, table);
        return err->code;
    }
    struct audit_chain_walk walk;
    audit_chain_walk_start(&walk, table);
    int rc, ncols = 0;
    while ((rc = db_step(st, err)) == 1) {
        ncols = ncols ? ncols : db_column_count(st);
        char computed[65];
        audit_chain_hash_db_row(st, ncols - 1, computed); /* every column but the hash */
        (*checked)++;
        if (audit_chain_walk_row(&walk, db_column_int64(st, 0), db_column_text(st, ncols - 2),
                                 db_column_text(st, ncols - 1), computed, out)) {
            rc = 0;
            break;
        }
    }
    db_finalize(st);
    return rc < 0 ? rc : 0;
}

int audit_chain_verify(struct db *d, struct audit_verify_result *out, struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    out->ok = 1;
    if (db_begin_snapshot(d, err)) /* all three chains at one moment */
        return err->code;
    int rc = verify_table(d, "decisions", audit_decision_hashed_columns, &out->decisions_checked,
                          out, err);
    if (rc == 0 && out->ok)
        rc = verify_table(d, "actions", audit_action_hashed_columns, &out->actions_checked, out,
                          err);
    if (rc == 0 && out->ok)
        rc = verify_table(d, "incident_changes", audit_change_hashed_columns, &out->changes_checked,
                          out, err);
    struct medic_error ignored = {0};
    db_commit(d, &ignored);
    return rc;
}

int audit_verify(struct audit_reader *reader, struct audit_verify_result *out,
                 struct medic_error *err)
{
    return audit_chain_verify(reader->db, out, err);
}

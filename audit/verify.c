/* `medic audit verify`: recompute the SHA-256 chains of decisions,
 * actions and incident changes, and name the first row that breaks one. */
#include "reader_internal.h"
#include "chain.h"
#include "schema.h"

#include <stdio.h>
#include <string.h>

static int verify_table(struct audit_reader *r, const char *table, const char *columns,
                        int64_t *checked, struct audit_verify_result *out, struct medic_error *err)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT %s, hash FROM %s ORDER BY id", columns, table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK)
        return medic_error_set(err, MEDIC_E_STORE, "cannot read %s: %s", table,
                               sqlite3_errmsg(r->db));
    /* hash_row hashes every column, so hash the row without the last one */
    char hashed_sql[512];
    snprintf(hashed_sql, sizeof(hashed_sql), "SELECT %s FROM %s WHERE id = ?1", columns, table);
    sqlite3_stmt *one = NULL;
    if (sqlite3_prepare_v2(r->db, hashed_sql, -1, &one, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return medic_error_set(err, MEDIC_E_STORE, "cannot read %s: %s", table,
                               sqlite3_errmsg(r->db));
    }
    struct audit_chain_walk walk;
    audit_chain_walk_start(&walk, table);
    int step, ncols = sqlite3_column_count(st);
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        (*checked)++;
        char computed[65] = "";
        sqlite3_bind_int64(one, 1, id);
        if (sqlite3_step(one) == SQLITE_ROW)
            audit_chain_hash_row(one, computed);
        sqlite3_reset(one);
        if (audit_chain_walk_row(&walk, id, (const char *)sqlite3_column_text(st, ncols - 2),
                                 (const char *)sqlite3_column_text(st, ncols - 1), computed, out))
            break;
    }
    int rc = 0;
    if (out->ok && step != SQLITE_DONE)
        rc =
            medic_error_set(err, MEDIC_E_STORE, "cannot read %s: %s", table, sqlite3_errmsg(r->db));
    sqlite3_finalize(st);
    sqlite3_finalize(one);
    return rc;
}

int audit_verify(struct audit_reader *reader, struct audit_verify_result *out,
                 struct medic_error *err)
{
    memset(out, 0, sizeof(*out));
    out->ok = 1;
    /* one read transaction, so that both chains are read at one moment */
    sqlite3_exec(reader->db, "BEGIN", NULL, NULL, NULL);
    int rc = verify_table(reader, "decisions", audit_decision_hashed_columns,
                          &out->decisions_checked, out, err);
    if (rc == 0 && out->ok)
        rc = verify_table(reader, "actions", audit_action_hashed_columns, &out->actions_checked,
                          out, err);
    if (rc == 0 && out->ok)
        rc = verify_table(reader, "incident_changes", audit_change_hashed_columns,
                          &out->changes_checked, out, err);
    sqlite3_exec(reader->db, "COMMIT", NULL, NULL, NULL);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The SHA-256 hash chain over decision, action and incident-change rows
 * (private). Each row's hash covers its hashed columns (schema.h), read
 * back from the database with their SQL types through db.h, and the
 * previous row's hash. SQLite and PostgreSQL rows hash alike: a NULL, an
 * integer as "i<digits>", a real as "r%.17g", anything else as "t<text>". */
#ifndef MEDIC_AUDIT_CHAIN_H
#define MEDIC_AUDIT_CHAIN_H

#include "audit.h"
#include "db.h"

#include <stdint.h>

#define AUDIT_CHAIN_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* A row's hash from the values a writer is about to store, the same as
 * audit_chain_hash_db_row computes from the stored row: an integer, an id
 * (NULL when 0 or less), a real (NULL when NaN) or a text (NULL when
 * NULL), in column order; finish frees the state. */
struct medic_sha256;
struct medic_sha256 *audit_chain_row_new(void);
void audit_chain_row_int(struct medic_sha256 *h, long long v);
void audit_chain_row_id(struct medic_sha256 *h, long long id);
void audit_chain_row_real(struct medic_sha256 *h, double v);
void audit_chain_row_text(struct medic_sha256 *h, const char *v);
void audit_chain_row_finish(struct medic_sha256 *h, char out[65]);

/* Hashes the first n columns of st's current row, on either backend. */
void audit_chain_hash_db_row(struct db_stmt *st, int n, char out[65]);

/* Recomputes the decision, action and incident-change chains of d in one
 * snapshot; names the first broken row. */
int audit_chain_verify(struct db *d, struct audit_verify_result *out, struct medic_error *err);

/* Walks one table's chain in id order. */
struct audit_chain_walk {
    const char *table;
    char prev[65];
    int64_t prev_id;
    int from_archive; /* the walk starts where an archive's rows end */
};
void audit_chain_walk_start(struct audit_chain_walk *w, const char *table);
/* The same from start, the hash the first row must name. */
void audit_chain_walk_from(struct audit_chain_walk *w, const char *table, const char *start);
/* Checks the next row (its stored prev_hash and hash, and the hash
 * computed from its content); 0 while the chain holds, else out names the
 * row and why (out->ok = 0) and it returns 1. */
int audit_chain_walk_row(struct audit_chain_walk *w, int64_t id, const char *row_prev,
                         const char *row_hash, const char *computed,
                         struct audit_verify_result *out);

#endif

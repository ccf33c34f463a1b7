/* The SHA-256 hash chain over decision and action rows (private). Each
 * row's hash covers its hashed columns (schema.h), read back from the
 * database with their SQL types, and the previous row's hash. */
#ifndef MEDIC_AUDIT_CHAIN_H
#define MEDIC_AUDIT_CHAIN_H

#include <sqlite3.h>

#define AUDIT_CHAIN_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* Hashes the current row of st (every column is hashed). */
void audit_chain_hash_row(sqlite3_stmt *st, char out[65]);

#endif

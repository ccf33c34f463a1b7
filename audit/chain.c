#include "chain.h"
#include "sha256.h"

#include <stdio.h>

void audit_chain_hash_row(sqlite3_stmt *st, char out[65])
{
    struct medic_sha256 *h = medic_sha256_new();
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; i++) {
        char num[40];
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_NULL:
            medic_sha256_field(h, NULL);
            break;
        case SQLITE_INTEGER:
            snprintf(num, sizeof(num), "i%lld", (long long)sqlite3_column_int64(st, i));
            medic_sha256_field(h, num);
            break;
        case SQLITE_FLOAT:
            snprintf(num, sizeof(num), "r%.17g", sqlite3_column_double(st, i));
            medic_sha256_field(h, num);
            break;
        default:
            medic_sha256_update(h, "t", 1);
            medic_sha256_field(h, (const char *)sqlite3_column_text(st, i));
            break;
        }
    }
    medic_sha256_finish(h, out);
}

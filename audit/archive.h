/* SPDX-License-Identifier: Apache-2.0 */
/* `medic audit archive` inside audit/ (private): the record an archive
 * leaves in the log and keeps in its own file (the audit_archives table),
 * the digest of the unchained rows it moved, and the removal of those rows
 * from the log. */
#ifndef MEDIC_AUDIT_ARCHIVE_H
#define MEDIC_AUDIT_ARCHIVE_H

#include "db.h"

#include <stdint.h>

/* The hash chains, in the order a record keeps their cuts. */
enum { ARCHIVE_DECISIONS, ARCHIVE_ACTIONS, ARCHIVE_CHANGES, ARCHIVE_CHAINS };
extern const char *const audit__archive_chains[ARCHIVE_CHAINS];

/* The rows a record counts, in its column order. */
enum {
    ARCHIVED_NOTIFICATIONS,
    ARCHIVED_ALERTS,
    ARCHIVED_DECISIONS,
    ARCHIVED_ACTIONS,
    ARCHIVED_CHANGES,
    ARCHIVED_REQUESTS,
    ARCHIVED_KINDS
};

struct archive_record {
    int64_t id, created_at, before_at;
    char file[1024];
    char state[16];                  /* removing, done (the log's), held (the archive's) */
    int64_t last_id[ARCHIVE_CHAINS]; /* the last row moved; the first left starts from its hash */
    char hash[ARCHIVE_CHAINS][65];
    char digest[65]; /* audit__archive_digest of the unchained rows moved */
    long long counts[ARCHIVED_KINDS];
};

/* Whether d's schema has archive records (version 12 on); asked outside
 * any transaction, since a failed statement ends PostgreSQL's. */
int audit__has_archives(struct db *d);

/* The newest record matching where (?1.. bound to args); *found 0 when
 * none. */
int audit__archive_record_read(struct db *d, const char *where, const int64_t *args, int nargs,
                               struct archive_record *out, int *found, struct medic_error *err);

/* Writes r: with its id when keep_id (the archive's copy), else as a new
 * record whose id is set in r->id. */
int audit__archive_record_write(struct db *d, struct archive_record *r, int keep_id,
                                struct medic_error *err);

/* SHA-256 over every unchained row of an archive file (notifications,
 * alerts and people's requests, table by table in id order, each value
 * with its type), and how many rows each kind has. */
int audit__archive_digest(struct db *archive, char out[65], long long counts[ARCHIVED_KINDS],
                          struct medic_error *err);

/* Takes the rows the archive holds out of the live log, in transactions
 * of at most chunk rows, children before what they refer to, each
 * followed by a pause for the daemon's writer when yield (a log whose
 * writers take turns: SQLite); a row that a newer one still refers to
 * stays (it is in both). */
int audit__archive_remove(struct db *live, int yield, struct db *archive,
                          const struct archive_record *r, size_t chunk,
                          void (*progress)(const char *line), struct medic_error *err);

#endif

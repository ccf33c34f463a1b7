/* One leader among replicas sharing a PostgreSQL audit log: a lease row
 * renewed well within its length and taken over once it expires, each term
 * with an epoch one higher than the last; and fencing, so that a leader
 * paused past its lease (SIGSTOP, a stall, a partition) never writes once
 * another has taken over. Times are the database's clock, so replicas'
 * clocks may differ. */
#ifndef MEDIC_AUDIT_LEASE_H
#define MEDIC_AUDIT_LEASE_H

#include "error.h"

#include <libpq-fe.h>
#include <stdint.h>

struct audit_lease {
    int64_t epoch;   /* the lease's term now */
    char holder[64]; /* the replica holding it */
    int ours;        /* whether that is this replica */
};

/* Takes the lease when it is free or expired (a new epoch), or renews it
 * when this replica holds it (the same epoch), for lease_ms from now; else
 * says who holds it. One statement, so two replicas cannot both win. */
int audit_lease_renew(PGconn *c, const char *replica, int64_t lease_ms, struct audit_lease *out,
                      struct medic_error *err);

/* Inside an open transaction: checks that replica still holds an unexpired
 * lease of epoch, and keeps the lease row share-locked until the
 * transaction ends, so that a takeover waits for this transaction rather
 * than overtaking it. MEDIC_E_FENCED when it does not (roll back and step
 * down). */
int audit_lease_fence(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err);

/* Gives the lease up (a clean shutdown), so that another replica need not
 * wait for it to expire. */
int audit_lease_release(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err);

#endif

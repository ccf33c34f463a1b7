/* SPDX-License-Identifier: Apache-2.0 */
/* One leader among replicas sharing a PostgreSQL audit log: a lease row
 * renewed well within its length and taken over once it expires, each term
 * with an epoch one higher than the last; and fencing, so that a leader
 * paused past its lease (SIGSTOP, a stall, a partition) never writes once
 * another has taken over. Times are the database's clock, so replicas'
 * clocks may differ.
 *
 * The lease also carries its holder's configuration hash: a replica whose
 * configuration differs from the last holder's does not take an expired
 * lease (it would decide differently from what the fleet was told), unless
 * an operator forced it (audit_lease_force), once, recorded in the row.
 * The PostgreSQL-level calls here are private to audit/ and its test
 * probes; the daemon uses audit.h's audit_lease_client. */
#ifndef MEDIC_AUDIT_LEASE_H
#define MEDIC_AUDIT_LEASE_H

#include "audit.h"
#include "db.h"
#include "error.h"

#include <libpq-fe.h>
#include <stdint.h>

/* Takes the lease when it is free, or expired and either held last with
 * the same configuration or forced (a new epoch); renews it when this
 * replica holds it (the same epoch), for lease_ms from now, publishing
 * config_hash; else says who holds it and with which configuration. One
 * statement decides, so two replicas cannot both win. */
int audit_lease_renew(PGconn *c, const char *replica, const char *config_hash, int64_t lease_ms,
                      struct audit_lease *out, struct medic_error *err);

/* Inside an open transaction on d: checks that replica still holds an unexpired
 * lease of epoch, and keeps the lease row share-locked until the
 * transaction ends, so that a takeover waits for this transaction rather
 * than overtaking it. MEDIC_E_FENCED when it does not (roll back and step
 * down). Its statement is prepared into *cached on first use (the caller
 * finalizes it); on the writer's connection it goes in the round trip of
 * the transaction's BEGIN. */
int audit_lease_fence(struct db *d, struct db_stmt **cached, const char *replica, int64_t epoch,
                      struct medic_error *err);

/* Gives the lease up (a clean shutdown), so that another replica need not
 * wait for it to expire. */
int audit_lease_release(PGconn *c, const char *replica, int64_t epoch, struct medic_error *err);

#endif

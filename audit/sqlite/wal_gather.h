/* SPDX-License-Identifier: Apache-2.0 */
/* An SQLite VFS for the audit writer's connection that gathers the WAL
 * writes of a commit into one write system call.
 *
 * SQLite writes a WAL frame as two writes (its 24-byte header, then the
 * page) and a commit of the audit log holds some 25 frames: 50 writes,
 * then the fsync. Here the contiguous writes of a commit are kept in
 * memory and written as one at the fsync (or before anything that reads,
 * truncates or sizes the file), which is when SQLite needs them on disk:
 * it syncs the WAL before a commit becomes visible to any other
 * connection (synchronous=FULL). Files other than the WAL, and a WAL on a
 * device without power-safe overwrite (where SQLite writes after its
 * sync), go to the default VFS unchanged. Private to audit/. */
#ifndef MEDIC_AUDIT_WAL_GATHER_H
#define MEDIC_AUDIT_WAL_GATHER_H

/* Registers the VFS (once; not as the default) and returns its name for
 * sqlite3_open_v2, or NULL when it could not be registered. */
const char *audit_wal_gather_vfs(void);

/* While on, the calling thread's syncs of a WAL file (SQLite's, at a
 * commit; all but the file's first, which is SQLite's own and syncs the
 * directory too) write what was gathered and leave the fdatasync to the
 * caller:
 * the commit is then visible to other connections but not yet durable.
 * Never on around a checkpoint: SQLite must have the WAL on disk before it
 * copies pages into the database. */
void audit_wal_defer_syncs(int on);

/* A descriptor of the WAL file whose sync the calling thread left since
 * its last call (fdatasync it to make those commits durable), or -1 when
 * it left none. Valid until the connection closes. */
int audit_wal_take_deferred(void);

#endif

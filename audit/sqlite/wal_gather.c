/* SPDX-License-Identifier: Apache-2.0 */
#include "wal_gather.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Most bytes gathered, then written: the default VFS writes at most
 * 0x1ffff bytes per call (a longer one comes back short, as a full disk) */
#define GATHER_MAX 0x1ffff

/* A WAL file: the default VFS's file first (its methods take the same
 * pointer), then what is gathered. */
struct gather {
    const sqlite3_io_methods *real; /* the default VFS's methods */
    unsigned char *buf;
    size_t len, cap;
    sqlite3_int64 at; /* file offset of buf[0] */
    int sync_fd;      /* the same file, opened for syncs left to the caller; -1: none */
    int synced;       /* SQLite synced it once itself */
};

static __thread int defer_syncs; /* see audit_wal_defer_syncs */
static __thread int deferred_fd = -1;

static sqlite3_vfs gather_vfs;
static sqlite3_vfs *default_vfs;
static int real_size; /* the default VFS's file, rounded up to 8 bytes */

static struct gather *gathered(sqlite3_file *f)
{
    return (struct gather *)((char *)f + real_size);
}

/* Writes what is gathered; the error, if any, goes to the caller. */
static int flush(sqlite3_file *f)
{
    struct gather *g = gathered(f);
    if (!g->len)
        return SQLITE_OK;
    int rc = g->real->xWrite(f, g->buf, (int)g->len, g->at);
    g->len = 0;
    return rc;
}

/* Room for need bytes in the buffer; 0 when memory is short (the caller
 * then writes through). */
static int reserve(struct gather *g, size_t need)
{
    if (need <= g->cap)
        return 1;
    size_t cap = g->cap ? g->cap : 64 * 1024;
    while (cap < need)
        cap *= 2;
    unsigned char *b = realloc(g->buf, cap);
    if (!b)
        return 0;
    g->buf = b;
    g->cap = cap;
    return 1;
}

static int gather_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 at)
{
    struct gather *g = gathered(f);
    size_t n = (size_t)amt;
    if (g->len && at == g->at + (sqlite3_int64)g->len && g->len + n <= GATHER_MAX &&
        reserve(g, g->len + n)) {
        memcpy(g->buf + g->len, data, n);
        g->len += n;
        return SQLITE_OK;
    }
    int rc = flush(f); /* not contiguous, or too long: what is gathered goes first */
    if (rc)
        return rc;
    if (n > GATHER_MAX || !reserve(g, n))
        return g->real->xWrite(f, data, amt, at);
    memcpy(g->buf, data, n);
    g->len = n;
    g->at = at;
    return SQLITE_OK;
}

static int gather_close(sqlite3_file *f)
{
    struct gather *g = gathered(f);
    int rc = flush(f);
    int closed = g->real->xClose(f);
    free(g->buf);
    g->buf = NULL;
    if (g->sync_fd >= 0)
        close(g->sync_fd);
    g->sync_fd = -1;
    return rc ? rc : closed;
}

static int gather_read(sqlite3_file *f, void *out, int amt, sqlite3_int64 at)
{
    int rc = flush(f);
    return rc ? rc : gathered(f)->real->xRead(f, out, amt, at);
}

static int gather_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    int rc = flush(f);
    return rc ? rc : gathered(f)->real->xTruncate(f, size);
}

static int gather_sync(sqlite3_file *f, int flags)
{
    struct gather *g = gathered(f);
    int rc = flush(f);
    /* the first sync is SQLite's own: it also syncs the directory, so that
     * a WAL created since the open is found after a power loss */
    if (rc == SQLITE_OK && defer_syncs && g->sync_fd >= 0 && g->synced) {
        deferred_fd = g->sync_fd;
        return SQLITE_OK;
    }
    if (rc == SQLITE_OK && (rc = g->real->xSync(f, flags)) == SQLITE_OK)
        g->synced = 1;
    return rc;
}

static int gather_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    int rc = flush(f);
    return rc ? rc : gathered(f)->real->xFileSize(f, size);
}

static int gather_lock(sqlite3_file *f, int level)
{
    return gathered(f)->real->xLock(f, level);
}

static int gather_unlock(sqlite3_file *f, int level)
{
    return gathered(f)->real->xUnlock(f, level);
}

static int gather_check_reserved(sqlite3_file *f, int *out)
{
    return gathered(f)->real->xCheckReservedLock(f, out);
}

static int gather_file_control(sqlite3_file *f, int op, void *arg)
{
    int rc = flush(f);
    return rc ? rc : gathered(f)->real->xFileControl(f, op, arg);
}

static int gather_sector_size(sqlite3_file *f)
{
    return gathered(f)->real->xSectorSize(f);
}

static int gather_device(sqlite3_file *f)
{
    return gathered(f)->real->xDeviceCharacteristics(f);
}

/* Version 1 methods: a WAL file has no shared memory and is not mapped. */
static const sqlite3_io_methods gather_methods = {
    .iVersion = 1,
    .xClose = gather_close,
    .xRead = gather_read,
    .xWrite = gather_write,
    .xTruncate = gather_truncate,
    .xSync = gather_sync,
    .xFileSize = gather_file_size,
    .xLock = gather_lock,
    .xUnlock = gather_unlock,
    .xCheckReservedLock = gather_check_reserved,
    .xFileControl = gather_file_control,
    .xSectorSize = gather_sector_size,
    .xDeviceCharacteristics = gather_device,
};

static int gather_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags,
                       int *out_flags)
{
    (void)vfs;
    struct gather *g = gathered(f);
    memset(g, 0, sizeof(*g));
    g->sync_fd = -1;
    int rc = default_vfs->xOpen(default_vfs, name, f, flags, out_flags);
    if (rc != SQLITE_OK || !f->pMethods || !(flags & SQLITE_OPEN_WAL))
        return rc;
    /* SQLite writes part of a frame after its sync where overwrites are
     * not power-safe: gather only where it syncs last */
    if (!(f->pMethods->xDeviceCharacteristics(f) & SQLITE_IOCAP_POWERSAFE_OVERWRITE))
        return rc;
    g->real = f->pMethods;
    f->pMethods = &gather_methods;
    g->sync_fd = open(name, O_RDONLY | O_CLOEXEC); /* -1: every sync is SQLite's own */
    return rc;
}

static void gather_register(void)
{
    default_vfs = sqlite3_vfs_find(NULL);
    if (!default_vfs)
        return;
    real_size = (default_vfs->szOsFile + 7) & ~7;
    gather_vfs = *default_vfs; /* every other method, and its pAppData */
    gather_vfs.szOsFile = real_size + (int)sizeof(struct gather);
    gather_vfs.zName = "medic-wal-gather";
    gather_vfs.pNext = NULL;
    gather_vfs.xOpen = gather_open;
    if (sqlite3_vfs_register(&gather_vfs, 0) != SQLITE_OK)
        default_vfs = NULL;
}

void audit_wal_defer_syncs(int on)
{
    defer_syncs = on;
}

int audit_wal_take_deferred(void)
{
    int fd = deferred_fd;
    deferred_fd = -1;
    return fd;
}

const char *audit_wal_gather_vfs(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, gather_register);
    return default_vfs ? gather_vfs.zName : NULL;
}

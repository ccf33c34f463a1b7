/* SPDX-License-Identifier: Apache-2.0 */
/* The readers: a few threads of their own that answer the on-call pages
 * and the audit queries, which read the log (and, for a node's page, its
 * agent, up to 1 s). The HTTP thread hands the request over and is free
 * at once; the answer goes back through receiver_later. Private to
 * engine/. */
#ifndef MEDIC_ENGINE_READERS_H
#define MEDIC_ENGINE_READERS_H

#include "buf.h"
#include "server.h"

/* Threads, and requests waiting for one at most (more: 503, try again). */
#define ENGINE_READERS 4
#define ENGINE_READERS_QUEUE 256

struct engine_readers;

/* A reader's job: its answer into out, its HTTP status returned. */
typedef int (*engine_reader_fn)(void *arg, struct medic_buf *out);

int engine_readers_start(struct engine_readers **out, struct medic_error *err);
/* Answers the requests still queued (503) and stops the threads. */
void engine_readers_stop(struct engine_readers *r);
/* Runs fn(arg) on a reader and answers through later; arg is freed with
 * free_arg afterwards. 0, or MEDIC_E_BUSY when the queue is full (nothing
 * was taken: the caller answers, and frees arg). */
int engine_readers_run(struct engine_readers *r, engine_reader_fn fn, void *arg,
                       void (*free_arg)(void *arg), const struct receiver_later *later);

#endif

/* storeq.h — the store executor: one thread, one connection, a queue of ops.
 *
 * Writer mode (group commit): the thread takes every queued op (up to max_batch), opens one
 * transaction, runs each op inside its own savepoint (an op that fails rolls back alone),
 * commits once — one fsync — and only then calls each op's done(). A failed commit completes
 * every op of the batch with HOOKD_STORE_ERR: nothing is acknowledged that is not durable.
 * Batches grow with load on their own: ops queue while the previous commit is in flight.
 *
 * An op marked HOOKD_STORE_OP_NO_SAVEPOINT runs without one (a savepoint copies every page the
 * op is first to touch in it: most of a batch's pages, once per op). If such an op fails having
 * written nothing (backend->changes() unchanged), the batch goes on. If it fails after writing,
 * its writes cannot be undone alone: the transaction is rolled back and the batch runs again in
 * a new one, every op in its own savepoint, so the failing op fails alone — except the batch's
 * unmarked ops that had already run: not every op may run twice, so they complete with
 * HOOKD_STORE_ERR (retryable). A marked op must therefore be safe to run twice (its run() resets
 * what a first run filled in), and should find its expected failures (a fenced lease, a taken
 * key) before its first write, so that only I/O errors and the like cost a second attempt.
 *
 * Reader mode: each op runs in its own read transaction (a consistent snapshot).
 *
 * done() runs on the executor thread: it must not block; typically it resumes an HTTP request
 * or posts to the dispatcher. */
#ifndef HOOKD_STORE_STOREQ_H
#define HOOKD_STORE_STOREQ_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

typedef struct hookd_store_op hookd_store_op;
struct hookd_store_op {
  /* Runs on the executor's connection. Return 0 or a negative HOOKD_STORE_* code; a negative
   * code rolls back this op's savepoint. Positive values are passed through as success. */
  int (*run)(hookd_store_conn *c, const hookd_store_backend *be, void *arg);
  /* Called after the commit (or failure) with run's code, or HOOKD_STORE_ERR if the commit
   * failed. */
  void (*done)(void *arg, int rc);
  void *arg;
  int flags;            /* HOOKD_STORE_OP_* */
  hookd_store_op *next; /* queue link, owned by the executor */
  int ran;              /* ran in the batch's first attempt (the executor's) */
  int64_t queued_ms;    /* when it was submitted (monotonic), for the stall measure */
  int rc;               /* run's result, kept until the commit */
};

/* The op runs without a savepoint of its own (see the top of this file). */
#define HOOKD_STORE_OP_NO_SAVEPOINT 1

typedef struct hookd_storeq_stats {
  uint64_t batches;        /* transactions committed (writer) */
  uint64_t ops;            /* ops completed */
  uint64_t failed_commits; /* batches that failed to commit */
  uint64_t redone_batches; /* batches run a second time, with savepoints (see above) */
  uint64_t queue_depth;    /* ops waiting right now */
  int64_t stalled_ms;      /* how long the current batch has run, or the oldest op waited */
  int last_failed;         /* the last batch failed (its commit or transaction); 0 once one
                            * that wrote (or probed, HOOKD_STORE probe) commits again */
  uint64_t batch_hist[8];  /* batch sizes: 1, 2-4, 5-16, 17-64, 65-256, 257-1024, >1024 */
  uint64_t commit_us_hist[11]; /* commit latency: <0.5ms <1ms <2ms <5ms <10ms <50ms <250ms <1s
                                 <5s <30s >= */
  uint64_t commit_us_sum;
  uint64_t slow_batches;   /* committed batches that took HOOKD_STOREQ_SLOW_US or more */
  uint64_t settled_commits[2]; /* commits whose answer was lost, then found committed / rolled
                                * back (the backend's commit_settled) */
} hookd_storeq_stats;

/* A committed batch that took this long (its ops and its commit together, µs) is slow: every
 * request waiting on it waited that long. */
#define HOOKD_STOREQ_SLOW_US 100000

/* Who hears of slow batches (process-wide; the daemon logs them, rate-limited): fn(queue, ops,
 * run_us, commit_us) after the batch committed, before its callers are answered — the time the
 * ops took and the time the commit (its fsync) took, so that a stall can be told apart as the
 * disk's or the work's. */
void hookd_storeq_set_slow_handler(void (*fn)(const char *queue, size_t ops, int64_t run_us,
                                              int64_t commit_us));

/* What the writer does when a commit's outcome is unknown (HOOKD_STORE_UNKNOWN): fn is called,
 * process-wide, before anything else (the daemon logs and exits, as PostgreSQL does on an fsync
 * failure, so that the next start's recovery decides, and no op is answered "failed" for what
 * may have committed — a client would retry a create that happened). Without one (the CLI) the
 * batch's ops complete with HOOKD_STORE_UNKNOWN, not HOOKD_STORE_ERR: the caller must say that
 * what it asked for may or may not be stored. */
void hookd_storeq_set_unknown_commit_handler(void (*fn)(const char *error));

/* A sync of the store's files failed after their pages were handed to the kernel (a checkpoint
 * of SQLite's WAL into the database: its fsync answered EIO). Linux reports a failed writeback
 * once and forgets the pages, so a later sync "succeeds" while they never reached the disk —
 * and a checkpoint that then succeeds lets the WAL start over over frames acknowledged long ago
 * (lost, or a corrupt database at the next reboot). Nothing may run on: the backend calls
 * hookd_storeq_lost_sync, which calls fn(error) (the daemon logs and exits) and then _exit(1);
 * the next start's recovery copies the whole WAL again, as PostgreSQL's does after its PANIC. */
void hookd_storeq_set_lost_sync_handler(void (*fn)(const char *error));
_Noreturn void hookd_storeq_lost_sync(const char *error);

/* The store's files were removed or replaced under it (docs/architecture.md "Failure windows"):
 * every commit from now on would go to files no name reaches. The backend calls
 * hookd_storeq_store_gone, which calls fn(what) (the daemon logs and exits) and then _exit(1). */
void hookd_storeq_set_store_gone_handler(void (*fn)(const char *what));
_Noreturn void hookd_storeq_store_gone(const char *what);

/* Who hears of commits whose answer was lost and whose outcome the backend then settled
 * (process-wide; the daemon logs them): fn(queue, committed), before the callers are told. */
void hookd_storeq_set_settled_handler(void (*fn)(const char *queue, bool committed));

/* Who hears of store failures (process-wide; the daemon logs them, rate-limited): fn(queue,
 * what, error) for an op that failed with HOOKD_STORE_ERR ("op") or a batch whose transaction
 * or commit failed ("commit"), with the backend's error text, before the callers are told; and
 * fn(queue, "recovered", NULL) for the first batch that commits writes after a failed one. */
void hookd_storeq_set_failure_handler(void (*fn)(const char *queue, const char *what,
                                                 const char *error));

/* Starts an executor on conn (which it then owns and closes on stop). */
hookd_storeq *hookd_storeq_start(const hookd_store_backend *be, hookd_store_conn *conn,
                                 int writer, int max_batch, const char *name);
/* Enqueues op; thread-safe. After stop, op->done is called at once with HOOKD_STORE_ERR. */
void hookd_storeq_submit(hookd_storeq *q, hookd_store_op *op);
/* Runs op and waits for its completion; returns its code. Not for the executor's own thread. */
int hookd_storeq_run_sync(hookd_storeq *q,
                          int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                          void *arg);
/* hookd_storeq_run_sync, for a caller with duties of its own (the main thread): every 100 ms
 * of waiting, go_on(ctx) runs them; false (a stop) interrupts what the executor runs now — the
 * op, or one queued ahead of it — and the wait goes on until the op is done. go_on NULL: the
 * plain wait of run_sync. */
int hookd_storeq_run_polled(hookd_storeq *q,
                            int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                            void *arg, bool (*go_on)(void *ctx), void *ctx);
/* Fails the op running now on a read executor, if the backend can interrupt one
 * (backend->interrupt); queued ops run as usual. Any thread. */
/* The store's words on the queue's last failure (an op's, or a commit's: "commit: disk I/O
 * error"), "" if none: for a caller of hookd_storeq_run_sync whose op failed at its commit. */
void hookd_storeq_last_error(hookd_storeq *q, char *out, size_t n);
void hookd_storeq_interrupt(hookd_storeq *q);
/* Completes every queued op, then stops the thread and closes the connection. */
void hookd_storeq_stop(hookd_storeq *q);
void hookd_storeq_get_stats(hookd_storeq *q, hookd_storeq_stats *out);

#endif

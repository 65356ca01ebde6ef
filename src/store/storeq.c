/* storeq.c — the store executor (group commit for the writer). See storeq.h.
 *
 * The design is simple: a mutex-protected singly linked FIFO; the thread sleeps on a condition
 * variable while it is empty. The writer takes up to max_batch ops per transaction. Nothing is
 * timed: when the queue is empty after a commit, the next op starts a batch of one. */
#include "store/storeq.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

struct hookd_storeq {
  const hookd_store_backend *be;
  hookd_store_conn *conn;
  int writer;
  int max_batch;
  char name[16];
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  hookd_store_op *head, *tail;
  size_t depth;
  int stopping;
  int stopped; /* thread has exited: submit completes ops at once */
  int running;  /* an op of the reader's runs now (hookd_storeq_interrupt may stop it) */
  int64_t batch_started_ms; /* the batch being run, 0 when idle (monotonic) */
  hookd_storeq_stats stats;
  char last_error[200]; /* the store's words on its last failure (hookd_storeq_last_error) */
};

static _Atomic(void (*)(const char *)) unknown_commit_handler;

void hookd_storeq_set_unknown_commit_handler(void (*fn)(const char *)) {
  unknown_commit_handler = fn;
}

static _Atomic(void (*)(const char *)) lost_sync_handler;

void hookd_storeq_set_lost_sync_handler(void (*fn)(const char *)) { lost_sync_handler = fn; }

static _Atomic(void (*)(const char *)) store_gone_handler;

void hookd_storeq_set_store_gone_handler(void (*fn)(const char *)) { store_gone_handler = fn; }

void hookd_storeq_store_gone(const char *what) {
  void (*fn)(const char *) = store_gone_handler;
  if (fn) fn(what);
  fprintf(stderr, "hookd: %s: stopping\n", what); /* (no handler: the CLI) */
  _exit(1);
}

void hookd_storeq_lost_sync(const char *error) {
  void (*fn)(const char *) = lost_sync_handler;
  if (fn) fn(error);
  /* (no handler: the CLI) said, and ended as the daemon ends */
  fprintf(stderr, "hookd: the store's sync failed (%s): stopping; the next start recovers it\n",
          error);
  _exit(1);
}

static _Atomic(void (*)(const char *, size_t, int64_t, int64_t)) slow_handler;

void hookd_storeq_set_slow_handler(void (*fn)(const char *, size_t, int64_t, int64_t)) {
  slow_handler = fn;
}

static _Atomic(void (*)(const char *, bool)) settled_handler;

void hookd_storeq_set_settled_handler(void (*fn)(const char *, bool)) { settled_handler = fn; }

static _Atomic(void (*)(const char *, const char *, const char *)) failure_handler;

void hookd_storeq_set_failure_handler(void (*fn)(const char *, const char *, const char *)) {
  failure_handler = fn;
}

/* Only failures the backend has words for are the store's: an op that fails for reasons of its
 * own (a hash it could not compute, out of memory) returns HOOKD_STORE_ERR with no backend
 * error — the connection's error is cleared before every op, so an earlier op's text is never
 * reported for it. */
static void report_failure(hookd_storeq *q, const char *what) {
  void (*fn)(const char *, const char *, const char *) = failure_handler;
  const char *e = q->be->errmsg ? q->be->errmsg(q->conn) : NULL;
  bool commit = !strcmp(what, "commit"); /* a failed transaction is the store's, worded or not */
  if (fn && ((e && *e) || commit)) fn(q->name, what, e && *e ? e : "storage error");
  if ((e && *e) || commit) {
    pthread_mutex_lock(&q->mu);
    snprintf(q->last_error, sizeof q->last_error, "%s: %s", what, e && *e ? e : "storage error");
    pthread_mutex_unlock(&q->mu);
  }
}

void hookd_storeq_last_error(hookd_storeq *q, char *out, size_t n) {
  pthread_mutex_lock(&q->mu);
  snprintf(out, n, "%s", q->last_error);
  pthread_mutex_unlock(&q->mu);
}

static int run_op(hookd_storeq *q, hookd_store_op *op) {
  if (q->be->clear_error) q->be->clear_error(q->conn);
  int rc = op->run(q->conn, q->be, op->arg);
  if (rc == HOOKD_STORE_ERR) report_failure(q, "op");
  return rc;
}

static int bucket_batch(size_t n) {
  static const size_t lim[] = {1, 4, 16, 64, 256, 1024};
  for (int i = 0; i < 6; i++)
    if (n <= lim[i]) return i;
  return 6;
}

static int bucket_us(int64_t us) {
  /* (past 250 ms too: a slow disk's 27 s commits all read 0.25 s in a quantile, a review) */
  static const int64_t lim[] = {500,   1000,   2000,    5000,    10000,
                                50000, 250000, 1000000, 5000000, 30000000};
  for (int i = 0; i < 10; i++)
    if (us <= lim[i]) return i; /* Prometheus buckets are "le" */
  return 10;
}

/* run_ops() result: a savepoint-free op failed after writing, or the database ended the
 * transaction under an op (SQLite does on SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM): only a new
 * transaction can go on. */
#define POISONED 1

/* Runs the batch's ops inside the open transaction. First attempt (redo = 0): ops marked
 * HOOKD_STORE_OP_NO_SAVEPOINT without one, stopping at the first that fails after writing.
 * Second attempt (redo = 1, a new transaction): every op in its own savepoint, except ops without
 * the mark that already ran in the first: they complete with HOOKD_STORE_ERR (not every op may
 * run twice). Returns 0, POISONED, or HOOKD_STORE_ERR if the transaction itself failed.
 *
 * After every op the transaction must still be open: were it not, the next op's SAVEPOINT would
 * quietly start (and its RELEASE commit) a transaction of its own and a savepoint-free op would
 * run in autocommit — writes made durable one by one while their ops are told the batch failed,
 * and an event committed without its deliveries. */
static int run_ops(hookd_storeq *q, hookd_store_op *batch, int redo) {
  const hookd_store_backend *be = q->be;
  int txn_rc = 0;
  for (hookd_store_op *op = batch; op; op = op->next) {
    if (txn_rc != 0) {
      op->rc = HOOKD_STORE_ERR;
      continue;
    }
    int no_savepoint = op->flags & HOOKD_STORE_OP_NO_SAVEPOINT;
    if (redo && op->ran && !no_savepoint) {
      op->rc = HOOKD_STORE_ERR;
      continue;
    }
    op->ran = 1;
    if (no_savepoint && !redo) {
      int64_t before = be->changes(q->conn);
      op->rc = run_op(q, op);
      if (!be->in_txn(q->conn)) return POISONED;
      if (op->rc < 0 && be->changes(q->conn) != before) return POISONED;
      continue;
    }
    if (be->savepoint(q->conn) != 0) {
      op->rc = HOOKD_STORE_ERR;
      /* (SQLite's SAVEPOINT out of memory rolls the whole transaction back: as after an op) */
      if (!be->in_txn(q->conn)) {
        if (!redo) return POISONED;
        txn_rc = HOOKD_STORE_ERR;
      }
      continue;
    }
    op->rc = run_op(q, op);
    if (!be->in_txn(q->conn)) {
      if (!redo) return POISONED;
      txn_rc = HOOKD_STORE_ERR;
      continue;
    }
    if (op->rc < 0) {
      if (be->rollback_to(q->conn) != 0) txn_rc = HOOKD_STORE_ERR;
    }
    if (be->release(q->conn) != 0) txn_rc = HOOKD_STORE_ERR;
  }
  return txn_rc;
}

static void run_batch_writer(hookd_storeq *q, hookd_store_op *batch, size_t n) {
  const hookd_store_backend *be = q->be;
  for (hookd_store_op *op = batch; op; op = op->next) op->ran = 0;
  int64_t started = hookd_mono_us();
  int64_t changes0 = be->changes(q->conn);
  int txn_rc = be->begin(q->conn, 1);
  if (txn_rc == 0) txn_rc = run_ops(q, batch, 0);
  int redone = txn_rc == POISONED;
  if (redone) {
    be->rollback(q->conn);
    changes0 = be->changes(q->conn); /* (the rolled-back run's writes are no write) */
    txn_rc = be->begin(q->conn, 1);
    if (txn_rc == 0) txn_rc = run_ops(q, batch, 1);
  }
  /* after a failure, a batch that writes nothing (the dispatcher's sweep, every second) commits
   * even on a full disk: it probes with a write, and only a write that went through says the
   * store takes writes again (the writer thread alone changes last_failed) */
  bool wrote = be->changes(q->conn) != changes0;
  if (txn_rc == 0 && !wrote && q->stats.last_failed && be->probe) {
    txn_rc = be->probe(q->conn);
    wrote = true;
  }
  int64_t t0 = hookd_mono_us();
  if (txn_rc == 0) txn_rc = be->commit(q->conn);
  int settled = be->commit_settled ? be->commit_settled(q->conn) : 0;
  if (settled) {
    void (*fn)(const char *, bool) = settled_handler;
    if (fn) fn(q->name, settled == HOOKD_STORE_SETTLED_COMMITTED);
  }
  if (txn_rc == HOOKD_STORE_UNKNOWN) { /* (with the store's words: an operator's first clue) */
    void (*fn)(const char *) = unknown_commit_handler;
    const char *e = q->be->errmsg ? q->be->errmsg(q->conn) : NULL;
    if (fn) fn(e && *e ? e : "storage error");
  }
  int64_t dt = hookd_mono_us() - t0;
  if (txn_rc != 0) {
    report_failure(q, "commit");
    be->rollback(q->conn);
  }

  pthread_mutex_lock(&q->mu);
  bool recovered = txn_rc == 0 && wrote && q->stats.last_failed;
  if (txn_rc != 0 || wrote) q->stats.last_failed = txn_rc != 0;
  if (txn_rc == 0) {
    q->stats.batches++;
    q->stats.batch_hist[bucket_batch(n)]++;
    q->stats.commit_us_hist[bucket_us(dt)]++;
    q->stats.commit_us_sum += (uint64_t)dt;
  } else {
    q->stats.failed_commits++;
  }
  /* a batch that failed slow (a lock held elsewhere: 5 s of busy wait) is a slow one too: a
   * locked store was invisible in the latency metrics (a review) */
  q->stats.slow_batches += (uint64_t)(t0 + dt - started >= HOOKD_STOREQ_SLOW_US);
  q->stats.redone_batches += (uint64_t)redone;
  if (settled) q->stats.settled_commits[settled == HOOKD_STORE_SETTLED_COMMITTED ? 0 : 1]++;
  if (txn_rc == 0) q->stats.ops += n; /* the batch-size histogram's sum: committed batches */
  pthread_mutex_unlock(&q->mu);
  void (*failed)(const char *, const char *, const char *) = failure_handler;
  if (recovered && failed) failed(q->name, "recovered", NULL);
  void (*slow)(const char *, size_t, int64_t, int64_t) = slow_handler;
  if (slow && txn_rc == 0 && t0 + dt - started >= HOOKD_STOREQ_SLOW_US)
    slow(q->name, n, t0 - started, dt);

  for (hookd_store_op *op = batch, *next; op; op = next) {
    next = op->next; /* done() may free op */
    /* an unknown outcome stays unknown: "failed" would have the caller retry what may be in */
    if (txn_rc != 0) op->rc = txn_rc == HOOKD_STORE_UNKNOWN ? txn_rc : HOOKD_STORE_ERR;
    if (op->done) op->done(op->arg, op->rc);
  }
}

static void run_batch_reader(hookd_storeq *q, hookd_store_op *batch, size_t n) {
  const hookd_store_backend *be = q->be;
  for (hookd_store_op *op = batch, *next; op; op = next) {
    next = op->next;
    if (be->begin(q->conn, 0) != 0) {
      op->rc = HOOKD_STORE_ERR;
    } else {
      pthread_mutex_lock(&q->mu);
      q->running = 1;
      pthread_mutex_unlock(&q->mu);
      op->rc = run_op(q, op);
      pthread_mutex_lock(&q->mu);
      q->running = 0; /* no interrupt lands on the rollback below */
      pthread_mutex_unlock(&q->mu);
      be->rollback(q->conn); /* read-only: nothing to commit */
    }
    if (op->done) op->done(op->arg, op->rc);
  }
  pthread_mutex_lock(&q->mu);
  q->stats.ops += n;
  pthread_mutex_unlock(&q->mu);
}

static void *thread_main(void *arg) {
  hookd_storeq *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
    if (!q->head && q->stopping) {
      q->stopped = 1;
      pthread_mutex_unlock(&q->mu);
      break;
    }
    hookd_store_op *batch = q->head, *last = q->head;
    size_t n = 1;
    size_t cap = q->writer ? (size_t)q->max_batch : 1;
    while (last->next && n < cap) {
      last = last->next;
      n++;
    }
    q->head = last->next;
    if (!q->head) q->tail = NULL;
    last->next = NULL;
    q->depth -= n;
    q->batch_started_ms = hookd_mono_ms();
    pthread_mutex_unlock(&q->mu);

    if (q->writer)
      run_batch_writer(q, batch, n);
    else
      run_batch_reader(q, batch, n);
    pthread_mutex_lock(&q->mu);
    q->batch_started_ms = 0;
    pthread_mutex_unlock(&q->mu);
  }
  return NULL;
}

hookd_storeq *hookd_storeq_start(const hookd_store_backend *be, hookd_store_conn *conn,
                                 int writer, int max_batch, const char *name) {
  hookd_storeq *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->be = be;
  q->conn = conn;
  q->writer = writer;
  q->max_batch = max_batch > 0 ? max_batch : 512;
  snprintf(q->name, sizeof q->name, "%s", name);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  if (pthread_create(&q->thread, NULL, thread_main, q) != 0) {
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    return NULL;
  }
  pthread_setname_np(q->thread, q->name);
  return q;
}

void hookd_storeq_submit(hookd_storeq *q, hookd_store_op *op) {
  op->next = NULL;
  pthread_mutex_lock(&q->mu);
  if (q->stopped) {
    pthread_mutex_unlock(&q->mu);
    if (op->done) op->done(op->arg, HOOKD_STORE_ERR);
    return;
  }
  if (q->tail)
    q->tail->next = op;
  else
    q->head = op;
  q->tail = op;
  op->queued_ms = hookd_mono_ms();
  q->depth++;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* Synchronous call: the op's arg is this struct, which carries both the caller's run/arg and
 * the waiter that done() signals. */
typedef struct sync_call {
  int (*run)(hookd_store_conn *, const hookd_store_backend *, void *);
  void *arg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int finished;
  int rc;
} sync_call;

static int sync_run(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  sync_call *call = arg;
  return call->run(c, be, call->arg);
}

static void sync_done(void *arg, int rc) {
  sync_call *call = arg;
  pthread_mutex_lock(&call->mu);
  call->finished = 1;
  call->rc = rc;
  pthread_cond_signal(&call->cv);
  pthread_mutex_unlock(&call->mu);
}

int hookd_storeq_run_polled(hookd_storeq *q,
                            int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                            void *arg, bool (*go_on)(void *ctx), void *ctx) {
  sync_call call = {.run = run, .arg = arg};
  pthread_mutex_init(&call.mu, NULL);
  pthread_condattr_t ca; /* (the monotonic clock: a step of the wall clock stops no poll) */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&call.cv, &ca);
  pthread_condattr_destroy(&ca);
  hookd_store_op op = {.run = sync_run, .done = sync_done, .arg = &call};
  hookd_storeq_submit(q, &op);
  pthread_mutex_lock(&call.mu);
  while (!call.finished) {
    if (!go_on) { /* (run_sync: nothing to do meanwhile) */
      pthread_cond_wait(&call.cv, &call.mu);
      continue;
    }
    struct timespec until = hookd_mono_deadline(100);
    if (pthread_cond_timedwait(&call.cv, &call.mu, &until) != ETIMEDOUT || call.finished) continue;
    pthread_mutex_unlock(&call.mu); /* (go_on may run ops of its own) */
    if (!go_on(ctx)) hookd_storeq_interrupt(q); /* what runs now, ours or one ahead of it */
    pthread_mutex_lock(&call.mu);
  }
  pthread_mutex_unlock(&call.mu);
  pthread_mutex_destroy(&call.mu);
  pthread_cond_destroy(&call.cv);
  return call.rc;
}

int hookd_storeq_run_sync(hookd_storeq *q,
                          int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                          void *arg) {
  return hookd_storeq_run_polled(q, run, arg, NULL, NULL);
}

void hookd_storeq_interrupt(hookd_storeq *q) {
  if (!q || !q->be->interrupt) return;
  pthread_mutex_lock(&q->mu);
  if (q->running) q->be->interrupt(q->conn); /* only an op: never a BEGIN or ROLLBACK */
  pthread_mutex_unlock(&q->mu);
}

void hookd_storeq_stop(hookd_storeq *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->stopping = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  q->be->close(q->conn);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cv);
  free(q);
}

void hookd_storeq_get_stats(hookd_storeq *q, hookd_storeq_stats *out) {
  pthread_mutex_lock(&q->mu);
  *out = q->stats;
  out->queue_depth = q->depth;
  int64_t now = hookd_mono_ms(), since = q->batch_started_ms;
  if (q->head && (!since || q->head->queued_ms < since)) since = q->head->queued_ms;
  out->stalled_ms = since ? now - since : 0;
  pthread_mutex_unlock(&q->mu);
}

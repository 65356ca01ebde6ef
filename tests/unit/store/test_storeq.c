/* test_storeq.c — the store executor (storeq.c) against a scripted backend: what a batch's ops
 * are told, and who is called, when a commit fails, when its outcome is unknown, and when a
 * SAVEPOINT ends the transaction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <cmocka.h>

#include "store/storeq.h"

static int commit_rc;      /* what the next commits return */
static int handler_calls;  /* calls of the unknown-commit handler */
static int rolled_back;

static int ok(hookd_store_conn *c) {
  (void)c;
  return 0;
}
static int begin(hookd_store_conn *c, int writer) {
  (void)c, (void)writer;
  return 0;
}
static int commit(hookd_store_conn *c) {
  (void)c;
  return commit_rc;
}
static int rollback(hookd_store_conn *c) {
  (void)c;
  rolled_back++;
  return 0;
}
static int64_t changes(hookd_store_conn *c) {
  (void)c;
  return 0;
}
static int in_txn(hookd_store_conn *c) {
  (void)c;
  return 1;
}
static void close_conn(hookd_store_conn *c) { (void)c; }
static const char *errmsg(hookd_store_conn *c) {
  (void)c;
  return "disk I/O error";
}

static const hookd_store_backend fake = {.name = "fake", .close = close_conn, .begin = begin,
                                         .commit = commit, .rollback = rollback,
                                         .savepoint = ok, .release = ok, .rollback_to = ok,
                                         .changes = changes, .in_txn = in_txn,
                                         .errmsg = errmsg};

static char handler_error[64];
static void on_unknown(const char *error) { /* the daemon's exits; this one returns */
  handler_calls++;
  snprintf(handler_error, sizeof handler_error, "%s", error);
}

static int run_ok(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)c, (void)be, (void)a;
  return 0;
}

/* Runs one op through a fresh writer; returns the code its done() got. */
static int one_op(void) {
  hookd_storeq *q = hookd_storeq_start(&fake, (hookd_store_conn *)&fake, 1, 16, "test-w");
  assert_non_null(q);
  int rc = hookd_storeq_run_sync(q, run_ok, NULL);
  hookd_storeq_stop(q);
  return rc;
}

static void unknown_commit_calls_the_handler_first(void **s) {
  (void)s;
  hookd_storeq_set_unknown_commit_handler(on_unknown);
  handler_calls = rolled_back = 0;
  commit_rc = HOOKD_STORE_UNKNOWN;
  assert_int_equal(one_op(), HOOKD_STORE_UNKNOWN); /* were the handler to return */
  assert_int_equal(handler_calls, 1);
  assert_string_equal(handler_error, "disk I/O error"); /* the store's words, for the log */
  assert_int_equal(rolled_back, 1);
}

static void failed_commit_is_not_unknown(void **s) {
  (void)s;
  hookd_storeq_set_unknown_commit_handler(on_unknown);
  handler_calls = 0;
  commit_rc = HOOKD_STORE_ERR;
  assert_int_equal(one_op(), HOOKD_STORE_ERR);
  assert_int_equal(handler_calls, 0);
  commit_rc = 0;
  assert_int_equal(one_op(), 0);
  assert_int_equal(handler_calls, 0);
}

/* the CLI sets no handler: its ops learn the outcome is unknown, not that the write failed (a
 * "failed" key creation would tell its user the printed token is not valid) */
static void without_a_handler_unknown_reaches_the_ops(void **s) {
  (void)s;
  hookd_storeq_set_unknown_commit_handler(NULL);
  handler_calls = rolled_back = 0;
  commit_rc = HOOKD_STORE_UNKNOWN;
  assert_int_equal(one_op(), HOOKD_STORE_UNKNOWN);
  assert_int_equal(rolled_back, 1);
  assert_int_equal(handler_calls, 0);
}

/* ---- a SAVEPOINT that ends the transaction (SQLite's, out of memory) ---- */

static int txn_open;       /* the scripted connection's transaction */
static int savepoints;     /* SAVEPOINTs asked for, and which one fails, ending the transaction */
static int failing_savepoint;
static int ran_outside;    /* ops run with no transaction open */
static int commits;

static int s_begin(hookd_store_conn *c, int writer) {
  (void)c, (void)writer;
  txn_open = 1;
  return 0;
}
static int s_commit(hookd_store_conn *c) {
  (void)c;
  if (!txn_open) return HOOKD_STORE_ERR; /* "no transaction is active" */
  txn_open = 0;
  commits++;
  return 0;
}
static int s_rollback(hookd_store_conn *c) {
  (void)c;
  txn_open = 0;
  return 0;
}
static int s_savepoint(hookd_store_conn *c) {
  (void)c;
  if (++savepoints != failing_savepoint) return 0;
  txn_open = 0;
  return HOOKD_STORE_ERR;
}
static int s_in_txn(hookd_store_conn *c) {
  (void)c;
  return txn_open;
}

static const hookd_store_backend scripted = {
    .name = "scripted", .close = close_conn, .begin = s_begin, .commit = s_commit,
    .rollback = s_rollback, .savepoint = s_savepoint, .release = ok, .rollback_to = ok,
    .changes = changes, .in_txn = s_in_txn};

typedef struct held_op {
  hookd_store_op op;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *gate;   /* the first op, once running, waits until the others are queued: one batch */
  int rc, done;
} held_op;

static int run_held(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)c, (void)be;
  held_op *h = a;
  if (!txn_open) ran_outside++;
  if (h->gate) {
    pthread_mutex_lock(h->mu);
    *h->gate = 1; /* running */
    pthread_cond_broadcast(h->cv);
    while (*h->gate != 2) pthread_cond_wait(h->cv, h->mu);
    pthread_mutex_unlock(h->mu);
  }
  return 0;
}
static void done_held(void *a, int rc) {
  held_op *h = a;
  pthread_mutex_lock(h->mu);
  h->rc = rc;
  h->done = 1;
  pthread_cond_broadcast(h->cv);
  pthread_mutex_unlock(h->mu);
}

static void savepoint_ending_the_transaction_redoes_the_batch(void **s) {
  (void)s;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  int gate = 0;
  held_op ops[4];
  for (int i = 0; i < 4; i++)
    ops[i] = (held_op){.op = {.run = run_held, .done = done_held, .arg = &ops[i]}, .mu = &mu,
                       .cv = &cv, .gate = i == 0 ? &gate : NULL};
  txn_open = savepoints = ran_outside = commits = 0;
  failing_savepoint = 3; /* op 0's batch alone, then ops 1-3: op 2's SAVEPOINT fails */
  hookd_storeq *q = hookd_storeq_start(&scripted, (hookd_store_conn *)&scripted, 1, 16, "test-s");
  assert_non_null(q);
  hookd_storeq_submit(q, &ops[0].op);
  pthread_mutex_lock(&mu);
  while (gate != 1) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  for (int i = 1; i < 4; i++) hookd_storeq_submit(q, &ops[i].op);
  pthread_mutex_lock(&mu);
  gate = 2;
  pthread_cond_broadcast(&cv);
  for (int i = 0; i < 4; i++)
    while (!ops[i].done) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  hookd_storeq_stop(q);
  /* op 3 never ran outside a transaction (SQLite: its RELEASE would have committed it alone,
   * its client told the batch failed); the batch was redone in a new one */
  assert_int_equal(ran_outside, 0);
  assert_int_equal(ops[0].rc, 0);
  assert_int_equal(ops[1].rc, HOOKD_STORE_ERR); /* ran in the lost transaction: not again */
  assert_int_equal(ops[2].rc, HOOKD_STORE_ERR);
  assert_int_equal(ops[3].rc, 0);
  assert_int_equal(commits, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(savepoint_ending_the_transaction_redoes_the_batch),
      cmocka_unit_test(unknown_commit_calls_the_handler_first),
      cmocka_unit_test(failed_commit_is_not_unknown),
      cmocka_unit_test(without_a_handler_unknown_reaches_the_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

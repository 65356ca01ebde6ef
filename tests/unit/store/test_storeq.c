/* test_storeq.c — the store executor (storeq.c) against a scripted backend: what a batch's ops
 * are told, and who is called, when a commit fails and when its outcome is unknown. */
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

static const hookd_store_backend fake = {.name = "fake", .close = close_conn, .begin = begin,
                                         .commit = commit, .rollback = rollback,
                                         .savepoint = ok, .release = ok, .rollback_to = ok,
                                         .changes = changes, .in_txn = in_txn};

static void on_unknown(void) { handler_calls++; } /* the daemon's exits; this one returns */

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
  assert_int_equal(one_op(), HOOKD_STORE_ERR); /* were the handler to return */
  assert_int_equal(handler_calls, 1);
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

static void without_a_handler_unknown_is_a_failed_commit(void **s) {
  (void)s;
  hookd_storeq_set_unknown_commit_handler(NULL);
  handler_calls = 0;
  commit_rc = HOOKD_STORE_UNKNOWN;
  assert_int_equal(one_op(), HOOKD_STORE_ERR);
  assert_int_equal(handler_calls, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unknown_commit_calls_the_handler_first),
      cmocka_unit_test(failed_commit_is_not_unknown),
      cmocka_unit_test(without_a_handler_unknown_is_a_failed_commit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_storeq.c — the group-commit executor (src/store/storeq.c) over a fake backend: with a
 * backend sync(), no op is answered before the sync() that follows its commit has returned, the
 * writer goes on committing meanwhile, answers keep commit order, a batch that wrote nothing
 * needs no sync() of its own but waits for the one ahead of it, and a failed commit is answered
 * with an error without a sync(); without sync(), done() follows the commit. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "store/storeq.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char trace[64]; /* 'C' commit, 'S' sync entered, 's' sync returned, 'a'.. done of op a.. */
static size_t n_trace;
static int gate_open, fail_commit, wrote_nothing, commits, syncs;

static void note(char c) {
  pthread_mutex_lock(&mu);
  if (n_trace + 1 < sizeof trace) trace[n_trace++] = c;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

/* Waits (bounded, on the condition variable: no sleeps) until pred() holds under mu. */
static int wait_for(int (*pred)(void)) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  pthread_mutex_lock(&mu);
  int ok = pred();
  while (!ok && pthread_cond_timedwait(&cv, &mu, &deadline) == 0) ok = pred();
  ok = pred();
  pthread_mutex_unlock(&mu);
  return ok;
}

static int fk_ok(hookd_store_conn *c) {
  (void)c;
  return 0;
}
static int fk_begin(hookd_store_conn *c, int writer) {
  (void)c;
  (void)writer;
  return 0;
}
static int fk_commit(hookd_store_conn *c) {
  (void)c;
  pthread_mutex_lock(&mu);
  commits++;
  int rc = fail_commit ? HOOKD_STORE_ERR : wrote_nothing ? 0 : HOOKD_STORE_COMMIT_UNSYNCED;
  pthread_mutex_unlock(&mu);
  note('C');
  return rc;
}
static void fk_close(hookd_store_conn *c) { (void)c; }
static int fk_sync(hookd_store_conn *c) {
  (void)c;
  note('S');
  pthread_mutex_lock(&mu);
  syncs++;
  while (!gate_open) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  note('s');
  return 0;
}

static const hookd_store_backend fake_sync = {
    .name = "fake", .close = fk_close, .begin = fk_begin, .commit = fk_commit,
    .rollback = fk_ok, .savepoint = fk_ok, .release = fk_ok, .rollback_to = fk_ok,
    .sync = fk_sync};
static int fk_commit_inline(hookd_store_conn *c) {
  fk_commit(c);
  return 0; /* durable by itself */
}
static const hookd_store_backend fake_inline = {
    .name = "fake", .close = fk_close, .begin = fk_begin, .commit = fk_commit_inline,
    .rollback = fk_ok, .savepoint = fk_ok, .release = fk_ok, .rollback_to = fk_ok};

static int dummy_conn;
#define CONN ((hookd_store_conn *)&dummy_conn)

typedef struct call {
  char name;
  int run_rc, done_rc, done;
  hookd_store_op op;
} call;

static int run_call(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  (void)c;
  (void)be;
  return ((call *)arg)->run_rc;
}
static void done_call(void *arg, int rc) {
  call *k = arg;
  pthread_mutex_lock(&mu);
  k->done_rc = rc;
  k->done = 1;
  pthread_mutex_unlock(&mu);
  note(k->name);
}
static void submit(hookd_storeq *q, call *k, char name, int run_rc) {
  memset(k, 0, sizeof *k);
  k->name = name;
  k->run_rc = run_rc;
  k->op = (hookd_store_op){.run = run_call, .done = done_call, .arg = k};
  hookd_storeq_submit(q, &k->op);
}

static void reset(void) {
  pthread_mutex_lock(&mu);
  n_trace = 0;
  memset(trace, 0, sizeof trace);
  gate_open = fail_commit = wrote_nothing = commits = syncs = 0;
  pthread_mutex_unlock(&mu);
}

static int sync_entered(void) { return syncs >= 1; }
static int two_commits(void) { return commits >= 2; }
static call a, b;
static int both_done(void) { return a.done && b.done; }
static int a_done(void) { return a.done; }

static void test_answers_wait_for_sync_and_keep_order(void **state) {
  (void)state;
  reset();
  hookd_storeq *q = hookd_storeq_start(&fake_sync, CONN, 1, 64, "t-writer");
  assert_non_null(q);
  submit(q, &a, 'a', 7);
  assert_true(wait_for(sync_entered));
  submit(q, &b, 'b', 8); /* committed while a's sync is still running */
  assert_true(wait_for(two_commits));
  pthread_mutex_lock(&mu);
  assert_false(a.done);
  assert_false(b.done);
  gate_open = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  assert_true(wait_for(both_done));
  assert_int_equal(a.done_rc, 7);
  assert_int_equal(b.done_rc, 8);
  /* a answered only after the sync that followed its commit returned; b needed a sync of
   * its own (it committed after the first sync began), and was answered after it */
  assert_string_equal(trace, "CSCsaSsb");
  hookd_storeq_stats st;
  hookd_storeq_get_stats(q, &st);
  assert_int_equal(st.syncs, 2);
  assert_int_equal(st.batches, 2);
  assert_int_equal(st.ops, 2);
  hookd_storeq_stop(q);
}

/* A batch that wrote nothing (a duplicate's lookup) needs no sync of its own, but may have
 * read the batch ahead of it: it is answered only once that one is durable. */
static void test_batch_without_writes_waits_for_earlier_sync_only(void **state) {
  (void)state;
  reset();
  hookd_storeq *q = hookd_storeq_start(&fake_sync, CONN, 1, 64, "t-writer");
  assert_non_null(q);
  submit(q, &a, 'a', 1);
  assert_true(wait_for(sync_entered));
  pthread_mutex_lock(&mu);
  wrote_nothing = 1;
  pthread_mutex_unlock(&mu);
  submit(q, &b, 'b', 2);
  assert_true(wait_for(two_commits));
  pthread_mutex_lock(&mu);
  assert_false(b.done);
  gate_open = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  assert_true(wait_for(both_done));
  assert_string_equal(trace, "CSCsab");
  assert_int_equal(syncs, 1);
  hookd_storeq_stop(q);
}

static void test_failed_commit_is_an_error_without_sync(void **state) {
  (void)state;
  reset();
  pthread_mutex_lock(&mu);
  fail_commit = 1;
  gate_open = 1;
  pthread_mutex_unlock(&mu);
  hookd_storeq *q = hookd_storeq_start(&fake_sync, CONN, 1, 64, "t-writer");
  assert_non_null(q);
  submit(q, &a, 'a', 7);
  assert_true(wait_for(a_done));
  assert_int_equal(a.done_rc, HOOKD_STORE_ERR);
  assert_int_equal(syncs, 0);
  hookd_storeq_stats st;
  hookd_storeq_get_stats(q, &st);
  assert_int_equal(st.failed_commits, 1);
  hookd_storeq_stop(q);
}

static void test_without_sync_done_follows_commit(void **state) {
  (void)state;
  reset();
  hookd_storeq *q = hookd_storeq_start(&fake_inline, CONN, 1, 64, "t-writer");
  assert_non_null(q);
  submit(q, &a, 'a', 5);
  assert_true(wait_for(a_done));
  assert_int_equal(a.done_rc, 5);
  assert_string_equal(trace, "Ca");
  hookd_storeq_stop(q);
}

static void test_stop_completes_what_waits_for_sync(void **state) {
  (void)state;
  reset();
  hookd_storeq *q = hookd_storeq_start(&fake_sync, CONN, 1, 64, "t-writer");
  assert_non_null(q);
  submit(q, &a, 'a', 1);
  assert_true(wait_for(sync_entered));
  pthread_mutex_lock(&mu);
  gate_open = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  hookd_storeq_stop(q); /* joins the syncer after it answered a */
  assert_true(a.done);
  assert_int_equal(a.done_rc, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_answers_wait_for_sync_and_keep_order),
      cmocka_unit_test(test_batch_without_writes_waits_for_earlier_sync_only),
      cmocka_unit_test(test_failed_commit_is_an_error_without_sync),
      cmocka_unit_test(test_without_sync_done_follows_commit),
      cmocka_unit_test(test_stop_completes_what_waits_for_sync),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_sqlite_store.c — the SQLite backend through the executor, on a real database file:
 * lease fencing (a stale holder's outcome is refused after another claim), claims never hand
 * the same delivery to two holders, fan-out and publish idempotency, append-only attempts,
 * replay cycles, group commit (one failing op rolls back alone; the batch commits once),
 * migrations applied once, the inbound receive step (dedup, conflict, the record written
 * once and linked to its event, retention), a WAL that stays bounded when the checkpointer
 * falls behind, a long scan cut short at shutdown, and answers kept under an Idempotency-Key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/clock.h"
#include "core/ids.h"
#include "store/sqlite/sqlite_int.h"
#include "store/storeq.h"

#include "store_fixture.h"

/* ---- tests ---- */

/* Endpoint ep1 of tenant t1, one event published to it, its delivery claimed by node "n". */
static hookd_claimed *one_event_claimed(fx *f) {
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  hookd_publish_res res;
  assert_int_equal(publish(f, "t1", "evt1", "a.b", NULL, 1, &res), 0);
  hookd_publish_res_free(&res);
  hookd_claimed *a = NULL;
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms(), 60000, &a), 1);
  return a;
}

static void stale_lease_is_fenced(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  hookd_publish_res res;
  assert_int_equal(publish(f, "t1", "evt1", "a.b", NULL, 1, &res), 0);
  assert_int_equal(res.n_deliveries, 1);
  hookd_publish_res_free(&res);

  int64_t now = hookd_now_ms();
  hookd_claimed *a = NULL, *b = NULL;
  assert_int_equal(claim(f, "ep1", "node-a", now, 1000, &a), 1);
  /* while A's lease is live nobody else gets it */
  assert_int_equal(claim(f, "ep1", "node-b", now + 10, 1000, &b), 0);
  free(b);
  /* A's lease expires; B claims with a higher token */
  assert_int_equal(claim(f, "ep1", "node-b", now + 2000, 1000, &b), 1);
  assert_true(b[0].d.lease_token > a[0].d.lease_token);
  /* A's late outcome is refused; B's is accepted */
  assert_int_equal(record(f, &a[0], HOOKD_DS_DELIVERED, 200), HOOKD_STORE_STALE);
  /* refused before writing anything: outcomes run without a savepoint (storeq.h) */
  assert_int_equal(last_outcome_changes, 0);
  assert_int_equal(record(f, &b[0], HOOKD_DS_RETRYING, 500), 0);
  /* the refused write left no trace: one attempt, by B */
  hookd_delivery d;
  hookd_attempt *att = NULL;
  call c = {.in = b[0].d.id, .out = &d, .out2 = &att};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_get, &c), 0);
  assert_int_equal(d.state, HOOKD_DS_RETRYING);
  assert_int_equal(c.n, 1);
  assert_int_equal(att[0].http_status, 500);
  assert_int_equal(att[0].lease_token, b[0].d.lease_token);
  hookd_delivery_free(&d);
  hookd_attempts_free(att, c.n);
  /* a second outcome under the same (now consumed) token is refused too */
  assert_int_equal(record(f, &b[0], HOOKD_DS_DELIVERED, 200), HOOKD_STORE_STALE);
  free_claimed(a, 1);
  free_claimed(b, 1);
}

static int run_sql(hookd_store_conn *c, const hookd_store_backend *be, void *a);

/* An outcome's first run changed its request (the endpoint moved in the same batch: a 410 made
 * a retry at the new URL), and that run was rolled back with the move: the second run decides
 * again from the request as asked — DEAD, the URL never moved. */
static int run_moved_outcome_failing(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  int rc = sq_exec(c, "UPDATE endpoints SET url = 'https://b.example/' WHERE id = 'ep1'");
  if (!rc) rc = be->record_outcome(c, (hookd_outcome *)((call *)a)->in);
  return rc ? rc : HOOKD_STORE_ERR; /* rolled back: the move and the outcome */
}

static void outcome_run_again_starts_from_the_request(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  call sql = {.in = "UPDATE endpoints SET url = 'https://a.example/' WHERE id = 'ep1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  hookd_publish_res res;
  assert_int_equal(publish(f, "t1", "evt1", "a.b", NULL, 1, &res), 0);
  hookd_publish_res_free(&res);
  hookd_claimed *a = NULL;
  assert_int_equal(claim(f, "ep1", "node-a", hookd_now_ms(), 60000, &a), 1);
  hookd_outcome o = {0};
  o.delivery_seq = a[0].d.seq;
  o.lease_token = a[0].d.lease_token;
  o.from = a[0].d.state;
  o.to = HOOKD_DS_DEAD;
  o.dead_reason = "gone";
  o.last_error = "http_410";
  o.endpoint_id = "ep1";
  o.sent_url = "https://a.example/";
  o.attempt_number = 1;
  o.now_ms = o.attempt.started_ms = o.attempt.finished_ms = hookd_now_ms();
  o.attempt.outcome = (char *)"http_error";
  o.attempt.http_status = 410;
  o.attempt.trigger = (char *)"live";
  call c = {.in = &o};
  assert_int_equal(w(f, run_moved_outcome_failing, &c), HOOKD_STORE_ERR);
  assert_int_equal(o.to, HOOKD_DS_RETRYING); /* the first run's decision, rolled back */
  assert_int_equal(w(f, run_outcome, &c), 0);
  hookd_delivery d;
  call g = {.in = a[0].d.id, .out = &d};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_get, &g), 0);
  assert_int_equal(d.state, HOOKD_DS_DEAD);
  hookd_delivery_free(&d);
  free_claimed(a, 1);
}

static void reclaim_bumps_token(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  hookd_publish_res res;
  assert_int_equal(publish(f, "t1", "evt1", "a.b", NULL, 1, &res), 0);
  hookd_publish_res_free(&res);
  hookd_claimed *a = NULL, *b = NULL;
  int64_t now = hookd_now_ms();
  assert_int_equal(claim(f, "ep1", "node-a", now, 60000, &a), 1);
  /* node-a restarts: its own leases are released at start */
  call c = {.in = "node-a", .i64 = now};
  assert_int_equal(w(f, run_reclaim, &c), 0);
  assert_int_equal(c.ival, 1);
  assert_int_equal(claim(f, "ep1", "node-a", now, 60000, &b), 1);
  assert_int_equal(record(f, &a[0], HOOKD_DS_DELIVERED, 200), HOOKD_STORE_STALE);
  assert_int_equal(record(f, &b[0], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(a, 1);
  free_claimed(b, 1);
}

static void fanout_and_idempotency(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep-all", NULL);
  make_tenant_endpoint(f, "t1", "ep-inv", "invoice.*,refund");
  make_tenant_endpoint(f, "t2", "ep-other", NULL);
  hookd_publish_res r1, r2, r3;
  assert_int_equal(publish(f, "t1", "e1", "invoice.paid", NULL, 7, &r1), 0);
  assert_int_equal(r1.n_deliveries, 2);
  assert_false(r1.duplicate);
  /* same id, same hash: the original result, nothing new */
  assert_int_equal(publish(f, "t1", "e1", "invoice.paid", NULL, 7, &r2), 0);
  assert_true(r2.duplicate);
  assert_int_equal(r2.n_deliveries, 2);
  assert_int_equal(r2.n_endpoints, 0);
  /* same id, different request: conflict */
  assert_int_equal(publish(f, "t1", "e1", "invoice.paid", NULL, 8, &r3), HOOKD_STORE_CONFLICT);
  hookd_publish_res_free(&r1);
  hookd_publish_res_free(&r2);
  /* idempotency key: a second request with a new generated id returns the first event */
  assert_int_equal(publish(f, "t1", "gen-1", "refund", "key-9", 3, &r1), 0);
  assert_int_equal(publish(f, "t1", "gen-2", "refund", "key-9", 3, &r2), 0);
  assert_true(r2.duplicate);
  assert_string_equal(r2.event_id, "gen-1");
  assert_int_equal(publish(f, "t1", "gen-3", "refund", "key-9", 4, &r3), HOOKD_STORE_CONFLICT);
  hookd_publish_res_free(&r1);
  hookd_publish_res_free(&r2);
  /* the same event id in another tenant is another event */
  assert_int_equal(publish(f, "t2", "e1", "invoice.paid", NULL, 9, &r1), 0);
  assert_false(r1.duplicate);
  assert_int_equal(r1.n_deliveries, 1);
  hookd_publish_res_free(&r1);
}

/* Publishes as an op that also reports whether it changed any row (call.i64: rows changed). */
static int run_publish_counting(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  int64_t before = be->changes(c);
  int rc = be->publish(c, k->in, k->out);
  k->i64 = be->changes(c) - before;
  return rc;
}

static int publish_counting(fx *f, const char *tenant, const char *id, const char *idem,
                            unsigned char hash_byte, int64_t *changed) {
  unsigned char hash[32];
  memset(hash, hash_byte, sizeof hash);
  hookd_publish_req req = {.tenant_id = tenant, .event_id = id, .type = "a", .body = "{}",
                           .body_len = 2, .request_hash = hash, .idempotency_key = idem,
                           .occurred_ms = hookd_now_ms(), .now_ms = hookd_now_ms()};
  hookd_publish_res res = {0};
  call c = {.in = &req, .out = &res};
  int rc = w(f, run_publish_counting, &c);
  hookd_publish_res_free(&res);
  *changed = c.i64;
  return rc;
}

/* publish runs without a savepoint: each of its refusals must come before its first write */
static void publish_refuses_before_writing(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  int64_t changed = 0;
  assert_int_equal(publish_counting(f, "t1", "e1", NULL, 7, &changed), 0);
  assert_true(changed > 0);
  assert_int_equal(publish_counting(f, "t1", "k1-event", "k1", 5, &changed), 0);
  /* an unknown tenant */
  assert_int_equal(publish_counting(f, "nobody", "e9", NULL, 7, &changed), HOOKD_STORE_NOTFOUND);
  assert_int_equal(changed, 0);
  /* an event id reused with another body, under a new Idempotency-Key */
  assert_int_equal(publish_counting(f, "t1", "e1", "k-new", 8, &changed), HOOKD_STORE_CONFLICT);
  assert_int_equal(changed, 0);
  /* an Idempotency-Key reused with another body */
  assert_int_equal(publish_counting(f, "t1", "e2", "k1", 6, &changed), HOOKD_STORE_CONFLICT);
  assert_int_equal(changed, 0);
  /* and the refused request left no key behind: k-new is free for another event */
  assert_int_equal(publish_counting(f, "t1", "e3", "k-new", 8, &changed), 0);
  assert_true(changed > 0);
}

/* Answers kept under an Idempotency-Key: per scope, until the retention walk's purge drops them
 * (no age read at the lookup: a node's clock may be off), the oldest first, a batch at a time. */
static int run_answers(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)a;
  const int64_t day = 24LL * 3600 * 1000, t0 = 1000 * day;
  char *hash = NULL, *answer = NULL;
  int status = 0;
  assert_int_equal(be->answer_get(c, "key_a", "k1", &hash, &status, &answer),
                   HOOKD_STORE_NOTFOUND);
  assert_int_equal(be->answer_put(c, "key_a", "k1", "h1", 200, "{\"n\":1}", t0), 0);
  assert_int_equal(be->answer_get(c, "key_a", "k1", &hash, &status, &answer), 0);
  assert_string_equal(hash, "h1");
  assert_string_equal(answer, "{\"n\":1}");
  assert_int_equal(status, 200);
  free(hash);
  free(answer);
  /* another scope's key is its own */
  assert_int_equal(be->answer_get(c, "key_b", "k1", &hash, &status, &answer),
                   HOOKD_STORE_NOTFOUND);
  /* a put keeps nothing else from being found, however old (before, a put dropped answers by
   * its own clock: a node started days ahead dropped every node's) */
  assert_int_equal(be->answer_put(c, "key_b", "new", "h", 200, "{}", t0 + 5 * day), 0);
  assert_int_equal(be->answer_get(c, "key_a", "k1", &hash, &status, &answer), 0);
  free(hash);
  free(answer);
  /* the purge: those stamped before its time, oldest first, limit at a time */
  assert_int_equal(be->answer_put(c, "key_b", "old", "h", 200, "{}", t0 - day), 0);
  int purged = 0;
  bool more = false;
  assert_int_equal(be->answer_purge(c, t0 + 1, 1, &purged, &more), 0);
  assert_int_equal(purged, 1);
  assert_true(more);
  assert_int_equal(be->answer_get(c, "key_b", "old", &hash, &status, &answer),
                   HOOKD_STORE_NOTFOUND);
  assert_int_equal(be->answer_purge(c, t0 + 1, 10, &purged, &more), 0);
  assert_int_equal(purged, 1);
  assert_false(more);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(c->db, "SELECT group_concat(key) FROM api_answers", -1, &st,
                                      NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "new");
  sqlite3_finalize(st);
  return 0;
}

static void answers_kept_under_a_key(void **state) {
  fx *f = *state;
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_answers, NULL), 0);
}

/* An op that holds the writer thread until released, so the ops queued meanwhile form one
 * batch deterministically. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int entered, open;
} gate;

static int run_gate(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  gate *g = a;
  pthread_mutex_lock(&g->mu);
  g->entered = 1;
  pthread_cond_broadcast(&g->cv);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  return 0;
}

static void gate_close(fx *f, gate *g, hookd_store_op *op) {
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->entered = g->open = 0;
  *op = (hookd_store_op){.run = run_gate, .arg = g};
  hookd_storeq_submit(f->s->writer, op);
  pthread_mutex_lock(&g->mu);
  while (!g->entered) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static int run_t_ok(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  hookd_tenant t = {.id = (char *)a, .name = (char *)"", .created_ms = 1};
  return be->tenant_create(c, &t);
}

static int run_t_fail(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  run_t_ok(c, be, a); /* written, then rolled back with the op's savepoint */
  return HOOKD_STORE_CONFLICT;
}

typedef struct done_rec {
  int rc[256];
  int n;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} done_rec;
static done_rec dr = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Records each op's completion (1 when the code is the expected one for its tenant id). */
static void record_done(void *arg, int rc) {
  pthread_mutex_lock(&dr.mu);
  dr.rc[dr.n++] = strcmp(arg, "t-batch-fail") == 0 ? (rc == HOOKD_STORE_CONFLICT) : (rc == 0);
  pthread_cond_broadcast(&dr.cv);
  pthread_mutex_unlock(&dr.mu);
}

static void count_done(void *arg, int rc) {
  pthread_mutex_lock(&dr.mu);
  dr.rc[0] += rc == 0;
  dr.n++;
  pthread_cond_broadcast(&dr.cv);
  pthread_mutex_unlock(&dr.mu);
}

static void wait_done(int n) {
  pthread_mutex_lock(&dr.mu);
  while (dr.n < n) pthread_cond_wait(&dr.cv, &dr.mu);
  pthread_mutex_unlock(&dr.mu);
}

static int tenant_exists(fx *f, const char *id) {
  hookd_store_conn *c = NULL;
  char err[128];
  assert_int_equal(f->s->be->open(f->s->shared, 0, &c, err, sizeof err), 0);
  hookd_tenant got;
  int rc = f->s->be->tenant_get(c, id, &got);
  if (rc == 0) hookd_tenant_free(&got);
  f->s->be->close(c);
  return rc == 0;
}

static void group_commit_isolates_failures(void **state) {
  fx *f = *state;
  gate g;
  hookd_store_op gop, ops[3];
  memset(dr.rc, 0, sizeof dr.rc);
  dr.n = 0;
  hookd_storeq_stats before, after;
  gate_close(f, &g, &gop);
  hookd_storeq_get_stats(f->s->writer, &before);
  const char *ids[] = {"t-a", "t-batch-fail", "t-b"};
  for (int i = 0; i < 3; i++)
    ops[i] = (hookd_store_op){.run = i == 1 ? run_t_fail : run_t_ok, .done = record_done,
                              .arg = (void *)ids[i]};
  hookd_storeq_submit(f->s->writer, &ops[0]);
  hookd_storeq_submit(f->s->writer, &ops[1]);
  hookd_storeq_submit(f->s->writer, &ops[2]);
  gate_open(&g);
  wait_done(3);
  hookd_storeq_get_stats(f->s->writer, &after);
  /* the gate's batch, then one batch (one commit) for the three */
  assert_int_equal(after.batches - before.batches, 2);
  assert_int_equal(dr.n, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(dr.rc[i], 1); /* each completed with its own code */
  assert_true(tenant_exists(f, "t-a"));
  assert_true(tenant_exists(f, "t-b"));
  assert_false(tenant_exists(f, "t-batch-fail"));
}

static int run_t_refuse(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)c, (void)be, (void)a;
  return HOOKD_STORE_STALE; /* like a fenced lease: refused before writing anything */
}

/* Ends the transaction the way SQLite does on SQLITE_FULL or an I/O error (the whole
 * transaction rolled back, no change counted) on its first call, and fails; writes normally on
 * the second. */
static int lose_txn_calls;
static int run_t_lose_txn_once(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  if (lose_txn_calls++ == 0) {
    assert_int_equal(sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    return HOOKD_STORE_ERR;
  }
  return run_t_ok(c, be, a);
}

/* Loses the transaction as above, then writes on regardless and says it succeeded (an op that
 * took the failed read for a value): its write must not commit on its own. Once. */
static int lost_write_rc; /* what the write after the loss returned (checked by the test) */
static int run_t_lose_txn_write_on(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  if (lose_txn_calls++ == 0) {
    lost_write_rc = sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK
                        ? run_t_ok(c, be, a)
                        : -100;
  }
  return HOOKD_STORE_OK;
}

/* Codes seen by each op of one batch, by position. */
static int seen_rc[8];
static void seen_done(void *arg, int rc) {
  pthread_mutex_lock(&dr.mu);
  seen_rc[(intptr_t)arg] = rc;
  dr.n++;
  pthread_cond_broadcast(&dr.cv);
  pthread_mutex_unlock(&dr.mu);
}

typedef struct {
  const char *tenant;
  int (*run)(hookd_store_conn *, const hookd_store_backend *, void *);
} t_step;
static t_step steps[8];
static int run_step(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  t_step *s = &steps[(intptr_t)a];
  return s->run(c, be, (void *)s->tenant);
}

/* Submits n ops in one batch (held behind a gate); flags[i] are the ops' HOOKD_STORE_OP_*. */
static void one_batch(fx *f, int n, const int *flags) {
  gate g;
  hookd_store_op gop, ops[8];
  dr.n = 0;
  gate_close(f, &g, &gop);
  for (intptr_t i = 0; i < n; i++) {
    ops[i] = (hookd_store_op){.run = run_step, .done = seen_done, .arg = (void *)i,
                              .flags = flags[i]};
    hookd_storeq_submit(f->s->writer, &ops[i]);
  }
  gate_open(&g);
  wait_done(n);
}

static void savepoint_free_ops_fail_alone_or_redo_the_batch(void **state) {
  fx *f = *state;
  const int NS = HOOKD_STORE_OP_NO_SAVEPOINT;
  hookd_storeq_stats before, after;
  hookd_storeq_get_stats(f->s->writer, &before);

  /* refused before writing: the op fails alone, its batch-mates (with and without a savepoint)
   * commit */
  steps[0] = (t_step){"t-sp-a", run_t_ok};
  steps[1] = (t_step){"t-sp-refused", run_t_refuse};
  steps[2] = (t_step){"t-sp-b", run_t_ok};
  steps[3] = (t_step){"t-sp-c", run_t_fail}; /* with a savepoint: rolled back alone */
  one_batch(f, 4, (int[]){0, NS, NS, 0});
  assert_int_equal(seen_rc[0], 0);
  assert_int_equal(seen_rc[1], HOOKD_STORE_STALE);
  assert_int_equal(seen_rc[2], 0);
  assert_int_equal(seen_rc[3], HOOKD_STORE_CONFLICT);
  assert_true(tenant_exists(f, "t-sp-a"));
  assert_true(tenant_exists(f, "t-sp-b"));
  assert_false(tenant_exists(f, "t-sp-c"));
  hookd_storeq_get_stats(f->s->writer, &after);
  assert_int_equal(after.failed_commits, before.failed_commits);

  /* failed after writing, without a savepoint to undo it alone: the transaction is rolled back
   * and the batch runs again, each op in a savepoint, so the failing op fails alone; marked ops
   * run again; an unmarked op that had already run completes with ERR (it may not run twice);
   * ops after the failing one ran only in the second attempt */
  steps[0] = (t_step){"t-sp-d", run_t_ok};
  steps[1] = (t_step){"t-sp-e", run_t_ok};
  steps[2] = (t_step){"t-sp-x", run_t_fail};
  steps[3] = (t_step){"t-sp-f", run_t_ok};
  steps[4] = (t_step){"t-sp-h", run_t_ok};
  one_batch(f, 5, (int[]){0, NS, NS, NS, 0});
  assert_int_equal(seen_rc[0], HOOKD_STORE_ERR);
  assert_int_equal(seen_rc[1], 0);
  assert_int_equal(seen_rc[2], HOOKD_STORE_CONFLICT);
  assert_int_equal(seen_rc[3], 0);
  assert_int_equal(seen_rc[4], 0);
  assert_false(tenant_exists(f, "t-sp-d"));
  assert_true(tenant_exists(f, "t-sp-e"));
  assert_false(tenant_exists(f, "t-sp-x"));
  assert_true(tenant_exists(f, "t-sp-f"));
  assert_true(tenant_exists(f, "t-sp-h"));
  hookd_storeq_get_stats(f->s->writer, &after);
  assert_int_equal(after.failed_commits, before.failed_commits);
  assert_int_equal(after.redone_batches, before.redone_batches + 1);

  /* the database ends the transaction under an op (SQLite rolls it back on SQLITE_FULL, an
   * I/O error, out of memory) without a change counted: nothing may run outside the batch's
   * transaction. The batch is redone in a new one, as above; without the check, t-sp-j's
   * savepoint would have committed on its own and t-sp-k run in autocommit while both were told
   * the batch failed. Once with the op that loses it without a savepoint, once with one. */
  for (int with_savepoint = 0; with_savepoint < 2; with_savepoint++) {
    char ids[4][16];
    for (int i = 0; i < 4; i++) snprintf(ids[i], sizeof ids[i], "t-lost-%d-%d", with_savepoint, i);
    lose_txn_calls = 0;
    steps[0] = (t_step){ids[0], run_t_ok};
    steps[1] = (t_step){ids[1], run_t_lose_txn_once};
    steps[2] = (t_step){ids[2], run_t_ok};
    steps[3] = (t_step){ids[3], run_t_ok};
    hookd_storeq_get_stats(f->s->writer, &before);
    one_batch(f, 4, (int[]){0, with_savepoint ? 0 : NS, 0, NS});
    assert_int_equal(lose_txn_calls, with_savepoint ? 1 : 2); /* an unmarked op runs once */
    assert_int_equal(seen_rc[0], HOOKD_STORE_ERR); /* ran, rolled back by the database */
    assert_int_equal(seen_rc[1], with_savepoint ? HOOKD_STORE_ERR : 0);
    assert_int_equal(seen_rc[2], 0);
    assert_int_equal(seen_rc[3], 0);
    assert_false(tenant_exists(f, ids[0]));
    assert_int_equal(tenant_exists(f, ids[1]), !with_savepoint);
    assert_true(tenant_exists(f, ids[2]));
    assert_true(tenant_exists(f, ids[3]));
    hookd_storeq_get_stats(f->s->writer, &after);
    assert_int_equal(after.redone_batches, before.redone_batches + 1);
    assert_int_equal(after.failed_commits, before.failed_commits);
  }

  /* an op that writes on after the transaction was lost: the write is refused (the commit
   * guard), not committed on its own while the batch is redone */
  lose_txn_calls = 0;
  steps[0] = (t_step){"t-lost-w", run_t_lose_txn_write_on};
  one_batch(f, 1, (int[]){NS});
  assert_int_not_equal(lost_write_rc, -100);
  assert_int_not_equal(lost_write_rc, 0); /* refused: no commit but the executor's */
  assert_false(tenant_exists(f, "t-lost-w"));

  /* and the writer goes on: the next batch commits */
  steps[0] = (t_step){"t-sp-g", run_t_ok};
  one_batch(f, 1, (int[]){NS});
  assert_int_equal(seen_rc[0], 0);
  assert_true(tenant_exists(f, "t-sp-g"));
}

static void batches_form_under_load(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  enum { N = 200 };
  static hookd_publish_req reqs[N];
  static hookd_publish_res res[N];
  static call calls[N];
  static char ids[N][32];
  static unsigned char hash[32];
  static hookd_store_op ops[N];
  gate g;
  hookd_store_op gop;
  gate_close(f, &g, &gop);
  hookd_storeq_stats before, after;
  hookd_storeq_get_stats(f->s->writer, &before);
  for (int i = 0; i < N; i++) {
    snprintf(ids[i], sizeof ids[i], "bulk-%d", i);
    reqs[i] = (hookd_publish_req){.tenant_id = "t1", .event_id = ids[i], .type = "x",
                                  .body = "{}", .body_len = 2, .request_hash = hash,
                                  .now_ms = hookd_now_ms(), .occurred_ms = hookd_now_ms()};
    calls[i] = (call){.in = &reqs[i], .out = &res[i]};
    ops[i] = (hookd_store_op){.run = run_publish, .done = count_done, .arg = &calls[i]};
    hookd_storeq_submit(f->s->writer, &ops[i]);
  }
  memset(dr.rc, 0, sizeof dr.rc);
  dr.n = 0;
  gate_open(&g);
  wait_done(N);
  hookd_storeq_get_stats(f->s->writer, &after);
  /* the gate's batch + 200 publishes in batches of at most 64: 4 commits, not 200 */
  assert_int_equal(after.ops - before.ops, 1 + N);
  assert_int_equal(after.batches - before.batches, 1 + 4);
  assert_int_equal(dr.rc[0], N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(res[i].n_deliveries, 1);
    hookd_publish_res_free(&res[i]);
  }
}

static int run_exec(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  return sq_exec(c, a) == 0 ? 0 : HOOKD_STORE_ERR;
}

/* A publish's fan-out matches payload filters against the payload the API parsed (req.payload),
 * not the envelope parsed again on the writer: an envelope whose data differs shows which one
 * was read. Without req.payload the envelope is parsed, as for the ops that have none. */
static void fan_out_matches_the_payload_it_is_given(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  assert_int_equal(w(f, run_exec, (call *)"UPDATE endpoints SET payload_filter = '{\"a\":2}'"), 0);
  static const char env[] =
      "{\"id\":\"x\",\"type\":\"a.x\",\"timestamp\":\"t\",\"data\":{\"a\":1}}";
  json_t *given = json_pack("{s:i}", "a", 2);
  unsigned char hash[32] = {0};
  for (int with = 0; with < 2; with++) {
    char id[32];
    snprintf(id, sizeof id, "evt_given_%d", with);
    hookd_publish_req req = {.tenant_id = "t1", .event_id = id, .type = "a.x", .body = env,
                             .body_len = sizeof env - 1, .request_hash = hash,
                             .payload = with ? given : NULL, .occurred_ms = hookd_now_ms(),
                             .now_ms = hookd_now_ms()};
    hookd_publish_res res;
    call c = {.in = &req, .out = &res};
    assert_int_equal(w(f, run_publish, &c), 0);
    assert_int_equal(res.n_deliveries, with); /* {"a":1} parsed; {"a":2} given */
    hookd_publish_res_free(&res);
  }
  json_decref(given);
}

static void attempts_are_append_only_and_replay_starts_a_cycle(void **state) {
  fx *f = *state;
  hookd_claimed *a = one_event_claimed(f);
  assert_int_equal(record(f, &a[0], HOOKD_DS_DEAD, 400), 0);
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_exec,
                                         "UPDATE attempts SET http_status = 200"),
                   HOOKD_STORE_ERR);
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_exec, "DELETE FROM attempts"),
                   HOOKD_STORE_ERR);
  /* the one change allowed: the response excerpt erased (a payload deleted on demand), alone */
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_exec,
                                         "UPDATE attempts SET response = NULL, error = 'x'"),
                   HOOKD_STORE_ERR);
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_exec,
                                         "UPDATE attempts SET response = x'01'"),
                   HOOKD_STORE_ERR);
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_exec,
                                         "UPDATE attempts SET response = NULL"),
                   0);
  call c = {.in = a[0].d.id};
  assert_int_equal(w(f, run_replay, &c), 0);
  /* replayed again while still scheduled (due already): "send it now" changes nothing, and
   * starts no second cycle (below: the cycle the first replay began) */
  assert_int_equal(w(f, run_replay, &c), 0);
  hookd_claimed *b = NULL;
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms(), 60000, &b), 1);
  assert_true(b[0].d.replay_cycle);
  assert_int_equal(b[0].d.cycle_base, 1);
  assert_int_equal(b[0].d.state, HOOKD_DS_PENDING);
  /* claimed (its attempt being made): refused, its outcome decides */
  assert_int_equal(w(f, run_replay, &c), HOOKD_STORE_STATE);
  free_claimed(a, 1);
  free_claimed(b, 1);
}

static int run_receive(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->receive(c, k->in, k->out);
}
static int run_purge(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  int64_t after = 0;
  return be->inbox_purge(c, k->i64, 100, &after, &k->ival);
}
static int run_src_dests(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->source_create(c, k->in, k->out, k->out ? 1 : 0, 0);
}

static int receive_bkey(fx *f, const char *inbox_id, const char *key, const char *bkey,
                        const char *hash, int64_t now, hookd_receive_res *res) {
  hookd_receive_req req = {.inbox_id = inbox_id, .source_id = "src1", .tenant_id = "t1",
                           .provider = "stripe", .identity_key = key,
                           .identity_kind = "provider_id", .provider_event_id = "evt_1",
                           .business_key = bkey, .event_type = "a.b", .payload_hash = hash,
                           .body = "{}", .body_len = 2, .content_type = "application/json",
                           .meta = "", .now_ms = now};
  call c = {.in = &req, .out = res};
  return w(f, run_receive, &c);
}
static int receive(fx *f, const char *inbox_id, const char *key, const char *hash, int64_t now,
                   hookd_receive_res *res) {
  return receive_bkey(f, inbox_id, key, NULL, hash, now, res);
}

/* Every delivery delivered: records are then the retention's to purge. */
static int run_finish_deliveries(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be;
  (void)a;
  return sqlite3_exec(c->db, "UPDATE deliveries SET state = 'delivered', next_attempt_at = NULL",
                      NULL, NULL, NULL) == SQLITE_OK ? 0 : HOOKD_STORE_ERR;
}

static void make_source(fx *f, bool with_destination);

/* ---- the change stamps of keys and sources (the periodic reload's skip) ---- */

static int run_stamps(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->config_stamps(c, &k->i64, (int64_t *)k->out);
}
static int run_key_make(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  return be->api_key_create(c, ((call *)a)->in);
}
static int run_key_revoke(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  return be->api_key_revoke(c, ((call *)a)->in, 5);
}
static int run_src_delete(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  hookd_delete_counts n;
  return be->source_delete(c, ((call *)a)->in, 6, &n);
}
static int run_sql(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be;
  return sq_exec(c, ((call *)a)->in);
}

/* asserts the stamps moved (1) or not (0) since *keys, *sources, and keeps the new ones */
static void stamps_moved(fx *f, int64_t *keys, int64_t *sources, int keys_moved,
                         int sources_moved) {
  int64_t s = -1;
  call c = {.out = &s};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_stamps, &c), 0);
  assert_int_equal(c.i64 != *keys, keys_moved);
  assert_int_equal(s != *sources, sources_moved);
  *keys = c.i64;
  *sources = s;
}

static void config_stamps_move_with_keys_and_sources(void **state) {
  fx *f = *state;
  int64_t keys = 0, sources = 0;
  stamps_moved(f, &keys, &sources, 0, 0); /* a new store: both 0 */
  hookd_api_key k = {.id = "key_a", .role = "viewer", .name = "a", .created_ms = 1};
  call c = {.in = &k};
  assert_int_equal(w(f, run_key_make, &c), 0);
  stamps_moved(f, &keys, &sources, 1, 0);
  c.in = "key_a";
  assert_int_equal(w(f, run_key_revoke, &c), 0);
  stamps_moved(f, &keys, &sources, 1, 0);
  make_source(f, true); /* (its tenant and endpoint with it: neither moves a stamp) */
  stamps_moved(f, &keys, &sources, 0, 1);
  hookd_receive_res r; /* an event received writes no source */
  assert_int_equal(receive(f, "in_1", "key-a", "hash-1", hookd_now_ms(), &r), 0);
  hookd_receive_res_free(&r);
  stamps_moved(f, &keys, &sources, 0, 0);
  c.in = "UPDATE api_keys SET name = 'edited by hand'"; /* whoever writes */
  assert_int_equal(w(f, run_sql, &c), 0);
  stamps_moved(f, &keys, &sources, 1, 0);
  c.in = "DELETE FROM api_keys";
  assert_int_equal(w(f, run_sql, &c), 0);
  stamps_moved(f, &keys, &sources, 1, 0);
  c.in = "src1";
  assert_int_equal(w(f, run_src_delete, &c), 0);
  stamps_moved(f, &keys, &sources, 0, 1);
}

static void receive_dedup_conflict_purge(void **state) {
  fx *f = *state;
  make_source(f, true);
  call c = {0};
  int64_t old = hookd_now_ms() - 10 * 86400 * 1000LL;
  hookd_receive_res r;
  assert_int_equal(receive(f, "in_1", "key-a", "hash-1", old, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_NEW);
  assert_string_equal(r.record.status, "received");
  assert_int_equal(r.n_endpoints, 1);
  hookd_receive_res_free(&r);
  assert_int_equal(w(f, run_finish_deliveries, &c), 0);
  assert_int_equal(receive(f, "in_2", "key-a", "hash-1", old, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_DUPLICATE);
  assert_string_equal(r.record.id, "in_1");
  hookd_receive_res_free(&r);
  assert_int_equal(receive(f, "in_3", "key-a", "hash-2", hookd_now_ms(), &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_CONFLICT);
  assert_string_equal(r.record.status, "conflict");
  assert_string_equal(r.record.conflict_of, "in_1");
  hookd_receive_res_free(&r);
  /* the same conflicting payload again: the conflict row's duplicate, no row more */
  assert_int_equal(receive(f, "in_4", "key-a", "hash-2", hookd_now_ms(), &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_DUPLICATE);
  assert_string_equal(r.record.id, "in_3");
  assert_string_equal(r.record.status, "conflict");
  hookd_receive_res_free(&r);
  /* a later event: the store's newest one stays whatever its age (its seq is not reused) */
  assert_int_equal(receive(f, "in_5", "key-b", "hash-1", hookd_now_ms(), &r), 0);
  hookd_receive_res_free(&r);
  /* retention: the 10-day-old record goes, the fresh conflict row stays */
  c.i64 = hookd_now_ms() - 86400 * 1000LL;
  assert_int_equal(w(f, run_purge, &c), 0);
  assert_int_equal(c.ival, 1);
  /* after the purge the identity is free again: a redelivery is new */
  assert_int_equal(receive(f, "in_4", "key-a", "hash-1", hookd_now_ms(), &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_NEW);
  hookd_receive_res_free(&r);
}

static int run_versions_purge(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  bool more = false;
  int rc = be->object_versions_purge(c, k->i64, 1, &k->ival, &more);
  k->n = more;
  return rc;
}

static int receive_version(fx *f, const char *inbox_id, const char *key, const char *object,
                           const char *version, int64_t now) {
  hookd_receive_req req = {.inbox_id = inbox_id, .source_id = "src1", .tenant_id = "t1",
                           .provider = "stripe", .identity_key = key,
                           .identity_kind = "provider_id", .provider_event_id = key,
                           .event_type = "a.b", .payload_hash = key, .body = "{}", .body_len = 2,
                           .content_type = "application/json", .meta = "", .now_ms = now,
                           .object_key = object, .version = version, .version_numeric = true};
  hookd_receive_res r;
  call c = {.in = &req, .out = &r};
  int rc = w(f, run_receive, &c);
  int outcome = rc ? -1 : r.outcome;
  if (!rc) hookd_receive_res_free(&r);
  return outcome;
}

/* An object's newest version is forgotten once not raised for the window (docs/inbound.md
 * "Retention"): a late event of it is then its first version; a recent one is still stale. */
static void object_versions_go_after_the_window(void **state) {
  fx *f = *state;
  make_source(f, true);
  int64_t now = hookd_now_ms(), old = now - 10 * 86400 * 1000LL;
  assert_int_equal(receive_version(f, "in_1", "k1", "obj-old", "5", old), HOOKD_RECV_NEW);
  assert_int_equal(receive_version(f, "in_2", "k2", "obj-new", "5", old), HOOKD_RECV_NEW);
  /* raised since: counts from then */
  assert_int_equal(receive_version(f, "in_3", "k3", "obj-new", "7", now), HOOKD_RECV_NEW);
  call c = {.i64 = now - 86400 * 1000LL};
  assert_int_equal(w(f, run_versions_purge, &c), 0);
  assert_int_equal(c.ival, 1);
  assert_int_equal(c.n, 1); /* a full batch (limit 1): there may be more */
  assert_int_equal(w(f, run_versions_purge, &c), 0);
  assert_int_equal(c.ival, 0);
  assert_int_equal(c.n, 0);
  assert_int_equal(receive_version(f, "in_4", "k4", "obj-old", "3", now), HOOKD_RECV_NEW);
  assert_int_equal(receive_version(f, "in_5", "k5", "obj-new", "6", now), HOOKD_RECV_STALE);
}

static void make_source(fx *f, bool with_destination) {
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  hookd_source src = {.id = "src1", .tenant_id = "t1", .provider = "stripe", .secrets = "[]",
                      .tolerance_s = 300, .created_ms = 1, .updated_ms = 1};
  hookd_endpoint d = {.id = "dst1", .tenant_id = "t1", .url = "https://example.com/handler",
                      .description = "", .enabled = true, .max_in_flight = 4,
                      .timeout_ms = 1000, .secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                      .source_id = "src1", .idempotent = true, .created_ms = 1};
  hookd_retry_policy_defaults(&d.policy);
  call c = {.in = &src};
  c.out = with_destination ? &d : NULL;
  assert_int_equal(w(f, run_src_dests, &c), 0);
}

static int run_inbox_get(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->inbox_get(c, k->in, k->out, NULL, NULL);
}
/* i64 = the seq of the engine event whose id is `in` (0 when there is none) */
static int run_event_seq(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be;
  call *k = a;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(c->db, "SELECT seq FROM events WHERE id = ?1", -1, &st, NULL))
    return HOOKD_STORE_ERR;
  sqlite3_bind_text(st, 1, k->in, -1, SQLITE_STATIC);
  k->i64 = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return 0;
}
static int64_t event_seq_of(fx *f, const char *id) {
  call c = {.in = id};
  assert_int_equal(w(f, run_event_seq, &c), 0);
  return c.i64;
}

/* The receive path writes a new record once, already linked to its event (no UPDATE of the row
 * it just inserted), and answers from what it wrote: the answer equals the stored record. */
static void receive_writes_the_record_once(void **state) {
  fx *f = *state;
  make_source(f, true);
  /* on the writer's connection, any UPDATE of an inbox row now fails the op */
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_exec,
                                         "CREATE TEMP TRIGGER inbox_no_update BEFORE UPDATE ON"
                                         " main.inbox BEGIN SELECT RAISE(ABORT, 'updated'); END"),
                   0);
  hookd_receive_res r;
  int64_t now = hookd_now_ms();
  assert_int_equal(receive(f, "in_1", "key-a", "hash-1", now, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_NEW);
  assert_int_equal(r.n_endpoints, 1);
  assert_string_equal(r.endpoints[0], "dst1");
  hookd_inbox got;
  call c = {.in = "in_1", .out = &got};
  assert_int_equal(w(f, run_inbox_get, &c), 0);
  assert_int_equal(r.record.seq, got.seq);
  assert_int_equal(r.record.event_seq, got.event_seq);
  assert_int_equal(got.event_seq, event_seq_of(f, "in_1"));
  assert_true(got.event_seq > 0);
  assert_int_equal(r.record.received_ms, got.received_ms);
  assert_int_equal(r.record.attempt_count, got.attempt_count);
  assert_int_equal(r.record.lease_until_ms, got.lease_until_ms);
  const char *a[] = {r.record.id,           r.record.source_id,    r.record.tenant_id,
                     r.record.provider,     r.record.identity_key, r.record.identity_kind,
                     r.record.provider_event_id, r.record.event_type, r.record.payload_hash,
                     r.record.status};
  const char *b[] = {got.id,           got.source_id,    got.tenant_id,
                     got.provider,     got.identity_key, got.identity_kind,
                     got.provider_event_id, got.event_type, got.payload_hash,
                     got.status};
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) assert_string_equal(a[i], b[i]);
  assert_null(got.business_key);
  assert_null(r.record.business_key);
  assert_null(r.record.result_ref);
  hookd_inbox_free(&got);
  hookd_receive_res_free(&r);
  /* a duplicate writes nothing either */
  assert_int_equal(receive(f, "in_2", "key-a", "hash-1", now, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_DUPLICATE);
  hookd_receive_res_free(&r);
}

/* A record that is not forwarded after its insert (semantic duplicate) links no event, and the
 * next new record still links the event written for it. */
static void receive_links_the_right_event(void **state) {
  fx *f = *state;
  make_source(f, true);
  hookd_receive_res r;
  int64_t now = hookd_now_ms();
  assert_int_equal(receive_bkey(f, "in_1", "key-a", "bk", "hash-1", now, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_NEW);
  assert_string_equal(r.record.business_key, "bk");
  int64_t first = r.record.event_seq;
  assert_int_equal(first, event_seq_of(f, "in_1"));
  hookd_receive_res_free(&r);
  /* another identity, the same business key */
  assert_int_equal(receive_bkey(f, "in_2", "key-b", "bk", "hash-2", now, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_SEMANTIC_DUP);
  assert_string_equal(r.record.status, "duplicate");
  assert_string_equal(r.record.conflict_of, "in_1");
  assert_int_equal(r.record.event_seq, 0);
  assert_int_equal(event_seq_of(f, "in_2"), 0);
  hookd_receive_res_free(&r);
  assert_int_equal(receive(f, "in_3", "key-c", "hash-3", now, &r), 0);
  assert_int_equal(r.outcome, HOOKD_RECV_NEW);
  assert_int_equal(r.record.event_seq, first + 1);
  assert_int_equal(event_seq_of(f, "in_3"), first + 1);
  hookd_receive_res_free(&r);
  hookd_inbox got;
  call c = {.in = "in_3", .out = &got};
  assert_int_equal(w(f, run_inbox_get, &c), 0);
  assert_int_equal(got.event_seq, first + 1);
  hookd_inbox_free(&got);
}

/* A source with no destination left refuses a new event (the provider retries), storing none of
 * it: an acknowledged event with nowhere to go was never forwarded. */
static void receive_without_destination_is_refused(void **state) {
  fx *f = *state;
  make_source(f, false);
  hookd_receive_res r;
  assert_int_equal(receive(f, "in_1", "k1", "h", hookd_now_ms(), &r), HOOKD_STORE_STATE);
  hookd_receive_res_free(&r);
  hookd_inbox got;
  call g = {.in = "in_1", .out = &got};
  assert_int_equal(w(f, run_inbox_get, &g), HOOKD_STORE_NOTFOUND);
  call e = {.in = "in_1"};
  assert_int_equal(w(f, run_event_seq, &e), 0);
  assert_int_equal(e.i64, 0);
}

/* Retention walks seq order and stops at the first record inside the window. */
static void purge_stops_at_the_first_fresh_record(void **state) {
  fx *f = *state;
  make_source(f, true);
  int64_t now = hookd_now_ms(), old = now - 10 * 86400 * 1000LL;
  hookd_receive_res r;
  const char *ids[] = {"in_1", "in_2", "in_3", "in_4"};
  const char *keys[] = {"k1", "k2", "k3", "k4"};
  int64_t at[] = {old, old, now, old}; /* in_4's clock ran behind in_3's */
  for (int i = 0; i < 4; i++) {
    assert_int_equal(receive(f, ids[i], keys[i], "h", at[i], &r), 0);
    hookd_receive_res_free(&r);
  }
  call c = {.i64 = now - 86400 * 1000LL};
  assert_int_equal(w(f, run_finish_deliveries, &c), 0);
  assert_int_equal(w(f, run_purge, &c), 0);
  assert_int_equal(c.ival, 2);
  hookd_inbox got;
  call g = {.in = "in_2", .out = &got};
  assert_int_equal(w(f, run_inbox_get, &g), HOOKD_STORE_NOTFOUND);
  g.in = "in_4";
  assert_int_equal(w(f, run_inbox_get, &g), 0);
  hookd_inbox_free(&got);
  /* nothing older left ahead of the fresh record: the next purge removes nothing */
  assert_int_equal(w(f, run_purge, &c), 0);
  assert_int_equal(c.ival, 0);
}

static int run_sql(hookd_store_conn *c, const hookd_store_backend *be, void *a);
static int64_t query_i64(fx *f, const char *sql);

/* a cursor, as the daemon walks: i64 = window, ival = purged, out = int64_t cursor; n = the
 * records an op reads (0: one) */
static int run_purge_step(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->inbox_purge(c, k->i64, k->n ? (int)k->n : 1, (int64_t *)k->out, &k->ival);
}

/* A record whose forward is not finished is kept whatever its age (its resolve and the
 * deduplication of a late redelivery need it); the walk goes past it to the finished ones. */
static void purge_keeps_records_whose_forward_is_not_finished(void **state) {
  fx *f = *state;
  make_source(f, true);
  int64_t now = hookd_now_ms(), old = now - 10 * 86400 * 1000LL;
  hookd_receive_res r;
  assert_int_equal(receive(f, "in_p", "kp", "h", old, &r), 0); /* its delivery is pending */
  assert_int_equal(r.n_endpoints, 1);
  hookd_receive_res_free(&r);
  assert_int_equal(receive(f, "in_d", "kd", "h", old, &r), 0);
  hookd_receive_res_free(&r);
  assert_int_equal(receive(f, "in_n", "kn", "h", now, &r), 0); /* the newest, inside the window */
  hookd_receive_res_free(&r);
  /* in_d's forward finished; in_p's is held as unknown for an operator */
  call sql = {.in = "UPDATE deliveries SET state = 'delivered' WHERE event_seq ="
                    " (SELECT event_seq FROM inbox WHERE id = 'in_d')"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  sql.in = "UPDATE deliveries SET state = 'unknown' WHERE event_seq ="
           " (SELECT event_seq FROM inbox WHERE id = 'in_p')";
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t cursor = 0;
  call c = {.i64 = now - 86400 * 1000LL, .out = &cursor};
  assert_int_equal(w(f, run_purge_step, &c), 0); /* in_p: kept, the walk goes on after it */
  assert_int_equal(c.ival, 0);
  assert_int_not_equal(cursor, 0);
  assert_int_equal(w(f, run_purge_step, &c), 0); /* in_d: purged */
  assert_int_equal(c.ival, 1);
  assert_int_equal(w(f, run_purge_step, &c), 0); /* in_n is inside the window: walk done */
  assert_int_equal(cursor, 0);
  hookd_inbox got;
  call g = {.in = "in_p", .out = &got};
  assert_int_equal(w(f, run_inbox_get, &g), 0);
  hookd_inbox_free(&got);
  g.in = "in_d";
  assert_int_equal(w(f, run_inbox_get, &g), HOOKD_STORE_NOTFOUND);
  /* in_d's event went with it: its raw body and its forward */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events"), 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries"), 2);
}

static void add_attempts(fx *f, const char *which, int n, int excerpt);
static void walk_op(fx *f, int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                    call *c, int taken, bool more);

/* An op of the inbox's retention weighs what each record takes with it as event retention does:
 * its event's body, and its forwards' attempts with their excerpts. Three old records whose
 * forward was tried 500 times with 4 KiB excerpts (~4 MiB each): two an op, then the third.
 * Before, only the bodies counted ("{}"), and the three went in one op. */
static void purge_weighs_the_forwards_attempts(void **state) {
  fx *f = *state;
  make_source(f, true);
  int64_t now = hookd_now_ms(), old = now - 10 * 86400 * 1000LL;
  const char *recs[] = {"in_a", "in_b", "in_c"}, *keys[] = {"ka", "kb", "kc"};
  hookd_receive_res r;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(receive(f, recs[i], keys[i], "h", old, &r), 0);
    assert_int_equal(r.n_endpoints, 1);
    hookd_receive_res_free(&r);
  }
  assert_int_equal(receive(f, "in_n", "kn", "h", now, &r), 0); /* inside the window */
  hookd_receive_res_free(&r);
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_finish_deliveries, NULL), 0);
  add_attempts(f, "e.seq IN (SELECT event_seq FROM inbox WHERE id <> 'in_n')", 500,
               HOOKD_EXCERPT_MAX);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 3 * 500);
  int64_t cursor = 0;
  call c = {.i64 = now - 86400 * 1000LL, .out = &cursor, .n = 200}; /* the daemon's 200 an op */
  walk_op(f, run_purge_step, &c, 2, true);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 500);
  walk_op(f, run_purge_step, &c, 1, false); /* in_n is inside the window: walk done */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM inbox"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 0);
}

/* A record stamped far ahead (received while the wall clock had stepped a year forward, then
 * set right) is passed over, not taken for the start of the window: the old records after it
 * in seq order are purged all the same. */
static void purge_passes_over_a_record_stamped_ahead(void **state) {
  fx *f = *state;
  make_source(f, true);
  int64_t now = hookd_now_ms(), day = 86400 * 1000LL;
  hookd_receive_res r;
  assert_int_equal(receive(f, "in_f", "kf", "h", now + 365 * day, &r), 0);
  hookd_receive_res_free(&r);
  assert_int_equal(receive(f, "in_o", "ko", "h", now - 10 * day, &r), 0);
  hookd_receive_res_free(&r);
  assert_int_equal(receive(f, "in_n", "kn", "h", now, &r), 0); /* inside the window */
  hookd_receive_res_free(&r);
  assert_int_equal(hookd_storeq_run_sync(f->s->writer, run_finish_deliveries, NULL), 0);
  call c = {.i64 = now - day};
  assert_int_equal(w(f, run_purge, &c), 0);
  assert_int_equal(c.ival, 1); /* in_o */
  hookd_inbox got;
  call g = {.in = "in_o", .out = &got};
  assert_int_equal(w(f, run_inbox_get, &g), HOOKD_STORE_NOTFOUND);
  g.in = "in_f"; /* kept: its time has not come */
  assert_int_equal(w(f, run_inbox_get, &g), 0);
  hookd_inbox_free(&got);
}

/* A purged record takes its event, forwards and attempts, but not while a forward was touched
 * inside the window, and never the store's newest event. */
static void purge_takes_the_event_and_keeps_recent_history(void **state) {
  fx *f = *state;
  make_source(f, true);
  int64_t now = hookd_now_ms(), old = now - 10 * 86400 * 1000LL, day = 86400 * 1000LL;
  hookd_receive_res r;
  const char *ids[] = {"in_a", "in_b", "in_c"};
  const char *keys[] = {"ka", "kb", "kc"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(receive(f, ids[i], keys[i], "h", old, &r), 0);
    hookd_receive_res_free(&r);
  }
  /* the three forwards delivered ten days ago; then in_b's replayed and delivered again now */
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "dst1", "n", hookd_now_ms() + 1000, 60000, &cl), 3);
  record_ago = 10 * day;
  for (int i = 0; i < 3; i++) assert_int_equal(record(f, &cl[i], HOOKD_DS_DELIVERED, 200), 0);
  record_ago = 0;
  call replay = {.in = cl[1].d.id};
  assert_int_equal(w(f, run_replay, &replay), 0);
  assert_int_equal(cl[1].d.event_seq, 2); /* in_b's */
  free_claimed(cl, 3);
  assert_int_equal(claim(f, "dst1", "n", hookd_now_ms() + 1000, 60000, &cl), 1);
  assert_int_equal(record(f, &cl[0], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(cl, 1);
  /* even with its delivery's last change made to look old, the fresh attempt keeps in_b */
  call sql = {.in = "UPDATE deliveries SET updated_at = updated_at - 864000000"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 4);
  call c = {.i64 = now - day};
  assert_int_equal(w(f, run_purge, &c), 0);
  assert_int_equal(c.ival, 1); /* in_a; in_b was attempted today; in_c's event is the newest */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM inbox"), 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events"), 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries"), 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 3);
  assert_int_equal(query_i64(f, "SELECT before_ms FROM retention_marks WHERE name = 'inbound'"),
                   now - day);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM retention_marks"), 1);
}

static int run_release_lease(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  const hookd_claimed *cl = ((call *)a)->in;
  hookd_release r = {.delivery_seq = cl->d.seq, .lease_token = cl->d.lease_token,
                     .state = cl->d.state, .next_attempt_ms = cl->d.next_attempt_ms,
                     .now_ms = hookd_now_ms(), .attempt_number = cl->d.attempt_count + 1};
  return be->release_lease(c, &r);
}

/* A claim given back unsent moves nothing of the cycle — but one whose number a late outcome's
 * attempt went past while it was claimed (late_outcome: the count raised by two, the cycle's
 * base by one) gives that number back to the cycle: else it counted an attempt never made, and
 * the delivery went DEAD one try early. */
static void release_after_an_appended_late_attempt(void **state) {
  fx *f = *state;
  make_source(f, true);
  hookd_receive_res r;
  assert_int_equal(receive(f, "in_r", "kr", "h", hookd_now_ms(), &r), 0);
  hookd_receive_res_free(&r);
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "dst1", "n", hookd_now_ms() + 1000, 60000, &cl), 1);
  char q[256];
  snprintf(q, sizeof q, "SELECT attempt_count - cycle_base FROM deliveries WHERE seq = %lld",
           (long long)cl[0].d.seq);
  int64_t in_cycle = query_i64(f, q);
  call rel = {.in = &cl[0]};
  assert_int_equal(w(f, run_release_lease, &rel), 0);
  assert_int_equal(query_i64(f, q), in_cycle); /* given back as claimed: nothing moved */
  free_claimed(cl, 1);
  assert_int_equal(claim(f, "dst1", "n", hookd_now_ms() + 1000, 60000, &cl), 1);
  /* while claimed for attempt count + 1, a late outcome's attempt is appended past it */
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO attempts (delivery_seq, attempt_number, started_at, finished_at, outcome,"
           " http_status, latency_ms, lease_token, kind) VALUES (%lld, %d, 1, 2, 'http_error',"
           " 500, 1, 0, 'live');"
           "UPDATE deliveries SET attempt_count = attempt_count + 2, cycle_base = cycle_base + 1"
           " WHERE seq = %lld",
           (long long)cl[0].d.seq, cl[0].d.attempt_count + 2, (long long)cl[0].d.seq);
  call c = {.in = sql};
  assert_int_equal(w(f, run_sql, &c), 0);
  assert_int_equal(query_i64(f, q), in_cycle + 1); /* the claim's number counted, not made */
  call rel2 = {.in = &cl[0]};
  assert_int_equal(w(f, run_release_lease, &rel2), 0);
  assert_int_equal(query_i64(f, q), in_cycle); /* given back unsent: set right */
  free_claimed(cl, 1);
}

/* As the sweep does to a lapsed lease of a destination that is not idempotent. */
static void sweep_hold(fx *f, int64_t seq) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "UPDATE deliveries SET lease_token = lease_token + 1, lease_owner = NULL,"
           " leased_until = NULL, state = 'unknown', last_error = 'lease lost: hookd stopped"
           " while the request may have been sent' WHERE seq = %lld", (long long)seq);
  call c = {.in = sql};
  assert_int_equal(w(f, run_sql, &c), 0);
}

/* An outcome written again after it landed (its first commit reported lost) finds the token
 * bumped once by an operator's replay, the delivery lease-free in the state it was claimed from
 * — the shape of the sweep's reclaim, which a late outcome settles; so does a lapsed lease's
 * outcome after a claim took it over and wrote its own. An attempt under its lease or a later
 * one is recorded: stale, the replay (the newer outcome) stands — before, it was overwritten, the
 * write failing only on the attempt's number. */
static void a_late_outcome_leaves_a_newer_one_alone(void **state) {
  fx *f = *state;
  hookd_claimed *a = one_event_claimed(f);
  assert_int_equal(a[0].d.state, HOOKD_DS_PENDING);
  assert_int_equal(record(f, &a[0], HOOKD_DS_DELIVERED, 200), 0);
  call c = {.in = a[0].d.id};
  assert_int_equal(w(f, run_replay, &c), 0);
  assert_int_equal(record(f, &a[0], HOOKD_DS_DELIVERED, 200), HOOKD_STORE_STALE);
  assert_int_equal(query_i64(f, "SELECT state = 'pending' FROM deliveries"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 1);
  /* a retry claimed, its lease lapses, a claim takes it over and writes its outcome (retrying
   * again): the lapsed one's, landing late, finds the token bumped once, no owner, the state as
   * claimed */
  hookd_claimed *r = NULL, *b = NULL, *b2 = NULL;
  int64_t now = hookd_now_ms();
  assert_int_equal(claim(f, "ep1", "n", now, 60000, &r), 1);
  assert_int_equal(record(f, &r[0], HOOKD_DS_RETRYING, 500), 0);
  assert_int_equal(claim(f, "ep1", "n", now + 3600000, 1000, &b), 1);
  assert_int_equal(b[0].d.state, HOOKD_DS_RETRYING);
  assert_int_equal(claim(f, "ep1", "n", now + 3605000, 60000, &b2), 1);
  assert_int_equal(b2[0].d.lease_token, b[0].d.lease_token + 1);
  assert_int_equal(record(f, &b2[0], HOOKD_DS_RETRYING, 503), 0);
  assert_int_equal(record(f, &b[0], HOOKD_DS_DELIVERED, 200), HOOKD_STORE_STALE);
  assert_int_equal(query_i64(f, "SELECT state = 'retrying' AND last_status = 503"
                                " FROM deliveries"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 3);
  free_claimed(a, 1);
  free_claimed(r, 1);
  free_claimed(b, 1);
  free_claimed(b2, 1);
}

/* The node that held a lapsed lease knows what the sweep could not: its late outcome settles a
 * held delivery, its late release (never sent) puts it back — unless anything else happened
 * since. When the destination was deleted meanwhile, a final outcome still stands, and one that
 * would send again (or a release) cancels the delivery, as the delete would have. A lapsed lease
 * of such a destination is the sweep's to take, never a claim's (it would send again). */
static void late_outcome_and_release_after_the_sweeps_hold(void **state) {
  fx *f = *state;
  make_source(f, true);
  call sql = {.in = "UPDATE endpoints SET idempotent = 0 WHERE id = 'dst1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  hookd_receive_res r;
  const char *ids[] = {"in_1", "in_2", "in_3", "in_4", "in_5"}, *keys[] = {"k1", "k2", "k3", "k4",
                                                                             "k5"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(receive(f, ids[i], keys[i], "h", hookd_now_ms(), &r), 0);
    hookd_receive_res_free(&r);
  }
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "dst1", "n", hookd_now_ms() + 1000, 1, &cl), 5); /* a 1 ms lease */
  /* lapsed: no claim takes them over */
  hookd_claimed *again = NULL;
  assert_int_equal(claim(f, "dst1", "n", hookd_now_ms() + 5000, 60000, &again), 0);
  free(again);
  for (int i = 0; i < 5; i++) sweep_hold(f, cl[i].d.seq);
  /* the outcome of the first lands late: delivered; the second was never sent: back */
  assert_int_equal(record(f, &cl[0], HOOKD_DS_DELIVERED, 200), 0);
  call rel = {.in = &cl[1]};
  assert_int_equal(w(f, run_release_lease, &rel), 0);
  /* the destination deleted: a retry cancels, a release cancels, a success stands */
  sql.in = "UPDATE endpoints SET deleted_at = 1 WHERE id = 'dst1'";
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(record(f, &cl[2], HOOKD_DS_RETRYING, 503), 0);
  call rel4 = {.in = &cl[3]};
  assert_int_equal(w(f, run_release_lease, &rel4), 0);
  assert_int_equal(record(f, &cl[4], HOOKD_DS_DELIVERED, 200), 0);
  const char *want[] = {"delivered", "pending", "cancelled", "cancelled", "delivered"};
  for (int i = 0; i < 5; i++) {
    char q[200];
    snprintf(q, sizeof q, "SELECT state = '%s' FROM deliveries WHERE seq = %lld", want[i],
             (long long)cl[i].d.seq);
    if (query_i64(f, q) != 1) fail_msg("delivery %d is not %s", i, want[i]);
  }
  /* every request that went out has its attempt, the released one none */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 3);
  /* a second late write: stale, nothing changes */
  assert_int_equal(record(f, &cl[0], HOOKD_DS_DEAD, 400), HOOKD_STORE_STALE);
  free_claimed(cl, 5);
}

/* n pending deliveries to endpoint ep of tenant t, due now, each of its own event (seqs from
 * base up), written as the delete benchmark writes them. */
static void backlog(fx *f, const char *t, const char *ep, int base, int n) {
  char sql[1400];
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE n(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
           " INSERT INTO events(seq, id, tenant_id, type, body, request_hash, occurred_at,"
           " created_at) SELECT i, 'evt_b' || i, '%s', 'x', '{}', randomblob(32), 1, 1 FROM n;"
           "INSERT INTO deliveries(seq, id, event_seq, endpoint_id, tenant_id, state,"
           " attempt_count, cycle_base, cycle_started_at, next_attempt_at, policy_id,"
           " created_at, updated_at)"
           " SELECT v.seq, 'dlv_b' || v.seq, v.seq, p.id, v.tenant_id, 'pending', 0, 0, 1, 1,"
           " p.policy_id, 1, 1 FROM events v JOIN endpoints p ON p.id = '%s'"
           " WHERE v.seq BETWEEN %d AND %d",
           base, base + n - 1, t, ep, base, base + n - 1);
  call c = {.in = sql};
  assert_int_equal(w(f, run_sql, &c), 0);
}

static int run_ep_delete(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->endpoint_delete(c, k->in, hookd_now_ms(), k->out);
}

static int run_delete_step(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  return be->delete_step(c, hookd_now_ms(), HOOKD_DELETE_STEP, ((call *)a)->out);
}

static int run_tenant_delete(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->tenant_delete(c, k->in, hookd_now_ms(), k->out);
}

/* A delete is bounded (docs/architecture.md "Deletes"): its transaction cancels what is in
 * flight and HOOKD_DELETE_STEP more, flags the endpoint, and the walk cancels the rest a step at
 * a time; meanwhile no claim takes what is left, though the dispatcher may not know yet. */
static void a_delete_cancels_in_bounded_steps(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  const int n = 5 * HOOKD_DELETE_STEP;
  backlog(f, "t1", "ep1", 1, n);
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms(), 60000, &cl), 10); /* in flight */
  hookd_delete_counts d;
  call del = {.in = "ep1", .out = &d};
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  assert_int_equal(d.cancelled, 10 + HOOKD_DELETE_STEP);
  assert_true(d.more);
  assert_int_equal(query_i64(f, "SELECT cancel_pending FROM endpoints WHERE id = 'ep1'"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'"),
                   n - 10 - HOOKD_DELETE_STEP);
  /* the in-flight ones were cancelled first: their lease is fenced */
  assert_int_equal(record(f, &cl[0], HOOKD_DS_RETRYING, 503), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE state = 'retrying'"), 0);
  /* what is left is never claimed */
  hookd_claimed *again = NULL;
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms(), 60000, &again), 0);
  free(again);
  hookd_delete_step s;
  call step = {.out = &s};
  int left = n - 10 - HOOKD_DELETE_STEP; /* a step each HOOKD_DELETE_STEP, the last finishes */
  for (; left > HOOKD_DELETE_STEP; left -= HOOKD_DELETE_STEP) {
    assert_int_equal(w(f, run_delete_step, &step), 0);
    assert_true(s.found && !s.finished);
    assert_string_equal(s.endpoint_id, "ep1");
    assert_int_equal(s.counts.cancelled, HOOKD_DELETE_STEP);
  }
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.finished);
  assert_int_equal(s.counts.cancelled, left);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE state = 'cancelled'"), n);
  assert_int_equal(query_i64(f, "SELECT cancel_pending FROM endpoints WHERE id = 'ep1'"), 0);
  /* then the URL walk: the tenant's deliveries 2,000 a step (its endpoint's attempt, recorded
   * after the delete, has no URL to cut) */
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.urls && !s.finished);
  assert_string_equal(s.tenant_id, "t1");
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.urls && s.finished);
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_false(s.found);
  free_claimed(cl, 10);

  /* a small backlog is cancelled by the delete alone, nothing flagged */
  make_tenant_endpoint(f, "t1", "ep2", NULL);
  backlog(f, "t1", "ep2", n + 1, 12);
  del.in = "ep2";
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  assert_int_equal(d.cancelled, 12);
  assert_false(d.more);
  assert_int_equal(query_i64(f, "SELECT cancel_pending FROM endpoints WHERE id = 'ep2'"), 0);

  /* a tenant's delete shares one budget over its endpoints: those past it wait for the walk */
  make_tenant_endpoint(f, "t2", "ep3", NULL);
  make_tenant_endpoint(f, "t2", "ep4", NULL);
  const int part = HOOKD_DELETE_STEP * 4 / 5; /* the first takes most of the budget */
  backlog(f, "t2", "ep3", n + 101, part);
  backlog(f, "t2", "ep4", 2 * n + 1, part);
  hookd_tenant_delete_res td = {0};
  call tdel = {.in = "t2", .out = &td};
  assert_int_equal(w(f, run_tenant_delete, &tdel), 0);
  assert_int_equal(td.counts.cancelled, HOOKD_DELETE_STEP);
  assert_true(td.counts.more);
  hookd_tenant_delete_res_free(&td);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM endpoints WHERE cancel_pending = 1"), 1);
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.finished);
  assert_int_equal(s.counts.cancelled, 2 * part - HOOKD_DELETE_STEP);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'"), 0);
}

static int run_delete_within_one(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be;
  int budget = 1;
  return sq_endpoint_delete_within(c, ((call *)a)->in, hookd_now_ms(), &budget, ((call *)a)->out);
}

static int run_reforward(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  hookd_due_hint *h = NULL;
  size_t n = 0, made = 0;
  int rc = be->inbox_reforward(c, k->in, hookd_now_ms(), false, &made, &h, &n);
  hookd_due_hints_free(h, n);
  k->ival = (int)made;
  return rc;
}

/* A destination replaced while its delete's walk has not cancelled all its forwards yet: a
 * record whose forward is still pending there is replayed to the replacement at once (a review:
 * it was refused, "a deleted destination without a replacement", until the walk's step), and
 * the pending one, never to be sent, no longer decides the record. */
static int run_get_attempts(fx *f, const char *delivery_id, hookd_attempt **att, size_t *n) {
  hookd_delivery d = {0};
  call c = {.in = (void *)delivery_id, .out = &d, .out2 = att};
  int rc = w(f, run_get, &c);
  *n = c.n;
  if (rc == 0) hookd_delivery_free(&d);
  return rc;
}

static char *query_text(fx *f, const char *sql);

/* A deleted endpoint's attempts keep no URL path (docs/architecture.md "Deletes": a Slack hook's
 * path is its credential): read cut from the delete on, recorded cut when the request ends after
 * it, and the rows cut by the URL walk; another endpoint's attempts keep theirs; nothing else of
 * an attempt may change. */
static void a_deleted_endpoints_attempts_keep_no_url_path(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t9", "epA", NULL);
  make_tenant_endpoint(f, "t9", "epB", NULL);
  backlog(f, "t9", "epA", 1, 6);
  backlog(f, "t9", "epB", 101, 2);
  record_url = "https://hooks.example.com/services/T0/B0/s3cr3t?k=v";
  hookd_claimed *ca = NULL, *cb = NULL;
  assert_int_equal(claim(f, "epA", "n", hookd_now_ms(), 60000, &ca), 6);
  assert_int_equal(claim(f, "epB", "n", hookd_now_ms(), 60000, &cb), 2);
  for (int i = 0; i < 3; i++) assert_int_equal(record(f, &ca[i], HOOKD_DS_DELIVERED, 200), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(record(f, &cb[i], HOOKD_DS_DELIVERED, 200), 0);
  hookd_delete_counts d;
  call del = {.in = "epA", .out = &d};
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  assert_int_equal(d.cancelled, 3); /* the three in flight */
  /* a request in flight at the delete ends after it: its attempt is recorded cut */
  assert_int_equal(record(f, &ca[3], HOOKD_DS_DELIVERED, 200), 0);
  char sql[200];
  snprintf(sql, sizeof sql, "SELECT url FROM attempts WHERE delivery_seq = %lld",
           (long long)ca[3].d.seq);
  char *u = query_text(f, sql);
  assert_string_equal(u, "https://hooks.example.com");
  free(u);
  /* before the walk: the rows hold the path, a read shows it cut */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts WHERE url LIKE '%s3cr3t%'"), 5);
  hookd_attempt *att = NULL;
  size_t n = 0;
  assert_int_equal(run_get_attempts(f, ca[0].d.id, &att, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(att[0].url, "https://hooks.example.com");
  hookd_attempts_free(att, n);
  assert_int_equal(run_get_attempts(f, cb[0].d.id, &att, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(att[0].url, record_url);
  hookd_attempts_free(att, n);
  /* the walk: one step for the tenant's 8 deliveries, its three attempts cut */
  hookd_delete_step s;
  call step = {.out = &s};
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.urls && s.finished);
  assert_string_equal(s.tenant_id, "t9");
  assert_int_equal(s.urls_cut, 3);
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_false(s.found);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts WHERE url LIKE '%s3cr3t%'"), 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts a JOIN deliveries d"
                                " ON d.seq = a.delivery_seq WHERE d.endpoint_id = 'epA'"
                                " AND a.url = 'https://hooks.example.com'"), 4);
  /* the trigger: a URL may become a prefix of itself, nothing else */
  snprintf(sql, sizeof sql, "UPDATE attempts SET url = 'https://other.example.com' WHERE"
                            " delivery_seq = %lld", (long long)cb[0].d.seq);
  call c = {.in = sql};
  assert_int_not_equal(w(f, run_sql, &c), 0);
  snprintf(sql, sizeof sql, "UPDATE attempts SET url = substr(url, 1, 25), outcome = 'x' WHERE"
                            " delivery_seq = %lld", (long long)cb[0].d.seq);
  assert_int_not_equal(w(f, run_sql, &c), 0);
  snprintf(sql, sizeof sql, "UPDATE attempts SET url = NULL WHERE delivery_seq = %lld",
           (long long)cb[0].d.seq);
  assert_int_not_equal(w(f, run_sql, &c), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts WHERE url LIKE '%s3cr3t%'"), 2);
  /* another delete in the tenant: its walk again */
  del.in = "epB";
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.urls && s.finished);
  assert_int_equal(s.urls_cut, 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts WHERE url LIKE '%s3cr3t%'"), 0);
  record_url = NULL;
  free_claimed(ca, 6);
  free_claimed(cb, 2);
}

/* Every delivery of endpoint ep dead after `per` attempts whose URL's path is `s3cr3t`. */
static void attempts_for(fx *f, const char *ep, int per) {
  char sql[900];
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
           " INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome,"
           " latency_ms, lease_token, kind, url) SELECT d.seq, n.i, 1, 1, 'http_error', 1, 0,"
           " 'live', 'https://hooks.example.com/services/s3cr3t' FROM deliveries d, n"
           " WHERE d.endpoint_id = '%s';"
           "UPDATE deliveries SET state = 'dead', dead_at = 1, next_attempt_at = NULL,"
           " attempt_count = %d WHERE endpoint_id = '%s'",
           per, ep, per, ep);
  call c = {.in = sql};
  assert_int_equal(w(f, run_sql, &c), 0);
}

static void url_step(fx *f, const char *tenant, int cut, bool finished) {
  hookd_delete_step s;
  call step = {.out = &s};
  assert_int_equal(w(f, run_delete_step, &step), 0);
  assert_true(s.found && s.urls);
  assert_string_equal(s.tenant_id, tenant);
  assert_int_equal(s.urls_cut, cut);
  assert_int_equal(s.finished, finished);
}

/* A step of the URL walk cuts 100 attempts at most, whatever its 2,000 deliveries hold (a review:
 * 2,000 dead deliveries of 24 attempts each held the writer 0.6-1 s a step); tenants take turns;
 * a delete during a pass has the pass go on to its end, then another from the first delivery (a
 * review: each delete started the pass over, and one tenant's deletes coming faster than a pass
 * kept it, and every other tenant's, from ending). */
static void the_url_walk_is_bounded_fair_and_ends(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "tA", "epA1", NULL);
  make_tenant_endpoint(f, "tA", "epA2", NULL);
  make_tenant_endpoint(f, "tB", "epB", NULL);
  make_tenant_endpoint(f, "tC", "epC", NULL);
  backlog(f, "tA", "epA1", 1, 2500);
  backlog(f, "tA", "epA2", 2501, 1); /* (no attempt) */
  backlog(f, "tB", "epB", 3001, 2);
  backlog(f, "tC", "epC", 4001, 3);
  attempts_for(f, "epA1", 1);
  attempts_for(f, "epB", 1);
  attempts_for(f, "epC", 150); /* 450 attempts in 3 deliveries */
  hookd_delete_counts d;
  call del = {.in = "epA2", .out = &d};
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  url_step(f, "tA", 0, false); /* 2,000 of tA's deliveries, no attempt of a deleted endpoint */
  del.in = "epA1"; /* during tA's pass: its last 500 by this one, the rest by another */
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  del.in = "epB";
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  del.in = "epC";
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  url_step(f, "tA", 100, false); /* the budget */
  url_step(f, "tB", 2, true);    /* turns: tB and tC are not held by tA's walk */
  url_step(f, "tC", 100, false); /* the budget: 100 of the first delivery's 150 */
  int64_t cut[2] = {100, 100}; /* tA's, tC's */
  bool done[2] = {false, false};
  for (int n = 0;; n++) {
    assert_true(n < 60);
    hookd_delete_step s;
    call step = {.out = &s};
    assert_int_equal(w(f, run_delete_step, &step), 0);
    if (!s.found) break;
    int k = !strcmp(s.tenant_id, "tC");
    assert_true(k || !strcmp(s.tenant_id, "tA"));
    assert_false(done[k]);
    assert_true(s.urls_cut <= 100);
    cut[k] += s.urls_cut;
    done[k] = s.finished;
    if (s.finished) assert_int_equal(s.urls_total, k ? 450 : 2500);
    if (s.finished && !k) assert_true(done[1]); /* tC, 450, ends before tA, 2,500 */
  }
  assert_true(done[0] && done[1]);
  assert_int_equal(cut[0], 2500);
  assert_int_equal(cut[1], 450);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts WHERE url LIKE '%s3cr3t%'"), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 2500 + 2 + 450);
  /* an endpoint never sent to has no attempt: its delete walks nothing */
  make_tenant_endpoint(f, "tA", "epA3", NULL);
  del.in = "epA3";
  assert_int_equal(w(f, run_ep_delete, &del), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM url_cuts"), 0);
}

static void a_replacement_takes_what_the_delete_walk_has_not_reached(void **state) {
  fx *f = *state;
  make_source(f, true);
  hookd_receive_res r;
  const char *ids[] = {"in_1", "in_2", "in_3"}, *keys[] = {"k1", "k2", "k3"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(receive(f, ids[i], keys[i], "h", hookd_now_ms(), &r), 0);
    hookd_receive_res_free(&r);
  }
  hookd_endpoint d2 = {.id = "dst2", .tenant_id = "t1", .url = "https://example.com/new",
                       .description = "", .enabled = true, .max_in_flight = 4,
                       .timeout_ms = 1000, .secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                       .source_id = "src1", .idempotent = true, .created_ms = 1};
  hookd_retry_policy_defaults(&d2.policy);
  call ep = {.in = &d2};
  assert_int_equal(w(f, run_ep, &ep), 0);
  hookd_delete_counts dc;
  call del = {.in = "dst1", .out = &dc};
  assert_int_equal(w(f, run_delete_within_one, &del), 0); /* a budget of one */
  assert_int_equal(dc.cancelled, 1);
  assert_true(dc.more);
  const char *pending = NULL;
  for (int i = 0; i < 3 && !pending; i++) {
    char q[300];
    snprintf(q, sizeof q,
             "SELECT COUNT(*) FROM deliveries d JOIN inbox i ON i.event_seq = d.event_seq"
             " WHERE i.id = '%s' AND d.endpoint_id = 'dst1' AND d.state = 'pending'", ids[i]);
    if (query_i64(f, q) == 1) pending = ids[i];
  }
  assert_non_null(pending);
  call rf = {.in = pending};
  assert_int_equal(w(f, run_reforward, &rf), 0);
  assert_int_equal(rf.ival, 1);
  char q[300];
  snprintf(q, sizeof q,
           "SELECT d.replaced FROM deliveries d JOIN inbox i ON i.event_seq = d.event_seq"
           " WHERE i.id = '%s' AND d.endpoint_id = 'dst1'", pending);
  assert_int_equal(query_i64(f, q), 1);
  /* the walk cancels it later: the record follows its replacement, not the cut-off forward */
  hookd_delete_step s;
  call step = {.out = &s};
  do assert_int_equal(w(f, run_delete_step, &step), 0);
  while (s.found);
  snprintf(q, sizeof q, "SELECT status = 'received' FROM inbox WHERE id = '%s'", pending);
  assert_int_equal(query_i64(f, q), 1);
}

static int run_mark_sent(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  const hookd_claimed *cl = ((call *)a)->in;
  return be->mark_sent(c, cl->d.seq, cl->d.lease_token);
}

/* The send mark decides what a reclaimed lease of a destination that is not idempotent was: one
 * marked under that lease may have been sent (held unknown), one without was never sent (due
 * again, like any other) — and a mark from an earlier lease counts for nothing. A mark is
 * refused once the lease is gone. */
static void reclaim_holds_only_what_was_marked(void **state) {
  fx *f = *state;
  make_source(f, true);
  call sql = {.in = "UPDATE endpoints SET idempotent = 0 WHERE id = 'dst1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  hookd_receive_res r;
  const char *ids[] = {"in_1", "in_2", "in_3"}, *keys[] = {"k1", "k2", "k3"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(receive(f, ids[i], keys[i], "h", hookd_now_ms(), &r), 0);
    hookd_receive_res_free(&r);
  }
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "dst1", "node-a", hookd_now_ms(), 60000, &cl), 3);
  call m0 = {.in = &cl[0]};
  assert_int_equal(w(f, run_mark_sent, &m0), 0);
  /* node-a restarts: its leases are reclaimed */
  call rc = {.in = "node-a", .i64 = hookd_now_ms()};
  assert_int_equal(w(f, run_reclaim, &rc), 0);
  assert_int_equal(rc.ival, 3);
  const char *want[] = {"unknown", "pending", "pending"};
  for (int i = 0; i < 3; i++) {
    char q[200];
    snprintf(q, sizeof q, "SELECT state = '%s' FROM deliveries WHERE seq = %lld", want[i],
             (long long)cl[i].d.seq);
    if (query_i64(f, q) != 1) fail_msg("delivery %d is not %s", i, want[i]);
  }
  /* the lease is gone: its mark is refused */
  call m1 = {.in = &cl[1]};
  assert_int_equal(w(f, run_mark_sent, &m1), HOOKD_STORE_STALE);
  /* claimed again: the mark of cl[0]'s lease is not this lease's; reclaimed unmarked, due */
  hookd_claimed *again = NULL;
  assert_int_equal(claim(f, "dst1", "node-a", hookd_now_ms(), 60000, &again), 2);
  call m2 = {.in = &again[0]};
  assert_int_equal(w(f, run_mark_sent, &m2), 0);
  assert_int_equal(w(f, run_reclaim, &rc), 0);
  assert_int_equal(rc.ival, 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE state = 'unknown'"), 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'"), 1);
  free_claimed(cl, 3);
  free_claimed(again, 2);
}

static int run_expire(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  int64_t after = 0;
  return be->event_expire(c, k->i64, 100, &after, &k->ival);
}

/* Event retention: a settled outbound event older than the window goes with its deliveries,
 * attempts and Idempotency-Keys; kept: one touched or attempted inside the window, an open one,
 * a DEAD head of an ordered lane, the store's newest. Attempts younger than the recorded cut-off
 * cannot be deleted at all. */
static void expire_deletes_settled_events_with_their_history(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  int64_t now = hookd_now_ms(), day = 86400 * 1000LL;
  const char *ids[] = {"e1", "e2", "e3", "e4", "e5", "e6"};
  hookd_publish_res res;
  for (int i = 0; i < 6; i++) {
    assert_int_equal(publish(f, "t1", ids[i], "a.b", i == 0 ? "key-1" : NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  /* ten days ago: e1 delivered, e2 DEAD, e3 delivered, e4 failed (retrying), e5 delivered */
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms() + 1000, 60000, &cl), 6);
  for (int i = 0; i < 6; i++) assert_int_equal(cl[i].d.event_seq, i + 1);
  record_ago = 10 * day;
  hookd_dstate to[] = {HOOKD_DS_DELIVERED, HOOKD_DS_DEAD, HOOKD_DS_DELIVERED,
                       HOOKD_DS_RETRYING, HOOKD_DS_DELIVERED, HOOKD_DS_DELIVERED};
  int status[] = {200, 400, 200, 500, 200, 200};
  for (int i = 0; i < 6; i++) assert_int_equal(record(f, &cl[i], to[i], status[i]), 0);
  record_ago = 0;
  /* e5 replayed and delivered again today (e4, due, fails again), then its delivery's last
   * change made to look old: the fresh attempt alone keeps it */
  call replay = {.in = cl[4].d.id};
  assert_int_equal(w(f, run_replay, &replay), 0);
  free_claimed(cl, 6);
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms() + 1000, 60000, &cl), 2);
  for (int i = 0; i < 2; i++)
    assert_int_equal(record(f, &cl[i], cl[i].d.event_seq == 5 ? HOOKD_DS_DELIVERED
                                                               : HOOKD_DS_RETRYING,
                            cl[i].d.event_seq == 5 ? 200 : 500),
                     0);
  free_claimed(cl, 2);
  /* every event published ten days ago; e3 the DEAD head of a lane that blocks */
  call sql = {.in = "UPDATE deliveries SET updated_at = updated_at - 864000000"
                    " WHERE event_seq = 5;"
                    "UPDATE events SET created_at = created_at - 864000000;"
                    /* (e1's key first used then too: a key used within the window keeps its
                     * event, outbound_policy.test.mjs) */
                    "UPDATE idempotency_keys SET created_at = created_at - 864000000;"
                    "UPDATE deliveries SET ordering_key = 'lane', state = 'dead',"
                    " dead_reason = 'max_attempts' WHERE event_seq = 3;"
                    "UPDATE endpoints SET ordered = 1, lane_policy = 'block' WHERE id = 'ep1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 8);

  call c = {.i64 = now - 20 * day}; /* a window every event is inside: nothing goes */
  assert_int_equal(w(f, run_expire, &c), 0);
  assert_int_equal(c.ival, 0);
  c.i64 = now - day;
  assert_int_equal(w(f, run_expire, &c), 0);
  assert_int_equal(c.ival, 2); /* e1 and e2; e3 lane head, e4 open, e5 attempted, e6 newest */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id IN ('e1', 'e2')"), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events"), 4);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries"), 4);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 6);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM idempotency_keys"), 0);
  assert_int_equal(query_i64(f, "SELECT before_ms FROM retention_marks WHERE name = 'outbound'"),
                   now - day);
  /* the id and its Idempotency-Key are free again: a new event */
  assert_int_equal(publish(f, "t1", "e1", "a.b", "key-1", 2, &res), 0);
  assert_false(res.duplicate);
  hookd_publish_res_free(&res);
  /* attempts younger than the recorded cut-off cannot be deleted, by the job or anyone; the
   * inbox's cut-off (another window) does not reach outbound attempts */
  sql.in = "INSERT INTO retention_marks(name, before_ms) VALUES ('inbound', 9000000000000000)";
  assert_int_equal(w(f, run_sql, &sql), 0);
  sql.in = "DELETE FROM attempts";
  assert_int_equal(w(f, run_sql, &sql), HOOKD_STORE_ERR);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 6);
  /* once its lanes skip a DEAD head, e3 holds nothing and goes (and e6 is no longer the
   * newest) */
  sql.in = "UPDATE endpoints SET lane_policy = 'skip' WHERE id = 'ep1'";
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(w(f, run_expire, &c), 0);
  assert_int_equal(c.ival, 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id IN ('e3', 'e6')"), 0);
}

/* An op of event retention takes whole events while what goes with them fits its budget, the
 * first one always (an event is deleted whole, however large its fan-out or its history): 500
 * deliveries, fewer with attempts, each weighed with its excerpt. */
static void expire_takes_whole_events_within_the_budget(void **state) {
  (void)state;
  const int64_t budget = HOOKD_PURGE_BYTES;
  int64_t small[25];
  for (int i = 0; i < 25; i++) small[i] = hookd_retention_weight(0, 1, 1);
  assert_int_equal(hookd_take_within(small, 25, budget), 25);
  const int64_t wide[] = {hookd_retention_weight(0, 300, 0), hookd_retention_weight(0, 300, 0),
                          hookd_retention_weight(0, 1, 0)};
  assert_int_equal(hookd_take_within(wide, 3, budget), 1);
  const int64_t huge[] = {hookd_retention_weight(0, 1000, 0), hookd_retention_weight(0, 1, 0)};
  assert_int_equal(hookd_take_within(huge, 2, budget), 1);
  const int64_t fits[] = {hookd_retention_weight(0, 200, 0), hookd_retention_weight(0, 200, 0),
                          hookd_retention_weight(0, 100, 0), hookd_retention_weight(0, 1, 0)};
  assert_int_equal(hookd_take_within(fits, 4, budget), 3);
  assert_int_equal(HOOKD_EXPIRE_DELIVERIES, 500);
  /* 20 deliveries DEAD after 24 attempts of 4 KiB excerpts: one such event an op (25 were
   * 0.35 s of the writer's); after 16 attempts, two; with empty excerpts, three */
  int64_t dead[3], empty[4];
  for (int i = 0; i < 3; i++) dead[i] = hookd_retention_weight(24 * 20 * 4096, 20, 24 * 20);
  assert_int_equal(hookd_take_within(dead, 3, budget), 1);
  for (int i = 0; i < 3; i++) dead[i] = hookd_retention_weight(16 * 20 * 4096, 20, 16 * 20);
  assert_int_equal(hookd_take_within(dead, 3, budget), 2);
  for (int i = 0; i < 4; i++) empty[i] = hookd_retention_weight(0, 20, 24 * 20);
  assert_int_equal(hookd_take_within(empty, 4, budget), 3);
  /* a row of either kind weighs enough that counting HOOKD_WEIGH_ROWS of one kind is over */
  assert_true(HOOKD_WEIGH_ROWS * (int64_t)HOOKD_ATTEMPT_WEIGHT > budget);
  assert_true(HOOKD_DELIVERY_WEIGHT >= HOOKD_ATTEMPT_WEIGHT);
}

/* Tenant t1 with `endpoints` endpoints (ep1 and its copies), then events w1..wn published to
 * every one of them. */
static void fan_out(fx *f, int endpoints, int n) {
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  char q[512];
  snprintf(q, sizeof q,
           "CREATE TEMP TABLE x AS SELECT * FROM endpoints WHERE id = 'ep1';"
           "INSERT INTO x SELECT x.* FROM x, (WITH RECURSIVE r(i) AS (SELECT 2"
           " UNION ALL SELECT i + 1 FROM r WHERE i < %d) SELECT i FROM r);"
           "UPDATE x SET id = 'epx' || rowid; DELETE FROM x WHERE rowid = 1;"
           "INSERT INTO endpoints SELECT * FROM x; DROP TABLE x",
           endpoints);
  call sql = {.in = q};
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM endpoints"), endpoints);
  for (int i = 1; i <= n; i++) {
    char id[16];
    snprintf(id, sizeof id, "w%d", i);
    hookd_publish_res res;
    assert_int_equal(publish(f, "t1", id, "a.b", NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries"), (int64_t)n * endpoints);
}

/* ... and sq_event_expire keeps to it: three old events fanned out to 512 endpoints each, one
 * op deletes 500 of the first one's deliveries, the next the rest with it (two events before:
 * 1,024 deliveries in one op; then one whole, 512), and says where to go on. */
static void expire_op_keeps_to_the_budget(void **state) {
  fx *f = *state;
  fan_out(f, 512, 3);
  call sql;
  sql.in = "UPDATE deliveries SET state = 'delivered', delivered_at = updated_at - 864000000,"
           " next_attempt_at = NULL, updated_at = updated_at - 864000000;"
           "UPDATE events SET created_at = created_at - 864000000";
  assert_int_equal(w(f, run_sql, &sql), 0);
  call c = {.i64 = hookd_now_ms() - 86400 * 1000LL};
  assert_int_equal(w(f, run_expire, &c), 0);
  assert_int_equal(c.ival, 0); /* w1 in part */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id = 'w1'"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries"),
                   3 * 512 - HOOKD_EXPIRE_DELIVERIES);
  assert_int_equal(w(f, run_expire, &c), 0);
  assert_int_equal(c.ival, 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id = 'w1'"), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries"), 2 * 512);
}

/* Old settled events' history: each delivery of the events e that `which` names ("e.id = 'w1'")
 * gets attempts 1..n, each with an excerpt of `excerpt` bytes, finished long ago. */
static void add_attempts(fx *f, const char *which, int n, int excerpt) {
  char q[1024];
  snprintf(q, sizeof q,
           "INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome,"
           " http_status, latency_ms, error, response, lease_token, kind)"
           " SELECT d.seq, r.i, 1, 1, 'http_error', 502, 1, 'HTTP 502', randomblob(%d), 1, 'live'"
           " FROM events e JOIN deliveries d ON d.event_seq = e.seq, (WITH RECURSIVE r(i) AS"
           " (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < %d) SELECT i FROM r) r"
           " WHERE %s",
           excerpt, n, which);
  call sql = {.in = q};
  assert_int_equal(w(f, run_sql, &sql), 0);
}

/* i64 = window, ival = expired, out = int64_t cursor: the daemon's walk (25 events an op) */
static int run_expire_step(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->event_expire(c, k->i64, 25, (int64_t *)k->out, &k->ival);
}

/* One op of a retention walk (c->out: its cursor) takes `taken` rows, and says whether the walk
 * goes on after them. */
static void walk_op(fx *f, int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                    call *c, int taken, bool more) {
  assert_int_equal(w(f, run, c), 0);
  assert_int_equal(c->ival, taken);
  assert_int_equal(*(int64_t *)c->out != 0, more);
}

/* ... and weighs each event's attempts with their excerpts, and its payload, not its
 * deliveries only: every freed page is zeroed and synced (25 events to 20 endpoints, DEAD after
 * 24 attempts of 4 KiB excerpts, held the writer 0.35 s in one op). Five old events to 20
 * endpoints: w1, 200 attempts a delivery, over the budget alone, goes alone and in parts
 * (HOOKD_SHED_ATTEMPTS of its 4,000 attempts, then the rest with it: whole, one event's 100,000
 * attempts held the writer 8.8 s, a review); then w2 and w3 (16 attempts a delivery, ~2.8 MiB
 * each) together; w4 (a 6 MiB payload) and w5 (as w2) in an op each. Before, the five went in
 * one op. */
static void expire_op_weighs_the_attempts(void **state) {
  fx *f = *state;
  fan_out(f, 20, 6); /* w6, the newest, stays */
  call sql;
  sql.in = "UPDATE deliveries SET state = 'dead', dead_reason = 'max_attempts', dead_at = 1,"
           " next_attempt_at = NULL, updated_at = updated_at - 864000000;"
           "UPDATE events SET created_at = created_at - 864000000;"
           "UPDATE events SET body = randomblob(6291456) WHERE id = 'w4'";
  assert_int_equal(w(f, run_sql, &sql), 0);
  add_attempts(f, "e.id = 'w1'", 200, HOOKD_EXCERPT_MAX);
  add_attempts(f, "e.id IN ('w2', 'w3', 'w5')", 16, HOOKD_EXCERPT_MAX);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 4000 + 3 * 320);
  int64_t after = 0;
  call c = {.i64 = hookd_now_ms() - 86400 * 1000LL, .out = &after};
  walk_op(f, run_expire_step, &c, 0, true); /* w1 in part; the walk comes back to it */
  assert_int_equal(after, -1); /* (w1 is the store's first event) */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"),
                   4000 - HOOKD_SHED_ATTEMPTS + 3 * 320);
  walk_op(f, run_expire_step, &c, 1, true);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id = 'w1'"), 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 3 * 320);
  walk_op(f, run_expire_step, &c, 2, true);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id IN ('w2', 'w3')"), 0);
  walk_op(f, run_expire_step, &c, 1, true);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id = 'w4'"), 0);
  walk_op(f, run_expire_step, &c, 1, false); /* the walk is done: w6 stays */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM attempts"), 0);
}

static int run_payload_purge(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->event_purge(c, k->i64, hookd_now_ms(), 1000, (int64_t *)k->out, &k->ival);
}

/* A payload purge's op frees whole bodies while they stay within HOOKD_PURGE_BYTES, the first
 * always, and says where the walk goes on: four settled old events of 3 MiB each, two an op
 * (a thousand 1 MiB payloads were a gigabyte zeroed into the WAL in one op). */
static void payload_purge_keeps_to_its_bytes(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  hookd_publish_res res;
  const char *ids[] = {"b1", "b2", "b3", "b4", "b5"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(publish(f, "t1", ids[i], "a.b", NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  call sql = {.in = "UPDATE deliveries SET state = 'delivered', delivered_at = 1,"
                    " next_attempt_at = NULL;"
                    "UPDATE events SET created_at = created_at - 864000000,"
                    " body = randomblob(3145728) WHERE id <> 'b5'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t after = 0;
  call c = {.i64 = hookd_now_ms() - 86400 * 1000LL, .out = &after};
  assert_int_equal(w(f, run_payload_purge, &c), 0);
  assert_int_equal(c.ival, 2);
  assert_true(after > 0); /* more to come */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE purged_at IS NOT NULL"), 2);
  assert_int_equal(w(f, run_payload_purge, &c), 0);
  assert_int_equal(c.ival, 2);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE purged_at IS NOT NULL"), 4);
}

/* The store's newest delivery keeps its event even when a newer event (without deliveries)
 * exists: deleting it would hand its seq out again, and a late outcome of the deleted delivery
 * (fenced by seq and lease token) could then land on the new one. */
static void expire_keeps_the_newest_delivery(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", "a.*");
  hookd_publish_res res;
  const char *ids[] = {"e1", "e2", "e3"};
  const char *types[] = {"a.b", "a.b", "z.z"}; /* e3: no endpoint takes it */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(publish(f, "t1", ids[i], types[i], NULL, (unsigned char)(i + 1), &res), 0);
    hookd_publish_res_free(&res);
  }
  hookd_claimed *cl = NULL;
  assert_int_equal(claim(f, "ep1", "n", hookd_now_ms() + 1000, 60000, &cl), 2);
  record_ago = 10 * 86400 * 1000LL;
  for (int i = 0; i < 2; i++) assert_int_equal(record(f, &cl[i], HOOKD_DS_DELIVERED, 200), 0);
  record_ago = 0;
  free_claimed(cl, 2);
  call sql = {.in = "UPDATE events SET created_at = created_at - 864000000"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t top = query_i64(f, "SELECT MAX(seq) FROM deliveries");
  call c = {.i64 = hookd_now_ms() - 86400 * 1000LL};
  assert_int_equal(w(f, run_expire, &c), 0);
  assert_int_equal(c.ival, 1); /* e1 only: e2 holds the newest delivery, e3 is the newest event */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM events WHERE id = 'e2'"), 1);
  assert_int_equal(publish(f, "t1", "e4", "a.b", NULL, 4, &res), 0);
  hookd_publish_res_free(&res);
  assert_true(query_i64(f, "SELECT MAX(seq) FROM deliveries") > top); /* not handed out again */
}

/* ---- ordering lanes ---- */

static int run_due_hints(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  hookd_due_hint *h = NULL;
  size_t n = 0;
  int rc = be->due_hints(c, k->i64, &h, &n);
  hookd_due_hints_free(h, n);
  return rc;
}

static size_t claim_ordered(fx *f, int64_t now, hookd_claimed **out) {
  hookd_claim_req req = {.endpoint_id = "ep1", .owner = "n", .limit = 10, .replay_limit = 10,
                         .ordered = true, .now_ms = now, .lease_ms = 60000};
  call c = {.in = &req, .out = out};
  assert_int_equal(w(f, run_claim, &c), 0);
  return c.n;
}

/* A delivery that waits behind an open one of its lane is left out of the due index
 * (lane_wait = 1), so a claim never visits a lane's blocked backlog; a head's terminal outcome
 * lets the next one in; the rescan repairs a hint a path forgot to clear. */
static void lanes_wait_out_of_the_due_index(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  call sql = {.in = "UPDATE endpoints SET ordered = 1 WHERE id = 'ep1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t now = hookd_now_ms();
  for (int i = 0; i < 4; i++) {
    char id[16];
    snprintf(id, sizeof id, "lane-%d", i);
    unsigned char hash[32] = {(unsigned char)i};
    hookd_publish_req req = {.tenant_id = "t1", .event_id = id, .type = "a", .body = "{}",
                             .body_len = 2, .request_hash = hash, .occurred_ms = now,
                             .now_ms = now, .ordering_key = "acct-1"};
    hookd_publish_res res;
    call c = {.in = &req, .out = &res};
    assert_int_equal(w(f, run_publish, &c), 0);
    hookd_publish_res_free(&res);
  }
  /* the lane's hints, in seq order, as a number: 111 = 0,1,1,1 */
  const char *hints = "SELECT CAST(group_concat(lane_wait, '') AS INTEGER) FROM"
                      " (SELECT lane_wait FROM deliveries ORDER BY seq)";
  assert_int_equal(query_i64(f, hints), 111);
  hookd_claimed *cl = NULL;
  assert_int_equal(claim_ordered(f, now, &cl), 1);
  assert_string_equal(cl[0].d.event_id, "lane-0");
  record_lane = true;
  assert_int_equal(record(f, &cl[0], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(cl, 1);
  assert_int_equal(query_i64(f, hints), 11); /* lane-1 let in */
  assert_int_equal(claim_ordered(f, now, &cl), 1);
  assert_string_equal(cl[0].d.event_id, "lane-1");
  /* a path that forgets to let the next one in: lane-2 stays out of the due index… */
  record_lane = false;
  assert_int_equal(record(f, &cl[0], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(cl, 1);
  assert_int_equal(claim_ordered(f, now, &cl), 0);
  free(cl);
  /* …until the rescan repairs it */
  call r = {.i64 = now};
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(query_i64(f, hints), 1);
  assert_int_equal(claim_ordered(f, now, &cl), 1);
  assert_string_equal(cl[0].d.event_id, "lane-2");
  free_claimed(cl, 1);
  /* no longer ordered: the rescan lets the waiting ones in */
  sql.in = "UPDATE endpoints SET ordered = 0 WHERE id = 'ep1'";
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(query_i64(f, hints), 1);
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(query_i64(f, hints), 0);
}

/* k->n events of ep1's tenant, one to each lane "lane-<i>" ("<k->in or many>-<i>"), in one
 * transaction. */
static int run_publish_lanes(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  for (size_t i = 0; i < k->n; i++) {
    char id[32], key[32];
    snprintf(id, sizeof id, "%s-%zu", k->in ? (const char *)k->in : "many", i);
    snprintf(key, sizeof key, "lane-%05zu", i);
    unsigned char hash[32] = {0};
    memcpy(hash, &i, sizeof i);
    hash[31] = k->in ? 1 : 0;
    hookd_publish_req req = {.tenant_id = "t1", .event_id = id, .type = "a", .body = "{}",
                             .body_len = 2, .request_hash = hash, .occurred_ms = k->i64,
                             .now_ms = k->i64, .ordering_key = key};
    hookd_publish_res res;
    int rc = be->publish(c, &req, &res);
    hookd_publish_res_free(&res);
    if (rc) return rc;
  }
  return 0;
}

/* The rescans' repair walks 4,096 lanes at most, each going on from where the last stopped: a
 * walk of every lane held the writer (and every tenant's acks) 0.56 s per 200,000 lanes. */
static void lanes_repair_walks_in_steps(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  call sql = {.in = "UPDATE endpoints SET ordered = 1 WHERE id = 'ep1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t now = hookd_now_ms();
  call pub = {.n = 5000, .i64 = now};
  assert_int_equal(w(f, run_publish_lanes, &pub), 0);
  const char *hidden = "SELECT COUNT(*) FROM deliveries WHERE lane_wait = 1";
  assert_int_equal(query_i64(f, hidden), 0); /* each the head of its lane */
  sql.in = "UPDATE deliveries SET lane_wait = 1"; /* every hint set by mistake */
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(query_i64(f, hidden), 5000);
  call r = {.i64 = now};
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(query_i64(f, hidden), 5000 - 4096); /* the first step's lanes */
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(query_i64(f, hidden), 0); /* the next goes on from there */
  sql.in = "UPDATE deliveries SET lane_wait = 1 WHERE ordering_key < 'lane-00010'";
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(w(f, run_due_hints, &r), 0); /* past the last lane: from the first again */
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(query_i64(f, hidden), 0);
}

/* A claim of ep1 (ordered), with in k->i64 the VM steps its statements took. */
static int run_claim_steps(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  for (sqlite3_stmt *s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s))
    sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1);
  hookd_claim_req req = {.endpoint_id = "ep1", .owner = "n", .limit = 10, .replay_limit = 10,
                         .ordered = true, .lane_block = true, .now_ms = hookd_now_ms(),
                         .lease_ms = 60000};
  hookd_claimed *cl = NULL;
  int64_t next = 0;
  int rc = be->claim(c, &req, &cl, &k->n, &next);
  free_claimed(cl, k->n);
  k->i64 = 0;
  for (sqlite3_stmt *s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s))
    k->i64 += sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 0);
  return rc;
}

/* The endpoint update (a PATCH) of ep1 to lane_policy k->in. */
static int run_lane_policy(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  hookd_endpoint ep;
  int rc = be->endpoint_get(c, "ep1", &ep);
  if (rc) return rc;
  free(ep.lane_policy);
  ep.lane_policy = strdup(((call *)a)->in);
  ep.updated_ms = hookd_now_ms();
  rc = be->endpoint_update(c, &ep);
  hookd_endpoint_free(&ep);
  return rc;
}

static void publish_in_lane(fx *f, const char *id, const char *key, int64_t version) {
  unsigned char hash[32] = {0};
  snprintf((char *)hash, sizeof hash, "%s", id);
  hookd_publish_req req = {.tenant_id = "t1", .event_id = id, .type = "a", .body = "{}",
                           .body_len = 2, .request_hash = hash, .occurred_ms = hookd_now_ms(),
                           .now_ms = hookd_now_ms(), .ordering_key = key,
                           .has_ordering_version = version > 0, .ordering_version = version};
  hookd_publish_res res;
  call c = {.in = &req, .out = &res};
  assert_int_equal(w(f, run_publish, &c), 0);
  hookd_publish_res_free(&res);
}

/* Deletes event k->in's payload (tenant t1). */
static int run_payload_delete(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  int64_t seq = 0, purged = 0;
  int cancelled = 0;
  return be->event_payload_delete(c, "t1", ((call *)a)->in, hookd_now_ms(), &seq, &purged,
                                  &cancelled);
}

/* The hint of event id's delivery. */
static int64_t hint_of(fx *f, const char *event_id) {
  char q[160];
  snprintf(q, sizeof q, "SELECT d.lane_wait FROM deliveries d JOIN events e ON e.seq ="
           " d.event_seq WHERE e.id = '%s'", event_id);
  return query_i64(f, q);
}

/* Marks the deliveries of events ids (an SQL list: "'a', 'b'") delivered: their lane done with. */
static void set_delivered(fx *f, const char *ids) {
  char q[256];
  snprintf(q, sizeof q, "UPDATE deliveries SET state = 'delivered' WHERE event_seq IN (SELECT seq"
           " FROM events WHERE id IN (%s))", ids);
  call sql = {.in = q};
  assert_int_equal(w(f, run_sql, &sql), 0);
}

/* Claims ep1's one due delivery, which must be event id's, and records its outcome. */
static void claim_one(fx *f, const char *id, hookd_dstate to, char *delivery_id) {
  hookd_claimed *cl = NULL;
  assert_int_equal(claim_ordered(f, hookd_now_ms(), &cl), 1);
  assert_string_equal(cl[0].d.event_id, id);
  if (delivery_id) snprintf(delivery_id, HOOKD_ID_MAX, "%s", cl[0].d.id);
  record_lane = true;
  record_dead_reason = "permanent";
  assert_int_equal(record(f, &cl[0], to, to == HOOKD_DS_DELIVERED ? 200 : 400), 0);
  record_dead_reason = NULL;
  free_claimed(cl, 1);
}

/* A lane held by a DEAD head (lane_policy block) is a blocked backlog too: the delivery behind
 * the head is hinted out at the head's DEAD outcome and at its own publish, so a claim never
 * walks the blocked lanes (a review: 20,000 of them made a claim 68 ms, and every tenant's
 * writes waited behind it); each way the head stops holding its lane lets it in — the head's
 * replay, a higher version, its payload deleted, the rescans' walk (a head whose event
 * expired), a PATCH to skip —
 * and the walk hints out a blocked lane a path left in (docs/isolation.md "Ordering lanes"). */
static void blocked_lanes_stay_out_of_the_due_index(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  call sql = {.in = "UPDATE endpoints SET ordered = 1, lane_policy = 'block' WHERE id = 'ep1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t now = hookd_now_ms();
  /* 2,000 lanes whose heads went DEAD, then an event more to each */
  call pub = {.n = 2000, .i64 = now};
  assert_int_equal(w(f, run_publish_lanes, &pub), 0);
  sql.in = "UPDATE deliveries SET state = 'dead', dead_reason = 'max_attempts', dead_at = 1";
  assert_int_equal(w(f, run_sql, &sql), 0);
  pub.in = "next";
  assert_int_equal(w(f, run_publish_lanes, &pub), 0);
  const char *in_sight = "SELECT COUNT(*) FROM deliveries WHERE lane_wait = 0"
                         " AND state = 'pending'";
  assert_int_equal(query_i64(f, in_sight), 0);
  call cs = {0};
  assert_int_equal(w(f, run_claim_steps, &cs), 0);
  assert_int_equal(cs.n, 0);
  if (cs.i64 > 200) print_error("a claim took %lld VM steps\n", (long long)cs.i64);
  assert_in_range(cs.i64, 1, 200);

  /* the walk: a blocked lane left in is hinted out; one whose head's event expired let in */
  sql.in = "UPDATE deliveries SET lane_wait = 0 WHERE event_seq = (SELECT seq FROM events"
           " WHERE id = 'next-0')";
  assert_int_equal(w(f, run_sql, &sql), 0);
  call r = {.i64 = now};
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(hint_of(f, "next-0"), 1);
  sql.in = "UPDATE events SET expires_at = 1 WHERE id = 'many-1'";
  assert_int_equal(w(f, run_sql, &sql), 0);
  assert_int_equal(hint_of(f, "next-1"), 1);
  assert_int_equal(w(f, run_due_hints, &r), 0);
  assert_int_equal(hint_of(f, "next-1"), 0);
  set_delivered(f, "'next-1'");

  /* the outcome: a head gone DEAD leaves the next one out; delivered on its replay, lets it in */
  publish_in_lane(f, "a1", "a", 0);
  publish_in_lane(f, "a2", "a", 0);
  char a1[HOOKD_ID_MAX];
  claim_one(f, "a1", HOOKD_DS_DEAD, a1);
  assert_int_equal(hint_of(f, "a2"), 1);
  hookd_claimed *cl = NULL;
  assert_int_equal(claim_ordered(f, hookd_now_ms(), &cl), 0);
  free(cl);
  call rp = {.in = a1};
  assert_int_equal(w(f, run_replay, &rp), 0);
  claim_one(f, "a1", HOOKD_DS_DELIVERED, NULL);
  assert_int_equal(hint_of(f, "a2"), 0);
  claim_one(f, "a2", HOOKD_DS_DELIVERED, NULL);

  /* a higher version: the DEAD head of a lower one holds the lane no more */
  publish_in_lane(f, "v1", "v", 1);
  claim_one(f, "v1", HOOKD_DS_DEAD, NULL);
  publish_in_lane(f, "v1-again", "v", 1); /* an equal version: held */
  assert_int_equal(hint_of(f, "v1-again"), 1);
  publish_in_lane(f, "v2", "v", 2);
  assert_int_equal(hint_of(f, "v1-again"), 0);
  assert_int_equal(hint_of(f, "v2"), 1); /* behind v1-again */
  set_delivered(f, "'v1-again', 'v2'");

  /* the DEAD head's payload deleted: it can no longer be replayed, nor hold its lane */
  publish_in_lane(f, "p1", "p", 0);
  claim_one(f, "p1", HOOKD_DS_DEAD, NULL);
  publish_in_lane(f, "p2", "p", 0);
  assert_int_equal(hint_of(f, "p2"), 1);
  call pd = {.in = "p1"};
  assert_int_equal(w(f, run_payload_delete, &pd), 0);
  assert_int_equal(hint_of(f, "p2"), 0);

  set_delivered(f, "'p2'");

  /* payload retention purges a DEAD head the lane was moved past beyond its next delivery
   * (lane_passed_by: r3; retention reads "moved past" to the lane's end, the claim to r2): the
   * head held r2 until then, and no longer can */
  publish_in_lane(f, "r1", "r", 0);
  publish_in_lane(f, "r2", "r", 0);
  publish_in_lane(f, "r3", "r", 0);
  sql.in = "UPDATE deliveries SET state = 'dead', dead_reason = 'max_attempts', dead_at = 1,"
           " lane_passed_by = (SELECT d.seq FROM deliveries d JOIN events e ON e.seq = d.event_seq"
           " WHERE e.id = 'r3') WHERE event_seq = (SELECT seq FROM events WHERE id = 'r1')";
  assert_int_equal(w(f, run_sql, &sql), 0);
  set_delivered(f, "'r3'");
  call rr = {.i64 = now};
  assert_int_equal(w(f, run_due_hints, &rr), 0); /* (the walk: r2 is held, hinted out) */
  assert_int_equal(hint_of(f, "r2"), 1);
  int64_t after = 0, purged = 0;
  call pp = {.i64 = hookd_now_ms() + 1, .out = &after};
  do { /* (the walk goes through this test's earlier events first) */
    assert_int_equal(w(f, run_payload_purge, &pp), 0);
    purged += pp.ival;
  } while (after > 0);
  assert_int_equal(query_i64(f, "SELECT purged_at IS NOT NULL FROM events WHERE id = 'r1'"), 1);
  assert_true(purged >= 1);
  assert_int_equal(hint_of(f, "r2"), 0);
  set_delivered(f, "'r2'");

  /* a PATCH to skip lets every blocked lane in — not one that waits behind an open head */
  publish_in_lane(f, "o1", "o", 0);
  publish_in_lane(f, "o2", "o", 0);
  assert_int_equal(hint_of(f, "o2"), 1);
  call pol = {.in = "skip"};
  assert_int_equal(w(f, run_lane_policy, &pol), 0);
  assert_int_equal(hint_of(f, "o2"), 1);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM deliveries WHERE lane_wait = 1"
                                 " AND state = 'pending'"), 1);
}

/* ---- the WAL stays bounded ---- */

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Runs one query returning a single integer on a read-only connection of its own. */
/* One query's first row, on a read-only connection of its own (query_done closes both). */
static sqlite3_stmt *query_row(fx *f, const char *sql) {
  sqlite3 *db;
  char path[160];
  snprintf(path, sizeof path, "%s/t.db", f->dir);
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  return st;
}
static void query_done(sqlite3_stmt *st) {
  sqlite3 *db = sqlite3_db_handle(st);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

/* Runs one query returning a single text (strdup). */
static char *query_text(fx *f, const char *sql) {
  sqlite3_stmt *st = query_row(f, sql);
  const unsigned char *t = sqlite3_column_text(st, 0);
  char *v = strdup(t ? (const char *)t : "(null)");
  query_done(st);
  return v;
}

/* Runs one query returning a single integer. */
static int64_t query_i64(fx *f, const char *sql) {
  sqlite3_stmt *st = query_row(f, sql);
  int64_t v = sqlite3_column_int64(st, 0);
  query_done(st);
  return v;
}

static int run_lanes_purge(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  bool more = false;
  int rc = be->lane_versions_purge(c, k->i64, (int64_t)k->n, 2, &k->ival, &more);
  k->n = more;
  return rc;
}

/* An ordered lane's highest version is forgotten once not raised for the window and no delivery
 * of it is left; one with a delivery counts as raised now, so the next op reads the others
 * (docs/isolation.md "Ordering lanes"). */
static void lane_versions_go_with_their_deliveries(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  call sql = {.in = "UPDATE endpoints SET ordered = 1 WHERE id = 'ep1'"};
  assert_int_equal(w(f, run_sql, &sql), 0);
  int64_t now = hookd_now_ms(), day = 86400 * 1000LL;
  unsigned char hash[32] = {1};
  hookd_publish_req req = {.tenant_id = "t1", .event_id = "e1", .type = "a", .body = "{}",
                           .body_len = 2, .request_hash = hash, .occurred_ms = now - 10 * day,
                           .now_ms = now - 10 * day, .ordering_key = "lane-a",
                           .has_ordering_version = true, .ordering_version = 5};
  hookd_publish_res res;
  call c = {.in = &req, .out = &res};
  assert_int_equal(w(f, run_publish, &c), 0);
  hookd_publish_res_free(&res);
  /* two lanes whose deliveries are gone (their events expired) */
  char ins[256];
  snprintf(ins, sizeof ins,
           "INSERT INTO lane_versions(endpoint_id, ordering_key, version, seen_at) VALUES"
           " ('ep1', 'lane-b', 3, %lld), ('ep1', 'lane-c', 4, %lld)",
           (long long)(now - 9 * day), (long long)(now - 8 * day));
  call add = {.in = ins};
  assert_int_equal(w(f, run_sql, &add), 0);
  call p = {.i64 = now - day, .n = (size_t)now};
  assert_int_equal(w(f, run_lanes_purge, &p), 0); /* lane-a kept (its delivery), lane-b gone */
  assert_int_equal(p.ival, 1);
  assert_int_equal(p.n, 1); /* two read of a limit of 2: there may be more */
  p.n = (size_t)now;
  assert_int_equal(w(f, run_lanes_purge, &p), 0); /* lane-c, not lane-a again */
  assert_int_equal(p.ival, 1);
  assert_int_equal(p.n, 0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM lane_versions"), 1);
  snprintf(ins, sizeof ins,
           "SELECT seen_at = %lld FROM lane_versions WHERE ordering_key = 'lane-a'",
           (long long)now);
  assert_int_equal(query_i64(f, ins), 1);
  /* a clock read behind the window (stepped back): kept lanes still leave it, a walk ends */
  call back = {.in = "UPDATE lane_versions SET seen_at = 0"};
  assert_int_equal(w(f, run_sql, &back), 0);
  p.n = (size_t)(now - 2 * day);
  assert_int_equal(w(f, run_lanes_purge, &p), 0);
  assert_int_equal(p.ival, 0);
  snprintf(ins, sizeof ins, "SELECT seen_at >= %lld FROM lane_versions", (long long)p.i64);
  assert_int_equal(query_i64(f, ins), 1);
}

static void writer_bounds_the_wal(void **state) {
  fx *f = *state;
  /* the checkpointer never runs, like one that always ends a few commits behind the writer:
   * only the writer's own checkpoint past the limit lets the WAL start over */
  enum { LIMIT = 300, ROWS = 1000 };
  hookd_sqlite_set_wal_pages(f->s->shared, 0, LIMIT);
  call c = {.in = "CREATE TABLE scratch(b BLOB)"};
  assert_int_equal(w(f, run_sql, &c), 0);
  char wal[160];
  snprintf(wal, sizeof wal, "%s/t.db-wal", f->dir);
  long largest = 0;
  c.in = "INSERT INTO scratch VALUES (randomblob(6000))"; /* >= 2 pages per commit */
  for (int i = 0; i < ROWS; i++) {
    assert_int_equal(w(f, run_sql, &c), 0);
    long size = file_size(wal);
    if (size > largest) largest = size;
  }
  /* unbounded, 1,000 commits would leave > 2,000 frames; bounded: the limit + one commit's */
  assert_true(largest > 0);
  assert_true(largest <= 32 + (LIMIT + 8) * (24 + 4096));
  /* and every row is there, read through a connection of its own */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM scratch"), ROWS);
}

static void checkpointer_copies_in_passes_and_the_wal_starts_over(void **state) {
  fx *f = *state;
  /* the checkpointer wakes at 200 frames not yet copied; the writer's own limit is never reached,
   * so only the writer finishing each pass lets the WAL start over */
  enum { CKPT = 200, ROWS = 2000 };
  hookd_sqlite_set_wal_pages(f->s->shared, CKPT, 1 << 30);
  call c = {.in = "CREATE TABLE scratch(b BLOB)"};
  assert_int_equal(w(f, run_sql, &c), 0);
  char wal[160];
  snprintf(wal, sizeof wal, "%s/t.db-wal", f->dir);
  uint64_t passes0 = hookd_sqlite_checkpoint_count(f->s->shared, false);
  long largest = 0;
  c.in = "INSERT INTO scratch VALUES (randomblob(6000))"; /* ~3 frames per commit */
  for (int i = 0; i < ROWS; i++) {
    assert_int_equal(w(f, run_sql, &c), 0);
    long size = file_size(wal);
    if (size > largest) largest = size;
  }
  uint64_t passes = hookd_sqlite_checkpoint_count(f->s->shared, false) - passes0;
  /* one pass per ~CKPT frames (~6,000 in all), not one per commit once the WAL is that long */
  assert_true(passes >= 1);
  assert_true(passes <= ROWS / 10);
  /* and the WAL started over after the passes rather than growing with every commit (~25 MB);
   * the margin leaves the checkpointer thread ~400 commits of lag on a loaded machine */
  assert_true(largest <= 32 + 10 * CKPT * (24 + 4096));
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM scratch"), ROWS);
}

/* A reader holding an old snapshot holds back the frames committed after it began: the
 * checkpointer, finding nothing to copy, waits between passes instead of running them back to
 * back (a core spun for as long as the reader read). */
static void checkpointer_waits_while_a_reader_holds_the_frames_back(void **state) {
  fx *f = *state;
  enum { CKPT = 50 };
  hookd_sqlite_set_wal_pages(f->s->shared, CKPT, 1 << 30);
  call c = {.in = "CREATE TABLE scratch(b BLOB)"};
  assert_int_equal(w(f, run_sql, &c), 0);
  char path[160];
  snprintf(path, sizeof path, "%s/t.db", f->dir);
  sqlite3 *reader;
  assert_int_equal(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM scratch;", NULL, NULL, NULL),
                   SQLITE_OK); /* its snapshot, kept until COMMIT */
  c.in = "INSERT INTO scratch VALUES (randomblob(6000))"; /* ~3 frames each */
  for (int i = 0; i < 4 * CKPT; i++) assert_int_equal(w(f, run_sql, &c), 0);
  uint64_t tries0 = hookd_sqlite_checkpoint_count(f->s->shared, true);
  int64_t t0 = hookd_mono_ms();
  struct timespec half = {0, 500 * 1000 * 1000};
  nanosleep(&half, NULL); /* (a rate measured: how many checkpoints in half a second) */
  uint64_t tries = hookd_sqlite_checkpoint_count(f->s->shared, true) - tries0;
  int64_t took = hookd_mono_ms() - t0; /* (more than 0.5 s on a loaded machine) */
  assert_int_equal(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(reader);
  /* one every 10 ms at most (~50 in 0.5 s); spinning, hundreds of thousands */
  if (tries > (uint64_t)(2 * (took / 10) + 100))
    fail_msg("%llu checkpoints in %lld ms while nothing could be copied",
             (unsigned long long)tries, (long long)took);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM scratch"), 4 * CKPT);
}

/* Frames a long reader held back (a backup's snapshot) past the writer's WAL limit are copied by
 * the checkpointer once the reader lets go, not by the writer inline at its next transaction:
 * that copy paused every commit ~1 s at the end of a backup (a scale review). */
static void a_pile_up_behind_a_reader_is_the_checkpointers_to_copy(void **state) {
  fx *f = *state;
  enum { CKPT = 50, LIMIT = 300 };
  hookd_sqlite_set_wal_pages(f->s->shared, CKPT, LIMIT);
  call c = {.in = "CREATE TABLE scratch(b BLOB)"};
  assert_int_equal(w(f, run_sql, &c), 0);
  char path[160], wal[170];
  snprintf(path, sizeof path, "%s/t.db", f->dir);
  snprintf(wal, sizeof wal, "%s-wal", path);
  sqlite3 *reader;
  assert_int_equal(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM scratch;", NULL, NULL, NULL),
                   SQLITE_OK); /* its snapshot, kept until COMMIT */
  c.in = "INSERT INTO scratch VALUES (randomblob(6000))"; /* ~3 frames each */
  int rows = 0;
  while (file_size(wal) < (long)(LIMIT + 150) * (24 + 4096)) { /* past the limit, held back */
    assert_int_equal(w(f, run_sql, &c), 0);
    rows++;
  }
  uint64_t passes0 = hookd_sqlite_checkpoint_count(f->s->shared, false);
  assert_int_equal(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(reader);
  /* the writer's next transactions come at once, as under traffic: none copies the pile-up */
  for (int i = 0; i < 5; i++, rows++) assert_int_equal(w(f, run_sql, &c), 0);
  /* the checkpointer's pass (it retries every 10 ms while it finds nothing to copy) */
  for (int i = 0; i < 500 && hookd_sqlite_checkpoint_count(f->s->shared, false) == passes0; i++) {
    struct timespec ms = {0, 10 * 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  assert_true(hookd_sqlite_checkpoint_count(f->s->shared, false) > passes0);
  /* then the writer copies the last commits' frames alone, and the WAL starts over */
  for (int i = 0; i < 50; i++, rows++) assert_int_equal(w(f, run_sql, &c), 0);
  int copied = hookd_sqlite_writer_copied_max(f->s->shared);
  if (copied > 100) fail_msg("the writer copied %d frames itself, inline", copied);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM scratch"), rows);
}

/* A daemon opening a store with a WAL left by a crash copies it into the database and starts it
 * over before writing anything: commits appended behind frames a failed fsync never wrote would
 * otherwise be lost with them at a power cut. */
static void a_wal_left_by_a_crash_is_checkpointed_at_start(void **state) {
  fx *f = *state;
  hookd_sqlite_set_wal_pages(f->s->shared, 0, 1 << 30); /* nothing copies the WAL meanwhile */
  call c = {.in = "CREATE TABLE scratch(b BLOB)"};
  assert_int_equal(w(f, run_sql, &c), 0);
  c.in = "INSERT INTO scratch VALUES (randomblob(6000))";
  for (int i = 0; i < 50; i++) assert_int_equal(w(f, run_sql, &c), 0);
  /* the files as a crash leaves them: the database and its WAL, no -shm */
  char cmd[512], wal[160], url[160];
  snprintf(cmd, sizeof cmd, "cp %s/t.db %s/crash.db && cp %s/t.db-wal %s/crash.db-wal", f->dir,
           f->dir, f->dir, f->dir);
  assert_int_equal(system(cmd), 0);
  snprintf(wal, sizeof wal, "%s/crash.db-wal", f->dir);
  assert_true(file_size(wal) > 50 * 6000);
  snprintf(url, sizeof url, "sqlite:%s/crash.db", f->dir);
  hookd_store_config cfg = {.url = url, .max_batch = 64};
  hookd_store *s;
  char err[256];
  assert_int_equal(hookd_store_open(&cfg, &s, err, sizeof err), 0);
  assert_int_equal(file_size(wal), 0); /* copied into the database and synced */
  hookd_store_close(s);
  sqlite3 *db;
  snprintf(cmd, sizeof cmd, "%s/crash.db", f->dir);
  assert_int_equal(sqlite3_open_v2(cmd, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM scratch", -1, &st, NULL), 0);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(st, 0), 50);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void page_cache_parks_split_pages_under_key_zero(void **state) {
  fx *f = *state;
  /* the store's open installed the wrapper before this process used SQLite */
  assert_int_equal(sq_process_setup(), 1);
  uint64_t parks0 = hookd_sqlite_pcache_parks();
  call c = {.in = "CREATE TABLE parked(k TEXT PRIMARY KEY, v TEXT NOT NULL)"};
  assert_int_equal(w(f, run_sql, &c), 0);
  /* 50 wide keys per commit in a scattered order (n * 7919 mod a prime: all distinct), so the
   * index splits pages all over; every 7th batch ends on a duplicate key and is rolled back to
   * its savepoint after its splits, restoring pages the wrapper may have parked and moved. */
  enum { BATCHES = 240, PER = 50 };
  int committed = 0;
  char sql[1024];
  for (int b = 0; b < BATCHES; b++) {
    int fail = b % 7 == 3;
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < %d)"
             " INSERT INTO parked(k, v) SELECT printf('%%08d', n) || hex(zeroblob(50)),"
             " 'v' || n FROM (SELECT ((%d + i) * 7919) %% 100003 AS n FROM s);%s",
             PER - 1, b * PER,
             fail ? " INSERT INTO parked(k, v) VALUES ('dup', 'a'), ('dup', 'b');" : "");
    c.in = sql;
    int rc = w(f, run_sql, &c);
    if (fail) {
      assert_int_not_equal(rc, 0);
    } else {
      assert_int_equal(rc, 0);
      committed++;
    }
  }
  /* the mechanism ran: page splits moved pages to the temporary number and back */
  assert_true(hookd_sqlite_pcache_parks() > parks0);
  /* and the database read from disk by another connection is whole and exactly right */
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM pragma_integrity_check"
                                " WHERE integrity_check <> 'ok'"),
                   0);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM parked"), committed * PER);
  assert_int_equal(query_i64(f, "SELECT COUNT(*) FROM parked WHERE v = 'v' ||"
                                " CAST(substr(k, 1, 8) AS INTEGER) AND length(k) = 108"),
                   committed * PER);
  assert_int_equal(query_i64(f, "SELECT COUNT(DISTINCT substr(k, 1, 8)) FROM parked"),
                   committed * PER);
  /* the rolled-back batches left nothing: batch 3's first key is absent */
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM parked WHERE k = printf('%%08d', %d) ||"
                            " hex(zeroblob(50))", (3 * PER * 7919) % 100003);
  assert_int_equal(query_i64(f, sql), 0);
}

static void reopen_keeps_schema(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  hookd_store_close(f->s);
  hookd_store_config cfg = {.url = f->url, .max_batch = 64};
  char err[256];
  assert_int_equal(hookd_store_open(&cfg, &f->s, err, sizeof err), 0);
  hookd_publish_res res;
  assert_int_equal(publish(f, "t1", "after-reopen", "a.b", NULL, 1, &res), 0);
  assert_int_equal(res.n_deliveries, 1);
  hookd_publish_res_free(&res);
}

/* The wrapper's contract, method by method: a page moved to the temporary number is found
 * under it — by a fetch, and gone with a truncation that covers it — as in SQLite's own cache,
 * whatever SQLite does between the moves. */
static void page_cache_parked_page_answers_to_its_number(void **state) {
  (void)state;
  const sqlite3_pcache_methods2 *m = hookd_sqlite_pcache_methods();
  assert_non_null(m);
  const int psz = 4096;
  const unsigned tmp = 0x40000000u / psz + 1;
  sqlite3_pcache *c = m->xCreate(psz, 64, 1);
  assert_non_null(c);
  m->xCachesize(c, 100); /* unpinned pages stay cached */
  uint64_t parks0 = hookd_sqlite_pcache_parks();

  /* parked, then fetched by its number: the same page, and the move back still works */
  sqlite3_pcache_page *pg = m->xFetch(c, 7, 2);
  assert_non_null(pg);
  m->xRekey(c, pg, 7, tmp);
  assert_int_equal(hookd_sqlite_pcache_parks(), parks0 + 1);
  assert_ptr_equal(m->xFetch(c, tmp, 0), pg);
  m->xRekey(c, pg, tmp, 9);
  assert_ptr_equal(m->xFetch(c, 9, 0), pg);
  assert_null(m->xFetch(c, tmp, 0));

  /* parked, then truncated below its number: gone, as SQLite's cache would have it */
  m->xRekey(c, pg, 9, tmp);
  m->xUnpin(c, pg, 0);
  m->xTruncate(c, 100);
  assert_null(m->xFetch(c, tmp, 0));
  assert_null(m->xFetch(c, 0, 0));
  /* a truncation above it leaves it */
  pg = m->xFetch(c, 8, 2);
  m->xRekey(c, pg, 8, tmp);
  m->xTruncate(c, tmp + 1);
  assert_ptr_equal(m->xFetch(c, tmp, 0), pg);
  m->xDestroy(c);

  /* parked and unpinned, then evicted (a small cache, new pages fetched): the page SQLite's cache
   * reused is not moved back from key 0 — before, that rekey ran off the hash chain (SEGV) */
  c = m->xCreate(psz, 64, 1);
  assert_non_null(c);
  m->xCachesize(c, 10);
  pg = m->xFetch(c, 7, 2);
  assert_non_null(pg);
  m->xRekey(c, pg, 7, tmp);
  m->xUnpin(c, pg, 0);
  for (unsigned k = 100; k < 120; k++) {
    sqlite3_pcache_page *other = m->xFetch(c, k, 2);
    assert_non_null(other);
    m->xUnpin(c, other, 0);
  }
  assert_null(m->xFetch(c, tmp, 0)); /* evicted: gone, as from SQLite's own cache */
  m->xTruncate(c, 50);
  assert_null(m->xFetch(c, 0, 0));
  m->xDestroy(c);
}

/* ---- a long scan at shutdown ---- */

static atomic_int scan_started, scan_done, scan_rc;

/* A scan with no end (a recursive CTE counting for ever), as a list walking a huge store. */
static int run_endless_scan(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be, (void)a;
  atomic_store(&scan_started, 1);
  return sq_exec(c, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
                    " SELECT count(*) FROM n");
}
static void endless_scan_done(void *arg, int rc) {
  (void)arg;
  atomic_store(&scan_rc, rc);
  atomic_store(&scan_done, 1);
}
static int run_quick_read(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be, (void)a;
  return sq_exec(c, "SELECT count(*) FROM events");
}

static void a_scan_is_interrupted_at_shutdown(void **state) {
  fx *f = *state;
  hookd_store_op op = {.run = run_endless_scan, .done = endless_scan_done};
  hookd_storeq_submit(f->s->scan, &op);
  int64_t deadline = hookd_mono_ms() + 10000;
  while (!atomic_load(&scan_started) && hookd_mono_ms() < deadline) {
  }
  assert_true(atomic_load(&scan_started));
  /* called again while the drain waits, as the daemon does: one call before the statement has
   * started would find nothing to stop */
  while (!atomic_load(&scan_done) && hookd_mono_ms() < deadline) hookd_store_interrupt_scans(f->s);
  assert_true(atomic_load(&scan_done));
  assert_int_equal(atomic_load(&scan_rc), HOOKD_STORE_ERR);
  /* the executor goes on: the next scan runs as usual */
  assert_int_equal(hookd_storeq_run_sync(f->s->scan, run_quick_read, NULL), 0);
  /* and the reader and writer were never touched */
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_quick_read, NULL), 0);
}

/* An endpoint's deliveries by state in an id range (ids sort by creation: hookd_id_floor),
 * each state's count cut at the cap the API gives: the stats route's read. */
typedef struct stats_call {
  const char *ep, *from, *to;
  int64_t cap;
  int64_t counts[HOOKD_DS__COUNT], unsent;
} stats_call;

static int run_stats(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  stats_call *k = a;
  return be->endpoint_stats(c, k->ep, k->from, k->to, k->cap, k->counts, &k->unsent);
}

static void endpoint_stats_by_state_in_a_window_cut_at_the_cap(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep_stats", NULL);
  make_tenant_endpoint(f, "t1", "ep_quiet", "never.*");
  for (int i = 0; i < 5; i++) {
    char id[32];
    snprintf(id, sizeof id, "evt_stats_%d", i);
    hookd_publish_res res = {0};
    assert_int_equal(publish(f, "t1", id, "a.b", NULL, (unsigned char)i, &res), 0);
    hookd_publish_res_free(&res);
  }
  /* (this process's ids carry the stamps earlier tests' clocks gave: the window is every
   * time; the black-box test reads windows on a daemon's own clock) */
  char from[HOOKD_ID_MAX], to[HOOKD_ID_MAX];
  hookd_id_floor("dlv", 0, from);
  hookd_id_floor("dlv", INT64_MAX, to);
  stats_call k = {.ep = "ep_stats", .from = from, .to = to, .cap = 100};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_stats, &k), 0);
  assert_int_equal(k.counts[HOOKD_DS_PENDING], 5);
  assert_int_equal(k.counts[HOOKD_DS_DELIVERED] + k.counts[HOOKD_DS_DEAD], 0);
  k.cap = 3; /* read no further than the cap */
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_stats, &k), 0);
  assert_int_equal(k.counts[HOOKD_DS_PENDING], 3);
  k.cap = 100;
  k.from = to; /* an empty window */
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_stats, &k), 0);
  assert_int_equal(k.counts[HOOKD_DS_PENDING], 0);
  k.from = from;
  k.ep = "ep_quiet"; /* another endpoint's deliveries are not its own */
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_stats, &k), 0);
  assert_int_equal(k.counts[HOOKD_DS_PENDING], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(stale_lease_is_fenced, setup, teardown),
      cmocka_unit_test_setup_teardown(a_wal_left_by_a_crash_is_checkpointed_at_start, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(reclaim_bumps_token, setup, teardown),
      cmocka_unit_test_setup_teardown(reclaim_holds_only_what_was_marked, setup, teardown),
      cmocka_unit_test_setup_teardown(fanout_and_idempotency, setup, teardown),
      cmocka_unit_test_setup_teardown(publish_refuses_before_writing, setup, teardown),
      cmocka_unit_test_setup_teardown(group_commit_isolates_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(savepoint_free_ops_fail_alone_or_redo_the_batch,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(batches_form_under_load, setup, teardown),
      cmocka_unit_test_setup_teardown(attempts_are_append_only_and_replay_starts_a_cycle, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(reopen_keeps_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(receive_dedup_conflict_purge, setup, teardown),
      cmocka_unit_test_setup_teardown(receive_without_destination_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(receive_writes_the_record_once, setup, teardown),
      cmocka_unit_test_setup_teardown(receive_links_the_right_event, setup, teardown),
      cmocka_unit_test_setup_teardown(purge_stops_at_the_first_fresh_record, setup, teardown),
      cmocka_unit_test_setup_teardown(purge_passes_over_a_record_stamped_ahead, setup, teardown),
      cmocka_unit_test_setup_teardown(outcome_run_again_starts_from_the_request, setup, teardown),
      cmocka_unit_test_setup_teardown(purge_keeps_records_whose_forward_is_not_finished, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(purge_weighs_the_forwards_attempts, setup, teardown),
      cmocka_unit_test_setup_teardown(purge_takes_the_event_and_keeps_recent_history, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(expire_deletes_settled_events_with_their_history, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(expire_keeps_the_newest_delivery, setup, teardown),
      cmocka_unit_test(expire_takes_whole_events_within_the_budget),
      cmocka_unit_test_setup_teardown(expire_op_keeps_to_the_budget, setup, teardown),
      cmocka_unit_test_setup_teardown(expire_op_weighs_the_attempts, setup, teardown),
      cmocka_unit_test_setup_teardown(payload_purge_keeps_to_its_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(release_after_an_appended_late_attempt, setup, teardown),
      cmocka_unit_test_setup_teardown(a_late_outcome_leaves_a_newer_one_alone, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(late_outcome_and_release_after_the_sweeps_hold, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(lanes_wait_out_of_the_due_index, setup, teardown),
      cmocka_unit_test_setup_teardown(lanes_repair_walks_in_steps, setup, teardown),
      cmocka_unit_test_setup_teardown(blocked_lanes_stay_out_of_the_due_index, setup, teardown),
      cmocka_unit_test_setup_teardown(writer_bounds_the_wal, setup, teardown),
      cmocka_unit_test_setup_teardown(checkpointer_waits_while_a_reader_holds_the_frames_back,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(checkpointer_copies_in_passes_and_the_wal_starts_over, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_pile_up_behind_a_reader_is_the_checkpointers_to_copy,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(page_cache_parks_split_pages_under_key_zero, setup,
                                      teardown),
      cmocka_unit_test(page_cache_parked_page_answers_to_its_number),
      cmocka_unit_test_setup_teardown(a_scan_is_interrupted_at_shutdown, setup, teardown),
      cmocka_unit_test_setup_teardown(answers_kept_under_a_key, setup, teardown),
      cmocka_unit_test_setup_teardown(object_versions_go_after_the_window, setup, teardown),
      cmocka_unit_test_setup_teardown(lane_versions_go_with_their_deliveries, setup, teardown),
      cmocka_unit_test_setup_teardown(a_delete_cancels_in_bounded_steps, setup, teardown),
      cmocka_unit_test_setup_teardown(a_deleted_endpoints_attempts_keep_no_url_path, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(the_url_walk_is_bounded_fair_and_ends, setup, teardown),
      cmocka_unit_test_setup_teardown(a_replacement_takes_what_the_delete_walk_has_not_reached,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(fan_out_matches_the_payload_it_is_given, setup, teardown),
      cmocka_unit_test_setup_teardown(endpoint_stats_by_state_in_a_window_cut_at_the_cap, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(config_stamps_move_with_keys_and_sources, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

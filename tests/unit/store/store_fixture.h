/* store_fixture.h — what the SQLite store's unit tests share: a store on a scratch database
 * file, synchronous wrappers around the writer, and helpers that make tenants, endpoints,
 * events, claims and outcomes. Header-only (static functions: each test binary takes what it
 * uses). */
#ifndef HOOKD_TEST_STORE_FIXTURE_H
#define HOOKD_TEST_STORE_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/clock.h"
#include "store/storeq.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#endif

typedef struct fx {
  char dir[64];
  char url[128];
  hookd_store *s;
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/hookd-store-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->url, sizeof f->url, "sqlite:%s/t.db", f->dir);
  hookd_store_config cfg = {.url = f->url, .max_batch = 64};
  char err[256];
  assert_int_equal(hookd_store_open(&cfg, &f->s, err, sizeof err), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  hookd_store_close(f->s);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
  assert_int_equal(system(cmd), 0);
  free(f);
  return 0;
}

/* ---- small synchronous wrappers ---- */

typedef struct call {
  const void *in;
  void *out;
  void *out2;
  size_t n;
  int64_t i64;
  int ival;
} call;

static int w(fx *f, int (*run)(hookd_store_conn *, const hookd_store_backend *, void *), call *c) {
  return hookd_storeq_run_sync(f->s->writer, run, c);
}

static int run_tenant(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  return be->tenant_create(c, ((call *)a)->in);
}
static int run_ep(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  return be->endpoint_create(c, (hookd_endpoint *)((call *)a)->in, 0);
}
static int run_publish(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->publish(c, k->in, k->out);
}
static int run_claim(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->claim(c, k->in, (hookd_claimed **)k->out, &k->n, &k->i64);
}
/* Also reports in call.i64 the rows the outcome changed. */
static int run_outcome(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  int64_t before = be->changes(c);
  int rc = be->record_outcome(c, (hookd_outcome *)k->in);
  k->i64 = be->changes(c) - before;
  return rc;
}
static int run_get(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->delivery_get(c, k->in, k->out, (hookd_attempt **)k->out2, &k->n);
}
static int run_replay(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->delivery_replay(c, k->in, hookd_now_ms(), false, NULL);
}
static int run_reclaim(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  hookd_due_hint *h = NULL;
  size_t n = 0;
  int held = 0;
  int rc = be->reclaim_leases(c, k->in, k->i64, 100, &h, &n, &k->ival, &held);
  hookd_due_hints_free(h, n);
  return rc;
}

static void make_tenant_endpoint(fx *f, const char *tenant, const char *ep_id, const char *filter) {
  hookd_tenant t = {.id = (char *)tenant, .name = (char *)"", .created_ms = hookd_now_ms()};
  call c = {.in = &t};
  int rc = w(f, run_tenant, &c);
  assert_true(rc == 0 || rc == HOOKD_STORE_EXISTS);
  hookd_endpoint e = {0};
  e.id = strdup(ep_id);
  e.tenant_id = strdup(tenant);
  e.url = strdup("https://example.com/hook");
  e.description = strdup("");
  e.event_types = filter ? strdup(filter) : NULL;
  e.enabled = true;
  e.max_in_flight = 4;
  e.timeout_ms = 1000;
  e.secret = strdup("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  hookd_retry_policy_defaults(&e.policy);
  e.created_ms = hookd_now_ms();
  c.in = &e;
  assert_int_equal(w(f, run_ep, &c), 0);
  assert_true(e.policy.id > 0);
  hookd_endpoint_free(&e);
}

static int publish(fx *f, const char *tenant, const char *id, const char *type, const char *idem,
                   unsigned char hash_byte, hookd_publish_res *res) {
  unsigned char hash[32];
  memset(hash, hash_byte, sizeof hash);
  hookd_publish_req req = {.tenant_id = tenant, .event_id = id, .type = type, .body = "{}",
                           .body_len = 2, .request_hash = hash, .idempotency_key = idem,
                           .occurred_ms = hookd_now_ms(), .now_ms = hookd_now_ms()};
  call c = {.in = &req, .out = res};
  return w(f, run_publish, &c);
}

static size_t claim(fx *f, const char *ep, const char *owner, int64_t now, int64_t lease_ms,
                    hookd_claimed **out) {
  hookd_claim_req req = {.endpoint_id = ep, .owner = owner, .limit = 10, .replay_limit = 10, .now_ms = now,
                         .lease_ms = lease_ms};
  call c = {.in = &req, .out = out};
  assert_int_equal(w(f, run_claim, &c), 0);
  return c.n;
}

static void free_claimed(hookd_claimed *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_claimed_free(&v[i]);
  free(v);
}

static int64_t last_outcome_changes; /* rows the last record() changed */
static bool record_lane;             /* record() says its delivery has an ordering key */
static int64_t record_ago;           /* record() happens this many ms in the past */
/* record()'s dead_reason when it goes DEAD (none unless set) */
static const char *record_dead_reason;
static const char *record_url; /* the URL record()'s attempt went to (none unless set) */
static int record(fx *f, const hookd_claimed *cl, hookd_dstate to, int status) {
  hookd_outcome o = {0};
  o.lane = record_lane;
  o.delivery_seq = cl->d.seq;
  o.lease_token = cl->d.lease_token;
  o.from = cl->d.state;
  o.to = to;
  o.dead_reason = to == HOOKD_DS_DEAD ? record_dead_reason : NULL;
  o.attempt_number = cl->d.attempt_count + 1;
  o.next_attempt_ms = hookd_now_ms() - record_ago;
  o.now_ms = hookd_now_ms() - record_ago;
  o.attempt.started_ms = o.now_ms;
  o.attempt.finished_ms = o.now_ms;
  o.attempt.outcome = (char *)(status == 200 ? "success" : "http_error");
  o.attempt.http_status = status;
  o.attempt.trigger = (char *)"live";
  o.attempt.url = (char *)record_url;
  call c = {.in = &o};
  int rc = w(f, run_outcome, &c);
  last_outcome_changes = c.i64;
  return rc;
}


#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#endif

/* test_sqlite_replay.c — replay jobs in the SQLite backend (sqlite_replay.c, docs/replay.md):
 * the snapshot's filter (state, endpoint, type prefix, time range) and its limit, the per-tenant
 * cap on active jobs, the state machine (and an outdated preview), and the step: the job's rate
 * as a token bucket with a one-second burst, a delivery no longer in the filter's state skipped
 * (never sent twice), nothing while paused, completion audited. */
#include "store_fixture.h"
#include "core/ids.h"
#include "store/sqlite/sqlite_int.h"

typedef struct rcall {
  const char *tenant;
  hookd_replay_filter f;
  int64_t max, now;
  hookd_replay_snapshot snap;
  hookd_replay_job job;
  hookd_replay_detail detail;
  hookd_replay_action action;
  hookd_replay_step_res step;
  char id[HOOKD_ID_MAX];
  size_t from, chunk; /* create: items stored so far; per call (0 = the daemon's chunk) */
  double rate;        /* create: items a second (0 = 2) */
} rcall;

static int run_select(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  rcall *k = a;
  return be->replay_select(c, k->tenant, &k->f, k->max, &k->snap);
}
static int run_create(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  rcall *k = a;
  hookd_replay_job j = {.id = k->id, .tenant_id = (char *)k->tenant, .filter = (char *)"{}",
                        .actor = (char *)"key_test", .reason = (char *)"test",
                        .rate_per_s = k->rate ? k->rate : 2,
                        .seq = k->job.seq, .total = k->job.total};
  int rc = be->replay_create(c, &j, &k->snap, &k->from,
                             k->chunk ? k->chunk : HOOKD_REPLAY_CREATE_CHUNK, k->now);
  k->job.seq = j.seq;
  k->job.total = j.total;
  return rc;
}
static int run_act(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  rcall *k = a;
  int rc = be->replay_act(c, k->tenant, k->id, k->action, k->now, &k->job);
  return rc;
}
static int run_getjob(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  rcall *k = a;
  return be->replay_get(c, k->tenant, k->id, &k->job, &k->detail);
}
static int run_abandon(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  rcall *k = a;
  hookd_replay_job j;
  int rc = be->replay_get(c, k->tenant, k->id, &j, NULL);
  if (rc) return rc;
  rc = be->replay_abandon(c, j.seq, k->now);
  hookd_replay_job_free(&j);
  return rc;
}
static int run_step(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  rcall *k = a;
  return be->replay_step(c, k->now, &k->step);
}

/* n events of `type` on every endpoint of the tenant, each delivery made DEAD. */
static void dead_events(fx *f, const char *tenant, const char *ep, const char *type, int n,
                        int *seq) {
  for (int i = 0; i < n; i++) {
    char id[64];
    snprintf(id, sizeof id, "evt_%s_%d", type, (*seq)++);
    hookd_publish_res res;
    assert_int_equal(publish(f, tenant, id, type, NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  for (int left = n; left > 0;) { /* a claim takes 10 at most */
    hookd_claimed *cl = NULL;
    size_t got = claim(f, ep, "node", hookd_now_ms() + 1, 60000, &cl);
    assert_int_equal(got, (size_t)(left < 10 ? left : 10));
    for (size_t i = 0; i < got; i++) assert_int_equal(record(f, &cl[i], HOOKD_DS_DEAD, 500), 0);
    free_claimed(cl, got);
    left -= (int)got;
  }
}

static int64_t select_count(fx *f, const char *tenant, hookd_replay_filter flt, int64_t max,
                            int expect_rc) {
  rcall k = {.tenant = tenant, .f = flt, .max = max};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &k), expect_rc);
  int64_t n = expect_rc == HOOKD_STORE_LIMIT ? k.snap.count : (int64_t)k.snap.n;
  hookd_replay_snapshot_free(&k.snap);
  return n;
}

static int run_event(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  hookd_event ev;
  hookd_delivery *dl = NULL;
  size_t n = 0;
  int rc = be->event_get(c, "t1", k->in, &ev, &dl, &n);
  if (rc) return rc;
  if (n == 1) snprintf(k->out, HOOKD_ID_MAX, "%s", dl[0].id);
  hookd_event_free(&ev);
  hookd_deliveries_free(dl, n);
  return n == 1 ? 0 : HOOKD_STORE_ERR;
}

static void delivery_of(fx *f, const char *event_id, char out[HOOKD_ID_MAX]) {
  call c = {.in = event_id, .out = out};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_event, &c), 0);
}

static int run_audit_list(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  return be->audit_list(c, "t1", 0, 10, (hookd_audit **)k->out, &k->n);
}

static void wait_next_ms(void) {
  int64_t t = hookd_now_ms();
  while (hookd_now_ms() == t) {
  }
}

static void the_filter_selects_what_it_names(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", "a.*");
  make_tenant_endpoint(f, "t1", "ep2", "b.*");
  make_tenant_endpoint(f, "t2", "ep3", NULL);
  dead_events(f, "t1", "ep1", "a.x", 2, &seq);
  wait_next_ms();
  int64_t cut = hookd_now_ms();
  wait_next_ms();
  dead_events(f, "t1", "ep1", "a.y", 1, &seq);
  dead_events(f, "t1", "ep2", "b.z", 3, &seq);
  dead_events(f, "t2", "ep3", "a.x", 1, &seq); /* another tenant's */

  hookd_replay_filter all = {.state = HOOKD_DS_DEAD};
  assert_int_equal(select_count(f, "t1", all, 100, 0), 6);
  hookd_replay_filter fl = all;
  fl.endpoint_id = "ep2";
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 3);
  fl = all;
  fl.event_type = "a.*";
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 3);
  fl.event_type = "a.x";
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 2);
  fl.event_type = "a"; /* a type, not a prefix */
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 0);
  fl = all;
  fl.until_ms = cut;
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 2);
  fl.until_ms = 0;
  fl.since_ms = cut;
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 4);
  fl = all;
  fl.state = HOOKD_DS_DELIVERED;
  assert_int_equal(select_count(f, "t1", fl, 100, 0), 0);
  /* over the limit: refused, with how many match */
  assert_int_equal(select_count(f, "t1", all, 5, HOOKD_STORE_LIMIT), 6);
  assert_int_equal(select_count(f, "t1", all, 6, 0), 6);
  /* an endpoint of another tenant, or none */
  fl = all;
  fl.endpoint_id = "ep3";
  select_count(f, "t1", fl, 100, HOOKD_STORE_NOTFOUND);
  fl.endpoint_id = "nope";
  select_count(f, "t1", fl, 100, HOOKD_STORE_NOTFOUND);
}

/* Creates a job over every delivery of t1 in `state`; returns its total. */
static int64_t create_job_for(fx *f, const char *id, hookd_dstate state, int64_t now, double rate,
                              int expect_rc) {
  rcall k = {.tenant = "t1", .f = {.state = state}, .max = 10000, .now = now, .rate = rate};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &k), 0);
  snprintf(k.id, sizeof k.id, "%s", id);
  int rc;
  do rc = w(f, run_create, (call *)&k);
  while (rc == 0 && k.from < k.snap.n);
  assert_int_equal(rc, expect_rc);
  hookd_replay_snapshot_free(&k.snap);
  return k.job.total;
}
/* Over every DEAD delivery of t1. */
static int64_t create_job_at(fx *f, const char *id, int64_t now, double rate, int expect_rc) {
  return create_job_for(f, id, HOOKD_DS_DEAD, now, rate, expect_rc);
}
static int64_t create_job(fx *f, const char *id, int64_t now, int expect_rc) {
  return create_job_at(f, id, now, 0, expect_rc);
}

static int act(fx *f, const char *id, hookd_replay_action a, int64_t now, char *state_out) {
  rcall k = {.tenant = "t1", .action = a, .now = now};
  snprintf(k.id, sizeof k.id, "%s", id);
  int rc = w(f, run_act, (call *)&k);
  if (rc == 0) {
    if (state_out) strcpy(state_out, k.job.state);
    hookd_replay_job_free(&k.job);
  }
  return rc;
}

/* A pause or a cancel: how many moved deliveries it took back. */
static int64_t act_back(fx *f, const char *id, hookd_replay_action a, int64_t now) {
  rcall k = {.tenant = "t1", .action = a, .now = now};
  snprintf(k.id, sizeof k.id, "%s", id);
  assert_int_equal(w(f, run_act, (call *)&k), 0);
  int64_t n = k.job.recalled;
  hookd_replay_job_free(&k.job);
  return n;
}

static void get_job(fx *f, const char *id, hookd_replay_job *out, hookd_replay_detail *d) {
  rcall k = {.tenant = "t1"};
  snprintf(k.id, sizeof k.id, "%s", id);
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_getjob, &k), 0);
  *out = k.job;
  *d = k.detail;
}

static hookd_replay_step_res step(fx *f, int64_t now) {
  rcall k = {.now = now};
  assert_int_equal(w(f, run_step, (call *)&k), 0);
  return k.step;
}

static void jobs_follow_their_state_machine(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 2, &seq);
  int64_t now = hookd_now_ms();
  assert_int_equal(create_job(f, "rpl_a", now, 0), 2);
  char st[32];
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_PAUSE, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_RESUME, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_CONFIRM, now, st), 0);
  assert_string_equal(st, "running");
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_CONFIRM, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_PAUSE, now, st), 0);
  assert_string_equal(st, "paused");
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_RESUME, now, st), 0);
  assert_string_equal(st, "running");
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_CANCEL, now, st), 0);
  assert_string_equal(st, "cancelled");
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_RESUME, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "rpl_a", HOOKD_REPLAY_CANCEL, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "nope", HOOKD_REPLAY_CANCEL, now, NULL), HOOKD_STORE_NOTFOUND);

  /* a preview past its time to live reads as expired and cannot be confirmed; it no longer
   * counts as active */
  assert_int_equal(create_job(f, "rpl_old", now - HOOKD_REPLAY_PREVIEW_TTL_MS - 1, 0), 2);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_old", &j, &d);
  assert_string_equal(j.state, "expired");
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  /* refused (the caller answers 409), and written expired: a clock set back later cannot make
   * it young again (the black-box test steps the clock) */
  char st2[32];
  assert_int_equal(act(f, "rpl_old", HOOKD_REPLAY_CONFIRM, now, st2), 0);
  assert_string_equal(st2, "expired");

  /* at most HOOKD_REPLAY_ACTIVE_MAX active jobs per tenant (previews included) */
  for (int i = 0; i < HOOKD_REPLAY_ACTIVE_MAX; i++) {
    char id[32];
    snprintf(id, sizeof id, "rpl_n%d", i);
    create_job(f, id, now, 0);
  }
  create_job(f, "rpl_over", now, HOOKD_STORE_CONFLICT);
  act(f, "rpl_n0", HOOKD_REPLAY_CANCEL, now, NULL);
  create_job(f, "rpl_over", now, 0);
}

/* The snapshot is stored a chunk per writer transaction. Until the last one the job is
 * `building`: it cannot be confirmed or cancelled, and it counts as active; a delivery that left
 * the filter's state between chunks is not stored; the preview is audited once. A job left
 * building ends as failed (its create failed: replay_abandon; its daemon died: no chunk for
 * HOOKD_REPLAY_BUILD_STALE_MS) and is neither counted nor built on. */
static void snapshots_are_stored_in_chunks(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 5, &seq);
  int64_t now = hookd_now_ms();
  rcall k = {.tenant = "t1", .f = {.state = HOOKD_DS_DEAD}, .max = 100, .now = now, .chunk = 2};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &k), 0);
  assert_int_equal(k.snap.n, 5);
  snprintf(k.id, sizeof k.id, "rpl_b");
  assert_int_equal(w(f, run_create, (call *)&k), 0);
  assert_int_equal(k.from, 2);
  assert_int_equal(k.job.total, 2);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_b", &j, &d);
  assert_string_equal(j.state, "building");
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  assert_int_equal(act(f, "rpl_b", HOOKD_REPLAY_CONFIRM, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "rpl_b", HOOKD_REPLAY_CANCEL, now, NULL), HOOKD_STORE_STATE);

  /* the fourth delivery is replayed by hand between two chunks: no longer DEAD, not stored */
  char fourth[HOOKD_ID_MAX];
  delivery_of(f, "evt_a.x_3", fourth);
  call c = {.in = fourth};
  assert_int_equal(w(f, run_replay, &c), 0);
  assert_int_equal(w(f, run_create, (call *)&k), 0);
  assert_int_equal(k.from, 4);
  assert_int_equal(k.job.total, 3);
  assert_int_equal(w(f, run_create, (call *)&k), 0);
  assert_int_equal(k.from, 5);
  assert_int_equal(k.job.total, 4);
  get_job(f, "rpl_b", &j, &d);
  assert_string_equal(j.state, "preview");
  assert_int_equal(j.total, 4);
  assert_int_equal(d.n_endpoints, 1);
  assert_int_equal(d.endpoints[0].n, 4);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  hookd_replay_snapshot_free(&k.snap);
  assert_int_equal(act(f, "rpl_b", HOOKD_REPLAY_CONFIRM, now, NULL), 0);

  /* building jobs count as active: the cap holds while they are stored */
  for (int i = 1; i < HOOKD_REPLAY_ACTIVE_MAX; i++) {
    rcall b = {.tenant = "t1", .f = {.state = HOOKD_DS_DEAD}, .max = 100, .now = now,
               .chunk = 1};
    assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &b), 0);
    snprintf(b.id, sizeof b.id, "rpl_b%d", i);
    assert_int_equal(w(f, run_create, (call *)&b), 0); /* the first chunk only */
    assert_true(b.from < b.snap.n);
    hookd_replay_snapshot_free(&b.snap);
  }
  create_job(f, "rpl_over", now, HOOKD_STORE_CONFLICT);

  /* a create that failed after its first chunk ends its job as failed: no longer counted */
  rcall a = {.tenant = "t1", .id = "rpl_b1", .now = now};
  assert_int_equal(w(f, run_abandon, (call *)&a), 0);
  rcall g = {.tenant = "t1", .id = "rpl_b1"};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_getjob, &g), 0);
  assert_string_equal(g.job.state, "failed");
  assert_true(g.job.finished_ms > 0);
  hookd_replay_job_free(&g.job);
  hookd_replay_detail_free(&g.detail);
  assert_int_equal(act(f, "rpl_b1", HOOKD_REPLAY_CONFIRM, now, NULL), HOOKD_STORE_STATE);
  assert_int_equal(create_job(f, "rpl_over", now, 0), 4);

  /* one whose daemon died mid-build (no chunk for HOOKD_REPLAY_BUILD_STALE_MS) reads as failed,
   * is not counted, and is not built on */
  act(f, "rpl_over", HOOKD_REPLAY_CANCEL, now, NULL);
  rcall o = {.tenant = "t1", .f = {.state = HOOKD_DS_DEAD}, .max = 100,
             .now = now - HOOKD_REPLAY_BUILD_STALE_MS - 1, .chunk = 1};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &o), 0);
  snprintf(o.id, sizeof o.id, "rpl_old");
  assert_int_equal(w(f, run_create, (call *)&o), 0);
  rcall og = {.tenant = "t1", .id = "rpl_old"};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_getjob, &og), 0);
  assert_string_equal(og.job.state, "failed");
  hookd_replay_job_free(&og.job);
  hookd_replay_detail_free(&og.detail);
  o.now = now;
  assert_int_equal(w(f, run_create, (call *)&o), HOOKD_STORE_STATE);
  hookd_replay_snapshot_free(&o.snap);
  /* seven active (rpl_b running, six building): the stale one would have been the eighth */
  assert_int_equal(create_job(f, "rpl_after", now, 0), 4);
}

static void steps_keep_the_rate_and_never_resend(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 8, &seq);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job(f, "rpl_r", t0, 0), 8); /* rate 2/s: one item per 500 ms */

  /* nothing goes before the confirmation */
  hookd_replay_step_res r = step(f, t0 + 5000);
  assert_int_equal(r.replayed + r.skipped, 0);
  assert_int_equal(r.next_ms, 0); /* no job running: the replayer sleeps until woken */
  hookd_replay_step_res_free(&r);

  assert_int_equal(act(f, "rpl_r", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  r = step(f, t0);
  assert_int_equal(r.replayed, 1);
  assert_int_equal(r.n_hints, 1);
  assert_string_equal(r.hints[0].endpoint_id, "ep1");
  assert_int_equal(r.next_ms, t0 + 500);
  hookd_replay_step_res_free(&r);
  r = step(f, t0 + 499);
  assert_int_equal(r.replayed + r.skipped, 0);
  hookd_replay_step_res_free(&r);
  r = step(f, t0 + 500);
  assert_int_equal(r.replayed, 1);
  hookd_replay_step_res_free(&r);

  /* the third item's delivery is replayed by hand meanwhile and delivered: no longer DEAD, so
   * skipped — a delivered delivery could be replayed, and would be sent twice — and a skip
   * takes no share of the rate */
  char third[HOOKD_ID_MAX];
  delivery_of(f, "evt_a.x_2", third);
  call c = {.in = third};
  assert_int_equal(w(f, run_replay, &c), 0);
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", hookd_now_ms() + 1000, 60000, &cl);
  assert_int_equal(got, 3); /* the job's two and the hand-replayed one */
  for (size_t i = 0; i < got; i++) assert_int_equal(record(f, &cl[i], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(cl, got);
  r = step(f, t0 + 1000);
  assert_int_equal(r.skipped, 1);
  assert_int_equal(r.replayed, 1);
  hookd_replay_step_res_free(&r);

  /* paused: the item moved at the last step, not claimed since, is taken back (docs/replay.md
   * "Taking back") and queued again; then nothing; resumed: the bucket starts at the resume,
   * full with one second at most */
  assert_int_equal(act_back(f, "rpl_r", HOOKD_REPLAY_PAUSE, t0 + 1000), 1);
  r = step(f, t0 + 5000);
  assert_int_equal(r.replayed + r.skipped, 0);
  hookd_replay_step_res_free(&r);
  assert_int_equal(act(f, "rpl_r", HOOKD_REPLAY_RESUME, t0 + 5000, NULL), 0);
  r = step(f, t0 + 10000); /* 5 s later: one second's worth (3 items), not 10 */
  assert_int_equal(r.replayed, 3);
  assert_int_equal(r.n_completed, 0);
  hookd_replay_step_res_free(&r);
  r = step(f, t0 + 10500);
  assert_int_equal(r.replayed, 1);
  assert_int_equal(r.n_completed, 0);
  hookd_replay_step_res_free(&r);
  r = step(f, t0 + 11000); /* the item taken back went again: one more than before the pause */
  assert_int_equal(r.replayed, 1);
  assert_int_equal(r.n_completed, 1);
  assert_string_equal(r.completed[0], "rpl_r");
  assert_int_equal(r.next_ms, 0);
  hookd_replay_step_res_free(&r);

  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_r", &j, &d);
  assert_string_equal(j.state, "completed");
  assert_int_equal(j.replayed, 7);
  assert_int_equal(j.skipped, 1);
  assert_int_equal(d.n_skipped, 1);
  assert_string_equal(d.skipped[0].key, "state_changed");
  assert_int_equal(d.n_states, 2); /* where the deliveries the job replayed are now */
  assert_string_equal(d.states[0].key, "delivered");
  assert_int_equal(d.states[0].n, 2);
  assert_string_equal(d.states[1].key, "pending");
  assert_int_equal(d.states[1].n, 5);
  assert_int_equal(d.n_endpoints, 1);
  assert_int_equal(d.endpoints[0].n, 8);
  assert_int_equal(d.endpoints[0].remaining, 0);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);

  /* the hand-replayed delivery stays delivered: the job did not send it again */
  hookd_delivery dl;
  call g = {.in = third, .out = &dl};
  assert_int_equal(w(f, run_get, &g), 0);
  assert_int_equal(dl.state, HOOKD_DS_DELIVERED);
  hookd_delivery_free(&dl);

  /* completion is audited, by "system" */
  hookd_audit *a = NULL;
  size_t na = 0;
  call l = {.out = &a};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_audit_list, &l), 0);
  na = l.n;
  assert_true(na >= 1);
  assert_string_equal(a[0].action, "replay.complete");
  assert_string_equal(a[0].actor, "system");
  assert_string_equal(a[0].target, "rpl_r");
  hookd_audits_free(a, na);
}

static int run_sql(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be;
  return sq_exec(c, ((call *)a)->in);
}

static void sql(fx *f, const char *text) {
  call c = {.in = text};
  assert_int_equal(w(f, run_sql, &c), 0);
}

/* Delivered deliveries of t1/ep1, one per event. */
static void delivered_events(fx *f, int n, int *seq) {
  for (int i = 0; i < n; i++) {
    char id[64];
    snprintf(id, sizeof id, "evt_d_%d", (*seq)++);
    hookd_publish_res res;
    assert_int_equal(publish(f, "t1", id, "a.x", NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", hookd_now_ms() + 1, 60000, &cl);
  assert_int_equal(got, (size_t)n);
  for (size_t i = 0; i < got; i++) assert_int_equal(record(f, &cl[i], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(cl, got);
}

/* Items name their delivery by seq and id, with its attempt count: a seq that retention freed
 * and another delivery took (another tenant's, say) is "gone"; a delivery replayed by hand and
 * delivered again since the snapshot is not sent a third time by a job over delivered ones. */
static void items_are_their_own_deliveries(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  make_tenant_endpoint(f, "t2", "ep2", NULL);
  delivered_events(f, 3, &seq);
  int64_t t0 = hookd_now_ms();
  rcall k = {.tenant = "t1", .f = {.state = HOOKD_DS_DELIVERED}, .max = 100, .now = t0};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &k), 0);
  snprintf(k.id, sizeof k.id, "rpl_d");
  assert_int_equal(w(f, run_create, (call *)&k), 0);
  assert_int_equal(k.job.total, 3);
  hookd_replay_snapshot_free(&k.snap);

  /* item 1: replayed by hand and delivered again */
  char first[HOOKD_ID_MAX];
  delivery_of(f, "evt_d_0", first);
  call c = {.in = first};
  assert_int_equal(w(f, run_replay, &c), 0);
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", hookd_now_ms() + 1000, 60000, &cl); /* due at the replay */
  assert_int_equal(got, 1);
  assert_int_equal(record(f, &cl[0], HOOKD_DS_DELIVERED, 200), 0);
  free_claimed(cl, got);
  /* item 2: its delivery deleted (as retention would) and its seq taken by t2's delivery */
  char second[HOOKD_ID_MAX];
  delivery_of(f, "evt_d_1", second);
  char q[512];
  snprintf(q, sizeof q,
           "UPDATE deliveries SET id = 'dlv_other', tenant_id = 't2', endpoint_id = 'ep2'"
           " WHERE id = '%s'",
           second);
  sql(f, q);

  assert_int_equal(act(f, "rpl_d", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  hookd_replay_step_res r = step(f, t0 + 5000);
  assert_int_equal(r.replayed, 1); /* the third only */
  assert_int_equal(r.skipped, 2);
  assert_int_equal(r.n_hints, 1);
  assert_string_equal(r.hints[0].endpoint_id, "ep1");
  hookd_replay_step_res_free(&r);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_d", &j, &d);
  assert_int_equal(d.n_skipped, 2);
  assert_string_equal(d.skipped[0].key, "gone");
  assert_string_equal(d.skipped[1].key, "state_changed");
  /* the breakdown never shows the other tenant's endpoint */
  for (size_t i = 0; i < d.n_endpoints; i++) assert_string_equal(d.endpoints[i].key, "ep1");
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  hookd_delivery dl;
  call g = {.in = "dlv_other", .out = &dl};
  assert_int_equal(w(f, run_get, &g), 0);
  assert_int_equal(dl.state, HOOKD_DS_DELIVERED); /* untouched */
  hookd_delivery_free(&dl);
}

/* A delivery claimed since the snapshot is not the job's, even when that cycle ended DEAD again
 * without an attempt counted (the lease lapsed and the delivery was held, then resolved dead;
 * or it expired): its attempt count is the snapshot's, its lease token is not. */
static int run_outcome_uncounted(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  const hookd_claimed *cl = ((call *)a)->in;
  hookd_outcome o = {0};
  o.delivery_seq = cl->d.seq;
  o.lease_token = cl->d.lease_token;
  o.from = cl->d.state;
  o.to = HOOKD_DS_DEAD;
  o.attempt_number = 0; /* no attempt made, none counted */
  o.now_ms = o.next_attempt_ms = hookd_now_ms();
  o.last_error = "expired";
  o.dead_reason = "expired";
  return be->record_outcome(c, &o);
}

static void a_claim_since_the_snapshot_is_not_the_jobs(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 2, &seq);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job(f, "rpl_c", t0, 0), 2);

  char first[HOOKD_ID_MAX];
  delivery_of(f, "evt_a.x_0", first);
  hookd_delivery before;
  call g = {.in = first, .out = &before};
  assert_int_equal(w(f, run_get, &g), 0);
  call c = {.in = first};
  assert_int_equal(w(f, run_replay, &c), 0);
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", hookd_now_ms() + 1000, 60000, &cl);
  assert_int_equal(got, 1);
  call o = {.in = &cl[0]};
  assert_int_equal(w(f, run_outcome_uncounted, &o), 0);
  free_claimed(cl, got);
  hookd_delivery after;
  g.out = &after;
  assert_int_equal(w(f, run_get, &g), 0);
  assert_int_equal(after.state, HOOKD_DS_DEAD); /* as in the snapshot, */
  assert_int_equal(after.attempt_count, before.attempt_count); /* with the same count */
  hookd_delivery_free(&before);
  hookd_delivery_free(&after);

  assert_int_equal(act(f, "rpl_c", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  hookd_replay_step_res r = step(f, t0 + 5000);
  assert_int_equal(r.replayed, 1); /* the second only */
  assert_int_equal(r.skipped, 1);
  hookd_replay_step_res_free(&r);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_c", &j, &d);
  assert_int_equal(d.n_skipped, 1);
  assert_string_equal(d.skipped[0].key, "state_changed");
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* Pausing and resuming does not skip the rate's wait. */
static void resume_keeps_the_wait(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 3, &seq);
  int64_t t0 = hookd_now_ms();
  create_job(f, "rpl_p", t0, 0); /* 2 a second */
  assert_int_equal(act(f, "rpl_p", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  hookd_replay_step_res r = step(f, t0);
  assert_int_equal(r.replayed, 1);
  hookd_replay_step_res_free(&r);
  assert_int_equal(act(f, "rpl_p", HOOKD_REPLAY_PAUSE, t0 + 100, NULL), 0);
  assert_int_equal(act(f, "rpl_p", HOOKD_REPLAY_RESUME, t0 + 200, NULL), 0);
  r = step(f, t0 + 300);
  assert_int_equal(r.replayed, 0);
  assert_int_equal(r.next_ms, t0 + 500);
  hookd_replay_step_res_free(&r);
  r = step(f, t0 + 500);
  assert_int_equal(r.replayed, 1);
  hookd_replay_step_res_free(&r);
}

/* A rate above 1,000 a second (an item's share under a millisecond): the bucket's position is
 * kept in whole ms, rounded up, so a step never gains the fraction it could not store — rounded
 * down, each step at one instant let one item more through, however many steps there were. */
static void fast_rates_are_not_exceeded(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 200, &seq);
  int64_t t0 = hookd_now_ms();
  create_job_at(f, "rpl_f", t0, 3000, 0); /* an item each 1/3 ms */
  assert_int_equal(act(f, "rpl_f", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  int64_t sent = 0;
  for (int i = 0; i < 10; i++) { /* ten steps at one instant (several nodes, a wake-up) */
    hookd_replay_step_res r = step(f, t0);
    sent += r.replayed;
    hookd_replay_step_res_free(&r);
  }
  assert_int_equal(sent, 1);
  hookd_replay_step_res r = step(f, t0 + 50);
  sent += r.replayed;
  hookd_replay_step_res_free(&r);
  /* 50 ms at 3,000 a second: 150 items after the first, a few fewer for the rounding */
  assert_in_range(sent, 145, 151);
}

static int run_purge(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  bool more = false;
  int rc = be->replay_purge(c, k->i64, k->i64, 2, &k->ival, &more);
  k->n = more;
  return rc;
}

/* An ended job's items go a week later, in steps; the job row stays, marked. */
static void ended_jobs_items_are_purged(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 3, &seq);
  int64_t t0 = hookd_now_ms();
  create_job(f, "rpl_e", t0, 0);
  create_job(f, "rpl_live", t0, 0);
  assert_int_equal(act(f, "rpl_e", HOOKD_REPLAY_CANCEL, t0, NULL), 0);
  call k = {.i64 = t0}; /* nothing ended before t0 */
  assert_int_equal(w(f, run_purge, &k), 0);
  assert_int_equal(k.ival, 0);
  k.i64 = t0 + 1;
  int total = 0;
  do {
    assert_int_equal(w(f, run_purge, &k), 0);
    total += k.ival;
  } while (k.n);
  assert_int_equal(total, 3);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_e", &j, &d);
  assert_true(j.items_purged_ms > 0);
  assert_int_equal(d.n_endpoints, 0);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  get_job(f, "rpl_live", &j, &d); /* a job still in preview keeps its items */
  assert_int_equal(j.items_purged_ms, 0);
  assert_int_equal(d.endpoints[0].n, 3);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* A "missing" job's step reads an event's body only for an endpoint with a payload filter, and
 * at most HOOKD_REPLAY_STEP_BYTES of them a step: a job over large events whose endpoint's
 * filter was changed after the preview to refuse them all (skips take no share of the rate)
 * goes in several steps, not 500 parses in one writer transaction. */
/* Tenant t1 with endpoint ep1, and n events of `pad` bytes of payload each (ids prefix_i). */
static void publish_big(fx *f, const char *prefix, int n, int pad) {
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  char *env = malloc((size_t)pad + 128);
  assert_non_null(env);
  int len = snprintf(env, 128, "{\"id\":\"x\",\"type\":\"a.x\",\"timestamp\":\"t\","
                               "\"data\":{\"pad\":\"");
  memset(env + len, 'x', (size_t)pad);
  len += pad;
  len += snprintf(env + len, 16, "\"}}");
  unsigned char hash[32] = {0};
  for (int i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "%s_%d", prefix, i);
    hookd_publish_req req = {.tenant_id = "t1", .event_id = id, .type = "a.x", .body = env,
                             .body_len = (size_t)len, .request_hash = hash,
                             .occurred_ms = hookd_now_ms(), .now_ms = hookd_now_ms()};
    hookd_publish_res res;
    call c = {.in = &req, .out = &res};
    assert_int_equal(w(f, run_publish, &c), 0);
    hookd_publish_res_free(&res);
  }
  free(env);
}

static void missing_steps_read_bounded_bytes(void **state) {
  fx *f = *state;
  enum { N = 8, PAD = 300 * 1024 };
  publish_big(f, "evt_big", N, PAD);
  make_tenant_endpoint(f, "t1", "ep2", NULL); /* made after them: it lacks them all */
  int64_t t0 = hookd_now_ms();
  rcall k = {.tenant = "t1", .f = {.endpoint_id = "ep2", .missing = true}, .max = 1000,
             .now = t0, .rate = 1000};
  assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &k), 0);
  assert_int_equal(k.snap.n, N);
  snprintf(k.id, sizeof k.id, "rpl_missing");
  int rc;
  do rc = w(f, run_create, (call *)&k);
  while (rc == 0 && k.from < k.snap.n);
  assert_int_equal(rc, 0);
  hookd_replay_snapshot_free(&k.snap);
  assert_int_equal(act(f, "rpl_missing", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  sql(f, "UPDATE endpoints SET payload_filter = '{\"pad\":\"no\"}' WHERE id = 'ep2'");

  int steps = 0, skipped = 0;
  while (skipped < N) {
    hookd_replay_step_res r = step(f, t0 + 100 * ++steps);
    assert_int_equal(r.replayed, 0);
    /* the item that passes the budget is the step's last */
    assert_true(r.skipped >= 1 && r.skipped <= HOOKD_REPLAY_STEP_BYTES / PAD + 1);
    skipped += r.skipped;
    hookd_replay_step_res_free(&r);
    assert_true(steps <= N);
  }
  assert_true(steps >= 2);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_missing", &j, &d);
  assert_string_equal(j.state, "completed");
  assert_int_equal(j.skipped, N);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* Two missing jobs over the same large events, every item skipped by its endpoint's filter:
 * the first spends a step's bytes, and the second goes first at the next step — it does not
 * wait for the first to finish. */
static void missing_steps_take_turns(void **state) {
  fx *f = *state;
  enum { N = 8, PAD = 300 * 1024 };
  publish_big(f, "evt_turn", N, PAD);
  int64_t t0 = hookd_now_ms();
  const char *const eps[] = {"ep2", "ep3"}, *const ids[] = {"rpl_first", "rpl_second"};
  for (int i = 0; i < 2; i++) {
    make_tenant_endpoint(f, "t1", eps[i], NULL);
    rcall k = {.tenant = "t1", .f = {.endpoint_id = eps[i], .missing = true}, .max = 1000,
               .now = t0, .rate = 1000};
    assert_int_equal(hookd_storeq_run_sync(f->s->reader, run_select, &k), 0);
    assert_int_equal(k.snap.n, N);
    snprintf(k.id, sizeof k.id, "%s", ids[i]);
    int rc;
    do rc = w(f, run_create, (call *)&k);
    while (rc == 0 && k.from < k.snap.n);
    assert_int_equal(rc, 0);
    hookd_replay_snapshot_free(&k.snap);
    assert_int_equal(act(f, ids[i], HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  }
  sql(f, "UPDATE endpoints SET payload_filter = '{\"pad\":\"no\"}' WHERE id IN ('ep2','ep3')");
  for (int s = 1; s <= 2; s++) {
    hookd_replay_step_res r = step(f, t0 + 100 * s);
    hookd_replay_step_res_free(&r);
  }
  /* two steps: each job has had one */
  for (int i = 0; i < 2; i++) {
    hookd_replay_job j;
    hookd_replay_detail d;
    get_job(f, ids[i], &j, &d);
    assert_true(j.skipped >= 1);
    assert_true(j.skipped < N);
    hookd_replay_job_free(&j);
    hookd_replay_detail_free(&d);
  }
}

/* A step takes HOOKD_REPLAY_STEP_ITEMS across its jobs, not 500 for each of up to 16 (a review:
 * 16 jobs held the writer, which every tenant's publishes share, ~100 ms a step, back to back);
 * a job that took nothing goes first at the next step. */
static void steps_take_bounded_items_across_jobs(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "a.x", 1000, &seq);
  int64_t t0 = hookd_now_ms();
  const char *const ids[] = {"rpl_a", "rpl_b", "rpl_c"};
  for (int i = 0; i < 3; i++) { /* three jobs over the same 1,000 (the later ones' skipped) */
    assert_int_equal(create_job_at(f, ids[i], t0, 10000, 0), 1000);
    assert_int_equal(act(f, ids[i], HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  }
  hookd_replay_step_res r = step(f, t0 + 1000); /* a second's worth due: 500 items each */
  assert_int_equal(r.replayed + r.skipped, HOOKD_REPLAY_STEP_ITEMS);
  hookd_replay_step_res_free(&r);
  r = step(f, t0 + 1000);
  assert_int_equal(r.replayed + r.skipped, HOOKD_REPLAY_STEP_ITEMS);
  hookd_replay_step_res_free(&r);
  /* the first step: a and b 500 each; the second: c first (it took nothing), then a — c
   * last, it would have had nothing again */
  const int64_t taken[] = {1000, 500, 500};
  for (int i = 0; i < 3; i++) {
    hookd_replay_job j;
    hookd_replay_detail d;
    get_job(f, ids[i], &j, &d);
    assert_int_equal(j.replayed + j.skipped, taken[i]);
    hookd_replay_job_free(&j);
    hookd_replay_detail_free(&d);
  }
}

/* A cancel takes back what a `retrying` job brought forward and was not sent: its next attempt
 * back at its time (docs/replay.md "Taking back"); one claimed since is left to its outcome. */
static void a_cancel_puts_a_retry_back_at_its_time(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  for (int i = 0; i < 2; i++) {
    char id[32];
    snprintf(id, sizeof id, "evt_r_%d", i);
    hookd_publish_res res;
    assert_int_equal(publish(f, "t1", id, "r.x", NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", hookd_now_ms() + 1, 60000, &cl);
  assert_int_equal(got, 2);
  record_ago = -3600000; /* their next attempts an hour from now */
  for (size_t i = 0; i < got; i++) assert_int_equal(record(f, &cl[i], HOOKD_DS_RETRYING, 500), 0);
  record_ago = 0;
  free_claimed(cl, got);
  char ids[2][HOOKD_ID_MAX];
  int64_t at[2];
  for (int i = 0; i < 2; i++) {
    char ev[32];
    snprintf(ev, sizeof ev, "evt_r_%d", i);
    delivery_of(f, ev, ids[i]);
    hookd_delivery dl;
    call g = {.in = ids[i], .out = &dl};
    assert_int_equal(w(f, run_get, &g), 0);
    at[i] = dl.next_attempt_ms;
    hookd_delivery_free(&dl);
  }

  int64_t t0 = hookd_now_ms();
  assert_true(at[0] > t0 + 3000000 && at[1] > t0 + 3000000);
  assert_int_equal(create_job_for(f, "rpl_rt", HOOKD_DS_RETRYING, t0, 100, 0), 2);
  assert_int_equal(act(f, "rpl_rt", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  for (int i = 0; i < 2; i++) { /* both brought forward, one per 10 ms */
    hookd_replay_step_res r = step(f, t0 + 10 * i);
    assert_int_equal(r.replayed, 1);
    hookd_replay_step_res_free(&r);
  }
  /* one is claimed since: its attempt is being made */
  hookd_claim_req req = {.endpoint_id = "ep1", .owner = "node", .limit = 1, .replay_limit = 1,
                         .now_ms = t0 + 11, .lease_ms = 60000};
  call c = {.in = &req, .out = &cl};
  assert_int_equal(w(f, run_claim, &c), 0);
  assert_int_equal(c.n, 1);
  int claimed = !strcmp(cl[0].d.id, ids[0]) ? 0 : 1;
  free_claimed(cl, c.n);

  char st[32];
  assert_int_equal(act_back(f, "rpl_rt", HOOKD_REPLAY_CANCEL, t0 + 12), 1);
  assert_int_equal(act(f, "rpl_rt", HOOKD_REPLAY_CANCEL, t0 + 13, st), HOOKD_STORE_STATE);
  for (int i = 0; i < 2; i++) {
    hookd_delivery dl;
    call g = {.in = ids[i], .out = &dl};
    assert_int_equal(w(f, run_get, &g), 0);
    assert_int_equal(dl.state, HOOKD_DS_RETRYING);
    if (i == claimed) assert_true(dl.next_attempt_ms <= t0 + 11); /* left as the job moved it */
    else assert_int_equal(dl.next_attempt_ms, at[i]);            /* back at its time */
    hookd_delivery_free(&dl);
  }
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_rt", &j, &d);
  assert_string_equal(j.state, "cancelled");
  assert_int_equal(j.replayed, 1);
  assert_int_equal(j.skipped, 1);
  assert_int_equal(d.n_skipped, 1);
  assert_string_equal(d.skipped[0].key, "recalled");
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* A job stops at an item whose endpoint has had a delivery due and unclaimed for
 * HOOKD_REPLAY_HOLD_AFTER_MS, says so, and moves on once the endpoint took them
 * (docs/replay.md "Held behind an endpoint"). */
/* Job id runs, held by endpoint ep since `since`, having replayed `replayed` (none skipped). */
static void assert_held_by(fx *f, const char *id, const char *ep, int64_t since,
                           int64_t replayed) {
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, id, &j, &d);
  assert_string_equal(j.state, "running");
  assert_non_null(j.held_endpoint);
  assert_string_equal(j.held_endpoint, ep);
  assert_int_equal(j.held_since_ms, since);
  assert_int_equal(j.replayed, replayed);
  assert_int_equal(j.skipped, 0);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

static void a_job_holds_behind_its_endpoint(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "h.x", 6, &seq);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_h", t0, 10, 0), 6);
  assert_int_equal(act(f, "rpl_h", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  hookd_replay_step_res r = step(f, t0 + 100); /* the items due at t0 and t0 + 100 */
  assert_int_equal(r.replayed, 2);
  hookd_replay_step_res_free(&r);
  /* nothing claimed them: HOOKD_REPLAY_HOLD_AFTER_MS later, the endpoint is behind */
  int64_t at = t0 + 100 + HOOKD_REPLAY_HOLD_AFTER_MS;
  r = step(f, at);
  assert_int_equal(r.replayed, 0);
  assert_int_equal(r.skipped, 0);
  assert_int_equal(r.next_ms, at + HOOKD_REPLAY_HOLD_POLL_MS); /* looked at again then */
  hookd_replay_step_res_free(&r);
  assert_held_by(f, "rpl_h", "ep1", at, 2);
  hookd_replay_job j;
  hookd_replay_detail d;
  /* still behind at the next look: held since the first */
  r = step(f, at + HOOKD_REPLAY_HOLD_POLL_MS);
  assert_int_equal(r.replayed, 0);
  hookd_replay_step_res_free(&r);
  get_job(f, "rpl_h", &j, &d);
  assert_int_equal(j.held_since_ms, at);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  /* the dispatcher claims them: the job moves on, no longer held */
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", at + 300, 60000, &cl);
  assert_int_equal(got, 2);
  free_claimed(cl, got);
  r = step(f, at + 600);
  assert_true(r.replayed >= 1);
  hookd_replay_step_res_free(&r);
  get_job(f, "rpl_h", &j, &d);
  assert_null(j.held_endpoint);
  assert_int_equal(j.held_since_ms, 0);
  assert_true(j.replayed >= 3);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* Only the items of an endpoint that is behind wait: the job's other endpoints' items go on,
 * and the held ones move, in order, once it catches up (docs/replay.md "Held behind…"). */
static void only_the_held_endpoints_items_wait(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", "a.*");
  make_tenant_endpoint(f, "t1", "ep2", "b.*");
  for (int i = 0; i < 3; i++) { /* a, b, a, b, a, b: the queue alternates */
    dead_events(f, "t1", "ep1", "a.x", 1, &seq);
    dead_events(f, "t1", "ep2", "b.x", 1, &seq);
  }
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_p", t0, 10, 0), 6);
  assert_int_equal(act(f, "rpl_p", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  hookd_replay_step_res r = step(f, t0 + 100); /* the items due at t0 and t0 + 100: a, b */
  assert_int_equal(r.replayed, 2);
  hookd_replay_step_res_free(&r);
  /* ep2 keeps up (its delivery claimed), ep1 does not: 2 s later it is behind */
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep2", "node", t0 + 200, 60000, &cl);
  assert_int_equal(got, 1);
  free_claimed(cl, got);
  int64_t at = t0 + 100 + HOOKD_REPLAY_HOLD_AFTER_MS;
  r = step(f, at);
  assert_int_equal(r.replayed, 2); /* ep2's two, past ep1's */
  assert_int_equal(r.n_hints, 1);
  assert_string_equal(r.hints[0].endpoint_id, "ep2");
  hookd_replay_step_res_free(&r);
  assert_held_by(f, "rpl_p", "ep1", at, 4);
  hookd_replay_job j;
  hookd_replay_detail d;
  /* nothing to move but ep1's: looked at again a poll later, not at every step */
  r = step(f, at + 50);
  assert_int_equal(r.replayed, 0);
  hookd_replay_step_res_free(&r);
  /* ep1 catches up: its two go, in order, and the job completes */
  got = claim(f, "ep1", "node", at + 300, 60000, &cl);
  assert_int_equal(got, 1);
  free_claimed(cl, got);
  r = step(f, at + 600);
  assert_int_equal(r.replayed, 2);
  assert_int_equal(r.n_completed, 1);
  hookd_replay_step_res_free(&r);
  get_job(f, "rpl_p", &j, &d);
  assert_string_equal(j.state, "completed");
  assert_null(j.held_endpoint);
  assert_int_equal(j.replayed, 6);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* A turn the rate ends before it reaches the items passed earlier still names the endpoint the
 * first of them waits for — not nothing, nor the last turn's, caught up since. */
static void held_names_the_first_waiting_item(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", "a.*");
  make_tenant_endpoint(f, "t1", "ep2", "b.*");
  make_tenant_endpoint(f, "t1", "ep3", "c.*");
  dead_events(f, "t1", "ep1", "a.x", 1, &seq); /* the queue: a1, c1, b1..b6 */
  dead_events(f, "t1", "ep3", "c.x", 1, &seq);
  dead_events(f, "t1", "ep2", "b.x", 6, &seq);
  /* a live delivery due now at ep1 and at ep3, not claimed: 2 s on, both are behind */
  const char *live[][2] = {{"evt_live_a", "a.live"}, {"evt_live_c", "c.live"}};
  for (int i = 0; i < 2; i++) {
    hookd_publish_res res;
    assert_int_equal(publish(f, "t1", live[i][0], live[i][1], NULL, 1, &res), 0);
    hookd_publish_res_free(&res);
  }
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_n", t0, 2, 0), 8);
  assert_int_equal(act(f, "rpl_n", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  /* a1 and c1 passed, b1..b3 moved (the bucket's second at 2/s), held by a1's endpoint */
  int64_t t1 = t0 + HOOKD_REPLAY_HOLD_AFTER_MS + 100;
  hookd_replay_step_res r = step(f, t1);
  assert_int_equal(r.replayed, 3);
  hookd_replay_step_res_free(&r);
  assert_held_by(f, "rpl_n", "ep1", t1, 3);
  /* ep1 catches up: a1 moves, and the rate ends the turn before c1 */
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", t1 + 1, 60000, &cl);
  assert_int_equal(got, 1);
  free_claimed(cl, got);
  r = step(f, t1 + 500);
  assert_int_equal(r.replayed, 1);
  hookd_replay_step_res_free(&r);
  assert_held_by(f, "rpl_n", "ep3", t1 + 500, 4); /* c1 waits for ep3 */
}

static void publish_keyed(fx *f, const char *id, const char *key, int64_t now) {
  unsigned char hash[32] = {0};
  hookd_publish_req req = {.tenant_id = "t1", .event_id = id, .type = "a.x", .body = "{}",
                           .body_len = 2, .request_hash = hash, .occurred_ms = now,
                           .now_ms = now, .ordering_key = key};
  hookd_publish_res res;
  call c = {.in = &req, .out = &res};
  assert_int_equal(w(f, run_publish, &c), 0);
  hookd_publish_res_free(&res);
}

/* Claims every claimable delivery of ordered endpoint ep at now and records it: delivered, but
 * the lane head `head` (an event id), which fails and retries in an hour. */
static void drain_ordered(fx *f, const char *ep, int64_t now, const char *head) {
  for (;;) {
    hookd_claim_req req = {.endpoint_id = ep, .owner = "n", .limit = 50, .replay_limit = 50,
                           .ordered = true, .now_ms = now, .lease_ms = 60000};
    hookd_claimed *cl = NULL;
    call c = {.in = &req, .out = &cl};
    assert_int_equal(w(f, run_claim, &c), 0);
    if (c.n == 0) {
      free(cl);
      return;
    }
    for (size_t i = 0; i < c.n; i++) {
      bool failing = !strcmp(cl[i].d.event_id, head);
      hookd_outcome o = {.lane = cl[i].d.ordering_key != NULL, .delivery_seq = cl[i].d.seq,
                         .lease_token = cl[i].d.lease_token, .from = cl[i].d.state,
                         .to = failing ? HOOKD_DS_RETRYING : HOOKD_DS_DELIVERED,
                         .attempt_number = cl[i].d.attempt_count + 1,
                         .next_attempt_ms = now + 3600000, .now_ms = now};
      o.attempt.started_ms = o.attempt.finished_ms = now;
      o.attempt.outcome = (char *)(failing ? "http_error" : "success");
      o.attempt.http_status = failing ? 500 : 200;
      o.attempt.trigger = (char *)"replay";
      call oc = {.in = &o};
      assert_int_equal(w(f, run_outcome, &oc), 0);
    }
    free_claimed(cl, c.n);
  }
}

/* The later deliveries of an ordered endpoint's lane wait on its head, not on the endpoint: they
 * hold no job. A lane whose replayed head retries in an hour, behind which two of the lane's
 * deliveries wait, and 40 deliveries without a key that the endpoint takes at once: the job
 * moves all 43 at its rate (before, counted as waiting, the two held it, every endpoint of it,
 * from +2.1 s for the hour: a review). */
static void an_ordered_lane_holds_no_job(void **state) {
  fx *f = *state;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  sql(f, "UPDATE endpoints SET ordered = 1 WHERE id = 'ep1'");
  int64_t t = hookd_now_ms() - 100000;
  publish_keyed(f, "L1", "acct-1", t);
  publish_keyed(f, "L2", "acct-1", t);
  publish_keyed(f, "L3", "acct-1", t);
  for (int i = 0; i < 40; i++) {
    char id[16];
    snprintf(id, sizeof id, "N%d", i);
    publish_keyed(f, id, NULL, t);
  }
  sql(f, "UPDATE deliveries SET state = 'dead', dead_reason = 'max_attempts', dead_at = 1,"
         " lane_wait = 0, next_attempt_at = NULL");
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_l", t0, 10, 0), 43);
  assert_int_equal(act(f, "rpl_l", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  int moved = 0;
  for (int64_t now = t0 + 50; now <= t0 + 10000; now += 50) {
    drain_ordered(f, "ep1", now, "L1");
    hookd_replay_step_res r = step(f, now);
    moved += r.replayed;
    hookd_replay_step_res_free(&r);
  }
  assert_int_equal(moved, 43);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_l", &j, &d);
  assert_string_equal(j.state, "completed");
  assert_null(j.held_endpoint);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* A step's probes read at most HOOKD_REPLAY_STEP_PROBE_ROWS rows across its jobs: past them, the
 * job stops at its item, not held, and goes on at the next step (a review: 500 probes of
 * endpoints with 900 waiting each read 385 ms of the writer in one step). */
static void a_step_probes_a_bounded_backlog(void **state) {
  fx *f = *state;
  int seq = 0;
  char ep[8][8];
  for (int e = 0; e < 8; e++) { /* a type each: an event goes to one endpoint */
    char type[16], filter[16];
    snprintf(ep[e], sizeof ep[e], "ep%d", e);
    snprintf(type, sizeof type, "p%d.x", e);
    snprintf(filter, sizeof filter, "p%d.*", e);
    make_tenant_endpoint(f, "t1", ep[e], filter);
    dead_events(f, "t1", ep[e], type, 1, &seq);
  }
  /* each endpoint has a live backlog of 900 deliveries due now (not behind for long: the job
   * is not held), never claimed */
  int64_t t0 = hookd_now_ms();
  char q[1024];
  snprintf(q, sizeof q,
           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 900)"
           " INSERT INTO events(seq, id, tenant_id, type, body, request_hash, occurred_at,"
           " created_at) SELECT 100000 + i, 'evt_w' || i, 't1', 'w.x', '{}', randomblob(32), 1,"
           " 1 FROM n;"
           "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state,"
           " cycle_started_at, next_attempt_at, policy_id, created_at, updated_at)"
           " SELECT 'dlv_w' || p.id || '_' || v.seq, v.seq, p.id, 't1', 'pending', 1, %lld,"
           " p.policy_id, 1, 1 FROM events v, endpoints p WHERE v.seq > 100000",
           (long long)t0);
  sql(f, q);
  assert_int_equal(create_job_at(f, "rpl_p", t0, 10000, 0), 8);
  assert_int_equal(act(f, "rpl_p", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  /* 900 + 1 rows a probe: 4,000 read after the fifth, so a step moves the items of 5 endpoints
   * (each under HOOKD_REPLAY_HOLD_COUNT: moved), the next step the 3 others */
  hookd_replay_step_res r = step(f, t0 + 50);
  assert_int_equal(r.replayed, 5);
  hookd_replay_step_res_free(&r);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_p", &j, &d);
  assert_null(j.held_endpoint); /* not held: the step's probes were spent */
  assert_string_equal(j.state, "running");
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  r = step(f, t0 + 100);
  assert_int_equal(r.replayed, 3);
  hookd_replay_step_res_free(&r);
}

/* However fast the job, no more than HOOKD_REPLAY_HOLD_COUNT of its moves wait at one endpoint
 * (each step counts its own). */
static void a_job_holds_at_the_count_waiting(void **state) {
  fx *f = *state;
  int seq = 0;
  int total = HOOKD_REPLAY_HOLD_COUNT + 10;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "k.x", total, &seq);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_k", t0, 10000, 0), total);
  assert_int_equal(act(f, "rpl_k", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  int moved = 0;
  for (int i = 1; i <= 4; i++) { /* 500 a step at most: the third and fourth are held */
    hookd_replay_step_res r = step(f, t0 + 50 * i);
    moved += r.replayed;
    hookd_replay_step_res_free(&r);
  }
  assert_int_equal(moved, HOOKD_REPLAY_HOLD_COUNT);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_k", &j, &d);
  assert_non_null(j.held_endpoint);
  assert_string_equal(j.held_endpoint, "ep1");
  assert_int_equal(j.held_since_ms, t0 + 150);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* total DEAD deliveries of t1 over two endpoints (ep1 a.*, ep2 b.*). */
static void dead_over_two(fx *f, int total) {
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", "a.*");
  make_tenant_endpoint(f, "t1", "ep2", "b.*");
  dead_events(f, "t1", "ep1", "a.x", total / 2, &seq);
  dead_events(f, "t1", "ep2", "b.x", total - total / 2, &seq);
}

/* Job `id`, made over them before, confirmed at t0 and stepped until every item moved: in
 * steps 50 ms apart over two endpoints, none has HOOKD_REPLAY_HOLD_COUNT moves waiting, none
 * for HOOKD_REPLAY_HOLD_AFTER_MS (the job would be held: "Held behind…"). */
static void moved_all(fx *f, const char *id, int total, int64_t t0) {
  assert_int_equal(act(f, id, HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  int moved = 0;
  for (int i = 1; moved < total && i < 10; i++) {
    hookd_replay_step_res r = step(f, t0 + 50 * i);
    moved += r.replayed;
    hookd_replay_step_res_free(&r);
  }
  assert_int_equal(moved, total);
}

/* A cancel takes back its job's first HOOKD_REPLAY_BACK_CHUNK items at once, the rest at the
 * replayer's next step (docs/replay.md "In chunks"). */
static void a_take_back_goes_in_chunks(void **state) {
  fx *f = *state;
  int total = HOOKD_REPLAY_BACK_CHUNK + 5;
  dead_over_two(f, total);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_c", t0, 10000, 0), total);
  moved_all(f, "rpl_c", total, t0);
  int64_t now = t0 + 20000;
  assert_int_equal(act_back(f, "rpl_c", HOOKD_REPLAY_CANCEL, now), HOOKD_REPLAY_BACK_CHUNK);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_c", &j, &d);
  assert_string_equal(j.state, "cancelled");
  assert_int_equal(j.replayed, 5);
  assert_int_equal(j.skipped, HOOKD_REPLAY_BACK_CHUNK);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  /* its items are not purged while the take-back has moves to walk */
  call k = {.i64 = now + 1};
  assert_int_equal(w(f, run_purge, &k), 0);
  assert_int_equal(k.ival, 0);
  hookd_replay_step_res r = step(f, now + 50); /* the rest */
  assert_true(r.next_ms == 0 || r.next_ms > now + 50); /* nothing left to take back */
  hookd_replay_step_res_free(&r);
  get_job(f, "rpl_c", &j, &d);
  assert_int_equal(j.replayed, 0);
  assert_int_equal(j.skipped, total);
  assert_int_equal(d.n_skipped, 1);
  assert_string_equal(d.skipped[0].key, "recalled");
  assert_int_equal(d.skipped[0].n, total);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
}

/* A step walks four jobs' take-backs; with a fifth waiting, it asks for the next step even when
 * those four end in it (before, four ending together left the fifth's walk until something else
 * woke the replayer: its moved deliveries were sent after its cancel, a review). */
static void a_fifth_take_back_is_walked_too(void **state) {
  fx *f = *state;
  int total = HOOKD_REPLAY_BACK_CHUNK + 5;
  dead_over_two(f, total);
  int64_t t0 = hookd_now_ms();
  /* four previews first (the older jobs: walked first), each walked past its first chunk */
  const char *previews[] = {"rpl_p0", "rpl_p1", "rpl_p2", "rpl_p3"};
  for (int i = 0; i < 4; i++) assert_int_equal(create_job_at(f, previews[i], t0, 10000, 0), total);
  assert_int_equal(create_job_at(f, "rpl_last", t0, 10000, 0), total);
  moved_all(f, "rpl_last", total, t0);
  int64_t now = t0 + 20000;
  for (int i = 0; i < 4; i++)
    assert_int_equal(act_back(f, previews[i], HOOKD_REPLAY_CANCEL, now), 0);
  assert_int_equal(act_back(f, "rpl_last", HOOKD_REPLAY_CANCEL, now), HOOKD_REPLAY_BACK_CHUNK);
  hookd_replay_step_res r = step(f, now + 50); /* the four previews' walks, which end here */
  assert_int_equal(r.recalled, 0);
  assert_true(r.next_ms > 0 && r.next_ms <= now + 50); /* the next step comes at once */
  hookd_replay_step_res_free(&r);
  r = step(f, now + 100); /* the fifth's */
  assert_int_equal(r.recalled, 5);
  hookd_replay_step_res_free(&r);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_last", &j, &d);
  assert_int_equal(j.skipped, total);
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  r = step(f, now + 150); /* nothing left: no step asked for */
  assert_int_equal(r.next_ms, 0);
  hookd_replay_step_res_free(&r);
}

/* A completed job a week old is not cancelled: its purge may have begun, and a move purged is
 * one a cancel cannot take back (a review). */
static void a_completed_job_a_week_old_is_not_cancelled(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "w.x", 2, &seq);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_w", t0, 1000, 0), 2);
  assert_int_equal(act(f, "rpl_w", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  hookd_replay_step_res r = step(f, t0 + 100);
  assert_int_equal(r.replayed, 2);
  hookd_replay_step_res_free(&r);
  hookd_replay_job j;
  hookd_replay_detail d;
  get_job(f, "rpl_w", &j, &d);
  assert_string_equal(j.state, "completed");
  int64_t done = j.finished_ms;
  hookd_replay_job_free(&j);
  hookd_replay_detail_free(&d);
  char st[32];
  int64_t last = done + HOOKD_REPLAY_ITEMS_KEEP_MS - HOOKD_REPLAY_CANCEL_MARGIN_MS; /* (a minute) */
  assert_int_equal(act(f, "rpl_w", HOOKD_REPLAY_CANCEL, last, st), HOOKD_STORE_STATE);
  assert_int_equal(act(f, "rpl_w", HOOKD_REPLAY_CANCEL, last - 1, st), 0);
  assert_string_equal(st, "cancelled");
}

static int run_release_as(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  call *k = a;
  const hookd_claimed *cl = k->in;
  hookd_release r = {.delivery_seq = cl->d.seq, .lease_token = cl->d.lease_token,
                     .state = cl->d.state, .next_attempt_ms = cl->d.next_attempt_ms,
                     .maybe_sent = k->i64 != 0, .now_ms = hookd_now_ms(),
                     .attempt_number = cl->d.attempt_count + 1};
  return be->release_lease(c, &r);
}

/* A moved delivery claimed, then given back unsent, is taken back by a cancel; one given back
 * after its request may have gone out (maybe_sent) is not (docs/replay.md "Taking back"). */
static void a_claim_given_back_unsent_is_taken_back(void **state) {
  fx *f = *state;
  int seq = 0;
  make_tenant_endpoint(f, "t1", "ep1", NULL);
  dead_events(f, "t1", "ep1", "g.x", 2, &seq);
  int64_t t0 = hookd_now_ms();
  assert_int_equal(create_job_at(f, "rpl_g", t0, 100, 0), 2);
  assert_int_equal(act(f, "rpl_g", HOOKD_REPLAY_CONFIRM, t0, NULL), 0);
  for (int i = 0; i < 2; i++) {
    hookd_replay_step_res r = step(f, t0 + 10 * i);
    assert_int_equal(r.replayed, 1);
    hookd_replay_step_res_free(&r);
  }
  hookd_claimed *cl = NULL;
  size_t got = claim(f, "ep1", "node", t0 + 1000, 60000, &cl);
  assert_int_equal(got, 2);
  for (size_t i = 0; i < got; i++) {
    call c = {.in = &cl[i], .i64 = (int64_t)i}; /* the second: maybe sent */
    assert_int_equal(w(f, run_release_as, &c), 0);
  }
  char unsent[HOOKD_ID_MAX];
  snprintf(unsent, sizeof unsent, "%s", cl[0].d.id);
  free_claimed(cl, got);
  assert_int_equal(act_back(f, "rpl_g", HOOKD_REPLAY_CANCEL, t0 + 100), 1);
  hookd_delivery dl;
  call g = {.in = unsent, .out = &dl};
  assert_int_equal(w(f, run_get, &g), 0);
  assert_int_equal(dl.state, HOOKD_DS_DEAD); /* the one given back unsent: DEAD again */
  hookd_delivery_free(&dl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(the_filter_selects_what_it_names, setup, teardown),
      cmocka_unit_test_setup_teardown(jobs_follow_their_state_machine, setup, teardown),
      cmocka_unit_test_setup_teardown(snapshots_are_stored_in_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(steps_keep_the_rate_and_never_resend, setup, teardown),
      cmocka_unit_test_setup_teardown(fast_rates_are_not_exceeded, setup, teardown),
      cmocka_unit_test_setup_teardown(items_are_their_own_deliveries, setup, teardown),
      cmocka_unit_test_setup_teardown(a_claim_since_the_snapshot_is_not_the_jobs, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(resume_keeps_the_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(ended_jobs_items_are_purged, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_steps_read_bounded_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_steps_take_turns, setup, teardown),
      cmocka_unit_test_setup_teardown(steps_take_bounded_items_across_jobs, setup, teardown),
      cmocka_unit_test_setup_teardown(a_cancel_puts_a_retry_back_at_its_time, setup, teardown),
      cmocka_unit_test_setup_teardown(a_take_back_goes_in_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(a_fifth_take_back_is_walked_too, setup, teardown),
      cmocka_unit_test_setup_teardown(a_job_holds_behind_its_endpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(only_the_held_endpoints_items_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(held_names_the_first_waiting_item, setup, teardown),
      cmocka_unit_test_setup_teardown(a_completed_job_a_week_old_is_not_cancelled, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_job_holds_at_the_count_waiting, setup, teardown),
      cmocka_unit_test_setup_teardown(an_ordered_lane_holds_no_job, setup, teardown),
      cmocka_unit_test_setup_teardown(a_step_probes_a_bounded_backlog, setup, teardown),
      cmocka_unit_test_setup_teardown(a_claim_given_back_unsent_is_taken_back, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

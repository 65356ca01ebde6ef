/* api_system.c — /healthz (alive), /readyz (ready to take traffic) and /metrics (Prometheus). */
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "daemon/api.h"
#include "daemon/metrics.h"

void hookd_api_healthz(hookd_req *r, hookd_app *app) {
  hookd_req_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

/* Ready: started, not shutting down, and the store committing — its last group commit did not
 * fail and no batch or op has waited past HOOKD_STORE_STALL_MS (twice the busy timeout): a node
 * whose store is locked, full or failing should not be sent traffic it can only answer 503. */
void hookd_api_readyz(hookd_req *r, hookd_app *app) {
  if (!atomic_load(&app->ready)) {
    hookd_req_error(r, 503, "not_ready", "hookd is starting or shutting down");
    return;
  }
  hookd_storeq_stats st;
  hookd_storeq_get_stats(app->store->writer, &st);
  if (st.last_failed || st.stalled_ms > HOOKD_STORE_STALL_MS) {
    hookd_req_add_header(r, "Retry-After", "1"); /* as every other storage_unavailable */
    if (st.last_failed)
      hookd_req_error(r, 503, "storage_unavailable",
                      "the store's last commit failed (see the store.error log)");
    else
      hookd_req_error(r, 503, "storage_unavailable", "the store has not committed for %lld ms",
                      (long long)st.stalled_ms);
    return;
  }
  /* a shared store's node whose clock the others outvote stamps what it takes — a publish's
   * next attempt, a received event's — by its clock: a balancer sends the traffic to the nodes
   * that agree, and it refuses the writes itself (docs/postgres.md "The clock guard"); a lone
   * node has no other to send it to, and a step being checked is a moment's */
  if (hookd_api_clock_outvoted(r, app)) return;
  hookd_req_reply_json(r, 200, json_pack("{s:s}", "status", "ready"));
}

static int storeq_metrics(hookd_buf *o, const char *name, hookd_storeq *q) {
  hookd_storeq_stats st;
  hookd_storeq_get_stats(q, &st);
  static const char *const bb[] = {"1", "4", "16", "64", "256", "1024", "+Inf"};
  static const char *const lb[] = {"0.0005", "0.001", "0.002", "0.005", "0.01", "0.05",
                                   "0.25",   "1",     "5",     "30",    "+Inf"};
  int rc = hookd_buf_printf(o,
                            "# HELP hookd_store_%s_queue_depth store ops waiting\n"
                            "# TYPE hookd_store_%s_queue_depth gauge\n"
                            "hookd_store_%s_queue_depth %llu\n"
                            "# HELP hookd_store_%s_stalled_seconds how long the batch being run"
                            " has run, or the oldest op has waited (0 when idle)\n"
                            "# TYPE hookd_store_%s_stalled_seconds gauge\n"
                            "hookd_store_%s_stalled_seconds %.3f\n",
                            name, name, name, (unsigned long long)st.queue_depth, name, name,
                            name, (double)st.stalled_ms / 1000.0);
  if (rc || strcmp(name, "writer") != 0) return rc; /* only the writer group-commits */
  rc = hookd_buf_printf(o,
                        "# HELP hookd_store_commit_batch_size ops per group commit\n"
                        "# TYPE hookd_store_commit_batch_size histogram\n");
  unsigned long long cum = 0;
  for (int i = 0; i < 7 && !rc; i++) {
    cum += st.batch_hist[i];
    rc = hookd_buf_printf(o, "hookd_store_commit_batch_size_bucket{le=\"%s\"} %llu\n", bb[i], cum);
  }
  if (!rc)
    rc = hookd_buf_printf(o,
                          "hookd_store_commit_batch_size_sum %llu\n"
                          "hookd_store_commit_batch_size_count %llu\n"
                          "# HELP hookd_store_commit_seconds time to commit (fsync) a batch\n"
                          "# TYPE hookd_store_commit_seconds histogram\n",
                          (unsigned long long)st.ops, (unsigned long long)st.batches);
  cum = 0;
  for (int i = 0; i < 11 && !rc; i++) {
    cum += st.commit_us_hist[i];
    rc = hookd_buf_printf(o, "hookd_store_commit_seconds_bucket{le=\"%s\"} %llu\n", lb[i], cum);
  }
  if (!rc)
    rc = hookd_buf_printf(o,
                          "hookd_store_commit_seconds_sum %.6f\n"
                          "hookd_store_commit_seconds_count %llu\n"
                          "# HELP hookd_store_failed_commits_total group commits that failed\n"
                          "# TYPE hookd_store_failed_commits_total counter\n"
                          "hookd_store_failed_commits_total %llu\n"
                          "# HELP hookd_store_redone_batches_total group commits run a second"
                          " time, each op in a savepoint, after an op failed having written\n"
                          "# TYPE hookd_store_redone_batches_total counter\n"
                          "hookd_store_redone_batches_total %llu\n"
                          "# HELP hookd_store_slow_batches_total group commits that took 100 ms"
                          " or more, their ops and commit together (store.slow_batch)\n"
                          "# TYPE hookd_store_slow_batches_total counter\n"
                          "hookd_store_slow_batches_total %llu\n"
                          "# HELP hookd_store_settled_commits_total group commits whose answer"
                          " the link to the store lost, by what the server then said\n"
                          "# TYPE hookd_store_settled_commits_total counter\n"
                          "hookd_store_settled_commits_total{outcome=\"committed\"} %llu\n"
                          "hookd_store_settled_commits_total{outcome=\"rolled_back\"} %llu\n",
                          (double)st.commit_us_sum / 1e6, (unsigned long long)st.batches,
                          (unsigned long long)st.failed_commits,
                          (unsigned long long)st.redone_batches,
                          (unsigned long long)st.slow_batches,
                          (unsigned long long)st.settled_commits[0],
                          (unsigned long long)st.settled_commits[1]);
  return rc;
}

/* Per-endpoint gauges, for the endpoints with something to show (requests in flight or
 * waiting, a breaker not closed, a failing run), at most ENDPOINT_SERIES of them: the series
 * stay bounded however many endpoints exist (the rest counted: left out silently before, a
 * review). Ids only (validated [A-Za-z0-9_.:-]), never URLs. */
#define ENDPOINT_SERIES 1000
#define EP_FAMILIES 4
static const char *const ep_families[EP_FAMILIES][2] = {
    {"hookd_endpoint_in_flight", "HTTP attempts in flight to the endpoint"},
    {"hookd_endpoint_waiting", "deliveries claimed for the endpoint, waiting for a slot"},
    {"hookd_endpoint_breaker_state",
     "the endpoint's circuit breaker: 0 closed, 1 open, 2 half-open"},
    {"hookd_endpoint_failing_seconds",
     "how long the endpoint's failing run has lasted (its failing_since), 0 when none"}};

typedef struct ep_row {
  char id[HOOKD_ID_MAX + 64]; /* as long as an endpoint id may be (api_endpoints.c) */
  double v[EP_FAMILIES];      /* in flight, waiting, breaker state, failing for */
} ep_row;

typedef struct ep_rows {
  ep_row *rows, *failing; /* those with something in hand; those only in a failing run */
  int n, nf, left_out;
  int64_t now_ms;
} ep_rows;

/* Under the dispatcher's snapshot lock: copies only (the dispatcher waits for this lock at every
 * send; the text is written after it is released). */
static int ep_collect(void *arg, const char *id, const hookd_endpoint_health *h) {
  ep_rows *x = arg;
  /* (a disabled endpoint's breaker is not shown: it stays as it was until an enable resets it) */
  bool closed = !h->breaker || !strcmp(h->breaker, "closed") || !h->sending;
  int64_t failing = h->sending && h->failing_since_ms && h->failing_since_ms < x->now_ms
                        ? x->now_ms - h->failing_since_ms
                        : 0;
  bool active = h->in_flight || h->queued || !closed;
  /* those with requests or a breaker first, then those only failing in the room left (failing
   * for days, they would take the series of the endpoints with requests out: a review); one
   * walk, two lists */
  if (!active && !failing) return 0;
  int *n = active ? &x->n : &x->nf;
  if (*n >= ENDPOINT_SERIES) {
    x->left_out++;
    return 0;
  }
  ep_row *r = active ? &x->rows[x->n++] : &x->failing[x->nf++];
  snprintf(r->id, sizeof r->id, "%s", id);
  r->v[0] = h->in_flight;
  r->v[1] = h->queued;
  r->v[2] = closed ? 0 : !strcmp(h->breaker, "open") ? 1 : 2;
  r->v[3] = failing / 1e3;
  return 0;
}

static int endpoint_metrics(hookd_buf *o, hookd_dispatcher *d) {
  ep_rows x = {.rows = d ? malloc(2 * ENDPOINT_SERIES * sizeof *x.rows) : NULL,
               .now_ms = hookd_now_ms()};
  if (d && !x.rows) return -1;
  x.failing = x.rows ? x.rows + ENDPOINT_SERIES : NULL;
  if (d) hookd_dispatcher_health_each(d, ep_collect, &x);
  int fit = x.nf < ENDPOINT_SERIES - x.n ? x.nf : ENDPOINT_SERIES - x.n; /* the room left */
  if (fit) memmove(x.rows + x.n, x.failing, (size_t)fit * sizeof *x.rows);
  x.n += fit;
  x.left_out += x.nf - fit;
  int rc = 0;
  for (int w = 0; w < EP_FAMILIES && !rc; w++) {
    rc = hookd_metrics_family(o, ep_families[w][0], ep_families[w][1], "gauge");
    for (int i = 0; i < x.n && !rc; i++)
      rc = hookd_buf_printf(o, "%s{endpoint_id=\"%s\"} %.15g\n", ep_families[w][0],
                            x.rows[i].id, x.rows[i].v[w]);
  }
  rc = rc ? rc
          : hookd_metrics_gauge(o, "hookd_endpoint_series_left_out",
                                "endpoints with something to show left out of the per-endpoint "
                                "series, past their bound of 1,000",
                                x.left_out);
  free(x.rows);
  return rc;
}

/* What runs and since when: a dashboard joins on these to tell an upgrade or a restart apart
 * from a change in traffic (the Prometheus conventions: an info series of value 1, and the
 * process's start as a Unix time). */
static int build_metrics(hookd_buf *o, const hookd_app *app) {
  int rc = hookd_metrics_family(o, "hookd_build_info",
                                "hookd's version and those of the libraries it runs on", "gauge");
  rc = rc ? rc
          : hookd_buf_printf(o,
                             "hookd_build_info{version=\"%s\",sqlite=\"%s\",libcurl=\"%s\","
                             "openssl=\"%s\"} 1\n",
                             HOOKD_VERSION, sqlite3_libversion(),
                             curl_version_info(CURLVERSION_NOW)->version,
                             OpenSSL_version(OPENSSL_VERSION_STRING));
  rc = rc ? rc
          : hookd_metrics_family(o, "process_start_time_seconds",
                                 "when this hookd process started, in seconds since the Unix epoch",
                                 "gauge");
  return rc ? rc
            : hookd_buf_printf(o, "process_start_time_seconds %lld.%03lld\n",
                               (long long)(app->started_ms / 1000),
                               (long long)(app->started_ms % 1000));
}

void hookd_api_metrics(hookd_req *r, hookd_app *app) { /* the router checked the token */
  hookd_buf o;
  hookd_buf_init(&o, 1 << 20);
  int rc = hookd_metrics_render(&o);
  rc = rc ? rc : build_metrics(&o, app);
  int64_t walked = atomic_load(&app->retention_walked_ms);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_retention_walked_timestamp_seconds",
                                     "when this node last finished a retention round with every "
                                     "walk done, in seconds since the Unix epoch (0: none since "
                                     "the start; rounds run every minute)",
                                     walked / 1e3);
  hookd_dispatcher_stats ds = {0};
  if (app->disp) hookd_dispatcher_get_stats(app->disp, &ds);
  /* as of the walk that read it (a few times a second while there is work): read against now,
   * a delivery sent since went on growing until the next walk */
  int64_t at = ds.walked_ms;
  double oldest = ds.oldest_due_ms && ds.oldest_due_ms < at ? (at - ds.oldest_due_ms) / 1e3 : 0;
  double held = ds.oldest_held_ms && ds.oldest_held_ms < at ? (at - ds.oldest_held_ms) / 1e3 : 0;
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_in_flight", "HTTP attempts in flight", ds.in_flight);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_claimed_waiting",
                                     "claimed deliveries waiting for a slot", ds.queued);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_oldest_pending_age_seconds",
                                     "how overdue the most overdue due delivery is", oldest);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_oldest_held_age_seconds",
                                     "how overdue the most overdue delivery is that an open "
                                     "breaker or a Retry-After pause holds",
                                     held);
  /* the store's count, as of its last read (the age says when: a store that does not answer) */
  int64_t read_at = atomic_load(&app->backlog_read_mono_ms);
  double backlog_age = (hookd_mono_ms() - (read_at ? read_at : app->started_mono_ms)) / 1e3;
  rc = rc ? rc
          : hookd_metrics_gauge(&o, "hookd_deliveries_backlog",
                                "deliveries waiting to be sent, every tenant's — pending or "
                                "retrying, due or not, held by a breaker, a pause or an ordered "
                                "lane too (a disabled endpoint's as well) — counted every 30 s up "
                                "to 1,000,000 (that value: at least); the store's count, the same "
                                "on every node",
                                (double)atomic_load(&app->backlog));
  rc = rc ? rc
          : hookd_metrics_gauge(&o, "hookd_deliveries_backlog_age_seconds",
                                "how long ago hookd_deliveries_backlog was counted (its count is "
                                "read on the store's scan connection: a store that does not "
                                "answer shows here)",
                                backlog_age);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_endpoints", "endpoints known to the dispatcher",
                                     ds.endpoints);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_tenants",
                                     "tenants known to the dispatcher (their limits and turns)",
                                     ds.tenants);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_breakers_open",
                                     "endpoints whose circuit breaker is open or half-open",
                                     ds.breakers_open);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_claims_held",
                                     "1 while this node claims and sweeps no lease: a step of "
                                     "its wall clock (its leases are being moved in the store: "
                                     "clock.leases_move_failed says why they are not yet), or, "
                                     "on a PostgreSQL store, its clock off the database's "
                                     "(clock.skew)",
                                     ds.claims_held);
  if (app->cfg && hookd_store_is_postgres(app->cfg->store_url))
    rc = rc ? rc
            : hookd_metrics_gauge(&o, "hookd_store_clock_skew_seconds",
                                  "the database's clock minus this node's, at the last check "
                                  "(docs/postgres.md \"The clock guard\")",
                                  ds.clock_skew_ms / 1e3);
  if (app->cfg && hookd_store_is_postgres(app->cfg->store_url))
    rc = rc ? rc
            : hookd_metrics_gauge(&o, "hookd_store_nodes",
                                  "hookd nodes running on the store, this one included, at the "
                                  "last count: each applies its share of the customers' limits",
                                  ds.nodes);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_endpoints_paused",
                                     "endpoints paused by a Retry-After", ds.endpoints_paused);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_endpoints_slow",
                                     "endpoints marked slow: an attempt slow or timed out, or a "
                                     "request still in flight past half its timeout, until 8 "
                                     "fast successes in a row",
                                     ds.endpoints_slow);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_endpoints_failing",
                                     "enabled endpoints in a failing run (5xx, timeouts, network "
                                     "errors, no success since), as this node sees them",
                                     ds.endpoints_failing);
  /* (against now: the run goes on between walks, which an idle loop makes seldom) */
  int64_t now_ms = hookd_now_ms();
  double failing_for = ds.oldest_failing_ms && ds.oldest_failing_ms < now_ms
                           ? (now_ms - ds.oldest_failing_ms) / 1e3
                           : 0;
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_oldest_failing_age_seconds",
                                     "how long the longest failing run of an enabled endpoint "
                                     "has lasted (its failing_since; --disable-failing-after-s "
                                     "disables it)",
                                     failing_for);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_endpoints_disabled",
                                     "endpoints disabled, by an operator, a 410 or a failing run "
                                     "(their deliveries wait)",
                                     ds.endpoints_disabled);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_claimed_body_bytes",
                                     "bytes of event bodies held by claimed deliveries (an "
                                     "event's body once, whatever its fan-out)",
                                     (double)ds.claimed_body_bytes);
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_http_buffered_bytes",
                                     "request-body bytes held while they arrive, all "
                                     "connections together (--max-buffered-bytes)",
                                     (double)hookd_server_buffered(app->srv));
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_http_requests_waiting",
                                     "requests suspended for their answer: on the store (a "
                                     "publish or a provider's delivery until its commit, an API "
                                     "read) or on a destination's address check",
                                     (double)hookd_server_waiting(app->srv));
  rc = rc ? rc : hookd_metrics_gauge(&o, "hookd_http_body_worker_queued",
                                     "requests with a big body (16 KiB or more) waiting for a "
                                     "body worker to handle them",
                                     (double)hookd_server_body_queued(app->srv));
  rc = rc ? rc : endpoint_metrics(&o, app->disp);
  rc = rc ? rc : storeq_metrics(&o, "writer", app->store->writer);
  rc = rc ? rc : storeq_metrics(&o, "reader", app->store->reader);
  rc = rc ? rc : storeq_metrics(&o, "scan", app->store->scan);
  hookd_store_health sh;
  hookd_store_health_get(app->store, &sh);
  rc = rc ? rc
          : hookd_metrics_family(&o, "hookd_store_checkpoint_failures_total",
                                 "store checkpoints that failed (the WAL keeps every commit but "
                                 "grows; logged as store.checkpoint_failed)",
                                 "counter");
  rc = rc ? rc
          : hookd_buf_printf(&o, "hookd_store_checkpoint_failures_total %llu\n",
                             (unsigned long long)sh.checkpoint_failures);
  rc = rc ? rc
          : hookd_metrics_gauge(&o, "hookd_store_wal_bytes",
                                "the store's write-ahead log in use (bounded near 128 MiB while "
                                "checkpoints succeed)",
                                (double)sh.wal_bytes);
  if (sh.db_bytes > 0) /* (SQLite's: a PostgreSQL store's size is the server's to show) */
    rc = rc ? rc
            : hookd_metrics_gauge(&o, "hookd_store_bytes",
                                  "the store's database file (SQLite), the WAL apart: it does not "
                                  "shrink after retention deletes (their pages are reused)",
                                  (double)sh.db_bytes);
  if (rc) {
    hookd_buf_free(&o);
    hookd_req_error(r, 500, "internal", "metrics too large");
    return;
  }
  size_t len = o.len;
  hookd_req_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", hookd_buf_steal(&o),
                  len);
}

/* metrics.c — Prometheus text rendering of hookd_m. */
#include "daemon/metrics.h"

#include <string.h>

#include "daemon/log.h"

hookd_metrics hookd_m;

/* Upper bounds in ms of the latency histograms: up to a day, since a delivery's or a forward's
 * time to its 2xx spans its retries (60 s at the most before, and every retried one fell in
 * +Inf: a metrics review) */
static const int64_t bounds_ms[HOOKD_HIST_BUCKETS] = {
    1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000, 60000, 300000, 3600000, 86400000};

static const char *const outcome_names[M_OUT__COUNT] = {
    "success",       "http_error", "timeout",        "dns_error", "connect_error",
    "tls_error",     "blocked",    "protocol_error", "too_large"};
static const char *const dead_names[M_DEAD__COUNT] = {
    "permanent", "gone", "blocked", "max_attempts", "max_age", "expired", "superseded", "operator"};

static const char *const failure_names[M_FAIL__COUNT] = {
    "http_3xx", "http_408", "http_410", "http_429", "http_4xx",  "http_5xx",  "http_other",
    "timeout",  "dns",      "connect",  "tls",      "blocked",   "protocol",  "response_too_large"};

int hookd_metrics_failure_index(const char *category) {
  for (int i = 0; category && *category && i < M_FAIL__COUNT; i++)
    if (strcmp(category, failure_names[i]) == 0) return i;
  return category && *category ? M_FAIL_HTTP_OTHER : -1;
}

void hookd_hist_observe_us(hookd_hist *h, int64_t us) {
  if (us < 0) us = 0;
  int b = HOOKD_HIST_BUCKETS;
  for (int i = 0; i < HOOKD_HIST_BUCKETS; i++) {
    if (us <= bounds_ms[i] * 1000) {
      b = i;
      break;
    }
  }
  atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
}

void hookd_hist_observe_ms(hookd_hist *h, int64_t ms) { hookd_hist_observe_us(h, ms * 1000); }

int hookd_metrics_outcome_index(const char *outcome) {
  for (int i = 0; i < M_OUT__COUNT; i++)
    if (strcmp(outcome, outcome_names[i]) == 0) return i;
  return M_OUT_PROTOCOL;
}

int hookd_metrics_dead_index(const char *reason) {
  for (int i = 0; i < M_DEAD__COUNT; i++)
    if (reason && strcmp(reason, dead_names[i]) == 0) return i;
  return M_DEAD_PERMANENT;
}

#define LOAD(x) ((unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed))

static int counter(hookd_buf *o, const char *name, const char *help, unsigned long long v) {
  return hookd_buf_printf(o, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
                          v);
}

/* One counter family with a label: name{label="names[i]"} v[i] for i < n. */
const char *const hookd_reject_names[HOOKD_REJECT__COUNT] = {
    [HOOKD_REJECT_SIGNATURE_MISMATCH] = "signature_mismatch",
    [HOOKD_REJECT_SIGNATURE_MALFORMED] = "signature_malformed",
    [HOOKD_REJECT_TIMESTAMP_STALE] = "timestamp_stale",
    [HOOKD_REJECT_TIMESTAMP_FUTURE] = "timestamp_future",
    [HOOKD_REJECT_INVALID_JSON] = "invalid_json",
    [HOOKD_REJECT_INVALID_REQUEST] = "invalid_request",
    [HOOKD_REJECT_MEDIA_TYPE] = "unsupported_media_type",
    [HOOKD_REJECT_BODY_TOO_LARGE] = "body_too_large"};

static const char *const unavail_names[HOOKD_UNAVAIL__COUNT] = {
    [HOOKD_UNAVAIL_OVERLOADED] = "overloaded",
    [HOOKD_UNAVAIL_NO_DESTINATION] = "no_destination",
    [HOOKD_UNAVAIL_STORE] = "store_error", [HOOKD_UNAVAIL_CLOCK] = "clock_outvoted"};

static int labelled(hookd_buf *o, const char *name, const char *help, const char *label,
                    const char *const *names, _Atomic uint64_t *v, int n) {
  int rc = hookd_buf_printf(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
  for (int i = 0; i < n && !rc; i++)
    rc = hookd_buf_printf(o, "%s{%s=\"%s\"} %llu\n", name, label, names[i], LOAD(v[i]));
  return rc;
}

static int hist(hookd_buf *o, const char *name, const char *help, hookd_hist *h) {
  int rc = hookd_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  unsigned long long cum = 0;
  for (int i = 0; i < HOOKD_HIST_BUCKETS && !rc; i++) {
    cum += LOAD(h->bucket[i]);
    rc = hookd_buf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, (double)bounds_ms[i] / 1000.0,
                          cum);
  }
  cum += LOAD(h->bucket[HOOKD_HIST_BUCKETS]);
  /* _count is the +Inf bucket (one scrape is consistent even while observations land) */
  if (!rc)
    rc = hookd_buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                          cum, name, (double)LOAD(h->sum_us) / 1e6, name, cum);
  return rc;
}

int hookd_metrics_family(hookd_buf *out, const char *name, const char *help, const char *type) {
  return hookd_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int hookd_metrics_gauge(hookd_buf *out, const char *name, const char *help, double v) {
  /* whole numbers (counts, bytes) exactly: %g's six digits showed 123456789 as 1.23457e+08 */
  if (v > -1e15 && v < 1e15 && v == (double)(long long)v)
    return hookd_buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %.0f\n", name, help, name,
                            name, v);
  /* (15 digits: a Unix time in seconds with its milliseconds, which %.9g cut to 10 s) */
  return hookd_buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %.15g\n", name, help, name, name,
                          v);
}

int hookd_metrics_render(hookd_buf *o) {
  hookd_metrics *m = &hookd_m;
  int rc = hookd_buf_puts(o, "# HELP hookd_http_requests_total API responses by status class\n"
                             "# TYPE hookd_http_requests_total counter\n");
  for (int i = 1; i <= 5 && !rc; i++)
    rc = hookd_buf_printf(o, "hookd_http_requests_total{code=\"%dxx\"} %llu\n", i,
                          LOAD(m->http_requests[i]));
  if (!rc)
    rc = hookd_buf_printf(o, "hookd_http_requests_total{code=\"other\"} %llu\n",
                          LOAD(m->http_requests[0]));
  rc = rc ? rc : counter(o, "hookd_http_head_timeouts_total",
                         "client connections shut down because a request head did not arrive "
                         "whole within --header-timeout-s of the connection's start or of its "
                         "last request's end",
                         LOAD(m->http_head_timeouts));
  rc = rc ? rc : counter(o, "hookd_http_request_timeouts_total",
                         "requests that did not arrive whole within --request-timeout-s: answered "
                         "408 as their bytes came, or their connection shut down 5 s past it",
                         LOAD(m->http_request_timeouts));
  rc = rc ? rc : counter(o, "hookd_http_address_busy_total",
                         "requests refused 503 because their client address already held its "
                         "share of --max-buffered-bytes (an eighth, at least --max-body-bytes)",
                         LOAD(m->http_address_busy));
  rc = rc ? rc : counter(o, "hookd_http_body_worker_requests_total",
                         "requests whose body (16 KiB or more) was handled on a body worker, "
                         "not on the HTTP server's thread",
                         LOAD(m->http_body_worker_requests));
  rc = rc ? rc : counter(o, "hookd_events_published_total", "events accepted (new)",
                         LOAD(m->events_published));
  rc = rc ? rc : counter(o, "hookd_publish_duplicates_total",
                         "publishes answered with an earlier result (idempotency)",
                         LOAD(m->publish_duplicates));
  rc = rc ? rc : counter(o, "hookd_publish_conflicts_total",
                         "publishes refused: same key, different body", LOAD(m->publish_conflicts));
  rc = rc ? rc : counter(o, "hookd_store_errors_total",
                         "store ops or group commits that failed (logged as store.error)",
                         LOAD(m->store_errors));
  rc = rc ? rc : counter(o, "hookd_deliveries_created_total",
                         "deliveries created (publish fan-out and inbound forwards)",
                         LOAD(m->deliveries_created));
  rc = rc ? rc : labelled(o, "hookd_attempts_total", "delivery attempts by outcome", "outcome",
                          outcome_names, m->attempts, M_OUT__COUNT);
  rc = rc ? rc : labelled(o, "hookd_attempt_failures_total",
                          "attempts that did not succeed, by reason (HTTP status class or network"
                          " error)",
                          "reason", failure_names, m->attempt_failures, M_FAIL__COUNT);
  rc = rc ? rc : counter(o, "hookd_retries_scheduled_total", "retries scheduled",
                         LOAD(m->retries_scheduled));
  rc = rc ? rc : counter(o, "hookd_deliveries_delivered_total", "deliveries that got a 2xx",
                         LOAD(m->delivered));
  rc = rc ? rc : labelled(o, "hookd_deliveries_dead_total", "deliveries moved to DEAD", "reason",
                          dead_names, m->dead, M_DEAD__COUNT);
  rc = rc ? rc : counter(o, "hookd_inbound_forwards_dead_total",
                         "of hookd_deliveries_dead_total, forwards of inbound events to their "
                         "destinations (their inbox records dead_lettered): an inbound alert apart "
                         "from outbound endpoints",
                         LOAD(m->inbound_dead));
  rc = rc ? rc : counter(o, "hookd_deliveries_cancelled_total",
                         "deliveries cancelled by their endpoint's or source's delete, as its "
                         "answer counts them (one in flight whose 2xx lands after counts "
                         "delivered too; an inbound destination's: their inbox records "
                         "dead_lettered until replayed to a replacement)",
                         LOAD(m->cancelled));
  rc = rc ? rc : counter(o, "hookd_log_lines_dropped_total",
                         "log lines dropped: stderr's reader fell behind by more than the queue",
                         hookd_log_dropped_total());
  rc = rc ? rc : counter(o, "hookd_stale_outcomes_total",
                         "outcomes written after their lease was superseded: the delivery "
                         "left as it was (the attempt appended, or recorded already)",
                         LOAD(m->stale_outcomes));
  rc = rc ? rc : counter(o, "hookd_outcome_write_retries_total",
                         "outcome and lease-release writes that failed (store error) and were"
                         " tried again",
                         LOAD(m->outcome_write_retries));
  rc = rc ? rc : counter(o, "hookd_claims_total", "claim operations", LOAD(m->claims));
  rc = rc ? rc : counter(o, "hookd_claimed_total", "deliveries claimed", LOAD(m->claimed));
  rc = rc ? rc : counter(o, "hookd_leases_reclaimed_total", "expired leases reclaimed",
                         LOAD(m->leases_reclaimed));
  rc = rc ? rc : counter(o, "hookd_clock_steps_total",
                         "steps of the wall clock of a second or more (clock.stepped): the "
                         "dispatcher's timers and this node's leases were moved by them",
                         LOAD(m->clock_steps));
  rc = rc ? rc : counter(o, "hookd_store_clock_checks_total",
                         "checks of this node's clock against a PostgreSQL store's (each "
                         "rescan; docs/postgres.md \"The clock guard\"); 0 on SQLite",
                         LOAD(m->clock_checks));
  rc = rc ? rc : counter(o, "hookd_endpoints_disabled_total", "endpoints disabled automatically",
                         LOAD(m->endpoints_disabled));
  rc = rc ? rc : counter(o, "hookd_ops_events_total",
                         "operational events published to the --ops-tenant",
                         LOAD(m->ops_events));
  rc = rc ? rc : counter(o, "hookd_payload_filters_over_total",
                         "payload filters that gave up on an event (more than 10,000 steps): "
                         "the event not taken",
                         LOAD(m->filters_over));
  rc = rc ? rc : counter(o, "hookd_egress_blocked_total",
                         "connections refused by the destination policy", LOAD(m->egress_blocked));
  rc = rc ? rc : counter(o, "hookd_egress_stalls_total",
                         "stalls of hookd's own (its sockets read a second or more late: "
                         "SIGSTOP, a paused VM, swapping): the timeouts they caused are not "
                         "counted against the endpoints",
                         LOAD(m->egress_stalls));
  rc = rc ? rc : counter(o, "hookd_attempts_stalled_total",
                         "attempts ended by their timeout after a stall of hookd's own: counted "
                         "in hookd_attempts_total and hookd_attempt_failures_total as timeouts "
                         "too (subtract them for the receivers' share), not against the endpoints",
                         LOAD(m->attempts_stalled));
  rc = rc ? rc : counter(o, "hookd_egress_fd_exhausted_total",
                         "deliveries given back unsent: hookd had no file descriptor left for the "
                         "connection (not counted against the endpoint)",
                         LOAD(m->egress_fd_exhausted));
  rc = rc ? rc : counter(o, "hookd_egress_local_failures_total",
                         "deliveries given back unsent: hookd's own side failed before sending "
                         "(its egress proxy not reached or asking for credentials, its CA file; "
                         "not counted against the endpoint)",
                         LOAD(m->egress_local_failures));
  rc = rc ? rc : counter(o, "hookd_egress_lookups_abandoned_total",
                         "requests ended before their name was resolved (the lookup's thread "
                         "stays behind): each holds its endpoint 30 s",
                         LOAD(m->egress_lookups_abandoned));
  rc = rc ? rc : counter(o, "hookd_replays_total",
                         "deliveries replayed (one by one and by jobs; one a job's pause took "
                         "back and its resume moved again counts again)",
                         LOAD(m->replays));
  rc = rc ? rc : counter(o, "hookd_replay_recalled_total",
                         "deliveries a replay job moved, then its pause or cancel took back "
                         "before they were sent",
                         LOAD(m->replay_recalled));
  rc = rc ? rc : counter(o, "hookd_replay_skipped_total",
                         "replay jobs' deliveries skipped (no longer in the filter's state, or "
                         "refused as a single replay would be)",
                         LOAD(m->replay_skipped));
  rc = rc ? rc : counter(o, "hookd_replay_items_purged_total",
                         "items of replay jobs that ended over a week ago, deleted",
                         LOAD(m->replay_purged));
  rc = rc ? rc : counter(o, "hookd_kept_answers_purged_total",
                         "answers kept under an API write's Idempotency-Key, deleted past their "
                         "24 hours by the retention walk",
                         LOAD(m->answers_purged));
  static const char *const tables[2] = {"api_keys", "sources"};
  rc = rc ? rc : labelled(o, "hookd_config_reads_total",
                          "reads of every API key or every source into the node's cache (its "
                          "start, a key's change through its API, a SIGHUP, a periodic reload "
                          "finding the table's change stamp moved)",
                          "table", tables, m->config_reads, 2);
  rc = rc ? rc : counter(o, "hookd_api_keys_purged_total",
                         "API keys deleted a week after they expired (a portal link's among "
                         "them), by the retention walk",
                         LOAD(m->keys_purged));
  if (!rc && atomic_load_explicit(&m->outbox_enabled, memory_order_relaxed)) {
    rc = rc ? rc : counter(o, "hookd_outbox_relayed_total",
                           "outbox rows published as new events (docs/outbox.md)",
                           LOAD(m->outbox_relayed));
    rc = rc ? rc : counter(o, "hookd_outbox_duplicates_total",
                           "outbox rows relayed again that the engine already had (a relay "
                           "repeated after a crash or a failed delete): no second event",
                           LOAD(m->outbox_duplicates));
    rc = rc ? rc : counter(o, "hookd_outbox_refused_total",
                           "outbox rows the engine refused, kept with relay_error",
                           LOAD(m->outbox_refused));
    rc = rc ? rc : counter(o, "hookd_outbox_deferred_total",
                           "outbox rows the engine could not take now (a 5xx): tried again",
                           LOAD(m->outbox_deferred));
    rc = rc ? rc : counter(o, "hookd_outbox_errors_total",
                           "failures to connect to or query the outbox's database",
                           LOAD(m->outbox_errors));
    rc = rc ? rc : counter(o, "hookd_outbox_standby_total",
                           "outbox batches not taken: another relay's batch held the table's "
                           "lock (tried again after --outbox-poll-ms)",
                           LOAD(m->outbox_standby));
    rc = rc ? rc : hookd_metrics_gauge(o, "hookd_outbox_connected",
                                       "1 while the outbox relay holds its connection",
                                       (double)atomic_load_explicit(&m->outbox_connected,
                                                            memory_order_relaxed));
    rc = rc ? rc : hookd_metrics_gauge(o, "hookd_outbox_active",
                                       "1 when this node's last outbox batch held the table's "
                                       "lock (one batch at a time across relays; 0: another's "
                                       "held it)",
                                       (double)atomic_load_explicit(&m->outbox_active,
                                                            memory_order_relaxed));
    rc = rc ? rc : hookd_metrics_gauge(o, "hookd_outbox_lag_seconds",
                                       "age of the oldest outbox row waiting, as of the relay's "
                                       "last look (0: none)",
                                       (double)atomic_load_explicit(&m->outbox_lag_ms,
                                                            memory_order_relaxed) /
                                           1000.0);
  }
  rc = rc ? rc : counter(o, "hookd_auth_failures_total", "API requests refused 401/403",
                         LOAD(m->auth_failures));
  rc = rc ? rc : counter(o, "hookd_deliveries_unknown_total",
                         "deliveries held for an operator (ambiguous outcome, not idempotent)",
                         LOAD(m->unknown));
  rc = rc ? rc : labelled(o, "hookd_inbound_received_total", "verified inbound requests by outcome",
                          "outcome", hookd_recv_outcome_names, m->inbound, HOOKD_RECV__COUNT);
  rc = rc ? rc : labelled(o, "hookd_inbound_rejected_total",
                          "inbound requests refused, by reason (signature, timestamp, format)",
                          "reason", hookd_reject_names, m->inbound_rejected, HOOKD_REJECT__COUNT);
  rc = rc ? rc : labelled(o, "hookd_inbound_unavailable_total",
                          "provider requests answered to retry later (503, VNPay \"99\"), nothing "
                          "stored",
                          "reason", unavail_names, m->inbound_unavailable, HOOKD_UNAVAIL__COUNT);
  rc = rc ? rc : counter(o, "hookd_inbound_handshakes_total", "provider handshakes answered",
                         LOAD(m->inbound_handshakes));
  rc = rc ? rc : counter(o, "hookd_inbox_purged_total", "dedup records purged by retention",
                         LOAD(m->inbox_purged));
  rc = rc ? rc : counter(o, "hookd_versions_purged_total",
                         "objects' and ordered lanes' newest versions forgotten by retention",
                         LOAD(m->versions_purged));
  rc = rc ? rc : counter(o, "hookd_payloads_purged_total",
                         "outbound event payloads emptied by --payload-retention-s",
                         LOAD(m->payloads_purged));
  rc = rc ? rc : counter(o, "hookd_events_expired_total",
                         "outbound events deleted by --event-retention-s, with their deliveries"
                         " and attempts", LOAD(m->events_expired));
  rc = rc ? rc : counter(o, "hookd_retention_failures_total",
                         "retention walks cut short by a store failure (retention.failed)",
                         LOAD(m->retention_failures));
  rc = rc ? rc : counter(o, "hookd_breaker_transitions_total",
                         "circuit breaker state changes", LOAD(m->breaker_transitions));
  rc = rc ? rc : counter(o, "hookd_breaker_opens_total", "circuit breakers opened",
                         LOAD(m->breaker_opens));
  rc = rc ? rc : counter(o, "hookd_endpoint_pauses_total",
                         "endpoints paused by a Retry-After on 429/503", LOAD(m->endpoint_pauses));
  rc = rc ? rc : counter(o, "hookd_publish_backpressure_total",
                         "publishes answered 503 because the store fell behind",
                         LOAD(m->publish_backpressure));
  rc = rc ? rc : hist(o, "hookd_attempt_duration_seconds", "HTTP attempt latency",
                      &m->attempt_latency);
  rc = rc ? rc : hist(o, "hookd_first_attempt_delay_seconds",
                      "time from publish to the first attempt's start", &m->first_attempt_delay);
  rc = rc ? rc : hist(o, "hookd_delivered_after_seconds",
                      "time from publish to the 2xx that delivered it (outbound; not replays)",
                      &m->delivered_after);
  rc = rc ? rc : hist(o, "hookd_inbound_forwarded_after_seconds",
                      "time from the provider's request to the forward's 2xx (inbound; not"
                      " replays)",
                      &m->forwarded_after);
  rc = rc ? rc : hist(o, "hookd_publish_ack_seconds",
                      "time from a publish request to its 202 (the commit's fsync included)",
                      &m->publish_ack);
  rc = rc ? rc : hist(o, "hookd_inbound_ack_seconds",
                      "time from a provider's request to its 2xx (the commit's fsync included)",
                      &m->inbound_ack);
  return rc;
}

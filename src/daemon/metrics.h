/* metrics.h — process-wide counters, gauges and histograms, rendered as Prometheus text at
 * GET /metrics. Increments are relaxed atomics (any thread). Labels carry categories and ids,
 * never URLs or payloads. */
#ifndef HOOKD_DAEMON_METRICS_H
#define HOOKD_DAEMON_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/buf.h"
#include "store/store.h"

#define HOOKD_HIST_BUCKETS 15

/* Why an /in/ request was refused: hookd_inbound_rejected_total{reason} (a wrong secret told
 * apart from a clock off by more than the tolerance). */
typedef enum {
  HOOKD_REJECT_SIGNATURE_MISMATCH,
  HOOKD_REJECT_SIGNATURE_MALFORMED,
  HOOKD_REJECT_TIMESTAMP_STALE,
  HOOKD_REJECT_TIMESTAMP_FUTURE,
  HOOKD_REJECT_INVALID_JSON,
  HOOKD_REJECT_INVALID_REQUEST,
  HOOKD_REJECT_MEDIA_TYPE,
  HOOKD_REJECT_BODY_TOO_LARGE,
  HOOKD_REJECT__COUNT
} hookd_reject_reason;
extern const char *const hookd_reject_names[HOOKD_REJECT__COUNT];

/* Why an /in/ request was answered "retry later" (503, VNPay "99"), nothing stored:
 * hookd_inbound_unavailable_total{reason}. */
typedef enum {
  HOOKD_UNAVAIL_OVERLOADED,     /* more than --max-store-queue writes waiting */
  HOOKD_UNAVAIL_NO_DESTINATION, /* every destination of the source deleted */
  HOOKD_UNAVAIL_STORE,          /* the store failed the receive */
  HOOKD_UNAVAIL_CLOCK,          /* this node's clock outvoted (docs/postgres.md) */
  HOOKD_UNAVAIL__COUNT
} hookd_unavail_reason;

typedef struct hookd_hist {
  _Atomic uint64_t bucket[HOOKD_HIST_BUCKETS + 1]; /* cumulative at render; +Inf last */
  _Atomic uint64_t count;
  _Atomic uint64_t sum_us;
} hookd_hist;

/* Outcome and dead-reason label sets. */
enum { M_OUT_SUCCESS, M_OUT_HTTP_ERROR, M_OUT_TIMEOUT, M_OUT_DNS, M_OUT_CONNECT, M_OUT_TLS,
       M_OUT_BLOCKED, M_OUT_PROTOCOL, M_OUT_TOO_LARGE, M_OUT__COUNT };
/* Why an attempt did not succeed: the classifier's categories (core/classify.c). */
enum { M_FAIL_HTTP_3XX, M_FAIL_HTTP_408, M_FAIL_HTTP_410, M_FAIL_HTTP_429, M_FAIL_HTTP_4XX,
       M_FAIL_HTTP_5XX, M_FAIL_HTTP_OTHER, M_FAIL_TIMEOUT, M_FAIL_DNS, M_FAIL_CONNECT, M_FAIL_TLS,
       M_FAIL_BLOCKED, M_FAIL_PROTOCOL, M_FAIL_TOO_LARGE, M_FAIL__COUNT };
enum { M_DEAD_PERMANENT, M_DEAD_GONE, M_DEAD_BLOCKED, M_DEAD_MAX_ATTEMPTS, M_DEAD_MAX_AGE,
       M_DEAD_EXPIRED, M_DEAD_SUPERSEDED, M_DEAD_OPERATOR, M_DEAD__COUNT };

typedef struct hookd_metrics {
  _Atomic uint64_t http_requests[6];      /* by status class: 1xx..5xx, [0] other */
  _Atomic uint64_t http_head_timeouts;    /* connections cut: head late (--header-timeout-s) */
  _Atomic uint64_t http_request_timeouts; /* requests late (--request-timeout-s): 408 or cut */
  _Atomic uint64_t http_address_busy;     /* bodies refused: their address held its share */
  _Atomic uint64_t http_body_worker_requests; /* handled on a body worker (a big body) */
  _Atomic uint64_t events_published;
  _Atomic uint64_t publish_duplicates;
  _Atomic uint64_t publish_conflicts;
  _Atomic uint64_t deliveries_created;
  _Atomic uint64_t attempts[M_OUT__COUNT];
  _Atomic uint64_t attempt_failures[M_FAIL__COUNT]; /* by the classifier's category */
  _Atomic uint64_t retries_scheduled;
  _Atomic uint64_t delivered;
  _Atomic uint64_t dead[M_DEAD__COUNT];
  _Atomic uint64_t inbound_dead;          /* of those, forwards to an inbound destination */
  _Atomic uint64_t cancelled;             /* deliveries cancelled by their endpoint's delete */
  _Atomic uint64_t stale_outcomes;        /* fenced-out outcome writes */
  _Atomic uint64_t outcome_write_retries; /* outcome writes that failed and were tried again */
  _Atomic uint64_t claims;                /* claim operations */
  _Atomic uint64_t claimed;               /* deliveries claimed */
  _Atomic uint64_t leases_reclaimed;
  _Atomic uint64_t clock_steps;           /* steps of the wall clock the dispatcher made up for */
  _Atomic uint64_t clock_checks;          /* checks of the clock against a shared store's */
  _Atomic uint64_t endpoints_disabled;
  _Atomic uint64_t ops_events;       /* operational events published (--ops-tenant) */
  _Atomic uint64_t filters_over;     /* payload filters that gave up on an event's payload */
  _Atomic uint64_t egress_blocked;
  _Atomic uint64_t egress_stalls;    /* sockets read a second or more late: hookd's own stall */
  _Atomic uint64_t attempts_stalled; /* attempts timed out by such a stall */
  _Atomic uint64_t egress_fd_exhausted; /* requests not made: no file descriptor left */
  _Atomic uint64_t egress_local_failures; /* requests not made: hookd's proxy, CA file, port */
  _Atomic uint64_t egress_lookups_abandoned; /* requests ended before their name was resolved */
  _Atomic uint64_t replays;
  _Atomic uint64_t replay_skipped; /* replay jobs' items not replayed (docs/replay.md) */
  _Atomic uint64_t replay_recalled; /* moves taken back by a job's pause or cancel */
  _Atomic uint64_t replay_purged;  /* ended replay jobs' items deleted after a week */
  _Atomic uint64_t answers_purged; /* answers kept under Idempotency-Keys, deleted after 24 h */
  _Atomic uint64_t keys_purged;    /* API keys deleted a week after they expired */
  _Atomic uint64_t config_reads[2]; /* full reads of the API keys [0] and the sources [1] */
  _Atomic uint64_t auth_failures;
  _Atomic uint64_t unknown;                 /* deliveries held: ambiguous, not idempotent */
  _Atomic uint64_t inbound[HOOKD_RECV__COUNT]; /* by HOOKD_RECV_* outcome */
  _Atomic uint64_t inbound_rejected[HOOKD_REJECT__COUNT]; /* refused /in/ requests, by why */
  _Atomic uint64_t inbound_unavailable[HOOKD_UNAVAIL__COUNT]; /* /in/ requests told to retry */
  _Atomic uint64_t inbound_handshakes;
  _Atomic uint64_t inbox_purged;
  _Atomic uint64_t versions_purged; /* objects' and ordered lanes' newest versions forgotten */
  _Atomic uint64_t payloads_purged;
  _Atomic uint64_t events_expired;
  _Atomic uint64_t retention_failures; /* retention walks a store failure cut short */
  _Atomic uint64_t breaker_transitions;
  _Atomic uint64_t breaker_opens;
  _Atomic uint64_t endpoint_pauses;
  _Atomic uint64_t publish_backpressure;
  _Atomic uint64_t outbox_relayed;    /* outbox rows published as new events (docs/outbox.md) */
  _Atomic uint64_t outbox_duplicates; /* outbox rows the engine already had (a repeat) */
  _Atomic uint64_t outbox_refused;    /* outbox rows the engine refused (marked in the table) */
  _Atomic uint64_t outbox_deferred;   /* outbox rows the engine could not take now (a 5xx) */
  _Atomic uint64_t outbox_errors;     /* the outbox database's connection or query failures */
  _Atomic uint64_t outbox_standby;    /* batches not taken: another relay's batch held the table */
  _Atomic int64_t outbox_connected;   /* gauge: 1 while the relay holds a connection */
  _Atomic int64_t outbox_active;      /* gauge: 1 while it holds the table's relay lock */
  _Atomic int64_t outbox_lag_ms;      /* gauge: the oldest waiting row's age, as last seen */
  _Atomic int outbox_enabled;         /* an outbox is relayed: its series are shown */
  _Atomic uint64_t store_errors;            /* store ops or batches failed (store.error) */
  hookd_hist attempt_latency;             /* seconds */
  hookd_hist first_attempt_delay;         /* publish → first attempt start, seconds */
  hookd_hist delivered_after;             /* publish → the 2xx that delivered it (outbound) */
  hookd_hist forwarded_after;             /* provider's request → forward completed (inbound) */
  hookd_hist publish_ack;                 /* publish request → 202 (after the commit) */
  hookd_hist inbound_ack;                 /* provider's request → its 2xx (after the commit) */
} hookd_metrics;

extern hookd_metrics hookd_m;

#define HOOKD_INC(field) atomic_fetch_add_explicit(&hookd_m.field, 1, memory_order_relaxed)
#define HOOKD_ADD(field, n) atomic_fetch_add_explicit(&hookd_m.field, (n), memory_order_relaxed)

/* One observation, in ms (a wall-clock difference) or µs where a monotonic µs clock measured
 * it: a 1.9 ms attempt read as 1 ms was counted under le="0.001". */
void hookd_hist_observe_ms(hookd_hist *h, int64_t ms);
void hookd_hist_observe_us(hookd_hist *h, int64_t us);
int hookd_metrics_outcome_index(const char *outcome);
int hookd_metrics_dead_index(const char *reason);
/* The attempt_failures index of a classifier category, -1 for none (a success). */
int hookd_metrics_failure_index(const char *category);

/* Appends every counter and histogram above. */
int hookd_metrics_render(hookd_buf *out);
/* Helpers for gauges and histograms owned elsewhere. */
int hookd_metrics_gauge(hookd_buf *out, const char *name, const char *help, double v);
/* A gauge family's HELP and TYPE lines; its samples follow (name{labels} value). */
int hookd_metrics_family(hookd_buf *out, const char *name, const char *help, const char *type);

#endif

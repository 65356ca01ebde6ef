/* dispatcher.h — the thread that turns due deliveries into HTTP attempts.
 *
 * It owns the egress and an in-memory index of endpoints (a cache of the store, rebuilt at
 * start): per endpoint its configuration, `next_due` (earliest time the store may hold unclaimed
 * work for it), in-flight count and a small queue of claimed deliveries. Due endpoints are
 * claimed through the store writer (lease + token); claimed deliveries are signed and sent;
 * each outcome is decided by the pure state machine and written back fenced by the lease token.
 *
 * Every store operation of the dispatcher goes through the writer queue, so their completions
 * arrive in commit order: a claim's "next due" snapshot is authoritative when it arrives, and
 * later hints (publishes, retries) merge into it with min(). Other threads talk to the
 * dispatcher only through the thread-safe calls below. */
#ifndef HOOKD_DAEMON_DISPATCHER_H
#define HOOKD_DAEMON_DISPATCHER_H

#include <stdint.h>

#include "core/breaker.h"
#include "daemon/keyring.h"
#include "egress/egress.h"
#include "store/store.h"

typedef struct hookd_dispatcher hookd_dispatcher;

typedef struct hookd_dispatcher_config {
  hookd_store *store;
  const char *node_id;        /* lease owner name */
  int max_in_flight;          /* global concurrency cap */
  int tenant_max_in_flight;   /* a tenant's cap unless it sets one */
  int max_claim_ops;          /* claims in progress at most, each a writer operation (0: no
                                 bound): the daemon's is a quarter of --max-store-queue */
  int64_t disable_failing_after_ms; /* disable an endpoint failing this long (0 = never) */
  int64_t shutdown_grace_ms;  /* stopping: requests in flight longer are abandoned (0 = at once) */
  int64_t max_claimed_bytes;  /* bodies held by claimed deliveries, all tenants (0 = no bound) */
  int64_t max_body_bytes;     /* the largest a body can be (the first claims' estimate) */
  hookd_breaker_cfg breaker;  /* zero fields take the defaults */
  int lease_margin_ms;        /* lease = endpoint timeout + margin (+ queue allowance) */
  int max_timeout_ms;         /* an endpoint's stored timeout is capped at this (0 = no cap): a
                                 restart with a lower --max-timeout-ms bounds every request, as
                                 event retention's check against it assumes */
  const hookd_keyring *keyring; /* opens the endpoints' sealed secrets */
  bool svix_headers;          /* outbound deliveries carry svix-id, -timestamp, -signature too */
  const char *ops_tenant;     /* operational events are published to it (NULL: none) */
  int64_t sweep_interval_ms;  /* expired-lease reclaim cadence; default 1000 */
  int64_t rescan_interval_ms; /* full due-hint recomputation; default 30000 */
  bool shared_store;          /* other nodes write the store too (PostgreSQL): each rescan also
                                 reads back the endpoints and tenants they changed */
  hookd_egress_config egress;
} hookd_dispatcher_config;

/* An endpoint's health as the dispatcher of this node sees it (the API shows it). */
typedef struct hookd_endpoint_health {
  const char *breaker;        /* closed, open, half_open */
  int64_t breaker_opened_ms;
  int64_t breaker_retry_ms;   /* open: when it probes again */
  uint64_t breaker_opens;
  int in_flight;
  int queued;
  int64_t paused_until_ms;    /* Retry-After pause, 0 = none */
  bool slow;
  int64_t failing_since_ms;
  bool sending;               /* this node sends to it (its copy of `enabled`) */
  int64_t config_updated_ms;  /* the updated_at of the configuration this node applies */
  int share_max_in_flight;    /* this node's share of its max_in_flight (docs/postgres.md) */
  double share_rate;          /* and of its rate_limit, per second (0: none) */
} hookd_endpoint_health;

typedef struct hookd_dispatcher_stats {
  int in_flight;
  int queued;                 /* claimed, waiting for a slot */
  int endpoints;
  int tenants;                /* tenants it keeps limits and turns for (a deleted one forgotten) */
  int64_t oldest_due_ms;      /* earliest next_due among endpoints with due work, 0 if none */
  int64_t oldest_held_ms;     /* and among those an open breaker or a Retry-After pause holds */
  int64_t walked_ms;          /* when the walk that read oldest_due_ms ran */
  int breakers_open;
  int endpoints_paused;
  int endpoints_slow;
  int endpoints_failing;      /* enabled endpoints in a failing run, as this node sees them */
  int64_t oldest_failing_ms;  /* the earliest failing_since among them, 0 if none */
  int endpoints_disabled;     /* endpoints disabled (by an operator, a 410, a failing run) */
  int64_t claimed_body_bytes; /* bodies held by claimed deliveries, each event's once */
  bool claims_held;           /* a step of the wall clock: this node's stored leases are still
                                 to be moved, so it claims and sweeps nothing meanwhile; or, on a
                                 shared store, its clock is off the database's (or not checked
                                 yet) */
  int64_t clock_skew_ms;      /* shared store: the database's clock minus this node's, at the
                                 last check */
  int nodes;                  /* shared store: the nodes running on it, at the last count */
} hookd_dispatcher_stats;

/* Loads endpoints, releases this node's old leases (not on a shared store: other nodes may be
 * sending under theirs), starts the thread; every endpoint starts due. */
hookd_dispatcher *hookd_dispatcher_start(const hookd_dispatcher_config *cfg, char *err,
                                         size_t errlen);

/* Thread-safe notifications. */
void hookd_dispatcher_hint(hookd_dispatcher *d, const char *endpoint_id, int64_t due_ms);
void hookd_dispatcher_rescan(hookd_dispatcher *d);
/* A shared store's change feed saw a change another node (or this one) committed: the rescan
 * that applies it runs soon (100 ms after the last one at least, docs/postgres.md "Several
 * nodes"); missed (the feed listens again after a break): at once. */
void hookd_dispatcher_store_changed(hookd_dispatcher *d, bool missed);
/* An event's payload was deleted: what this node claimed of it and has not sent is given back
 * (its deliveries are cancelled in the store), not sent. */
void hookd_dispatcher_event_purged(hookd_dispatcher *d, int64_t event_seq);
/* Counts and logs n deliveries held `unknown` other than by an attempt's outcome (why: the
 * log line's reason). */
void hookd_held_unknown(int n, const char *why);
/* ep is copied. Deleted endpoints have deleted_ms set. */
void hookd_dispatcher_endpoint_changed(hookd_dispatcher *d, const hookd_endpoint *ep);

/* t is copied: its limits and weight apply from now on. */
void hookd_dispatcher_tenant_changed(hookd_dispatcher *d, const hookd_tenant *t);
/* The tenant was deleted (its endpoints posted as deleted before): forgotten once nothing of it
 * is left in the dispatcher (tenants made and deleted through the API would pile up, each
 * walked five times a second). */
void hookd_dispatcher_tenant_deleted(hookd_dispatcher *d, const char *id);
/* Calls fn(arg) on the dispatcher thread once every change posted before it (the two calls
 * above) is applied: what the API answers after a change, since no request starts under the
 * old configuration from then on. Out of memory, fn runs at once, on the calling thread. */
void hookd_dispatcher_sync(hookd_dispatcher *d, void (*fn)(void *), void *arg);

void hookd_dispatcher_get_stats(hookd_dispatcher *d, hookd_dispatcher_stats *out);
/* Calls fn for each endpoint's health snapshot, under the snapshots' lock (fn must be quick and
 * must not call back into the dispatcher); stops when fn returns non-zero, returning that. */
int hookd_dispatcher_health_each(hookd_dispatcher *d,
                                 int (*fn)(void *arg, const char *endpoint_id,
                                           const hookd_endpoint_health *h),
                                 void *arg);
/* Returns 0 and fills out, or -1 when this node's dispatcher does not know the endpoint. */
int hookd_dispatcher_endpoint_health(hookd_dispatcher *d, const char *endpoint_id,
                                     hookd_endpoint_health *out);

/* Graceful stop: no new claims; queued deliveries are released; in-flight requests finish and
 * their outcomes are recorded. Then the thread exits and everything is freed. Returns how many
 * outcomes and releases could not be written (the store failing): they are redone after the
 * restart, as after a crash. Returns -1, freeing nothing, when the thread has not ended
 * HOOKD_DISPATCHER_STOP_MARGIN_MS past the grace period (a store op that never returns: a
 * PostgreSQL write waiting on a lock an operator's session holds): the caller exits at once. */
#define HOOKD_DISPATCHER_STOP_MARGIN_MS 30000
int hookd_dispatcher_stop(hookd_dispatcher *d);

/* The clock guard's bound (docs/postgres.md "The clock guard"): a quarter of the lease margin,
 * so that two nodes that claim are within half of it — the room a request is sent with. */
static inline int64_t hookd_clock_bound_ms(int64_t lease_margin_ms) { return lease_margin_ms / 4; }

/* The most the net of the wall clock's steps the dispatcher has taken since the start has read
 * behind where it was at the start (ms; any thread; steps forward count against steps back):
 * what is stamped meanwhile reads older than it is by up to this once the clock is set right,
 * so retention keeps everything that much longer (docs/architecture.md "Clocks"). */
int64_t hookd_dispatcher_stepped_back_ms(hookd_dispatcher *d);
/* A shared store: this node's clock is not checked yet, or outvoted by the clock guard
 * (docs/postgres.md): retention, which deletes by it, waits. Thread-safe. */
bool hookd_dispatcher_clock_holds(hookd_dispatcher *d);
/* A shared store: this node's clock was outvoted at its last check by the database's and other
 * live nodes' (not a step being checked, nor a lone node's disagreement). Thread-safe; false
 * without a dispatcher (not started yet). */
bool hookd_dispatcher_clock_outvoted(hookd_dispatcher *d);

#endif

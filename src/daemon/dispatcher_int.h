/* dispatcher_int.h — the dispatcher's internal structures, shared by dispatcher.c (the thread,
 * its inbox, store operations and outcomes) and dispatcher_sched.c (what is claimed and what is
 * sent: tenants, endpoint readiness, limits, budgets, breakers, timers). Everything here is
 * owned by the dispatcher thread unless a field says otherwise. docs/isolation.md explains the
 * policies. */
#ifndef HOOKD_DAEMON_DISPATCHER_INT_H
#define HOOKD_DAEMON_DISPATCHER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/breaker.h"
#include "core/bucket.h"
#include "core/sign.h"
#include "core/strmap.h"
#include "daemon/dispatcher.h"
#include "store/storeq.h"

/* Traffic classes with separate budgets. */
enum { CLS_LIVE = 0, CLS_RETRY, CLS_REPLAY, CLS__COUNT };

/* The shortest Retry-After honoured (HTTP's resolution is a second). */
#define RETRY_AFTER_FLOOR_MS 1000
/* Fast successes in a row that clear an endpoint's slow flag. */
#define SLOW_CLEAR_STREAK 8
/* A request held longer than this is slow whatever its endpoint's timeout (half of it, below):
 * timeouts are the tenants' own, up to 60 s, and four tenants whose receivers answered just
 * under half of theirs held the global cap, every other tenant down to its reserve (a review). */
#define SLOW_ABS_MS 5000
/* What an endpoint holding nothing may always claim, whatever its tenant's claim budget: its
 * tenant's other endpoints (a wall of hanging ones) cannot take every claim from it. */
#define EP_CLAIM_FLOOR 4

struct ep;
struct tenant;
struct item;

typedef enum {
  MSG_HINT, MSG_RESCAN_REQ, MSG_STORE_CHANGED, MSG_EVENT_PURGED, MSG_ENDPOINT, MSG_TENANT,
  MSG_CLAIMED,
  MSG_RECORDED, MSG_RELEASED, MSG_MARKED, MSG_SWEPT, MSG_RESCANNED, MSG_LEASES_MOVED, MSG_SYNC
} msg_type;

/* A message to the dispatcher thread (from other threads, or store completions). */
typedef struct msg {
  msg_type type;
  struct msg *next;
  struct hookd_dispatcher *d;
  hookd_store_op op;
  int rc;
  char *endpoint_id;          /* MSG_HINT, MSG_CLAIMED (copy for the writer thread) */
  int64_t due_ms;
  hookd_endpoint ep;          /* MSG_ENDPOINT */
  hookd_tenant tenant;        /* MSG_TENANT */
  bool tenant_deleted;        /* MSG_TENANT: the tenant was deleted (only its id is set) */
  hookd_claim_req claim;      /* MSG_CLAIMED */
  struct ep *claim_ep;
  int64_t claim_back_ms;      /* MSG_CLAIMED: d->clock_back_ms at its submit */
  hookd_claimed *claimed;
  size_t n_claimed;
  int64_t next_due;
  hookd_due_hint *hints;      /* MSG_SWEPT, MSG_RESCANNED */
  size_t n_hints;
  int reclaimed, held;        /* MSG_SWEPT: leases reclaimed; of them, held unknown
                                 MSG_LEASES_MOVED: reclaimed = leases moved */
  int64_t now_ms;
  struct item *item;          /* MSG_RECORDED, MSG_RELEASED, MSG_MARKED */
  hookd_endpoint *eps;        /* MSG_RESCANNED on a shared store: endpoints changed since */
  size_t n_eps;
  hookd_tenant *tenants;      /* and every tenant (their limits) */
  size_t n_tenants;
  bool clock_read;            /* MSG_RESCANNED on a shared store: the database's clock was read */
  int64_t skew_ms, skew_err_ms; /* its time minus this node's, give or take skew_err_ms */
  hookd_clock_voter *votes;   /* and the other live nodes' skews to it (the clock guard's vote) */
  size_t n_votes;
  uint64_t clock_gen;         /* d->clock_gen when the rescan was sent: a step since voids it */
  int64_t sent_mono_ms;       /* and when (monotonic: its time taken, the change feed's gap) */
  int nodes;                  /* and the nodes running on it (0: not read) */
  bool pauses_read;           /* and its endpoints paused by a receiver were read: */
  hookd_due_hint *pauses;     /* these (due_ms: until when) */
  size_t n_pauses;
  void (*sync_fn)(void *);    /* MSG_SYNC: called once every message before it is applied */
  void *sync_arg;
} msg;

/* A claimed event's body, shared by its claimed deliveries: an event fanned out to many
 * endpoints is held once, however many of its deliveries are claimed (d->bodies). */
typedef struct body_ref {
  int refs;
  char *data;
  size_t len;
  struct tenant *t;            /* the event's tenant: its claimed bytes count there too */
} body_ref;

/* A webhook-signature header's value: two signatures (v1a, Ed25519's, the longest) during a
 * rotation's overlap, a blank between them */
#define DISP_SIG_MAX (2 * 100 + 2)

/* One claimed delivery, from claim to recorded outcome. */
typedef struct item {
  hookd_claimed c;             /* c.body borrowed from body when that is set */
  body_ref *body;
  struct ep *ep;
  struct item *next;          /* endpoint class-queue link */
  int cls;                    /* CLS_* */
  bool slow;                  /* counted in the slow share while in flight */
  bool newcomer;              /* counted in its tenant's newcomer share while in flight */
  bool spare;                 /* started by an idle endpoint past the global cap's refusal:
                                 counted in the dispatcher's spare_in_flight (sched spare_ep) */
  bool probe;                 /* sent as a half-open breaker probe (of the breaker of
                                 probe_gen: disp_probe) */
  unsigned probe_gen;
  hookd_egress_req req;
  struct curl_slist *hdrs;
  bool wipe_hdrs;             /* hdrs carry the endpoint's custom headers: wiped when freed */
  char sig[DISP_SIG_MAX];     /* the webhook-signature it was sent with (masked in its
                                 response: dispatcher.c on_http_done) */
  char *url;                  /* req.url: the item's own copy (an endpoint update frees the
                                 endpoint's while the request may still be connecting, and the
                                 connect-time check reads it) */
  int64_t first_delay_ms;     /* from its event's publish to this send (the first attempt's
                                 delay, observed once that attempt is recorded) */
  int64_t sent_ms;            /* wall clock, moved by its steps (dispatcher.c clock_stepped):
                                 how long it has been out, and whether before the endpoint's
                                 stored health_since */
  int64_t stall_credit_ms;    /* the stalls of hookd's own while it was out (disp_stalled):
                                 taken off how long it has been out, and off its latency, for
                                 the slow mark alone (sent_ms is left: it dates the request
                                 against the endpoint's changes) */
  hookd_store_op op;          /* record, release or the send mark */
  msg done;                   /* posted back when op completes (no allocation) */
  bool recording;
  bool hold_counted;          /* counted in outcomes_out while its write is at the writer */
  bool marking;               /* op is the send mark; counted in flight meanwhile */
  bool marked;                /* the send mark of its lease is committed: it may go out */
  bool mark_written;          /* the send mark is committed, sent or not (its release must land:
                               * else the sweep holds a delivery never sent as unknown) */
  bool purged;                /* its request was ended before it was sent: its payload was
                                 deleted (released, no attempt) */
  bool maybe_sent;            /* given back after its request may have gone out (an outcome
                                 that could not be decided): hookd_release.maybe_sent */
  char *endpoint_id;          /* copy for the writer thread */
  hookd_outcome out;
  char last_error[32];
  char dead_reason[32];
  char disable_reason[96];
  char result_ref[256];
  hookd_publish_res ops[2];   /* operational events the outcome published (their endpoints are
                                 hinted once it is done) */
  int rc;
  int record_tries;           /* outcome writes that failed with a store error */
  int64_t retry_ms;           /* when to write the outcome again (in d->record_retry) */
  int64_t op_net_ms, op_back_ms; /* d->clock_net_ms and d->clock_back_ms at its op's submit:
                                    the steps taken while its op was out, caught up with at
                                    its end (catch_up_steps) */
  struct item *retry_next;
  struct hookd_dispatcher *d;
} item;

/* A log line that a failing dependency would repeat for every item: one a second, with how
 * many it stands for (disp_log_pass). */
typedef struct disp_log_throttle {
  int64_t last_ms;  /* the last line (the clock passed in) */
  int64_t muted;    /* occurrences not logged since */
} disp_log_throttle;
/* true when a line may be written now (*muted: the occurrences it stands for besides its own);
 * else the occurrence is counted for the next. now_ms: the monotonic clock (a wall clock
 * stepped back would mute the lines for as long as the step). */
bool disp_log_pass(disp_log_throttle *t, int64_t now_ms, int64_t *muted);

typedef struct tenant {
  char *id;
  int max_in_flight;          /* effective cap */
  int weight;
  hookd_bucket bucket;
  int in_flight, queued, slow_in_flight;
  int new_in_flight;          /* its newcomers' requests in flight (ep_newcomer) */
  int slow_eps;               /* its endpoints marked slow (kept as they change; the stats walk
                                 recounts it) */
  int claiming;               /* limits of its endpoints' claims not completed yet */
  int claim_ops;              /* its endpoints' claims in progress (the ops bound's share) */
  int64_t body_bytes;         /* bytes of the bodies its claimed deliveries hold */
  struct ep *ready_head, *ready_tail; /* endpoints with something they may send */
  int ready_idle;             /* those of them that may take a spare slot: holding no request,
                                 proven, not slow (sched_ep_idle_sync; spare_ep) */
  bool in_ring;               /* in the dispatcher's sending ring */
  struct tenant *ring_next;
  int turn_left;              /* sends left in its current turn */
  bool keep_turn;             /* left the ring mid-turn for the global reserve: goes on with it */
  bool serving;               /* the scheduler is serving its turn: not re-queued meanwhile */
  bool blocked_cap;           /* out of the ring until one of its requests completes */
  int64_t wake_ms;            /* rate-limited: back in the ring then (0 = not waiting) */
  struct tenant *wait_next;
  bool waiting;
  int refs;                   /* endpoints pointing here */
  bool deleted;               /* deleted: freed once no endpoint and no work is left of it */
  int64_t known_mono_ms;      /* when this node first knew of it (forget_tenants_gone) */
  uint64_t listed_gen;        /* the last shared-store rescan whose tenant list held it */
  bool share_blocked;         /* on d->share_wait: the global cap is down to its reserve, or to
                                 the band above it and the tenant holds its fair share */
  struct tenant *share_next;
  struct ep *share_wait;      /* its endpoints stopped by the reserve of its cap */
  bool demanding;             /* it has work ready to send: endpoints ready and neither its cap
                                 nor its rate holds it (weighed in d->demand_weight) */
  int demand_eps;             /* its endpoints with work ready to send (ep.demanding) */
  int demand_held;            /* the requests in flight of those endpoints */
  int ready_live;             /* its endpoints with live_ready set */
  int in_flight_cls[CLS__COUNT];
} tenant;

typedef struct ep {
  hookd_endpoint cfg;         /* as stored: secrets sealed */
  tenant *t;
  bool ed25519;
  hookd_hmac_key key, prev_key;
  char *ed_key, *prev_ed_key;
  bool has_prev;
  int64_t prev_until_ms;
  char *header_lines;         /* its custom headers opened, "Name: value\n" each (NULL none) */
  char *redact_lines;         /* what an excerpt of its answers must not show, as header lines:
                               * those values and its signing secrets' text (NULL none) */
  bool key_ok;                /* its secret (and custom headers) opened: it may be sent to */
  bool gone;
  uint64_t pause_gen;         /* apply_pauses: pause_stored is the store's pause of this rescan */
  int64_t pause_stored;       /* when pause_gen is the dispatcher's */
  bool pause_adopted;         /* paused_until is held in the store: another node's Retry-After
                                 read there, or this node's own once its write committed (shared
                                 store): lifted when the store no longer has it (apply_pauses) */
  bool disabled_by_outcome;   /* disabled in memory by an outcome not yet known to be stored
                                 (a configuration from the store supersedes it) */
  int share_limit;            /* its max_in_flight, this node's share (at least 1) */
  double share_rate;          /* its rate_limit, this node's share (0: none) */
  int in_flight;
  int in_flight_replays;      /* of them, replayed deliveries */
  bool last_turn;             /* the last request sent was a replay or a retry (ordered: they
                                 take turns with live work) */
  int queued;                 /* all classes */
  int claiming;               /* limit of its claim in progress (0 = none) */
  int item_ops;               /* its items' record/release ops not completed yet */
  item *q_head[CLS__COUNT], *q_tail[CLS__COUNT];
  int64_t next_due;           /* 0 = nothing known due */
  size_t heap_pos;            /* claim heap, index + 1 (0 = not in it) */
  int64_t heap_key;           /* when it may claim: max(next_due, pause, breaker) */
  bool capped;                /* put off by the claims-in-progress bound: its key brought back
                                 to now once they fall to half the bound (sched_claims_freed) */
  bool in_ready;              /* in its tenant's ready list */
  bool live_ready;            /* in_ready with live deliveries queued (counted in its tenant's
                                 ready_live) */
  struct ep *ready_next, *ready_prev; /* (doubly linked: a removal is O(1), not a walk of a
                                       * tenant's thousands of ready endpoints) */
  size_t wake_pos;            /* wake heap (rate limit, pause, breaker), index + 1 */
  int64_t wake_ms;
  bool budget_blocked;        /* waiting for a retry/replay budget (on d->budget_wait) */
  bool slow_blocked;          /* waiting for the slow or newcomer share (on d->slow_wait) */
  bool share_blocked;         /* on its tenant's share_wait: the tenant cap is down to its
                                 reserve, or to the band above it and e holds its fair share */
  struct ep *share_next;
  bool demanding;             /* in_ready or share_blocked: counted in its tenant's demand_eps
                                 (the fair shares of the band above the reserve) */
  bool idle_counted;          /* counted in its tenant's ready_idle (sched_ep_idle_sync) */
  /* one link per wait list: an endpoint may be on both (waiting for a budget, then served by a
   * claim and stopped by the slow share), and a shared link crossed the lists */
  struct ep *budget_next, *slow_next;
  hookd_bucket bucket;
  hookd_breaker br;
  unsigned br_gen;            /* counts the breaker's resets (a new URL, a re-enable): a probe
                                 sent before one is not the new breaker's */
  int64_t paused_until;       /* Retry-After from a 429/503 */
  int64_t fd_wait_until;      /* no claim before: hookd was out of file descriptors */
  int64_t lookup_hold_until;  /* nothing sent before: a request of it left a name lookup behind
                                 (docs/isolation.md "A name server that never answers") */
  int64_t health_since;       /* moved to another URL or enabled again by an operator then: what
                               * a request sent before answers says nothing of its health */
  bool slow;                  /* an attempt timed out or took half its timeout, and fewer than
                               * SLOW_CLEAR_STREAK fast successes followed */
  int fast_streak;            /* fast successes since the last slow attempt */
  bool proven;                /* an attempt of it has ended since hookd started (or its URL last
                               * changed): until then, in a tenant with slow endpoints, it sends
                               * within the newcomer share */
  int64_t failing_since;      /* first failure since the last success (0 = healthy) */
  int64_t failing_since_stored; /* the same as the store has it (a clock step moves only the
                                   one above) */
} ep;

/* How long a request of endpoint e may be held before it counts slow: half its timeout, and
 * SLOW_ABS_MS at most. */
static inline int64_t ep_slow_after_ms(const ep *e) {
  int64_t half = (int64_t)e->cfg.timeout_ms / 2;
  return half < SLOW_ABS_MS ? half : SLOW_ABS_MS;
}

/* Marks an endpoint slow or clears the mark, keeping its tenant's count — of enabled endpoints
 * only, as the stats walk recounts it (a disabled one holds back no newcomer). */
void sched_ep_idle_sync(ep *e);
static inline void ep_set_slow(ep *e, bool slow) {
  if (e->slow == slow) return;
  e->slow = slow;
  if (e->cfg.enabled && !e->gone) e->t->slow_eps += slow ? 1 : -1;
  sched_ep_idle_sync(e);
}

/* Whether the endpoint is a newcomer: never heard from, in a tenant with slow endpoints. Its
 * requests count in the tenant's newcomer share — a wave of new endpoints that hang looks like
 * any other traffic until half their timeout, and would take the whole tenant cap from its
 * healthy endpoints again after each wave before it (docs/isolation.md "Slow endpoints"). */
static inline bool ep_newcomer(const ep *e) {
  return !e->slow && !e->proven && e->t->slow_eps > 0;
}

/* An inbound destination marked idempotent: false: a request that may have reached it is never
 * sent again without an operator (held `unknown`; the store's RECLAIM_NO_RESEND holds a
 * reclaimed lease the same way when its send mark is there). */
static inline bool ep_no_resend(const ep *e) { return e->cfg.source_id && !e->cfg.idempotent; }

/* Whether the endpoint's lanes wait on a DEAD head (ordered, lane_policy block). */
static inline bool ep_lanes_block(const ep *e) {
  return e->cfg.ordered && e->cfg.lane_policy && !strcmp(e->cfg.lane_policy, "block");
}

/* Whether the item is a probe of its endpoint's breaker as it is now: one sent before the
 * breaker was reset neither decides the new one nor gives back its probe slot (a second probe
 * would go out beside the new breaker's own). */
static inline bool disp_probe(const item *it) {
  return it->probe && it->probe_gen == it->ep->br_gen;
}

/* Whether the item's lease leaves room for a request (its timeout) and its outcome's write
 * (half the lease margin: a loop pass, a store queue behind a long batch — with a second, an
 * outcome landing late found the lease taken by the sweep and the delivery was sent again):
 * else it is given back and claimed again rather than lapse mid-request (checked before the
 * send mark, and again once it is committed). */
static inline bool disp_lease_room(const item *it, const ep *e, int64_t now, int64_t margin_ms) {
  int64_t room = margin_ms / 2 > 1000 ? margin_ms / 2 : 1000; /* (a second at least, as before) */
  return it->c.d.leased_until_ms - now >= e->cfg.timeout_ms + room;
}

/* A snapshot of an endpoint's health for the API (guarded by hookd_dispatcher.health_mu). */
typedef struct ep_health_rec {
  hookd_endpoint_health h;
} ep_health_rec;

struct hookd_dispatcher {
  hookd_dispatcher_config cfg;
  char *node_id;
  hookd_store *store;
  hookd_egress *eg;
  pthread_t thread;

  pthread_mutex_t mu;         /* guards inbox, stats, exited */
  pthread_cond_t exited_cv;   /* CLOCK_MONOTONIC: the loop's thread has ended (exited) */
  bool exited;
  msg *in_head, *in_tail;
  disp_log_throttle fd_exhausted_log; /* egress.fd_exhausted / local_failure lines */
  _Atomic bool stopping;      /* set by hookd_dispatcher_stop, read by the loop anywhere */
  int64_t stop_ms;            /* when the loop saw the stop (monotonic), 0 before */
  int writes_given_up;        /* outcomes and releases not written while stopping */
  hookd_dispatcher_stats stats;

  pthread_mutex_t health_mu;  /* guards health (read by API threads) */
  hookd_strmap health;        /* endpoint id → ep_health_rec* */

  hookd_strmap eps;
  hookd_strmap tenants;
  uint64_t rescans_applied;  /* shared-store rescans applied (tenant.listed_gen) */
  ep **heap;                  /* claim heap by heap_key */
  size_t heap_len, heap_cap;
  ep **wake;                  /* wake heap by wake_ms */
  size_t wake_len, wake_cap;
  tenant *ring_head, *ring_tail; /* tenants with endpoints ready to send */
  tenant *tenant_wait;        /* rate-limited tenants */
  ep *budget_wait, *slow_wait;
  tenant *share_wait;         /* tenants stopped by the reserve of the global cap, or by their
                                 fair share of the band above it */
  int demand_weight;          /* the weights of the tenants with work ready (tenant.demanding):
                                 the band's fair shares divide the global cap by it */
  int demand_held;            /* the requests in flight of those tenants (the rest are held by
                                 tenants wanting no more: not shared out) */
  int in_flight, queued, slow_in_flight;
  int spare_in_flight;        /* requests started past the global cap's refusal (item.spare) */
  hookd_strmap bodies;        /* event seq (decimal) → body_ref of claimed deliveries */
  int64_t body_bytes;         /* bytes of those bodies (each counted once) */
  int64_t claim_bytes_avg;    /* new body bytes per claimed delivery (moving average): what a
                                 claim still in progress is expected to add */
  int claiming;               /* limits of the claims in progress: counted against the claim
                                 budgets before they return, or one pass over many due endpoints
                                 claims far past them */
  int claim_ops;              /* claims in progress (cfg.max_claim_ops bounds them) */
  bool capped_any;            /* endpoints were put off by that bound (ep.capped) */
  int in_flight_cls[CLS__COUNT];
  /* live deliveries that could take a global slot now: endpoints with live_ready, of tenants
   * neither at their cap nor waiting for their rate limit. The retry and replay budgets apply
   * only while there are some (a live delivery stopped by its own endpoint's or tenant's limits
   * leaves the global slots idle, and lends them) */
  int ready_live;
  int cls_weight[CLS__COUNT]; /* weights of the tenants with requests of the class in flight */
  ep **later;                 /* a claim pass's endpoints stopped by the caps */
  size_t later_cap;
  int store_ops;
  int stall_ended;            /* requests ended by a stall's timeouts, since the last one said */
  int breakers_open;          /* endpoints whose breaker is not closed (the stats walk counts
                                 them; a breaker's move adjusts the count between walks) */
  hookd_dispatcher_stats published; /* what update_counts last copied into stats */
  item *record_retry;         /* outcomes whose write failed, waiting to be written again */
  int64_t retries_hurried_ms; /* when a write that landed last brought those forward (mono) */
  int64_t write_failed_ms;    /* when an outcome's write last failed (mono) */
  int64_t write_landed_ms;    /* when a write of the dispatcher's last landed (mono) */
  int64_t claims_held_ms;     /* since when a waiting outcome holds claims with the store taking
                                 writes again (mono; 0: not so) */
  int64_t claims_held_since_ms; /* since when claims are held for waiting outcomes (mono) */
  bool claims_hold_over;      /* the hold's bound passed: not again until those are written */
  int outcomes_out;           /* answers past their leases at the writer, written again */
  bool sweeping, rescanning;
  int64_t next_sweep_ms, next_rescan_ms;
  int64_t rescan_sent_ms;     /* when the last rescan was sent (the change feed's spacing) */
  int64_t rescan_took_ms;     /* and how long the last that succeeded took, sent to applied */
  int64_t config_seen_ms;     /* shared store: the latest endpoint change read back */
  int64_t clock_offset_us;    /* wall clock minus monotonic clock at the last check, µs: a change
                                 of CLOCK_STEP_MS or more is a step (docs/architecture.md
                                 "Clocks") */
  int64_t clock_forward_ms;   /* the steps forward taken so far, added to the age of a cycle
                                 started before the latest (its max age counts time passed) */
  int64_t clock_forward_at;   /* when the latest was taken (dispatcher time) */
  int64_t clock_net_ms;            /* the clock steps taken, net (+ forward) */
  int64_t clock_back_ms;           /* the steps back taken, summed (<= 0): the leases held in
                                      memory moved by them (a claim or an item's op out
                                      meanwhile catches up at its end), the stored ones not */
  uint64_t pause_gen;              /* apply_pauses's rescans, counted (ep.pause_gen) */
  _Atomic int64_t stepped_back_ms; /* the most clock_net_ms has read behind 0 (by retention) */
  int64_t lease_move_pending; /* ms this node's stored leases still have to move forward: no
                                 claim nor sweep runs until they have (one would take them over) */
  bool lease_moving;          /* that move's op is in the writer's queue */
  int64_t lease_move_retry_ms; /* a failed move is tried again then (monotonic) */
  uint64_t lease_move_failures; /* failed moves in a row (logged once, then once a minute) */
  int64_t lease_move_logged_ms; /* when the last of those was logged (monotonic) */
  int nodes;                  /* nodes running on the store, this one included: each applies
                                 its share of the customers' limits (sched_share) */
  disp_log_throttle claim_fail_log; /* claim.failed lines */
  bool clock_checked;         /* shared store: the database's clock was read once at least */
  atomic_bool clock_agrees;   /* shared store: checked, and not outvoted (read by retention) */
  atomic_bool clock_outvoted; /* outvoted at the last check, other live nodes voting (read by
                                 /readyz: a lone node has no other to send the traffic to) */
  bool clock_skewed;          /* and this node's wall clock was outvoted at the last read: no
                                 claim nor sweep (docs/postgres.md "The clock guard") */
  int64_t outvoted_skew_ms;   /* outvoted by other nodes: the database's time minus this node's
                                 at the last check (an outcome's next attempt is written on the
                                 database's clock), else 0 */
  bool store_clock_off;       /* and it won the vote against the database's clock */
  bool claims_shown;          /* stats.claims_held as last set (the loop sets it on a change) */
  uint64_t clock_gen;         /* steps of the wall clock seen: a check read before one is void */
  int64_t next_stats_ms;      /* the loop's next stats walk (0: at the next pass) */
  bool stats_busy;            /* the last walk saw work (due, in flight, paused, a breaker not
                                 closed): the loop wakes for the next one */
  hookd_breaker_cfg breaker_cfg;
};

/* dispatcher_sched.c */
tenant *sched_tenant(hookd_dispatcher *d, const char *id);
void sched_tenant_apply(hookd_dispatcher *d, tenant *t, const hookd_tenant *cfg);
void sched_tenant_release(hookd_dispatcher *d, tenant *t);
void sched_tenant_deleted(hookd_dispatcher *d, const char *id);
void sched_ep_schedule(hookd_dispatcher *d, ep *e);   /* claim heap membership and key */
void sched_ep_ready(hookd_dispatcher *d, ep *e);      /* may it send? ready list, waits */
void sched_ep_unlink(hookd_dispatcher *d, ep *e);     /* out of every list and heap */
void sched_enqueue(hookd_dispatcher *d, ep *e, item *it);
void sched_release_queue(hookd_dispatcher *d, ep *e); /* claimed deliveries back to the store */
void sched_claim_due(hookd_dispatcher *d, int64_t now);
/* A claim completed: the endpoints the claims-in-progress bound put off are due again once the
 * claims in progress have fallen to half the bound. */
void sched_claims_freed(hookd_dispatcher *d, int64_t now);
void sched_dispatch(hookd_dispatcher *d, int64_t now);
void sched_wake(hookd_dispatcher *d, int64_t now);    /* timers that have fired */
/* The wall clock as the dispatcher thread keeps it: as of the thread's last check (once a turn
 * of its loop, which makes up for a step first), carried on by the monotonic clock; no side
 * effect, so a step never moves what a caller is halfway through (docs/architecture.md
 * "Clocks"). Every read of the dispatcher thread goes through it. */
int64_t disp_now(hookd_dispatcher *d);
/* Moves the in-process timers of endpoints and tenants by a step of the wall clock. */
void sched_clock_step(hookd_dispatcher *d, int64_t delta_ms);
void sched_sent_done(hookd_dispatcher *d, item *it);  /* a request finished: free its slot */
void sched_mark_overdue(hookd_dispatcher *d, int64_t now); /* in flight past half the timeout */
bool sched_share_recheck(hookd_dispatcher *d); /* the band's shares, when no answer comes */
/* Marks e slow (an overdue request, or a slow or timed-out answer): its requests still in flight
 * count in the slow share from now. */
void sched_ep_marked_slow(hookd_dispatcher *d, ep *e);
/* ms until the next timer (claims: false while this node claims nothing, leases_current) */
int64_t sched_next_timer(hookd_dispatcher *d, int64_t now, bool claims);
void sched_health_update(hookd_dispatcher *d, ep *e);
void sched_health_remove(hookd_dispatcher *d, const char *id);
int sched_ep_limit(const ep *e);
/* This node's share of a limit customers set, with d->nodes nodes running on the store
 * (docs/postgres.md "Several nodes"): a count rounded down, at least 1 (0 stays 0, none). */
int sched_share(const hookd_dispatcher *d, int limit);
double sched_share_rate(const hookd_dispatcher *d, double rate);
/* Sets the endpoint's shares of its max_in_flight and rate_limit, and its rate's bucket. */
void sched_ep_share(hookd_dispatcher *d, ep *e, int64_t now);
/* The breaker blocks this endpoint now (open, cool-down not over; half-open moves lazily). */
bool sched_breaker_blocks(hookd_dispatcher *d, const ep *e, int64_t now);

/* dispatcher.c */
void disp_submit_claim(hookd_dispatcher *d, ep *e, int limit, int replay_limit, int64_t now);
void disp_release_item(hookd_dispatcher *d, item *it);
void disp_record_without_attempt(hookd_dispatcher *d, item *it, const char *reason);
int disp_send_item(hookd_dispatcher *d, item *it, int64_t now);
void disp_mark_item(hookd_dispatcher *d, item *it);
void disp_record_hold(hookd_dispatcher *d, item *it); /* held unknown, not sent (see .c) */

#endif

/* dispatcher_sched.c — what the dispatcher claims and what it sends (docs/isolation.md).
 *
 *  - claim heap: endpoints by the time they may claim (max of next due, Retry-After pause,
 *    breaker cool-down); claims are bounded per endpoint, per tenant and globally, with a fair
 *    share that a small tenant may always claim;
 *  - sending: a ring of tenants with ready endpoints, in weighted round robin; each tenant's
 *    endpoints in round robin; per endpoint a live, a retry and a replay queue with budgets;
 *  - an endpoint leaves its tenant's ready list when it cannot send (empty, at its cap,
 *    rate-limited, paused, breaker open, waiting for a budget or the slow share) and comes back
 *    when that changes (a claim, a completion, a timer on the wake heap);
 *  - a tenant leaves the ring when it has no ready endpoint, is at its cap (back on one of its
 *    completions) or is rate-limited (back when its bucket refills). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/share.h"
#include "daemon/dispatcher_int.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

#define CLAIM_LIMIT_MAX 256

static void share_wait_remove(ep *e);
static void flush_share_eps(hookd_dispatcher *d, tenant *t);
static void tenant_hold(hookd_dispatcher *d, tenant *t, bool *flag, bool on);

int sched_ep_limit(const ep *e) { return e->share_limit > 0 ? e->share_limit : 1; }

int sched_share(const hookd_dispatcher *d, int limit) {
  if (limit <= 0 || d->nodes <= 1) return limit;
  return limit / d->nodes > 0 ? limit / d->nodes : 1;
}

double sched_share_rate(const hookd_dispatcher *d, double rate) {
  return rate > 0 && d->nodes > 1 ? rate / d->nodes : rate;
}

void sched_ep_share(hookd_dispatcher *d, ep *e, int64_t now) {
  e->share_limit = sched_share(d, e->cfg.max_in_flight > 0 ? e->cfg.max_in_flight : 1);
  e->share_rate = sched_share_rate(d, e->cfg.rate_limit);
  hookd_bucket_set(&e->bucket, e->share_rate, hookd_bucket_spacing_burst(e->share_rate), now);
}

bool sched_breaker_blocks(hookd_dispatcher *d, const ep *e, int64_t now) {
  return e->br.state == HOOKD_BREAKER_OPEN && now < hookd_breaker_retry_at(&e->br, &d->breaker_cfg);
}

/* ---------- generic min-heaps of endpoints ---------- */

/* Two heaps of endpoints (claim times, wake times), written out by one macro. */
#define HEAP_FUNCS(name, arr, len, cap, pos, key)                                              \
  static void name##_swap(hookd_dispatcher *d, size_t i, size_t j) {                            \
    ep *t = d->arr[i];                                                                          \
    d->arr[i] = d->arr[j];                                                                      \
    d->arr[j] = t;                                                                              \
    d->arr[i]->pos = i + 1;                                                                     \
    d->arr[j]->pos = j + 1;                                                                     \
  }                                                                                             \
  static void name##_up(hookd_dispatcher *d, size_t i) {                                        \
    while (i > 0) {                                                                             \
      size_t p = (i - 1) / 2;                                                                   \
      if (d->arr[i]->key >= d->arr[p]->key) break;                                              \
      name##_swap(d, i, p);                                                                     \
      i = p;                                                                                    \
    }                                                                                           \
  }                                                                                             \
  static void name##_down(hookd_dispatcher *d, size_t i) {                                      \
    for (;;) {                                                                                  \
      size_t l = 2 * i + 1, r = l + 1, m = i;                                                   \
      if (l < d->len && d->arr[l]->key < d->arr[m]->key) m = l;                                 \
      if (r < d->len && d->arr[r]->key < d->arr[m]->key) m = r;                                 \
      if (m == i) break;                                                                        \
      name##_swap(d, i, m);                                                                     \
      i = m;                                                                                    \
    }                                                                                           \
  }                                                                                             \
  static void name##_remove(hookd_dispatcher *d, ep *e) {                                       \
    if (!e->pos) return;                                                                        \
    size_t i = e->pos - 1;                                                                      \
    e->pos = 0;                                                                                 \
    d->len--;                                                                                   \
    if (i == d->len) return;                                                                    \
    d->arr[i] = d->arr[d->len];                                                                 \
    d->arr[i]->pos = i + 1;                                                                     \
    name##_up(d, i);                                                                            \
    name##_down(d, d->arr[i]->pos - 1);                                                         \
  }                                                                                             \
  static void name##_set(hookd_dispatcher *d, ep *e) {                                          \
    if (e->pos) {                                                                               \
      name##_up(d, e->pos - 1);                                                                 \
      name##_down(d, e->pos - 1);                                                               \
      return;                                                                                   \
    }                                                                                           \
    if (d->len == d->cap) {                                                                     \
      size_t nc = d->cap ? d->cap * 2 : 64;                                                     \
      ep **nh = realloc(d->arr, nc * sizeof *nh);                                               \
      if (!nh) return; /* left out until the next rescan */                                     \
      d->arr = nh;                                                                              \
      d->cap = nc;                                                                              \
    }                                                                                           \
    d->arr[d->len] = e;                                                                         \
    e->pos = ++d->len;                                                                          \
    name##_up(d, d->len - 1);                                                                   \
  }

HEAP_FUNCS(claimh, heap, heap_len, heap_cap, heap_pos, heap_key)
HEAP_FUNCS(wakeh, wake, wake_len, wake_cap, wake_pos, wake_ms)

/* ---------- health snapshots for the API ---------- */

void sched_health_update(hookd_dispatcher *d, ep *e) {
  pthread_mutex_lock(&d->health_mu);
  ep_health_rec *r = hookd_strmap_get(&d->health, e->cfg.id);
  if (!r && (r = calloc(1, sizeof *r)) && hookd_strmap_put(&d->health, e->cfg.id, r) != 0) {
    free(r);
    r = NULL;
  }
  if (r) {
    r->h.breaker = hookd_breaker_name(e->br.state);
    r->h.breaker_opened_ms = e->br.opens ? e->br.opened_ms : 0;
    r->h.breaker_retry_ms = hookd_breaker_retry_at(&e->br, &d->breaker_cfg);
    r->h.breaker_opens = e->br.opens;
    r->h.in_flight = e->in_flight;
    r->h.queued = e->queued;
    r->h.paused_until_ms = e->paused_until > disp_now(d) ? e->paused_until : 0;
    r->h.slow = e->slow;
    r->h.failing_since_ms = e->failing_since;
    r->h.sending = e->cfg.enabled && !e->gone;
    r->h.config_updated_ms = e->cfg.updated_ms;
    r->h.share_max_in_flight = sched_ep_limit(e);
    r->h.share_rate = e->share_rate;
  }
  pthread_mutex_unlock(&d->health_mu);
}

void sched_health_remove(hookd_dispatcher *d, const char *id) {
  pthread_mutex_lock(&d->health_mu);
  free(hookd_strmap_del(&d->health, id));
  pthread_mutex_unlock(&d->health_mu);
}

/* ---------- tenants ---------- */

tenant *sched_tenant(hookd_dispatcher *d, const char *id) {
  tenant *t = hookd_strmap_get(&d->tenants, id);
  if (t) return t;
  t = calloc(1, sizeof *t);
  if (!t || !(t->id = strdup(id)) || hookd_strmap_put(&d->tenants, id, t) != 0) {
    if (t) free(t->id);
    free(t);
    return NULL;
  }
  t->max_in_flight = d->cfg.tenant_max_in_flight;
  t->weight = 1;
  t->known_mono_ms = hookd_mono_ms();
  hookd_bucket_init(&t->bucket, 0, 1, disp_now(d));
  return t;
}

static void ring_push(hookd_dispatcher *d, tenant *t);

void sched_tenant_apply(hookd_dispatcher *d, tenant *t, const hookd_tenant *cfg) {
  int64_t now = disp_now(d);
  t->deleted = false; /* (its limits read from the store: it is there, whatever came before) */
  /* (a cap the tenant sets is shared out among the nodes; the default cap is each node's own) */
  t->max_in_flight =
      cfg->max_in_flight > 0 ? sched_share(d, cfg->max_in_flight) : d->cfg.tenant_max_in_flight;
  int weight = cfg->weight > 0 ? cfg->weight : 1;
  for (int c = 0; c < CLS__COUNT; c++)
    if (t->in_flight_cls[c] > 0) d->cls_weight[c] += weight - t->weight;
  if (t->demanding) d->demand_weight += weight - t->weight;
  t->weight = weight;
  if (t->turn_left > weight) t->turn_left = weight; /* a turn kept or going on, by the new one */
  double rate = sched_share_rate(d, cfg->rate_limit);
  hookd_bucket_set(&t->bucket, rate, rate > 1 ? rate : 1, now);
  if (t->share_wait) flush_share_eps(d, t); /* its cap, and so its reserve, may have changed */
  /* a tenant waiting for its rate limit waits by the new rate (lifted: at once, not at the
   * time the old one gave, up to an hour away); one stopped at its cap goes back in the ring
   * when the new cap leaves room, not at its next completion */
  if (t->waiting) t->wake_ms = now + hookd_bucket_wait_ms(&t->bucket, now);
  if (t->blocked_cap && t->in_flight < t->max_in_flight) {
    tenant_hold(d, t, &t->blocked_cap, false);
    ring_push(d, t);
  }
}

static void ring_push(hookd_dispatcher *d, tenant *t) {
  if (t->in_ring || t->serving || !t->ready_head || t->blocked_cap || t->waiting) return;
  t->in_ring = true;
  t->ring_next = NULL;
  if (!t->keep_turn || t->turn_left <= 0) t->turn_left = t->weight;
  t->keep_turn = false;
  if (d->ring_tail) d->ring_tail->ring_next = t;
  else d->ring_head = t;
  d->ring_tail = t;
}

/* Back at the head of the ring, its turn going on (turn_left as it is). */
static void ring_push_head(hookd_dispatcher *d, tenant *t) {
  if (t->in_ring) return;
  t->in_ring = true;
  t->ring_next = d->ring_head;
  d->ring_head = t;
  if (!d->ring_tail) d->ring_tail = t;
}

/* One of t's endpoints could not send and left its ready list (a share, a budget, its rate
 * or breaker): t's turn goes on with its next ready endpoint. Sent to the ring's tail with a
 * fresh turn instead, the slot went to another tenant — a healthy endpoint behind ten blocked
 * slow siblings got 4 of 120 slots freed, and weight 3 got 1.4x weight 1 (an audit). */
static void turn_goes_on(hookd_dispatcher *d, tenant *t, const ep *e) {
  t->serving = false;
  if (e->in_ready || !t->ready_head) ring_push(d, t); /* back as it was: no loop on e */
  else ring_push_head(d, t);
}

static tenant *ring_pop(hookd_dispatcher *d) {
  tenant *t = d->ring_head;
  if (!t) return NULL;
  d->ring_head = t->ring_next;
  if (!d->ring_head) d->ring_tail = NULL;
  t->in_ring = false;
  t->ring_next = NULL;
  return t;
}

/* A deleted tenant is freed once nothing points at it: no endpoint (an endpoint's ref is given
 * back only once it holds no work: ep_maybe_free, so no request or claim of the tenant's is left
 * either), and on no list of the dispatcher's (the ring, the rate wait, the reserve's wait). */
static void tenant_forget_if_done(hookd_dispatcher *d, tenant *t) {
  if (!t->deleted || t->refs > 0 || t->in_ring || t->serving || t->waiting || t->share_blocked)
    return;
  hookd_strmap_del(&d->tenants, t->id); /* (the map keeps a key of its own) */
  free(t->id);
  free(t);
}

void sched_tenant_release(hookd_dispatcher *d, tenant *t) {
  if (!t || --t->refs > 0) return;
  /* no endpoint left: keep the tenant (its limits), unless it was deleted */
  tenant_forget_if_done(d, t);
}

void sched_tenant_deleted(hookd_dispatcher *d, const char *id) {
  tenant *t = hookd_strmap_get(&d->tenants, id);
  if (!t) return;
  t->deleted = true;
  tenant_forget_if_done(d, t);
}

/* ---------- endpoint readiness ---------- */

static bool ep_queue_empty(const ep *e) {
  return !e->q_head[CLS_LIVE] && !e->q_head[CLS_RETRY] && !e->q_head[CLS_REPLAY];
}

/* A tenant's live work counts for the budgets unless its own limits hold it back. */
static bool tenant_open(const tenant *t) { return !t->blocked_cap && !t->waiting; }

/* Keeps e->live_ready, its tenant's ready_live and d->ready_live in step with e's ready list
 * membership and live queue. */
static void live_update(hookd_dispatcher *d, ep *e) {
  bool now = e->in_ready && e->q_head[CLS_LIVE] != NULL;
  if (now == e->live_ready || !e->t) return;
  e->live_ready = now;
  e->t->ready_live += now ? 1 : -1;
  if (tenant_open(e->t)) d->ready_live += now ? 1 : -1;
}

/* Keeps t->demanding and d->demand_weight in step: a tenant has work ready to send when it has
 * endpoints ready and neither its cap nor its rate holds it (the band's fair shares). */
static void demand_update(hookd_dispatcher *d, tenant *t) {
  bool now = t->ready_head != NULL && tenant_open(t);
  if (now == t->demanding) return;
  t->demanding = now;
  d->demand_weight += now ? t->weight : -t->weight;
  d->demand_held += now ? t->in_flight : -t->in_flight;
}

/* Keeps e counted in its tenant's ready_idle while it may take a spare slot (spare_ep): ready,
 * holding no request, proven (it has answered) and not slow. Called wherever one of these
 * changes; so a tenant whose ready endpoints are all new or slow (a wall of hanging ones) is not
 * walked for one at each refusal. */
void sched_ep_idle_sync(ep *e) {
  bool now = e->t && e->in_ready && e->in_flight == 0 && e->proven && !e->slow;
  if (now == e->idle_counted) return;
  e->idle_counted = now;
  e->t->ready_idle += now ? 1 : -1;
}

/* Keeps e->demanding and its tenant's demand_eps in step: ready, or waiting for the reserve of
 * its tenant's cap (or its share of the band above it). */
static void ep_demand_update(ep *e) {
  bool now = e->in_ready || e->share_blocked;
  if (now == e->demanding || !e->t) return;
  e->demanding = now;
  e->t->demand_eps += now ? 1 : -1;
  e->t->demand_held += now ? e->in_flight : -e->in_flight;
}

/* Sets a tenant's blocked_cap or waiting flag, moving its live work in or out of the count. */
static void tenant_hold(hookd_dispatcher *d, tenant *t, bool *flag, bool on) {
  bool before = tenant_open(t);
  *flag = on;
  if (before != tenant_open(t)) d->ready_live += before ? -t->ready_live : t->ready_live;
  demand_update(d, t);
}

static void ready_push(hookd_dispatcher *d, ep *e) {
  tenant *t = e->t;
  if (e->in_ready || !t) return;
  e->in_ready = true;
  sched_ep_idle_sync(e);
  live_update(d, e);
  e->ready_next = NULL;
  e->ready_prev = t->ready_tail;
  if (t->ready_tail) t->ready_tail->ready_next = e;
  else t->ready_head = e;
  t->ready_tail = e;
  ep_demand_update(e);
  demand_update(d, t);
  ring_push(d, t);
}

static ep *ready_pop(hookd_dispatcher *d, tenant *t) {
  ep *e = t->ready_head;
  if (!e) return NULL;
  t->ready_head = e->ready_next;
  if (t->ready_head) t->ready_head->ready_prev = NULL;
  else t->ready_tail = NULL;
  e->in_ready = false;
  sched_ep_idle_sync(e);
  e->ready_next = e->ready_prev = NULL;
  live_update(d, e);
  ep_demand_update(e);
  demand_update(d, t);
  return e;
}

static void ready_remove(hookd_dispatcher *d, ep *e) {
  tenant *t = e->t;
  if (!e->in_ready || !t) return;
  if (e->ready_prev) e->ready_prev->ready_next = e->ready_next;
  else t->ready_head = e->ready_next;
  if (e->ready_next) e->ready_next->ready_prev = e->ready_prev;
  else t->ready_tail = e->ready_prev;
  e->in_ready = false;
  sched_ep_idle_sync(e);
  e->ready_next = e->ready_prev = NULL;
  live_update(d, e);
  ep_demand_update(e);
  demand_update(d, t);
}

/* The link of e on the budget or the slow wait list. */
static ep **wait_link(ep *e, bool budget) { return budget ? &e->budget_next : &e->slow_next; }

static void wait_list_remove(ep **head, ep *e, bool budget) {
  ep *prev = NULL;
  for (ep *p = *head; p; prev = p, p = *wait_link(p, budget)) {
    if (p != e) continue;
    if (prev) *wait_link(prev, budget) = *wait_link(p, budget);
    else *head = *wait_link(p, budget);
    break;
  }
  *wait_link(e, budget) = NULL;
}

static void wait_list_push(ep **head, ep *e, bool budget) {
  *wait_link(e, budget) = *head;
  *head = e;
}

void sched_ep_unlink(hookd_dispatcher *d, ep *e) {
  claimh_remove(d, e);
  wakeh_remove(d, e);
  ready_remove(d, e);
  if (e->budget_blocked) wait_list_remove(&d->budget_wait, e, true);
  if (e->slow_blocked) wait_list_remove(&d->slow_wait, e, false);
  e->budget_blocked = e->slow_blocked = false;
  share_wait_remove(e);
}

/* ---------- the reserve of a cap (docs/isolation.md) ---------- */

/* The last sixteenth of a cap (at least one slot) is kept for holders of fewer than an eighth
 * of it (at least one): requests in flight cannot be taken back, so others' hanging first
 * requests must not be able to hold every slot. */
static int cap_reserve(int cap) { return cap / 16 > 0 ? cap / 16 : 1; }

/* The cap a tenant's endpoints share: its own, or, when the global one binds first, what the
 * global cap leaves one tenant (all of it but its reserve: --tenant-max-in-flight at or above
 * --max-in-flight, a tenant given more). Before, a review: the endpoints' reserve was counted on
 * the tenant's own cap alone, which never filled — a tenant's hanging endpoints held the global
 * cap's every slot but its reserve (other tenants'), and its healthy sibling waited for their
 * timeouts. */
static int tenant_cap(const hookd_dispatcher *d, const tenant *t) {
  int g = d->cfg.max_in_flight - cap_reserve(d->cfg.max_in_flight);
  if (g < 1) g = 1;
  return t->max_in_flight < g ? t->max_in_flight : g;
}

/* Whether a holder of held of a cap's used slots may start one more. Past the reserve, the next
 * sixteenth of the cap goes by fair shares (docs/isolation.md "The band above the reserve"): once
 * no more than twice the reserve is free, a holder at its share starts nothing. Its share: the
 * slots outside the reserve less those held by holders wanting no more (others: no work ready),
 * × its weight ÷ demand, the weights of the holders with work ready (its own among them),
 * rounded up (so the shares cover what is left: one is always below its own in the band). At a
 * full cap slots free one at a time, and holders answering slowly took back every one while a
 * fast holder got turns only. The floor holds whatever the share. */
static bool cap_allows(int cap, int used, int held, int weight, int demand, int others) {
  int res = cap_reserve(cap), floor = res / 8 > 0 ? res / 8 : 1;
  if (cap - used > 2 * res || held < floor) return true;
  if (cap - used <= res || demand <= 0) return cap - used > res;
  int64_t fair = ((int64_t)(cap - res - others) * weight + demand - 1) / demand;
  return held < fair;
}

/* An endpoint of t that may start a request although the global cap stopped t
 * (docs/isolation.md "An idle endpoint of a tenant stopped by the global cap"): ready, holding
 * none, proven and not slow (it has answered, in less than half its timeout: a wall of new
 * hanging endpoints, never heard from, took every such slot, and with many tenants the global
 * reserve — a review), while fewer than the global reserve's floor of requests started so are in
 * flight, all tenants' together, and more than that floor of the cap is free (kept for tenants
 * holding little). The endpoints' reserve is kept of the tenant's cap, not of what other tenants
 * leave it: a tenant's hanging endpoints filling that held its healthy sibling to their
 * timeouts. */
static ep *spare_ep(const hookd_dispatcher *d, const tenant *t) {
  int res = cap_reserve(d->cfg.max_in_flight), floor = res / 8 > 0 ? res / 8 : 1;
  if (t->ready_idle <= 0 || d->spare_in_flight >= floor ||
      d->cfg.max_in_flight - d->in_flight <= floor)
    return NULL;
  for (ep *e = t->ready_head; e; e = e->ready_next)
    if (e->in_flight == 0 && e->proven && !e->slow) return e;
  return NULL;
}

static void share_wait_remove(ep *e) {
  if (!e->share_blocked) return;
  for (ep **pp = &e->t->share_wait; *pp; pp = &(*pp)->share_next) {
    if (*pp != e) continue;
    *pp = e->share_next;
    break;
  }
  e->share_next = NULL;
  e->share_blocked = false;
  ep_demand_update(e);
}

/* The global cap has more than its reserve free again: stopped tenants go back to the ring, in
 * the order they left it (d->share_wait is last-stopped first), each with the rest of its turn:
 * at a full cap slots free one at a time, and the weights hold only so. */
static void flush_share_tenants(hookd_dispatcher *d) {
  tenant *list = NULL;
  for (tenant *t = d->share_wait, *next; t; t = next) {
    next = t->share_next;
    t->share_next = list;
    list = t;
  }
  d->share_wait = NULL;
  while (list) {
    tenant *t = list;
    list = t->share_next;
    t->share_next = NULL;
    t->share_blocked = false;
    ring_push(d, t);
    tenant_forget_if_done(d, t); /* (deleted while it waited) */
  }
}

/* Its tenant's cap has more than its reserve free again (or changed): its stopped endpoints are
 * ready again in the order they were stopped (t->share_wait is last-stopped first; taken so, at
 * a full cap the endpoint that had just sent went first again and the others never did). */
static void flush_share_eps(hookd_dispatcher *d, tenant *t) {
  ep *list = NULL;
  for (ep *e = t->share_wait, *next; e; e = next) {
    next = e->share_next;
    e->share_next = list;
    list = e;
  }
  t->share_wait = NULL;
  while (list) {
    ep *e = list;
    list = e->share_next;
    e->share_next = NULL;
    e->share_blocked = false;
    sched_ep_ready(d, e);
    ep_demand_update(e);
  }
}

/* Holders stopped by a share of the band are let go once those who wanted more stop wanting (their
 * work sent, or their own limits holding them): at every answer, and here, five times a second,
 * for when no answer comes (every request in flight hanging). true when any was let go. */
bool sched_share_recheck(hookd_dispatcher *d) {
  bool any = false;
  if (d->share_wait && d->cfg.max_in_flight - d->in_flight > cap_reserve(d->cfg.max_in_flight)) {
    flush_share_tenants(d);
    any = true;
  }
  const char *k;
  void *v;
#ifndef NDEBUG
  int weights = 0, held = 0; /* debug builds (the test suite's): the demand counts are right */
#endif
  for (size_t i = 0; (i = hookd_strmap_next(&d->tenants, i, &k, &v)) != 0;) {
    tenant *t = v;
    if (t->share_wait && tenant_cap(d, t) - t->in_flight > cap_reserve(tenant_cap(d, t))) {
      flush_share_eps(d, t);
      any = true;
    }
#ifndef NDEBUG
    int eps = 0, eps_held = 0, idle = 0;
    for (ep *e = t->ready_head; e; e = e->ready_next)
      eps++, eps_held += e->in_flight, idle += e->in_flight == 0 && e->proven && !e->slow;
    for (ep *e = t->share_wait; e; e = e->share_next)
      if (!e->in_ready) eps++, eps_held += e->in_flight;
    if (t->demanding != (t->ready_head && tenant_open(t)) || eps != t->demand_eps ||
        eps_held != t->demand_held || idle != t->ready_idle) {
      HLOG(HOOKD_LOG_ERROR, "dispatcher.demand_broken", KV_S("tenant_id", t->id),
           KV_I("demand_eps", t->demand_eps), KV_I("counted", eps),
           KV_I("demand_held", t->demand_held), KV_I("held", eps_held),
           KV_I("ready_idle", t->ready_idle), KV_I("idle", idle));
      abort();
    }
    weights += t->demanding ? t->weight : 0;
    held += t->demanding ? t->in_flight : 0;
#endif
  }
#ifndef NDEBUG
  if (weights != d->demand_weight || held != d->demand_held) {
    HLOG(HOOKD_LOG_ERROR, "dispatcher.demand_broken", KV_I("demand_weight", d->demand_weight),
         KV_I("counted", weights), KV_I("demand_held", d->demand_held), KV_I("held", held));
    abort();
  }
#endif
  return any;
}

static void wake_at(hookd_dispatcher *d, ep *e, int64_t when) {
  if (e->wake_pos && e->wake_ms <= when) return;
  e->wake_ms = when;
  wakeh_set(d, e);
}

/* Whether tenant t may start a request of class cls (retry or replay) while live work waits:
 * below the class's budget, or below its weighted share of it among the tenants holding some —
 * so one tenant's hanging replays cannot hold every replay slot while another's wait for their
 * timeout. */
static bool budget_allows(hookd_dispatcher *d, const tenant *t, int cls, int budget) {
  int held = t->in_flight_cls[cls];
  return hookd_share_allows(budget, d->in_flight_cls[cls], held, t->weight,
                            d->cls_weight[cls] + (held ? 0 : t->weight));
}

/* The class this endpoint may send now, or -1 (budget_blocked set when only a budget stops
 * it). Live first; retries and replays within their budgets while live work that could take a
 * global slot waits. */
static int pick_class(hookd_dispatcher *d, ep *e, bool *budget_blocked) {
  *budget_blocked = false;
  bool live_waiting = d->ready_live > 0;
  int cap = d->cfg.max_in_flight;
  /* on an ordered endpoint a replayed or retrying delivery is its lane's head: the lane's later
   * deliveries wait behind it, so it goes before the endpoint's own live work — in turn with
   * live (replays and retries take half the endpoint at most; replays one at a time), within
   * their budgets */
  if (e->cfg.ordered && !e->last_turn) {
    if (e->q_head[CLS_REPLAY] && e->in_flight_replays == 0 &&
        (!live_waiting || budget_allows(d, e->t, CLS_REPLAY, (cap + 9) / 10)))
      return CLS_REPLAY;
    if (e->q_head[CLS_RETRY] &&
        (!live_waiting || budget_allows(d, e->t, CLS_RETRY, (cap + 4) / 5)))
      return CLS_RETRY;
  }
  if (e->q_head[CLS_LIVE]) return CLS_LIVE;
  if (e->q_head[CLS_RETRY]) {
    if (!live_waiting || budget_allows(d, e->t, CLS_RETRY, (cap + 4) / 5)) return CLS_RETRY;
    *budget_blocked = true;
  }
  if (e->q_head[CLS_REPLAY]) {
    if (!live_waiting || budget_allows(d, e->t, CLS_REPLAY, (cap + 9) / 10)) return CLS_REPLAY;
    *budget_blocked = true;
  }
  return -1;
}

/* Decides whether e may send now; places it in its tenant's ready list or in the wait that
 * will bring it back. */
void sched_ep_ready(hookd_dispatcher *d, ep *e) {
  if (e->gone || !e->t) return;
  int64_t now = disp_now(d);
  if (ep_queue_empty(e) || e->in_flight >= sched_ep_limit(e) || !e->cfg.enabled) {
    ready_remove(d, e); /* a completion or a claim brings it back */
    return;
  }
  if (e->paused_until > now || e->lookup_hold_until > now) {
    ready_remove(d, e);
    wake_at(d, e, e->paused_until > e->lookup_hold_until ? e->paused_until : e->lookup_hold_until);
    return;
  }
  if (sched_breaker_blocks(d, e, now)) {
    ready_remove(d, e);
    wake_at(d, e, hookd_breaker_retry_at(&e->br, &d->breaker_cfg));
    return;
  }
  if (e->br.state == HOOKD_BREAKER_HALF_OPEN && e->br.probes_in_flight >= d->breaker_cfg.probes) {
    ready_remove(d, e); /* the probe's outcome brings it back */
    return;
  }
  int64_t wait = hookd_bucket_wait_ms(&e->bucket, now);
  if (wait > 0) {
    ready_remove(d, e);
    wake_at(d, e, now + wait);
    return;
  }
  ready_push(d, e);
}

void sched_enqueue(hookd_dispatcher *d, ep *e, item *it) {
  const hookd_delivery *dl = &it->c.d;
  it->cls = dl->attempt_count > dl->cycle_base ? CLS_RETRY
            : dl->replay_cycle                  ? CLS_REPLAY
                                                : CLS_LIVE;
  it->next = NULL;
  if (e->q_tail[it->cls]) e->q_tail[it->cls]->next = it;
  else e->q_head[it->cls] = it;
  e->q_tail[it->cls] = it;
  e->queued++;
  e->t->queued++;
  d->queued++;
  live_update(d, e);
}

static item *dequeue(hookd_dispatcher *d, ep *e, int cls) {
  item *it = e->q_head[cls];
  if (!it) return NULL;
  e->q_head[cls] = it->next;
  if (!e->q_head[cls]) e->q_tail[cls] = NULL;
  it->next = NULL;
  e->queued--;
  e->t->queued--;
  d->queued--;
  live_update(d, e);
  return it;
}

void sched_release_queue(hookd_dispatcher *d, ep *e) {
  for (int cls = 0; cls < CLS__COUNT; cls++) {
    item *it;
    while ((it = dequeue(d, e, cls))) disp_release_item(d, it);
  }
  ready_remove(d, e);
}

/* ---------- claiming ---------- */

/* When the endpoint may claim next (0 = not at all for now). */
static int64_t claim_key(hookd_dispatcher *d, const ep *e) {
  if (!e->next_due) return 0;
  int64_t k = e->next_due;
  if (e->paused_until > k) k = e->paused_until;
  if (e->fd_wait_until > k) k = e->fd_wait_until;
  if (e->lookup_hold_until > k) k = e->lookup_hold_until;
  int64_t br = hookd_breaker_retry_at(&e->br, &d->breaker_cfg);
  if (br > k) k = br;
  return k;
}

/* How many more the endpoint may claim: two windows of its concurrency, or about two seconds
 * of its rate when it is rate-limited; a breaker not closed claims only its probes (an open one
 * turns half-open at its first send after the cool-down: claiming a full window for it then
 * only gave back all but the probe). An inbound destination that is not idempotent claims only
 * its free slots: the send mark decides what a crash holds, and each of its requests waits for
 * a commit anyway, so deliveries claimed ahead would only sit leased in its queue. */
static int ep_room(hookd_dispatcher *d, const ep *e) {
  int limit = (ep_no_resend(e) ? 1 : 2) * sched_ep_limit(e);
  if (e->share_rate > 0) {
    int by_rate = (int)ceil(e->share_rate * 2) + 1;
    if (by_rate < limit) limit = by_rate;
  }
  if (e->br.state != HOOKD_BREAKER_CLOSED) limit = d->breaker_cfg.probes;
  return limit - e->in_flight - e->queued;
}

void sched_ep_schedule(hookd_dispatcher *d, ep *e) {
  int64_t key = claim_key(d, e);
  e->capped = false; /* its own key from now on (a pause's, a breaker's: never brought forward) */
  if (key > 0 && !e->claiming && !e->gone && e->cfg.enabled && e->key_ok && ep_room(d, e) > 0 &&
      !d->stopping) {
    e->heap_key = key;
    claimh_set(d, e);
  } else {
    claimh_remove(d, e);
  }
}

static bool holds_work(const tenant *t) { return t->in_flight + t->queued + t->claiming > 0; }

/* Sum of the weights of tenants holding work, plus the claimer's when it holds none. The sum is
 * taken once per claim pass (*sum, -1 until then; a walk over every tenant for each endpoint
 * the caps stopped took most of a core with thousands of tenants) and kept up to date by the
 * pass as its claims make tenants hold work. */
static int active_weight(hookd_dispatcher *d, const tenant *claimer, int *sum) {
  if (*sum < 0) {
    *sum = 0;
    const char *k;
    void *v;
    for (size_t i = 0; (i = hookd_strmap_next(&d->tenants, i, &k, &v)) != 0;)
      if (holds_work(v)) *sum += ((tenant *)v)->weight;
  }
  int w = *sum + (holds_work(claimer) ? 0 : claimer->weight);
  return w > 0 ? w : 1;
}

/* How many more deliveries the claimed bodies' byte bound leaves room for (--max-claimed-bytes):
 * counts bound the deliveries held, not their bodies (up to --max-body-bytes each: 2,048 claimed
 * deliveries of 1 MiB events held 2 GiB). Claims in progress count at the recent average. As
 * with counts, a tenant below its weighted share of the bound may always claim, and a tenant
 * holding nothing gets one, so that another's big bodies never stop it; nor do a tenant's own
 * hanging endpoints stop a sibling not marked slow that holds nothing: it gets one too. */
static int bytes_room(hookd_dispatcher *d, const ep *e, const tenant *t, int *weights) {
  int64_t cap = d->cfg.max_claimed_bytes;
  if (cap <= 0) return INT_MAX;
  int64_t avg = d->claim_bytes_avg > 1024 ? d->claim_bytes_avg : 1024;
  int64_t left = cap - d->body_bytes - (int64_t)d->claiming * avg;
  int64_t t_held = t->body_bytes + (int64_t)t->claiming * avg;
  if (left < avg) { /* the bound is reached: a tenant's own share */
    int64_t fair = cap / active_weight(d, t, weights) * t->weight;
    if (fair - t_held > left) left = fair - t_held;
  }
  if (left < avg && (t_held == 0 || !e->slow) && e->in_flight + e->queued == 0) left = avg;
  return left <= 0 ? 0 : left / avg > INT_MAX ? INT_MAX : (int)(left / avg);
}

void sched_claim_due(hookd_dispatcher *d, int64_t now) {
  int leased_cap = 2 * d->cfg.max_in_flight;
  /* endpoints the caps stop now go back in the heap afterwards; the pass goes on past them
   * (stopping after a few dozen left an endpoint that may claim behind another tenant's
   * hundreds of stalled ones, one pass each 50 ms per few dozen) */
  size_t n_later = 0;
  int weights = -1; /* active_weight's sum for this pass */
  while (d->heap_len && d->heap[0]->heap_key <= now) {
    ep *e = d->heap[0];
    claimh_remove(d, e);
    e->capped = false;
    tenant *t = e->t;
    int room = ep_room(d, e);
    /* the budgets count what waits in memory for a slot, not what is in flight (bounded by the
     * caps): counted, a tenant's requests in flight used up its share of the claims, its queue
     * ran dry, and its live work waiting in the store no longer held retries and replays to
     * their budgets (an audit: 22 of 32 slots to replays while live work waited) */
    int leased = d->queued + d->claiming;
    int t_leased = t->queued + t->claiming;
    int t_room = 2 * t->max_in_flight - t_leased;
    /* an endpoint with nothing waiting, below its cap and its tenant's, always gets a small
     * window: its tenant's budget taken by other endpoints (hanging or rate-limited ones hoard
     * claims) must not starve it — one request in flight beside ten rate-limited siblings was
     * all a healthy endpoint got (an audit). Not only while the global cap has room: it is full
     * under load, and a sibling with nothing waiting when its tenant's turn came lost it. */
    bool floor = e->queued == 0 && e->in_flight < sched_ep_limit(e) &&
                 t->in_flight < t->max_in_flight;
    if (floor && t_room < EP_CLAIM_FLOOR) t_room = EP_CLAIM_FLOOR;
    if (room > t_room) room = t_room;
    int floor_room = room < EP_CLAIM_FLOOR ? room : EP_CLAIM_FLOOR;
    if (leased + room > leased_cap) {
      /* a tenant below its weighted share of the claim budget may always claim: one that
       * sends slowly and hoards claims cannot starve the others — and one holding nothing
       * may claim one, however many tenants share the budget (past 2 × --max-in-flight of
       * them the share rounded to none: a new tenant's events waited minutes) */
      int fair = (int)((int64_t)leased_cap * t->weight / active_weight(d, t, &weights));
      if (fair < 1) fair = 1;
      int g_room = leased_cap - leased;
      if (t_leased < fair && fair - t_leased > g_room) g_room = fair - t_leased;
      if (room > g_room) room = g_room;
      /* nor the global budget, when its own tenant's endpoints fill it (past ~500 hanging
       * ones, each re-claiming its floor after a timeout, a healthy sibling got no claim at
       * all): the floor holds for an endpoint not marked slow — a slow one, whose claims wait
       * for the slow share's few slots, is what fills the budget */
      if (floor && !e->slow && room < floor_room) room = floor_room;
    }
    int by_bytes = bytes_room(d, e, t, &weights);
    if (room > by_bytes) room = by_bytes;
    if (room > CLAIM_LIMIT_MAX) room = CLAIM_LIMIT_MAX;
    /* each claim is one writer operation: those in progress are bounded whatever the budgets
     * (the floors above pass them), or a tenant of 52,000 endpoints due at once queued 47,000,
     * past --max-store-queue — every tenant's publishes refused 503 overloaded while the store
     * kept up (a review). A tenant below its weighted share of the bound may still claim (a
     * small tenant is not held behind a big one's fan-out: 1.5 s in a review); the others are
     * put off until the claims in progress fall to half the bound (sched_claims_freed), not
     * for the next pass's 50 ms (which paced a fan-out: 25 claims each 50 ms, a review) */
    bool capped = false;
    if (room > 0 && d->cfg.max_claim_ops > 0 && d->claim_ops >= d->cfg.max_claim_ops) {
      int share = (int)((int64_t)d->cfg.max_claim_ops * t->weight / active_weight(d, t, &weights));
      capped = t->claim_ops >= (share > 1 ? share : 1);
      if (capped) room = 0;
    }
    if (room <= 0) {
      if (capped) {
        e->capped = true;
        d->capped_any = true;
      }
      if (n_later == d->later_cap) {
        size_t nc = d->later_cap ? 2 * d->later_cap : 64;
        ep **nl = realloc(d->later, nc * sizeof *nl);
        if (!nl) { /* this one and the rest stay due in the heap for the next pass */
          claimh_set(d, e);
          break;
        }
        d->later = nl;
        d->later_cap = nc;
      }
      d->later[n_later++] = e;
      continue;
    }
    int replays = d->ready_live > 0 ? (room + 9) / 10 : room;
    bool held = holds_work(t);
    disp_submit_claim(d, e, room, replays, now);
    if (!held && weights >= 0 && holds_work(t)) weights += t->weight;
  }
  for (size_t i = 0; i < n_later; i++) {
    /* retried when a slot frees (a completion reschedules its endpoint) or on the next pass */
    d->later[i]->heap_key = now + 50;
    claimh_set(d, d->later[i]);
  }
}

void sched_claims_freed(hookd_dispatcher *d, int64_t now) {
  if (!d->capped_any || d->claim_ops > d->cfg.max_claim_ops / 2) return;
  d->capped_any = false;
  /* their keys back to now, the heap made again (one walk: put off, they are many) */
  for (size_t i = 0; i < d->heap_len; i++)
    if (d->heap[i]->capped) {
      d->heap[i]->capped = false;
      if (d->heap[i]->heap_key > now) d->heap[i]->heap_key = now;
    }
  for (size_t i = d->heap_len / 2; i-- > 0;) claimh_down(d, i);
}

/* ---------- sending ---------- */

/* The slow share: slow endpoints together hold at most half the global and tenant caps. The
 * newcomer share: in a tenant with slow endpoints, those never heard from yet together hold at
 * most a quarter of its cap, and only while the slow requests and theirs leave the last quarter
 * to the endpoints that have answered before — slow requests may hold more than their half
 * (those sent before their endpoint was marked slow). A tenant cap too small for quarters
 * lets a newcomer go while nothing slow or new is in flight. */
static bool newcomer_share_ok(const tenant *t) {
  int q = (t->max_in_flight + 3) / 4, rest = t->max_in_flight - q;
  return t->new_in_flight < q && t->slow_in_flight + t->new_in_flight < (rest > 1 ? rest : 1);
}

static bool slow_share_ok(hookd_dispatcher *d, const ep *e) {
  if (ep_newcomer(e)) return newcomer_share_ok(e->t);
  if (!e->slow) return true;
  return d->slow_in_flight < (d->cfg.max_in_flight + 1) / 2 &&
         e->t->slow_in_flight < (e->t->max_in_flight + 1) / 2;
}

static void flush_wait(hookd_dispatcher *d, ep **head, bool budget);

static void dispatch_ring(hookd_dispatcher *d, int64_t now);

#ifndef NDEBUG
/* Debug builds (the test suite's): each wait list holds only endpoints flagged as on it, each
 * once, and no endpoint gone. */
static void wait_list_check(const hookd_dispatcher *d, ep *head, bool budget) {
  size_t n = 0;
  for (ep *p = head; p; p = *wait_link(p, budget)) {
    if (!(budget ? p->budget_blocked : p->slow_blocked) || p->gone || ++n > d->eps.len) {
      HLOG(HOOKD_LOG_ERROR, "dispatcher.wait_list_broken", KV_S("list", budget ? "budget" : "slow"),
           KV_S("endpoint_id", p->cfg.id));
      abort();
    }
  }
}
#endif

void sched_dispatch(hookd_dispatcher *d, int64_t now) {
  for (;;) {
    dispatch_ring(d, now);
    /* the live work that held retries and replays to their budgets is gone (sent, or stopped
     * by its own endpoint's or tenant's limits): what waited for a budget may go now */
    if (!d->budget_wait || d->ready_live > 0 || d->in_flight >= d->cfg.max_in_flight) break;
    flush_wait(d, &d->budget_wait, true);
  }
#ifndef NDEBUG
  wait_list_check(d, d->budget_wait, true);
  wait_list_check(d, d->slow_wait, false);
#endif
}

static void dispatch_ring(hookd_dispatcher *d, int64_t now) {
  while (d->in_flight < d->cfg.max_in_flight) {
    tenant *t = ring_pop(d);
    if (!t) break;
    t->serving = true; /* its endpoints becoming ready must not re-queue it mid-turn */
    if (t->in_flight >= t->max_in_flight) {
      t->serving = false;
      tenant_hold(d, t, &t->blocked_cap, true); /* back in the ring on one of its completions */
      continue;
    }
    ep *spare = NULL;
    if (!cap_allows(d->cfg.max_in_flight, d->in_flight, t->in_flight, t->weight,
                    d->demand_weight + (t->demanding ? 0 : t->weight),
                    d->in_flight - d->demand_held - (t->demanding ? 0 : t->in_flight)) &&
        !(spare = spare_ep(d, t))) {
      t->serving = false;
      t->keep_turn = true;
      if (!t->share_blocked) { /* back when the reserve is exceeded, or on a completion */
        t->share_blocked = true;
        t->share_next = d->share_wait;
        d->share_wait = t;
      }
      continue;
    }
    int64_t twait = hookd_bucket_wait_ms(&t->bucket, now);
    if (twait > 0) {
      t->serving = false;
      tenant_hold(d, t, &t->waiting, true);
      t->wake_ms = now + twait;
      t->wait_next = d->tenant_wait;
      d->tenant_wait = t;
      continue;
    }
    ep *e = spare;
    if (e) ready_remove(d, e); /* (the idle endpoint, wherever it is in the tenant's list) */
    else e = ready_pop(d, t);
    if (!e) {
      t->serving = false;
      tenant_forget_if_done(d, t); /* (deleted while it waited in the ring) */
      continue; /* nothing ready: out of the ring until an endpoint is */
    }
    if (!cap_allows(tenant_cap(d, t), t->in_flight, e->in_flight, 1,
                    t->demand_eps + (e->demanding ? 0 : 1),
                    t->in_flight - t->demand_held - (e->demanding ? 0 : e->in_flight))) {
      if (!e->share_blocked) { /* back as its tenant's are, or on its own completion */
        e->share_blocked = true;
        e->share_next = t->share_wait;
        t->share_wait = e;
        ep_demand_update(e); /* (still wanting a slot: its tenant's shares count it) */
      }
      turn_goes_on(d, t, e);
      continue;
    }
    bool budget = false;
    int cls = pick_class(d, e, &budget);
    if (cls < 0) {
      if (budget && !e->budget_blocked) {
        e->budget_blocked = true;
        wait_list_push(&d->budget_wait, e, true);
      }
      turn_goes_on(d, t, e);
      continue;
    }
    if (!slow_share_ok(d, e)) {
      if (!e->slow_blocked) {
        e->slow_blocked = true;
        wait_list_push(&d->slow_wait, e, false);
      }
      turn_goes_on(d, t, e);
      continue;
    }
    hookd_breaker_state was = e->br.state;
    bool allowed = hookd_bucket_wait_ms(&e->bucket, now) == 0 &&
                   hookd_breaker_allow(&e->br, &d->breaker_cfg, now);
    if (e->br.state != was) { /* open → half-open, at its first probe: counted and logged as
                               * the breaker's other moves are (dispatcher.c) */
      HOOKD_INC(breaker_transitions);
      HLOG(HOOKD_LOG_WARN, "endpoint.breaker", KV_S("endpoint_id", e->cfg.id),
           KV_S("tenant_id", e->cfg.tenant_id), KV_S("from", hookd_breaker_name(was)),
           KV_S("to", hookd_breaker_name(e->br.state)));
      sched_health_update(d, e);
    }
    if (!allowed) {
      sched_ep_ready(d, e); /* into the wake heap, or out until a completion */
      /* ready again: sched_ep_ready read the clock anew and saw a step (a breaker's cool-down
       * moved past it). The pass goes on at that time: at the old one, e was popped, refused
       * and made ready again for ever, and the thread never saw a stop (a review) */
      if (e->in_ready) now = disp_now(d);
      turn_goes_on(d, t, e);
      continue;
    }
    item *it = dequeue(d, e, cls);
    it->probe = e->br.state == HOOKD_BREAKER_HALF_OPEN;
    it->probe_gen = e->br_gen;
    bool sent = false, probe = it->probe;
    if (it->c.expires_ms && now >= it->c.expires_ms) {
      disp_record_without_attempt(d, it, "expired");
    } else if (ep_no_resend(e) && it->c.d.state == HOOKD_DS_RETRYING && it->c.d.last_ambiguous) {
      /* a retry after an attempt that may have reached it, made before the destination was
       * made not idempotent (as the dispatcher judged it when it ended: last_ambiguous) */
      disp_record_hold(d, it);
    } else if (!disp_lease_room(it, e, disp_now(d), d->cfg.lease_margin_ms)) {
      /* waited too long for a slot: the lease could lapse mid-request; claim it again later
       * (read at the item, not at the pass's start: a long pass ate into the lease, a review) */
      disp_release_item(d, it);
      if (!e->next_due || e->next_due > now) e->next_due = now;
    } else if (e->key_ok &&
               ((ep_no_resend(e) && !it->marked) || disp_send_item(d, it, now) == 0)) {
      /* a destination that is not idempotent: the send mark first, the request once it is
       * committed (on_marked), counted in flight from now */
      if (ep_no_resend(e) && !it->marked) disp_mark_item(d, it);
      /* rate tokens pay for requests sent only: one taken for an item then released would be
       * lost, and a slow limit could lose every one (the item waits out its lease each time) */
      hookd_bucket_take(&e->bucket, now);
      hookd_bucket_take(&t->bucket, now);
      sent = true;
      e->in_flight++;
      e->in_flight_replays += it->cls == CLS_REPLAY;
      e->last_turn = it->cls != CLS_LIVE;
      t->in_flight++;
      d->in_flight++;
      t->demand_held += e->demanding; /* (the band's counts: held by holders with work ready) */
      d->demand_held += t->demanding;
      d->in_flight_cls[it->cls]++;
      if (t->in_flight_cls[it->cls]++ == 0) d->cls_weight[it->cls] += t->weight;
      it->slow = e->slow;
      if (it->slow) {
        d->slow_in_flight++;
        t->slow_in_flight++;
      }
      it->newcomer = ep_newcomer(e);
      t->new_in_flight += it->newcomer;
      it->spare = spare != NULL;
      d->spare_in_flight += it->spare;
    } else {
      disp_release_item(d, it);
    }
    if (!sent && probe) hookd_breaker_cancel_probe(&e->br); /* no outcome will give it back */
    sched_health_update(d, e); /* in flight and waiting as they are now (API, metrics) */
    sched_ep_ready(d, e);
    sched_ep_schedule(d, e);
    t->serving = false;
    if (--t->turn_left > 0 && t->ready_head) {
      ring_push_head(d, t); /* its turn continues, with what is left of it */
    } else {
      ring_push(d, t); /* at the tail, with a new turn */
    }
  }
}

/* Those waiting are ready again in the order they were stopped (*head is last-stopped first):
 * taken so, the endpoint that had just sent went first again. */
static void flush_wait(hookd_dispatcher *d, ep **head, bool budget) {
  ep *list = NULL;
  for (ep *e = *head, *next; e; e = next) {
    next = *wait_link(e, budget);
    *wait_link(e, budget) = list;
    list = e;
  }
  *head = NULL;
  while (list) {
    ep *e = list;
    list = *wait_link(e, budget);
    *wait_link(e, budget) = NULL;
    if (budget) e->budget_blocked = false;
    else e->slow_blocked = false;
    sched_ep_ready(d, e);
  }
}

void sched_sent_done(hookd_dispatcher *d, item *it) {
  ep *e = it->ep;
  tenant *t = e->t;
  e->in_flight--;
  e->in_flight_replays -= it->cls == CLS_REPLAY;
  sched_ep_idle_sync(e);
  d->spare_in_flight -= it->spare;
  t->in_flight--;
  d->in_flight--;
  t->demand_held -= e->demanding;
  d->demand_held -= t->demanding;
  d->in_flight_cls[it->cls]--;
  if (--t->in_flight_cls[it->cls] == 0) d->cls_weight[it->cls] -= t->weight;
  if (it->newcomer) t->new_in_flight--;
  if (it->slow) {
    d->slow_in_flight--;
    t->slow_in_flight--;
  }
  if (it->slow || it->newcomer) flush_wait(d, &d->slow_wait, false);
  if (it->cls != CLS_LIVE && d->budget_wait) flush_wait(d, &d->budget_wait, true);
  if (t->blocked_cap && t->in_flight < t->max_in_flight) {
    tenant_hold(d, t, &t->blocked_cap, false);
    ring_push(d, t);
  }
  if (d->share_wait && d->cfg.max_in_flight - d->in_flight > cap_reserve(d->cfg.max_in_flight))
    flush_share_tenants(d);
  else if (t->share_blocked)
    ring_push(d, t); /* holding one less, it may be under the floor */
  if (t->share_wait && tenant_cap(d, t) - t->in_flight > cap_reserve(tenant_cap(d, t)))
    flush_share_eps(d, t);
  sched_ep_ready(d, e);
  sched_ep_schedule(d, e);
}

static void mark_slow(hookd_dispatcher *d, item *it) {
  it->slow = true;
  d->slow_in_flight++;
  it->ep->t->slow_in_flight++;
}

/* Every request in flight to a slow endpoint counts in the slow share: one walk, however many
 * endpoints were just marked (a wave of hundreds marked in one sweep). A request sent to an
 * endpoint already slow was marked when sent; a request that ended is out of the live list
 * before its outcome is read. */
static void mark_slow_eps_requests(hookd_dispatcher *d) {
  for (hookd_egress_req *r = hookd_egress_live(d->eg); r; r = r->live_next) {
    item *it = r->user;
    if (it->ep->slow && !it->slow) mark_slow(d, it);
  }
}

/* A request in flight for more than half its timeout makes its endpoint slow now, and counts in
 * the slow share from now, rather than when it times out: a hanging endpoint's first requests
 * join the slow share while they still hang, so its next ones are held to the share. So do the
 * endpoint's other requests in flight, from the moment it is marked: sent a few ms after the
 * first (a burst of events published one by one), they would otherwise count as healthy until
 * their own half timeout, and the newcomer share, which reads the slow requests, let a new
 * hanging endpoint take the last slot of the tenant meanwhile (a flaky test showed it). */
void sched_mark_overdue(hookd_dispatcher *d, int64_t now) {
  bool marked = false;
  /* the sockets unread for a second and more in this turn: hookd stalled in it (SIGSTOP, a
   * paused VM), and the next read tells how long — until then no request is judged overdue
   * (a review: a stop landing in the turn marked the requests it held up slow) */
  if (hookd_egress_unread_ms(d->eg) > HOOKD_EGRESS_STALL_MS) return;
  /* (sent_ms is moved by a step of the wall clock: a step marks nothing slow) */
  for (hookd_egress_req *r = hookd_egress_live(d->eg); r; r = r->live_next) {
    item *it = r->user;
    ep *e = it->ep;
    if (it->slow || now - it->sent_ms - it->stall_credit_ms <= ep_slow_after_ms(e)) continue;
    /* a newcomer's request keeps its place in the newcomer share until it ends: given to the
     * next newcomer now, the wave's requests would pile up in the slow share past its half
     * and take the slots of the endpoints that answered before */
    mark_slow(d, it);
    /* a request sent before an operator moved the endpoint or enabled it again holds its slot
     * in the slow share, but says nothing of the endpoint's health now (as its answer would
     * not: docs/isolation.md) — before, a review: one hanging at the old URL marked the moved
     * endpoint slow */
    if (it->sent_ms < e->health_since) continue;
    e->fast_streak = 0;
    if (!e->slow) {
      ep_set_slow(e, true);
      sched_health_update(d, e);
      marked = true;
    }
  }
  if (marked) mark_slow_eps_requests(d);
}

void sched_ep_marked_slow(hookd_dispatcher *d, ep *e) {
  if (e->slow) return;
  ep_set_slow(e, true);
  mark_slow_eps_requests(d);
}

void sched_wake(hookd_dispatcher *d, int64_t now) {
  while (d->wake_len && d->wake[0]->wake_ms <= now) {
    ep *e = d->wake[0];
    wakeh_remove(d, e);
    sched_ep_ready(d, e);
    sched_ep_schedule(d, e);
  }
  tenant **pp = &d->tenant_wait;
  while (*pp) {
    tenant *t = *pp;
    if (t->wake_ms <= now) {
      *pp = t->wait_next;
      t->wait_next = NULL;
      tenant_hold(d, t, &t->waiting, false);
      ring_push(d, t);
      tenant_forget_if_done(d, t); /* (deleted while it waited) */
    } else {
      pp = &t->wait_next;
    }
  }
}

void sched_clock_step(hookd_dispatcher *d, int64_t delta_ms) {
  const char *k;
  void *v;
  /* (every wake time moves alike: the wake heap keeps its order) */
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    hookd_breaker_shift(&e->br, delta_ms);
    hookd_bucket_shift(&e->bucket, delta_ms);
    if (e->paused_until) e->paused_until += delta_ms;
    /* moved, it is no longer the store's value (on the old clock): this node's own from here on,
     * ended by its own rules; a rescan adopts the store's again only when that is longer (else
     * the next rescan cut a pause moved forward back to the stored time, and lifted it) */
    e->pause_adopted = false;
    if (e->fd_wait_until) e->fd_wait_until += delta_ms;
    if (e->lookup_hold_until) e->lookup_hold_until += delta_ms;
    if (e->failing_since) e->failing_since += delta_ms;
    /* as the requests' send times (move_items): a request sent before an operator's enable, and
     * answered after a step forward, still reads as sent before it (its 410 disabled the endpoint
     * enabled since); one sent after the enable and a step back, as sent after it */
    if (e->health_since) e->health_since += delta_ms;
    if (e->wake_pos) e->wake_ms += delta_ms;
    sched_ep_schedule(d, e); /* its claim time mixes stored due times with those moved */
    sched_health_update(d, e);
  }
  for (size_t i = 0; (i = hookd_strmap_next(&d->tenants, i, &k, &v)) != 0;) {
    tenant *t = v;
    hookd_bucket_shift(&t->bucket, delta_ms);
    if (t->wake_ms) t->wake_ms += delta_ms;
  }
}

int64_t sched_next_timer(hookd_dispatcher *d, int64_t now, bool claims) {
  int64_t t = 1000;
  if (claims && d->heap_len && d->queued + d->claiming < 2 * d->cfg.max_in_flight) {
    /* (as claims count; while claims are held, a due endpoint would only wake the loop again) */
    int64_t due = d->heap[0]->heap_key - now;
    if (due < t) t = due;
  }
  if (d->wake_len && d->wake[0]->wake_ms - now < t) t = d->wake[0]->wake_ms - now;
  for (tenant *w = d->tenant_wait; w; w = w->wait_next)
    if (w->wake_ms - now < t) t = w->wake_ms - now;
  return t < 0 ? 0 : t;
}

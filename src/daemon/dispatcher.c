/* dispatcher.c — the dispatcher thread: its inbox, the store operations it issues (claims,
 * fenced outcomes, lease releases, sweeps), signing and sending, and what each outcome does to
 * the delivery and to its endpoint's health (breaker, Retry-After pause, slowness, failing
 * streak). What is claimed and sent when is dispatcher_sched.c's business.
 *
 * Every store operation goes through the writer queue, so completions arrive in commit order: a
 * claim's "next due" snapshot is authoritative, later hints merge into it with min(). An
 * endpoint is freed only when it is gone and nothing references it. */
#include "daemon/dispatcher.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/custom_headers.h"
#include "core/envelope.h"
#include "core/delivery_state.h"
#include "core/ids.h"
#include "core/redact.h"
#include "core/retry_after.h"
#include "core/secretbox.h"
#include "core/timefmt.h"
#include "daemon/dispatcher_int.h"
#include "daemon/log.h"
#include "daemon/ops_events.h"
#include "daemon/metrics.h"

#define RECLAIM_BATCH 1000

/* ---------- inbox ---------- */

/* Queues m; wakes the dispatcher only when the inbox goes from empty to non-empty (it drains
 * everything each time it wakes). The wake-up is sent under the lock: once the message can be
 * seen, the last store completion of a stop may let the dispatcher end and be freed, and a
 * wake-up sent after the unlock touched the freed egress (TSan, a stop with the store locked). */
static void post(hookd_dispatcher *d, msg *m) {
  m->next = NULL;
  pthread_mutex_lock(&d->mu);
  bool was_empty = d->in_head == NULL;
  if (d->in_tail) d->in_tail->next = m;
  else d->in_head = m;
  d->in_tail = m;
  if (was_empty) hookd_egress_wakeup(d->eg);
  pthread_mutex_unlock(&d->mu);
}

static msg *msg_new(hookd_dispatcher *d, msg_type t) {
  msg *m = calloc(1, sizeof *m);
  if (m) {
    m->type = t;
    m->d = d;
  }
  return m;
}

void hookd_dispatcher_hint(hookd_dispatcher *d, const char *endpoint_id, int64_t due_ms) {
  msg *m = msg_new(d, MSG_HINT);
  if (!m || !(m->endpoint_id = strdup(endpoint_id))) {
    free(m);
    return; /* the periodic rescan will find it */
  }
  m->due_ms = due_ms;
  post(d, m);
}

void hookd_dispatcher_rescan(hookd_dispatcher *d) {
  msg *m = msg_new(d, MSG_RESCAN_REQ);
  if (m) post(d, m);
}

void hookd_dispatcher_store_changed(hookd_dispatcher *d, bool missed) {
  msg *m = msg_new(d, MSG_STORE_CHANGED);
  if (!m) return; /* (the periodic rescan reads the change) */
  m->due_ms = missed;
  post(d, m);
}

void hookd_dispatcher_event_purged(hookd_dispatcher *d, int64_t event_seq) {
  msg *m = msg_new(d, MSG_EVENT_PURGED);
  if (!m) return;
  m->due_ms = event_seq;
  post(d, m);
}

static void on_http_done(hookd_egress_req *req, void *arg);

/* Ends the requests handed to libcurl but not sent yet (waiting for a name, a connection) of
 * the event event_seq, or else of the endpoint e: given back, no attempt (item.purged). Returns
 * how many. */
static size_t end_unsent(hookd_dispatcher *d, int64_t event_seq, const ep *e, const char *why) {
  hookd_egress_req *cut[64];
  size_t n, ended = 0;
  do { /* (each one ended leaves the live list) */
    n = 0;
    for (hookd_egress_req *r = hookd_egress_live(d->eg); r && n < 64; r = r->live_next) {
      item *it = r->user;
      if ((e ? it->ep == e : it->c.d.event_seq == event_seq) && !r->request_sent && !it->purged)
        cut[n++] = r;
    }
    for (size_t i = 0; i < n; i++) {
      ((item *)cut[i]->user)->purged = true;
      hookd_egress_abort(d->eg, cut[i], why, on_http_done, d);
    }
    ended += n;
  } while (n == 64);
  return ended;
}

/* Gives back the queues that hold a claimed, unsent delivery of the event (the whole queue of
 * such an endpoint: what else it held is claimed again). */
static void drop_event_items(hookd_dispatcher *d, int64_t event_seq) {
  /* and the requests not sent yet (waiting for a name, a connection): ended now, given back */
  size_t ended = end_unsent(d, event_seq, NULL, "its event's payload was deleted"), queues = 0;
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    bool holds = false;
    for (int c = 0; c < CLS__COUNT && !holds; c++)
      for (item *it = e->q_head[c]; it && !holds; it = it->next)
        holds = it->c.d.event_seq == event_seq;
    if (holds) {
      sched_release_queue(d, e);
      queues++;
    }
  }
  if (ended || queues)
    HLOG(HOOKD_LOG_DEBUG, "event.purged_released", KV_I("event_seq", event_seq),
         KV_I("requests_ended", (int64_t)ended), KV_I("queues_released", (int64_t)queues));
}

void hookd_dispatcher_endpoint_changed(hookd_dispatcher *d, const hookd_endpoint *e) {
  msg *m = msg_new(d, MSG_ENDPOINT);
  if (!m) return;
  hookd_endpoint_copy(&m->ep, e);
  post(d, m);
}

void hookd_dispatcher_tenant_deleted(hookd_dispatcher *d, const char *id) {
  msg *m = msg_new(d, MSG_TENANT);
  if (!m) return;
  m->tenant_deleted = true;
  if (!(m->tenant.id = strdup(id))) {
    free(m);
    return;
  }
  post(d, m);
}

void hookd_dispatcher_tenant_changed(hookd_dispatcher *d, const hookd_tenant *t) {
  msg *m = msg_new(d, MSG_TENANT);
  if (!m) return;
  m->tenant = *t;
  m->tenant.id = strdup(t->id);
  m->tenant.name = NULL;
  m->tenant.metadata = NULL; /* (borrowed: the dispatcher reads the limits only) */
  if (!m->tenant.id) {
    free(m);
    return;
  }
  post(d, m);
}

void hookd_dispatcher_sync(hookd_dispatcher *d, void (*fn)(void *), void *arg) {
  msg *m = msg_new(d, MSG_SYNC);
  if (!m) {
    fn(arg);
    return;
  }
  m->sync_fn = fn;
  m->sync_arg = arg;
  post(d, m);
}

void hookd_dispatcher_get_stats(hookd_dispatcher *d, hookd_dispatcher_stats *out) {
  pthread_mutex_lock(&d->mu);
  *out = d->stats;
  pthread_mutex_unlock(&d->mu);
}

int hookd_dispatcher_health_each(hookd_dispatcher *d,
                                 int (*fn)(void *arg, const char *endpoint_id,
                                           const hookd_endpoint_health *h),
                                 void *arg) {
  int rc = 0;
  const char *k;
  void *v;
  pthread_mutex_lock(&d->health_mu);
  for (size_t i = 0; !rc && (i = hookd_strmap_next(&d->health, i, &k, &v)) != 0;)
    rc = fn(arg, k, &((ep_health_rec *)v)->h);
  pthread_mutex_unlock(&d->health_mu);
  return rc;
}

int hookd_dispatcher_endpoint_health(hookd_dispatcher *d, const char *id,
                                     hookd_endpoint_health *out) {
  pthread_mutex_lock(&d->health_mu);
  ep_health_rec *r = hookd_strmap_get(&d->health, id);
  if (r) *out = r->h;
  pthread_mutex_unlock(&d->health_mu);
  return r ? 0 : -1;
}

/* Store completions run on the writer thread: they only post the message back. */
static void op_done_post(void *arg, int rc) {
  msg *m = arg;
  m->rc = rc;
  post(m->d, m);
}

static void item_done_post(void *arg, int rc) {
  item *it = arg;
  it->rc = rc;
  memset(&it->done, 0, sizeof it->done);
  it->done.type = it->marking ? MSG_MARKED : it->recording ? MSG_RECORDED : MSG_RELEASED;
  it->done.d = it->d;
  it->done.item = it;
  it->done.rc = rc;
  post(it->d, &it->done);
}

/* ---------- endpoints ---------- */

static void ep_forget_keys(ep *e) {
  OPENSSL_cleanse(&e->key, sizeof e->key); /* ep_free frees e next: a memset could be dropped */
  OPENSSL_cleanse(&e->prev_key, sizeof e->prev_key);
  hookd_secret_free(e->ed_key);
  hookd_secret_free(e->prev_ed_key);
  e->ed_key = e->prev_ed_key = NULL;
  hookd_secret_free(e->header_lines);
  hookd_secret_free(e->redact_lines);
  e->header_lines = e->redact_lines = NULL;
  e->has_prev = false;
  e->key_ok = false;
}

static void ep_free(hookd_dispatcher *d, ep *e) {
  if (e->t) sched_tenant_release(d, e->t);
  ep_forget_keys(e);
  hookd_endpoint_free(&e->cfg);
  free(e);
}

static void ep_maybe_free(hookd_dispatcher *d, ep *e) {
  if (!e->gone || e->in_flight || e->queued || e->claiming || e->item_ops) return;
  sched_ep_unlink(d, e);
  sched_health_remove(d, e->cfg.id);
  if (hookd_strmap_get(&d->eps, e->cfg.id) == e) hookd_strmap_del(&d->eps, e->cfg.id);
  ep_free(d, e);
}

/* Adds a secret's text, whole and without its prefix (whsec_…: the key's base64 alone, which a
 * receiver's error may quote), to what excerpts of e's answers mask. False out of memory (the
 * endpoint is then not sent to: an excerpt would show it). */
static bool redact_secret(ep *e, const char *plain) {
  const char *bare = strchr(plain, '_');
  bare = bare ? bare + 1 : plain;
  const char *had = e->redact_lines ? e->redact_lines : "";
  size_t n = strlen(had) + strlen(plain) + strlen(bare) + 16;
  char *lines = malloc(n);
  if (!lines) return false;
  snprintf(lines, n, "%ss: %s\ns: %s\n", had, plain, bare);
  hookd_secret_free(e->redact_lines);
  e->redact_lines = lines;
  return true;
}

/* A receiver's error that quotes the secret it expected is shown to every viewer of the tenant,
 * who may not read secrets: a stored secret's text is masked in excerpts, whatever its encoding
 * (JSON's "\/", a URL's). False out of memory; a value that does not open has nothing to mask. */
static bool mask_secret(hookd_dispatcher *d, ep *e, const char *stored) {
  if (!stored || !*stored) return true;
  char *plain = hookd_keyring_open(d->cfg.keyring, stored, e->cfg.id);
  bool ok = !plain || redact_secret(e, plain);
  hookd_secret_free(plain);
  return ok;
}

/* Opens one stored secret into the form the signer uses. */
static bool open_key(hookd_dispatcher *d, const ep *e, const char *stored, hookd_hmac_key *hk,
                     char **ed) {
  char *plain = hookd_keyring_open(d->cfg.keyring, stored, e->cfg.id);
  if (!plain) return false;
  bool ok;
  if (e->ed25519) {
    char pk[HOOKD_ED_SECRET_MAX];
    ok = hookd_ed25519_public(plain, pk) == 0;
    if (ok) *ed = plain;
    else hookd_secret_free(plain);
  } else {
    ok = hookd_secret_parse(plain, hk) == 0;
    hookd_secret_free(plain);
  }
  return ok;
}

static void ep_apply_config(hookd_dispatcher *d, ep *e, const hookd_endpoint *cfg) {
  int64_t now = disp_now(d);
  hookd_endpoint_free(&e->cfg);
  hookd_endpoint_copy(&e->cfg, cfg);
  if (d->cfg.max_timeout_ms > 0 && e->cfg.timeout_ms > d->cfg.max_timeout_ms)
    e->cfg.timeout_ms = d->cfg.max_timeout_ms;
  ep_forget_keys(e);
  e->ed25519 = e->cfg.signing && !strcmp(e->cfg.signing, "ed25519");
  e->key_ok = e->cfg.secret && open_key(d, e, e->cfg.secret, &e->key, &e->ed_key);
  if (e->key_ok && e->cfg.previous_secret && e->cfg.previous_expires_ms > now) {
    e->has_prev = open_key(d, e, e->cfg.previous_secret, &e->prev_key, &e->prev_ed_key);
    e->prev_until_ms = e->cfg.previous_expires_ms;
  }
  /* both masked, the previous one past its overlap too (it signs nothing then, but a receiver
   * still on it quotes it); out of memory, not sent to: an excerpt would show them */
  if (e->key_ok)
    e->key_ok = mask_secret(d, e, e->cfg.secret) && mask_secret(d, e, e->cfg.previous_secret);
  /* custom headers the receiver's gateway may require: a request without them would be refused
   * there (or reach what the gateway guards without its credentials), so an endpoint whose
   * headers do not open is not sent to, as one whose secret does not */
  if (e->key_ok && e->cfg.headers) {
    json_t *h = hookd_keyring_open_json(d->cfg.keyring, e->cfg.headers, e->cfg.id);
    e->header_lines = json_is_object(h) ? hookd_custom_headers_lines(h) : NULL;
    e->key_ok = e->header_lines != NULL;
    json_decref(h);
    if (e->header_lines) { /* the values masked beside the secrets */
      const char *had = e->redact_lines ? e->redact_lines : "";
      size_t n = strlen(had) + strlen(e->header_lines) + 1;
      char *lines = malloc(n);
      if (lines) {
        snprintf(lines, n, "%s%s", had, e->header_lines);
        hookd_secret_free(e->redact_lines);
        e->redact_lines = lines;
      }
      e->key_ok = lines != NULL; /* (unmasked, they would be shown) */
    }
  }
  if (!e->key_ok) {
    HLOG(HOOKD_LOG_ERROR, "endpoint.secret_unavailable", KV_S("endpoint_id", e->cfg.id),
         KV_S("tenant_id", e->cfg.tenant_id));
    /* what it had claimed is given back, not sent unsigned or without its headers */
    sched_release_queue(d, e);
  }
  sched_ep_share(d, e, now);
}

static ep *ep_get(hookd_dispatcher *d, const char *id) { return hookd_strmap_get(&d->eps, id); }

static bool same_text(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static void ep_upsert(hookd_dispatcher *d, const hookd_endpoint *cfg) {
  ep *e = ep_get(d, cfg->id);
  int64_t now = disp_now(d);
  if (cfg->deleted_ms) {
    if (!e) return;
    e->gone = true;
    /* nothing starts from the answer on: its requests not sent yet are ended too (before, a
     * review: one waiting for a slow name went out seconds after the DELETE's answer) */
    end_unsent(d, 0, e, "its endpoint was deleted");
    sched_release_queue(d, e);
    sched_ep_unlink(d, e);
    ep_maybe_free(d, e);
    return;
  }
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e) return;
    hookd_bucket_init(&e->bucket, 0, 1, now);
    hookd_breaker_init(&e->br, now);
    ep_apply_config(d, e, cfg);
    /* the failing window and a Retry-After pause the store kept over a restart; once loaded,
     * this node's are the ones (a configuration read before a success's write would bring an
     * old window back) */
    e->failing_since = e->failing_since_stored = e->cfg.failing_since_ms;
    if (e->cfg.paused_until_ms > now) e->paused_until = e->cfg.paused_until_ms;
    e->pause_adopted = e->paused_until > now; /* the store's word, as another node's */
    e->t = sched_tenant(d, e->cfg.tenant_id);
    if (!e->t || hookd_strmap_put(&d->eps, e->cfg.id, e) != 0) {
      e->t = NULL; /* (no ref taken on it yet) */
      ep_free(d, e);
      return;
    }
    e->t->refs++;
    e->next_due = now; /* a claim finds out what is due */
  } else {
    /* (disabled in memory by an answer whose write is not in yet: enabled as far as an
     * operator's change goes — another change read before that write is no re-enable, which
     * would wipe its breaker and lift the receiver's Retry-After pause) */
    bool was_enabled = e->cfg.enabled || e->disabled_by_outcome;
    bool was_resend = !ep_no_resend(e);
    bool was_lanes = ep_lanes_block(e);
    bool was_ordered = e->cfg.ordered;
    bool moved = !e->cfg.url || !cfg->url || strcmp(e->cfg.url, cfg->url) != 0;
    /* signed or given its headers under the old ones: a secret rotated, a header changed, or
     * the body another (body_format: NULL is the envelope) */
    bool resigned = !same_text(e->cfg.secret, cfg->secret) ||
                    !same_text(e->cfg.previous_secret, cfg->previous_secret) ||
                    !same_text(e->cfg.headers, cfg->headers) ||
                    strcmp(e->cfg.body_format ? e->cfg.body_format : "envelope",
                           cfg->body_format ? cfg->body_format : "envelope") != 0;
    ep_apply_config(d, e, cfg);
    e->disabled_by_outcome = false; /* the store's word now */
    /* a new URL is another destination, and an operator who enables the endpoint again has
     * seen to it: its failures (the store clears failing_since too) and its breaker start
     * over, and what a request sent before answers says nothing of its health (on_http_done);
     * a slow mark clears itself after a run of fast answers, as ever */
    if (moved || (!was_enabled && e->cfg.enabled)) {
      e->failing_since = e->failing_since_stored = 0;
      if (e->br.state != HOOKD_BREAKER_CLOSED) d->breakers_open--;
      hookd_breaker_init(&e->br, now);
      e->br_gen++;
      e->health_since = now;
    }
    if (moved) e->proven = false; /* not heard from at the new URL: a newcomer again */
    sched_ep_idle_sync(e);
    /* a Retry-After pause was the old receiver's word: a new URL, or an operator enabling the
     * endpoint again, ends it (else an hour's 429 held a fixed endpoint that hour) */
    if ((moved || (!was_enabled && e->cfg.enabled)) && e->paused_until > now) {
      e->paused_until = 0;
      e->pause_adopted = false;
      HLOG(HOOKD_LOG_INFO, "endpoint.pause_lifted", KV_S("endpoint_id", e->cfg.id),
           KV_S("tenant_id", e->cfg.tenant_id),
           KV_S("reason", moved ? "url_changed" : "enabled"));
    }
    /* any change may make something claimable (enabled, no longer ordered, a lane policy
     * that skips a DEAD head): a claim finds out */
    if (e->cfg.enabled && (!e->next_due || e->next_due > now)) e->next_due = now;
    /* from the answer on, no request starts under the old settings (docs/api.md): those handed
     * to libcurl but not sent yet (waiting for a slow name, a connection) were signed and
     * addressed under them — ended, given back, claimed again under the new ones (before, a
     * review: sent seconds after a DELETE, a disable, a move or a cut-over rotation was
     * answered; the rotation's went DEAD at a receiver checking the new secret) */
    if ((was_enabled && !e->cfg.enabled) || moved || resigned)
      end_unsent(d, 0, e,
                 !e->cfg.enabled ? "its endpoint was disabled"
                 : moved         ? "its endpoint moved to another URL"
                                 : "its endpoint's secret or headers changed");
    if (was_enabled && !e->cfg.enabled) sched_release_queue(d, e);
    /* made not idempotent: the PATCH marked every lease as maybe sent, since the store cannot
     * tell the requests out from the leases still queued here. Those queued are given back (the
     * release keeps the token, so the next claim's token no longer matches that mark) and are
     * claimed again under the send mark, instead of being held unknown after a crash although
     * never sent. A crash before the release commits holds them, as before. */
    else if (was_resend && ep_no_resend(e)) sched_release_queue(d, e);
    /* made ordered (or its lanes to block): what it holds was claimed without that rule (a
     * lane's deliveries all at once, a DEAD head's successor) — given back, claimed again by it */
    else if ((!was_ordered && e->cfg.ordered) || (!was_lanes && ep_lanes_block(e)))
      sched_release_queue(d, e);
  }
  sched_ep_ready(d, e);
  sched_ep_schedule(d, e);
  sched_health_update(d, e);
}

/* ---------- store ops ---------- */

/* Frees the rows a claim read (they hold no lease unless its batch committed). */
static void claimed_drop(msg *m) {
  for (size_t i = 0; i < m->n_claimed; i++) hookd_claimed_free(&m->claimed[i]);
  free(m->claimed);
  m->claimed = NULL;
  m->n_claimed = 0;
}

static int run_claim(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  msg *m = arg;
  claimed_drop(m); /* a second run (its batch rolled back and redone) forgets the first one's */
  return be->claim(c, &m->claim, &m->claimed, &m->n_claimed, &m->next_due);
}

void disp_submit_claim(hookd_dispatcher *d, ep *e, int limit, int replay_limit, int64_t now) {
  msg *m = msg_new(d, MSG_CLAIMED);
  if (!m) return;
  if (!(m->endpoint_id = strdup(e->cfg.id))) {
    free(m);
    return;
  }
  m->claim_ep = e;
  m->claim_back_ms = d->clock_back_ms;
  m->claim.endpoint_id = m->endpoint_id;
  m->claim.owner = d->node_id;
  m->claim.limit = limit;
  m->claim.replay_limit = replay_limit;
  m->claim.ordered = e->cfg.ordered;
  /* on an ordered endpoint a replayed delivery is its lane's head (the lane's later deliveries
   * wait behind it): one is claimed, and sent, before live work — turn about with live, so
   * that a bulk replay takes half the endpoint at most (pick_class) */
  m->claim.replay_first = e->cfg.ordered && !e->last_turn;
  m->claim.lane_block = ep_lanes_block(e); /* (the store reads both again: hookd_claim_mode) */
  m->claim.now_ms = now;
  /* the lease covers a queue wait of one request plus the request itself, plus the margin */
  m->claim.lease_ms = 2 * (int64_t)e->cfg.timeout_ms + d->cfg.lease_margin_ms;
  m->op.run = run_claim;
  m->op.done = op_done_post;
  m->op.arg = m;
  m->op.flags = HOOKD_STORE_OP_NO_SAVEPOINT; /* it fails only on I/O errors; runs twice safely */
  e->claiming = limit;
  e->t->claiming += limit;
  d->claiming += limit;
  d->claim_ops++;
  e->t->claim_ops++;
  d->store_ops++;
  HOOKD_INC(claims);
  hookd_storeq_submit(d->store->writer, &m->op);
}

/* The operational events an outcome reports, in its transaction (docs/api.md "Operational
 * events"): a DEAD delivery, an endpoint disabled by its answers — another tenant's. */
static int publish_ops(hookd_store_conn *c, const hookd_store_backend *be, item *it) {
  const char *ops = it->d->cfg.ops_tenant;
  const hookd_outcome *o = &it->out;
  const hookd_delivery *dl = &it->c.d;
  if (!ops || !dl->tenant_id || !strcmp(dl->tenant_id, ops) || o->cancelled || o->superseded)
    return 0; /* (superseded: the delivery did not move) */
  char at[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(o->now_ms, at);
  int rc = 0;
  if (o->to == HOOKD_DS_DEAD && o->attempt_number > 0)
    rc = hookd_ops_publish(
        c, be, ops, "delivery.dead",
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:s?,s:s}", "tenant_id", dl->tenant_id,
                  "endpoint_id", it->endpoint_id ? it->endpoint_id : "", "event_id",
                  dl->event_id ? dl->event_id : "", "event_type",
                  dl->event_type ? dl->event_type : "", "delivery_id", dl->id ? dl->id : "",
                  "reason", o->dead_reason ? o->dead_reason : "", "attempts",
                  o->attempt_number, "last_status", o->attempt.http_status, "last_error",
                  o->last_error, "dead_at", at),
        o->now_ms, &it->ops[0]);
  if (!rc && o->disabled_now) /* once: not for each answer of the requests that were out */
    rc = hookd_ops_publish(c, be, ops, "endpoint.disabled",
                           json_pack("{s:s,s:s,s:s,s:s}", "tenant_id", dl->tenant_id,
                                     "endpoint_id", it->endpoint_id ? it->endpoint_id : "",
                                     "reason", o->disable_reason ? o->disable_reason : "",
                                     "disabled_at", at),
                           o->now_ms, &it->ops[1]);
  return rc;
}

static int run_record(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  item *it = arg;
  hookd_publish_res_free(&it->ops[0]); /* a redone batch runs the op again */
  hookd_publish_res_free(&it->ops[1]);
  int rc = be->record_outcome(c, &it->out);
  return rc ? rc : publish_ops(c, be, it);
}

static int run_release(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  item *it = arg;
  hookd_release r = {.delivery_seq = it->c.d.seq,
                     .lease_token = it->c.d.lease_token,
                     .state = it->c.d.state,
                     .next_attempt_ms = it->c.d.next_attempt_ms,
                     .last_error = it->c.d.last_error,
                     .inbound = it->c.inbound,
                     .maybe_sent = it->maybe_sent,
                     .now_ms = hookd_now_ms(),
                     .attempt_number = it->c.d.attempt_count + 1};
  return be->release_lease(c, &r);
}

static int run_mark(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  item *it = arg;
  return be->mark_sent(c, it->c.d.seq, it->c.d.lease_token);
}

/* The item's store op: its outcome, the release of its lease, or the send mark before its
 * request (docs/inbound.md "Ambiguous outcomes": the request starts when the mark is committed,
 * on_marked; the item counts as in flight meanwhile, the caller counted it). */
typedef enum { ITEM_RELEASE, ITEM_RECORD, ITEM_MARK } item_op_kind;

static void submit_item_op(hookd_dispatcher *d, item *it, item_op_kind kind) {
  it->d = d;
  it->recording = kind == ITEM_RECORD;
  it->marking = kind == ITEM_MARK;
  it->op.run = kind == ITEM_RECORD ? run_record : kind == ITEM_MARK ? run_mark : run_release;
  it->op.done = item_done_post;
  it->op.arg = it;
  /* a fenced lease (HOOKD_STORE_STALE) is found by the first UPDATE, before anything is written;
   * all write only the store, so they may run twice */
  it->op.flags = HOOKD_STORE_OP_NO_SAVEPOINT;
  it->op_net_ms = d->clock_net_ms;
  it->op_back_ms = d->clock_back_ms;
  d->store_ops++;
  it->ep->item_ops++; /* the endpoint outlives the op even if it is deleted meanwhile */
  hookd_storeq_submit(d->store->writer, &it->op);
}

void disp_release_item(hookd_dispatcher *d, item *it) { submit_item_op(d, it, ITEM_RELEASE); }

void disp_mark_item(hookd_dispatcher *d, item *it) { submit_item_op(d, it, ITEM_MARK); }

/* An outcome without an attempt (nothing was sent): the delivery moves by `t`, with last_error
 * and, going DEAD, its reason; a move the state does not allow gives the lease back. */
static void record_no_attempt(hookd_dispatcher *d, item *it, hookd_dtrigger t,
                              const char *last_error, const char *dead_reason) {
  hookd_delivery *dl = &it->c.d;
  hookd_dstate to;
  if (hookd_dstate_next(dl->state, t, &to) != 0) {
    disp_release_item(d, it);
    return;
  }
  memset(&it->out, 0, sizeof it->out);
  it->out.delivery_seq = dl->seq;
  it->out.lease_token = dl->lease_token;
  it->out.from = dl->state;
  it->out.to = to;
  it->out.last_error = last_error;
  it->out.dead_reason = dead_reason;
  it->out.inbound = it->c.inbound;
  it->out.lane = dl->ordering_key != NULL;
  it->out.now_ms = disp_now(d);
  submit_item_op(d, it, ITEM_RECORD);
}

void disp_record_without_attempt(hookd_dispatcher *d, item *it, const char *reason) {
  snprintf(it->dead_reason, sizeof it->dead_reason, "%s", reason);
  record_no_attempt(d, it, HOOKD_DT_DEAD, it->dead_reason, it->dead_reason);
}

/* A retry claimed for a destination that is not idempotent, whose last attempt may have reached
 * it (made before an operator's PATCH to idempotent: false, which the store cannot see in the
 * leases queued here nor in those waiting for their backoff): held unknown for an operator
 * rather than sent again, as that attempt would have been under the new setting. */
void disp_record_hold(hookd_dispatcher *d, item *it) {
  record_no_attempt(d, it, HOOKD_DT_HOLD,
                    "held: the destination was made not idempotent after an attempt that may "
                    "have reached it",
                    NULL);
}

/* ---------- sending ---------- */

static const char *attempt_kind(const hookd_delivery *dl) {
  if (dl->attempt_count > dl->cycle_base) return "retry";
  return dl->replay_cycle ? "replay" : "live";
}

/* Appends each '\n'-ended line of lines (NULL: none) to *hs, through buf (a line longer than
 * cap through one of its size: a provider's header is forwarded whole), but those naming a
 * header of skip; -1 out of memory. */
static int add_lines(struct curl_slist **hs, const char *lines, const char *skip, char *buf,
                     size_t cap) {
  for (const char *line = lines; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t ll = end ? (size_t)(end - line) : strlen(line);
    if (ll && !hookd_header_line_named(line, ll, skip)) {
      char *b = ll < cap ? buf : malloc(ll + 1);
      if (!b) return -1;
      memcpy(b, line, ll);
      b[ll] = '\0';
      struct curl_slist *t = curl_slist_append(*hs, b);
      if (b != buf) {
        OPENSSL_cleanse(b, ll); /* (custom headers are credentials) */
        free(b);
      }
      if (!t) return -1;
      *hs = t;
    }
    line = end ? end + 1 : line + ll;
  }
  return 0;
}

/* A request's header list freed; wiped first when it carried an endpoint's custom headers
 * (credentials, which freed memory would otherwise keep). */
static void free_hdrs(struct curl_slist *hs, bool wipe) {
  for (struct curl_slist *l = hs; wipe && l; l = l->next) OPENSSL_cleanse(l->data, strlen(l->data));
  curl_slist_free_all(hs);
}

int disp_send_item(hookd_dispatcher *d, item *it, int64_t now) {
  ep *e = it->ep;
  /* its secret or headers no longer open (a claim or a send mark that landed after): given back
   * by the caller, never sent unsigned (an Ed25519 key NULL) or without its gateway's headers */
  if (!e->key_ok) return -1;
  hookd_delivery *dl = &it->c.d;
  char ts[24], *sig = it->sig, h[HOOKD_ID_MAX + 2048] /* most lines fit */;
  int64_t now_s = now / 1000;
  snprintf(ts, sizeof ts, "%lld", (long long)now_s);
  /* what is sent: the stored bytes — or, to an endpoint whose body_format is "payload", the
   * envelope's data alone, as Svix sends a message (an inbound forward is the provider's body) */
  const char *body = it->c.body;
  size_t body_len = it->c.body_len;
  bool payload_only = !it->c.inbound && e->cfg.body_format &&
                      !strcmp(e->cfg.body_format, "payload") &&
                      hookd_envelope_data(it->c.body, it->c.body_len, &body, &body_len);
  /* the current signature, then during a rotation overlap the previous one */
  bool prev = e->has_prev && now < e->prev_until_ms;
  int rc;
  if (e->ed25519) {
    rc = hookd_sign_v1a(e->ed_key, dl->event_id, now_s, body, body_len, sig);
    if (!rc && prev) {
      size_t n = strlen(sig);
      sig[n] = ' ';
      rc = hookd_sign_v1a(e->prev_ed_key, dl->event_id, now_s, body, body_len,
                          sig + n + 1);
    }
  } else {
    rc = hookd_sign_v1(&e->key, dl->event_id, now_s, body, body_len, sig);
    if (!rc && prev) {
      size_t n = strlen(sig);
      sig[n] = ' ';
      rc = hookd_sign_v1(&e->prev_key, dl->event_id, now_s, body, body_len,
                         sig + n + 1);
    }
  }
  if (rc != 0) return -1;
  struct curl_slist *hs = NULL, *t;
#define ADD(...)                                                                               \
  do {                                                                                         \
    snprintf(h, sizeof h, __VA_ARGS__);                                                        \
    if (!(t = curl_slist_append(hs, h))) goto fail;                                            \
    hs = t;                                                                                    \
  } while (0)
  if (it->c.inbound) {
    /* a forward: the provider's raw body, its content type, the same Idempotency-Key on every
     * attempt, the provider's identifying headers, and hookd's signature */
    ADD("Content-Type: %s", it->c.content_type ? it->c.content_type : "application/json");
    ADD("Idempotency-Key: %s", dl->event_id);
    /* (a header the destination sets itself is its own: the provider's of that name is not
     * forwarded beside it — a receiver reading the first would read the provider's) */
    if (add_lines(&hs, it->c.meta, e->header_lines, h, sizeof h) != 0) goto fail;
  } else {
    ADD("Content-Type: application/json");
    /* (the type is not in a payload alone: said beside it, as a forward says a provider's) */
    if (payload_only) ADD("hookd-event-type: %s", dl->event_type ? dl->event_type : "");
  }
  ADD("webhook-id: %s", dl->event_id);
  ADD("webhook-timestamp: %s", ts);
  ADD("webhook-signature: %s", sig);
  if (d->cfg.svix_headers && !it->c.inbound) { /* (a forward: the provider's svix-* never) */
    ADD("svix-id: %s", dl->event_id);
    ADD("svix-timestamp: %s", ts);
    ADD("svix-signature: %s", sig);
  }
  ADD("hookd-delivery-id: %s", dl->id);
  ADD("hookd-attempt: %d", dl->attempt_count + 1);
  ADD("Expect:");
#undef ADD
  /* the endpoint's own headers last, on every attempt (a gateway's credentials); their names
   * never are one of the above (core/custom_headers.c) */
  if (add_lines(&hs, e->header_lines, NULL, h, sizeof h) != 0) goto fail;
  it->wipe_hdrs = e->header_lines != NULL;
  if (it->wipe_hdrs) OPENSSL_cleanse(h, sizeof h); /* it held the last of them */
  memset(&it->req, 0, sizeof it->req);
  it->hdrs = hs;
  free(it->url);
  if (!(it->url = strdup(e->cfg.url))) goto fail;
  it->req.url = it->url;
  it->req.headers = hs;
  it->req.body = body;
  it->req.body_len = body_len;
  it->req.timeout_ms = e->cfg.timeout_ms;
  it->req.user = it;
  if (hookd_egress_start(d->eg, &it->req) != 0) goto fail;
  it->sent_ms = now;
  it->stall_credit_ms = 0;
  it->first_delay_ms = now - dl->created_ms; /* read now: a step moves sent_ms, not created_ms */
  return 0;
fail:
  free_hdrs(hs, e->header_lines != NULL);
  it->hdrs = NULL;
  free(it->url);
  it->url = NULL;
  return -1;
}

/* ---------- outcomes ---------- */

/* The correlation keys of a delivery's log lines (X4): the delivery, its event, tenant and
 * endpoint, the lease token it was claimed with and the node (worker) holding it. An attempt is
 * (delivery_id, attempt). */
/* An attempt's number and id (core/ids.h; no id for number 0), in a buffer of the statement's
 * own: a log call's arguments live until the call returns. */
#define KV_ATTEMPT(dl, n)                                                                         \
  KV_S("attempt_id", hookd_attempt_id((dl)->id, (n), (char[HOOKD_ATTEMPT_ID_MAX]){0})),         \
      KV_I("attempt", (n))
#define KV_DELIVERY(disp, dl, ep_id)                                                            \
  KV_S("delivery_id", (dl)->id), KV_S("event_id", (dl)->event_id),                            \
      KV_S("tenant_id", (dl)->tenant_id), KV_S("endpoint_id", (ep_id)),                        \
      KV_I("lease_token", (dl)->lease_token), KV_S("worker_id", (disp)->node_id)

/* What an outcome says about the endpoint's health (docs/isolation.md): success, failure — a
 * 5xx, a timeout, a connection, DNS, TLS or protocol error — or neither: a 4xx is the
 * payload's problem even when retried (408, a policy's retry_statuses), a 429 a request to slow
 * down (handled by the pause), a 3xx a redirect never followed. *reached: the receiver answered
 * for itself — a success, or a 3xx or 4xx but a 408 (a timeout's) and a 429: what a half-open
 * breaker's probe needs to close it (else one request at a time until a delivery succeeded). */
static void health_signal(const hookd_egress_req *req, hookd_classification cls, bool *ok,
                          bool *bad, bool *reached) {
  *ok = cls.cls == HOOKD_CLASS_SUCCESS;
  *bad = cls.cls == HOOKD_CLASS_RETRY && (req->net != HOOKD_NET_OK || req->status >= 500);
  *reached = *ok || (req->net == HOOKD_NET_OK && req->status >= 300 && req->status < 500 &&
                     req->status != 408 && req->status != 429);
}

/* The lines hookd_redact_values masks the values of (core/redact.h): `had` (an endpoint's
 * redact_lines, or NULL) and each signature of a webhook-signature value ("v1,<base64>
 * v1,<base64>"), its base64 alone (a receiver may quote either). NULL when out of memory. */
static char *sig_lines(const char *had, const char *sig) {
  size_t n = (had ? strlen(had) : 0) + 2 * strlen(sig) + 8;
  char *out = malloc(n), *w = out;
  if (!out) return NULL;
  w += snprintf(w, n, "%s", had ? had : "");
  for (const char *p = sig; *p;) {
    size_t len = strcspn(p, " ");
    const char *comma = memchr(p, ',', len);
    const char *b64 = comma ? comma + 1 : p;
    w += snprintf(w, n - (size_t)(w - out), "s: %.*s\n", (int)(len - (size_t)(b64 - p)), b64);
    p += len + (p[len] == ' ');
  }
  return out;
}

/* The response excerpt as stored and shown: the values of the endpoint's custom headers and its
 * secrets' text (its `redact_lines`, or NULL) and what looks like credentials or personal data
 * masked (O3), then
 * cut to HOOKD_EXCERPT_MAX (core/redact.h: never inside a character or a word). It was read past
 * the bound (HOOKD_EXCERPT_READ), so what straddles the bound is masked whole. Out of memory,
 * nothing is kept (never the unmasked bytes). */
static void redact_excerpt(hookd_egress_req *req, const char *header_lines) {
  if (!req->response.len) return;
  bool read_cut = req->response_total > req->response.len;
  hookd_buf red;
  hookd_buf_init(&red, 5 * HOOKD_EXCERPT_READ); /* masks may lengthen it */
  /* the header values (a receiver echoing its request: values only hookd and it know) and
   * the credentials, marked on the same bytes */
  int rc = hookd_redact_excerpt(req->response.data, req->response.len, header_lines, read_cut,
                                &red);
  hookd_buf_free(&req->response);
  if (rc == HOOKD_BUF_NOMEM) hookd_buf_free(&red);
  if (red.len) {
    red.len = hookd_redact_cut(red.data, red.len, HOOKD_EXCERPT_MAX,
                               read_cut || rc != HOOKD_BUF_OK);
    red.data[red.len] = '\0';
  }
  req->response = red;
}

#define LOOKUP_HOLD_MS 30000 /* glibc's longest lookup: 2 tries of 5 s on each of 3 servers */

bool disp_log_pass(disp_log_throttle *t, int64_t now_ms, int64_t *muted) {
  if (t->last_ms && now_ms - t->last_ms < 1000) {
    t->muted++;
    return false;
  }
  *muted = t->muted;
  t->last_ms = now_ms;
  t->muted = 0;
  return true;
}

/* hookd's own side failed before sending — no file descriptor left for the connection (its own
 * limit, a flood of inbound connections), or req->local_failure: nothing reached the receiver
 * and its health is not in question — no attempt, no breaker failure, no failing streak, the
 * rate tokens given back. The delivery and the rest of its endpoint's queue are given back, and
 * the endpoint claims again in a second (not at once: the release's own due time would have it
 * claim, fail and give back in a loop). Logged at most once a second, counted always. */
static void local_failure(hookd_dispatcher *d, item *it, hookd_egress_req *req, int64_t now) {
  ep *e = it->ep;
  if (req->local_failure) HOOKD_INC(egress_local_failures);
  else HOOKD_INC(egress_fd_exhausted);
  int64_t muted;
  if (disp_log_pass(&d->fd_exhausted_log, hookd_mono_ms(), &muted))
    HLOG(HOOKD_LOG_ERROR, req->local_failure ? "egress.local_failure" : "egress.fd_exhausted",
         KV_DELIVERY(d, &it->c.d, e->cfg.id), KV_S("why", req->local_failure),
         KV_S("error", req->error), KV_I("suppressed", muted));
  hookd_egress_req_cleanup(req);
  if (disp_probe(it)) hookd_breaker_cancel_probe(&e->br);
  hookd_bucket_refund(&e->bucket); /* tokens pay for requests sent only */
  hookd_bucket_refund(&e->t->bucket);
  sched_sent_done(d, it);
  disp_release_item(d, it);
  e->fd_wait_until = now + 1000; /* claim_key waits it out, whatever next_due the releases set */
  sched_release_queue(d, e);
  sched_ep_schedule(d, e);
}

static void on_http_done(hookd_egress_req *req, void *arg) {
  const int64_t latency_ms = req->latency_us / 1000;
  hookd_dispatcher *d = arg;
  item *it = req->user;
  ep *e = it->ep;
  hookd_delivery *dl = &it->c.d;
  int64_t now = disp_now(d);
  free_hdrs(it->hdrs, it->wipe_hdrs);
  it->hdrs = NULL;
  /* The endpoint moved to another URL while this request was in flight: the old URL's answer
   * says nothing about the new one. A failure is retried there (a 410 or a 4xx from the old
   * URL neither kills the delivery nor disables the endpoint), and the endpoint's health —
   * breaker, slowness, failing streak, Retry-After pause — is left as the new URL has it. */
  bool moved = !e->cfg.url || !it->url || strcmp(e->cfg.url, it->url) != 0;
  if ((req->fd_exhausted || req->local_failure) && !req->request_sent) {
    local_failure(d, it, req, now);
    return;
  }
  /* its name server never answered in time: libcurl's resolver thread stays behind until the
   * lookup ends — the endpoint sends nothing meanwhile, so that it leaves one at a time, not one
   * per attempt (a tenant's silent names took every thread and descriptor of the process). Not
   * when hookd cut the request short itself (its payload deleted, say): that says nothing of the
   * name server, and held the endpoint 30 s after a lookup of a millisecond (a review). */
  if (req->lookup_abandoned && !req->abandoned && !req->stalled_ms) {
    e->lookup_hold_until = now + LOOKUP_HOLD_MS;
    HOOKD_INC(egress_lookups_abandoned);
  }
  if (it->purged && !req->request_sent) { /* never went out: given back, no attempt */
    hookd_egress_req_cleanup(req);
    if (disp_probe(it)) hookd_breaker_cancel_probe(&e->br);
    sched_sent_done(d, it);
    disp_release_item(d, it);
    sched_health_update(d, e);
    return;
  }
  /* sent before the endpoint moved or was enabled again: its health is left alone too */
  bool stale = moved || it->sent_ms < e->health_since;

  hookd_classification cls = hookd_classify(req->net, req->status);
  /* a 4xx the delivery's policy lists is retried instead of given up (O6) — a 410 too, which
   * then disables nothing; and a 410 the endpoint's policy lists now (a delivery keeps the
   * version it was made under: one made before the list had 410 disabled the endpoint a PATCH
   * had said not to, a review) */
  if ((cls.cls == HOOKD_CLASS_PERMANENT || cls.cls == HOOKD_CLASS_GONE) &&
      req->net == HOOKD_NET_OK &&
      (hookd_retry_policy_retries(&it->c.policy, req->status) ||
       (cls.cls == HOOKD_CLASS_GONE && hookd_retry_policy_retries(&e->cfg.policy, 410))))
    cls.cls = HOOKD_CLASS_RETRY;
  if (moved && cls.cls != HOOKD_CLASS_SUCCESS) cls.cls = HOOKD_CLASS_RETRY;
  int64_t ra = -1;
  if (!moved && req->net == HOOKD_NET_OK && req->retry_after[0] &&
      hookd_retry_after_parse(req->retry_after, now, &ra) != 0)
    ra = -1;
  /* "Retry-After: 0" (or a date past) is no reason to retry at once: a receiver answering it to
   * every request made each delivery spend its attempts within milliseconds, and its endpoint
   * pause and release its queue on every answer (a retry storm) */
  if (ra >= 0 && ra < RETRY_AFTER_FLOOR_MS) ra = RETRY_AFTER_FLOOR_MS;
  /* a cycle started before a step of the wall clock forward is that much younger than the
   * clock says: its max age counts the time that passed (a +4 days step, or a clock set right
   * after days behind, made every retrying delivery DEAD max_age at its next failure) */
  int64_t stepped = dl->cycle_started_ms < d->clock_forward_at ? d->clock_forward_ms : 0;
  hookd_delivery_view view = {.state = dl->state,
                              .cycle_attempts = dl->attempt_count - dl->cycle_base,
                              .cycle_started_ms = dl->cycle_started_ms + stepped,
                              .expires_ms = it->c.expires_ms};
  /* a request that may have reached a non-idempotent destination without an answer is not
   * resent: it waits for an operator (inbound destinations marked idempotent: false). A
   * gateway's answer that it got none from the handler behind it (which may have done the work
   * meanwhile) is as ambiguous as a timeout: 502, 504; a 503 without a Retry-After that reads
   * (Heroku's router after 30 s, Envoy's upstream reset — one with it asks for a retry; one
   * whose value does not parse, "soon", asks for nothing either); Cloudflare's 520 and 524
   * (the origin took the request, then nothing); 598, 599 (proxies' read timeouts) */
  int st = req->status;
  int64_t ra_read;
  bool asks_retry = req->retry_after[0] &&
                    hookd_retry_after_parse(req->retry_after, now, &ra_read) == 0;
  bool gateway = st == 502 || st == 504 || (st == 503 && !asks_retry) || st == 520 ||
                 st == 524 || st == 598 || st == 599;
  /* (too_large: header lines, or 1xx answers, past the bound before a final status — the
   * request was read, its outcome unknown) */
  bool ambiguous = req->request_sent &&
                   (req->net == HOOKD_NET_TIMEOUT || req->net == HOOKD_NET_PROTOCOL ||
                    req->net == HOOKD_NET_TOO_LARGE || (req->net == HOOKD_NET_OK && gateway));
  bool hold = ep_no_resend(e) && ambiguous;
  hookd_decision dec;
  if (hookd_decide(&it->c.policy, &view, cls, ra, now, hookd_random_u64(), hold, &dec) != 0) {
    HLOG(HOOKD_LOG_ERROR, "delivery.illegal_transition", KV_DELIVERY(d, dl, e->cfg.id),
         KV_S("state", hookd_dstate_name(dl->state)));
    it->maybe_sent = req->request_sent; /* (read before the cleanup) */
    hookd_egress_req_cleanup(req);
    if (disp_probe(it)) hookd_breaker_cancel_probe(&e->br);
    sched_sent_done(d, it);
    sched_health_update(d, e);
    disp_release_item(d, it);
    return;
  }

  /* A request hookd itself abandoned at shutdown, or timed out by hookd's own stall, does not
   * spend the delivery's last attempt nor end its retry window: the restart (or the next turn)
   * sends it once more (an event past its expiry still goes DEAD). */
  bool stall_timeout = req->stalled_ms && req->net == HOOKD_NET_TIMEOUT;
  if ((req->abandoned || stall_timeout) && dec.next == HOOKD_DS_DEAD && dec.dead_reason &&
      (!strcmp(dec.dead_reason, "max_attempts") || !strcmp(dec.dead_reason, "max_age"))) {
    dec.next = HOOKD_DS_RETRYING;
    dec.next_attempt_ms = now;
    dec.dead_reason = NULL;
  }

  hookd_outcome *o = &it->out;
  memset(o, 0, sizeof *o); /* (asked_kept too: a request of its own, record_outcome keeps it) */
  snprintf(it->last_error, sizeof it->last_error, "%s", cls.category);
  o->delivery_seq = dl->seq;
  o->lease_token = dl->lease_token;
  o->from = dl->state;
  o->to = dec.next;
  o->attempt_number = dl->attempt_count + 1;
  /* outvoted by the other nodes' clocks, this one's next attempt is theirs to send, when their
   * clocks say: written on the database's (before, a node an hour ahead wrote a retry due an
   * hour late, a review) */
  o->next_attempt_ms = dec.next_attempt_ms + d->outvoted_skew_ms;
  o->last_error = cls.cls == HOOKD_CLASS_SUCCESS ? NULL : it->last_error;
  if (dec.dead_reason) {
    snprintf(it->dead_reason, sizeof it->dead_reason, "%s", dec.dead_reason);
    o->dead_reason = it->dead_reason;
  }
  free(it->endpoint_id);
  it->endpoint_id = strdup(e->cfg.id);
  o->endpoint_id = it->endpoint_id;
  /* a 410 to a request sent before an operator enabled the endpoint again disables nothing */
  o->disable_endpoint = dec.disable_endpoint && it->endpoint_id && !stale;
  /* the store checks it too (its configuration may be newer than this node's copy): the answer's
   * word on the endpoint counts only while it has this URL and was not moved nor enabled again
   * since the request was sent */
  o->sent_url = it->url;
  o->sent_ms = it->sent_ms;
  if (dec.disable_endpoint) {
    snprintf(it->disable_reason, sizeof it->disable_reason, "endpoint answered 410 Gone");
    o->disable_reason = it->disable_reason;
  }
  o->now_ms = now;
  o->inbound = it->c.inbound;
  o->ambiguous = ambiguous;
  /* the request went out: its attempt is history even when the delivery has moved on past this
   * lease (a thread stalled past it, a node stopped, a write that landed only after it: claimed
   * and sent again meanwhile, or settled by an operator) — appended, the delivery untouched */
  o->keep_attempt = true;
  o->lane = dl->ordering_key != NULL;
  /* the endpoint's secrets and headers, and the signature the request carried: a receiver
   * answering "signature mismatch: received v1,…" quotes it in prose, which the masks by field
   * name leave (a review); out of memory, the endpoint's alone. Built only when there is an
   * answer to mask (most 2xx have no body: no allocation on the dispatcher thread for them) */
  bool answered = req->response.len || (req->result_ref[0] && cls.cls == HOOKD_CLASS_SUCCESS);
  char *sig_masked = answered ? sig_lines(e->redact_lines, it->sig) : NULL;
  const char *mask = sig_masked ? sig_masked : e->redact_lines;
  if (req->result_ref[0] && cls.cls == HOOKD_CLASS_SUCCESS) {
    /* shown to every reader of the tenant (and to an inbound provider's duplicate), as the
     * excerpt is: masked as it is; none rather than one unmasked */
    hookd_buf red;
    hookd_buf_init(&red, 5 * sizeof it->result_ref);
    if (hookd_redact_excerpt(req->result_ref, strlen(req->result_ref), mask, false, &red) ==
            HOOKD_BUF_OK &&
        red.len) {
      size_t n = hookd_redact_cut(red.data, red.len, sizeof it->result_ref - 1, false);
      memcpy(it->result_ref, red.data, n);
      it->result_ref[n] = '\0';
      o->result_ref = it->result_ref;
    }
    hookd_buf_free(&red);
  }
  o->attempt.started_ms = req->started_ms;
  o->attempt.finished_ms = req->started_ms + latency_ms;
  o->attempt.outcome = (char *)cls.outcome;
  o->attempt.http_status = req->net == HOOKD_NET_OK ? req->status : 0;
  o->attempt.latency_ms = latency_ms;
  o->attempt.error = req->error[0] ? req->error : NULL;
  redact_excerpt(req, mask);
  free(sig_masked);
  o->attempt.response = req->response.data;
  o->attempt.response_len = req->response.len;
  o->attempt.trigger = (char *)attempt_kind(dl);
  o->attempt.url = it->url;

  HOOKD_INC(attempts[hookd_metrics_outcome_index(cls.outcome)]);
  int fail = hookd_metrics_failure_index(cls.category);
  if (fail >= 0) HOOKD_INC(attempt_failures[fail]);
  hookd_hist_observe_us(&hookd_m.attempt_latency, req->latency_us);
  if (req->net == HOOKD_NET_BLOCKED) {
    HOOKD_INC(egress_blocked);
    HLOG(HOOKD_LOG_WARN, "egress.blocked", KV_S("rule", req->blocked_rule),
         KV_DELIVERY(d, dl, e->cfg.id), KV_ATTEMPT(dl, o->attempt_number));
  }
  int lvl = cls.cls == HOOKD_CLASS_SUCCESS ? HOOKD_LOG_DEBUG : HOOKD_LOG_INFO;
  HLOG(lvl, "attempt", KV_DELIVERY(d, dl, e->cfg.id), KV_ATTEMPT(dl, o->attempt_number),
       KV_S("outcome", cls.outcome), KV_I("status", o->attempt.http_status),
       KV_I("latency_ms", latency_ms), KV_S("next_state", hookd_dstate_name(dec.next)),
       /* what the network said (libcurl's words: the host and port, never the path or query),
        * for an operator reading the log, as GET …/deliveries/{id} shows it */
       KV_S("error", o->attempt.error));

  /* the endpoint's health: breaker, slowness, failing streak */
  bool ok, bad, reached;
  health_signal(req, cls, &ok, &bad, &reached);
  /* neither: a probe's slot is given back. Nor when hookd abandoned the request at its stop: the
   * endpoint did not fail (a failing window stored then would date its disable from the stop) */
  /* nor a timeout of hookd's own stall (docs/architecture.md): its answer may have waited unread */
  if (stale || req->abandoned || stall_timeout) ok = bad = reached = false;
  if (stall_timeout) {
    d->stall_ended++;
    HOOKD_INC(attempts_stalled);
  }
  /* a half-open breaker's probe closes on a reached receiver; only while half-open (a probe
   * ending after another closed it: a 4xx is no success of a closed breaker's window) */
  bool probe = disp_probe(it);
  bool closes = ok || (reached && probe && e->br.state == HOOKD_BREAKER_HALF_OPEN);
  hookd_breaker_state before = e->br.state;
  if (hookd_breaker_record(&e->br, &d->breaker_cfg, closes, bad, probe, now)) {
    /* the total follows the endpoint's own series at once (the stats walk recounts it) */
    d->breakers_open += (e->br.state != HOOKD_BREAKER_CLOSED) - (before != HOOKD_BREAKER_CLOSED);
    HOOKD_INC(breaker_transitions);
    if (e->br.state == HOOKD_BREAKER_OPEN) HOOKD_INC(breaker_opens);
    HLOG(HOOKD_LOG_WARN, "endpoint.breaker", KV_S("endpoint_id", e->cfg.id),
         KV_S("tenant_id", e->cfg.tenant_id), KV_S("from", hookd_breaker_name(before)),
         KV_S("to", hookd_breaker_name(e->br.state)));
    if (e->br.state == HOOKD_BREAKER_OPEN) sched_release_queue(d, e); /* they wait in the store */
  }
  /* slow: set by one slow attempt, cleared only by a run of fast successes — an endpoint that
   * alternates (holds one request to just under its timeout, answers the next at once) must not
   * escape the slow share every other attempt */
  if (req->abandoned || req->stalled_ms) {
    /* (cut short by hookd, or read late by hookd's stall — its latency holds the stall: says
     * nothing of its speed) */
  } else if (stale) {
    /* the old URL's speed is not the new one's; an answer sent before an operator enabled the
     * endpoint again is still an answer of its URL */
    if (!moved) e->proven = true;
  } else if (req->net == HOOKD_NET_TIMEOUT ||
             latency_ms - it->stall_credit_ms > ep_slow_after_ms(e)) {
    sched_ep_marked_slow(d, e);
    e->fast_streak = 0;
    e->proven = true;
  } else {
    e->proven = true; /* heard from: a newcomer no more (the newcomer share) */
    /* 8 successes in a row under 0.8 of the mark's time (0.4 of its timeout, 4 s at most) clear
     * the mark (only those under a quarter counted before, and an endpoint answering in a third
     * of its timeout, slow once, stayed slow until a restart); the gap below the mark keeps one
     * answering about at the mark from being marked and cleared in turn */
    if (e->slow && ok && (latency_ms - it->stall_credit_ms) * 5 < ep_slow_after_ms(e) * 4 &&
        ++e->fast_streak >= SLOW_CLEAR_STREAK) /* counted only while slow */
      ep_set_slow(e, false);
  }
  sched_ep_idle_sync(e); /* (proven now: it may take a spare slot) */
  if (ok && e->failing_since) {
    e->failing_since = e->failing_since_stored = 0;
    o->failing = -1;
  } else if (bad && !e->failing_since) {
    e->failing_since = e->failing_since_stored = now;
    o->failing = 1;
  }
  if (bad && d->cfg.disable_failing_after_ms > 0 && e->failing_since &&
      now - e->failing_since >= d->cfg.disable_failing_after_ms && e->cfg.enabled) {
    o->disable_endpoint = it->endpoint_id != NULL;
    /* only if the store's run began then too: another node's success since (a shared store)
     * ended it there, and this node's view of it is not the endpoint's */
    o->failing_since_ms = e->failing_since_stored;
    char since[HOOKD_RFC3339_MAX];
    hookd_fmt_rfc3339_ms(e->failing_since, since); /* as every time the API shows */
    snprintf(it->disable_reason, sizeof it->disable_reason, "failing without a success since %s",
             since);
    o->disable_reason = it->disable_reason;
  }
  /* a 429 or 503 with Retry-After pauses the whole endpoint, not only this delivery */
  if (!stale && ra >= 0 && (req->status == 429 || req->status == 503) &&
      it->c.policy.retry_after_cap_ms > 0) { /* a cap of 0: Retry-After is not honoured */
    int64_t cap = it->c.policy.retry_after_cap_ms;
    int64_t until = now + (ra < cap ? ra : cap);
    if (until > e->paused_until) {
      /* a pause begins, or one under way goes on (each answer to the requests in flight when
       * it began moves it a few ms: one pause, counted and logged once) */
      bool begins = e->paused_until <= now;
      e->paused_until = until;
      e->pause_adopted = false; /* this node's own word now */
      o->pause_until_ms = until; /* kept by the store for a restart */
      if (begins) {
        HOOKD_INC(endpoint_pauses);
        HLOG(HOOKD_LOG_INFO, "endpoint.paused", KV_S("endpoint_id", e->cfg.id),
             KV_S("tenant_id", e->cfg.tenant_id), KV_I("for_ms", until - now));
      }
      sched_release_queue(d, e);
    }
  }
  if (o->disable_endpoint && e->cfg.enabled) {
    /* (counted and logged once the store has disabled it: its write may fail, or the store
     * decline it, or another node's answer disable it first) */
    e->cfg.enabled = false;
    e->disabled_by_outcome = true;
    sched_release_queue(d, e);
  }
  submit_item_op(d, it, ITEM_RECORD);
  sched_sent_done(d, it);
  sched_health_update(d, e);
}

/* ---------- inbox processing ---------- */

static void set_due(hookd_dispatcher *d, ep *e, int64_t due, bool authoritative) {
  if (authoritative) e->next_due = due;
  else if (due > 0 && (!e->next_due || due < e->next_due)) e->next_due = due;
  sched_ep_schedule(d, e);
}

/* The claimed delivery's body becomes its event's shared copy, or is dropped for the copy
 * already held (the claim read one per delivery). */
static void body_share(hookd_dispatcher *d, item *it) {
  char key[24];
  snprintf(key, sizeof key, "%lld", (long long)it->c.d.event_seq);
  body_ref *b = hookd_strmap_get(&d->bodies, key);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return; /* it keeps its own */
    b->data = it->c.body;
    b->len = it->c.body_len;
    if (hookd_strmap_put(&d->bodies, key, b) != 0) {
      free(b);
      return;
    }
    b->t = it->ep->t;
    d->body_bytes += (int64_t)b->len;
    b->t->body_bytes += (int64_t)b->len;
    d->claim_bytes_avg += ((int64_t)b->len - d->claim_bytes_avg) / 8;
  } else if (b->len == it->c.body_len) { /* an event's body never changes */
    free(it->c.body);
    d->claim_bytes_avg -= d->claim_bytes_avg / 8; /* a fan-out's other deliveries add nothing */
  } else {
    return; /* cannot happen; it keeps its own */
  }
  b->refs++;
  it->body = b;
  it->c.body = b->data;
}

static void body_unshare(hookd_dispatcher *d, item *it) {
  body_ref *b = it->body;
  if (!b) return;
  it->body = NULL;
  it->c.body = NULL;
  if (--b->refs > 0) return;
  char key[24];
  snprintf(key, sizeof key, "%lld", (long long)it->c.d.event_seq);
  hookd_strmap_del(&d->bodies, key);
  d->body_bytes -= (int64_t)b->len;
  b->t->body_bytes -= (int64_t)b->len;
  free(b->data);
  free(b);
}

static void on_claimed(hookd_dispatcher *d, msg *m) {
  ep *e = m->claim_ep;
  e->t->claiming -= e->claiming;
  d->claiming -= e->claiming;
  d->claim_ops--;
  e->t->claim_ops--;
  e->claiming = 0;
  sched_claims_freed(d, disp_now(d));
  free(m->endpoint_id);
  if (m->rc != 0) {
    /* a failing store fails every endpoint's claim: a line a second, with how many it stands
     * for (2,000 endpoints through a minute's outage wrote 120,000) */
    int64_t muted;
    if (disp_log_pass(&d->claim_fail_log, hookd_mono_ms(), &muted))
      HLOG(HOOKD_LOG_ERROR, "claim.failed", KV_S("endpoint_id", e->cfg.id),
           KV_S("tenant_id", e->cfg.tenant_id), KV_S("worker_id", d->node_id),
           KV_S("error", hookd_store_strerror(m->rc)), KV_I("suppressed", muted));
    e->next_due = disp_now(d) + 1000; /* try again later rather than spinning */
    claimed_drop(m); /* a claim that ran but whose batch did not commit */
  } else {
    HOOKD_ADD(claimed, m->n_claimed);
    for (size_t i = 0; i < m->n_claimed; i++) {
      item *it = calloc(1, sizeof *it);
      if (!it) {
        hookd_claimed_free(&m->claimed[i]);
        continue; /* its lease expires and it is claimed again */
      }
      it->c = m->claimed[i];
      /* its lease ends as long after the claim's time as the store says: a step back since
       * then moves it as it moved those held (clock_stepped) */
      it->c.d.leased_until_ms += d->clock_back_ms - m->claim_back_ms;
      it->ep = e;
      it->d = d;
      body_share(d, it);
      if (e->gone || !e->cfg.enabled || d->stopping || sched_breaker_blocks(d, e, disp_now(d)) ||
          e->paused_until > disp_now(d)) {
        disp_release_item(d, it);
        continue;
      }
      sched_enqueue(d, e, it);
    }
    free(m->claimed);
    m->claimed = NULL;
    e->next_due = m->next_due;
  }
  sched_ep_ready(d, e);
  sched_ep_schedule(d, e);
  sched_health_update(d, e);
  ep_maybe_free(d, e);
}

/* An outcome whose write failed with a store error (a commit that failed, a busy or full disk, a
 * database restarting or failing over): the request was sent and answered, so giving the outcome
 * up would leave that request out of the history. The write is fenced by the lease token, so it
 * may simply run again, later (one that did commit after all comes back STALE); a release, a
 * few times. Returns true when the item waits in d->record_retry. */
#define RECORD_TRIES 6
#define RECORD_RETRY_BASE_MS 100
static bool record_retry_later(hookd_dispatcher *d, item *it) {
  int64_t now = disp_now(d);
  /* An outcome is written until it lands (every 6.4 s after the first six tries), past its
   * lease too: the request went out, and its attempt is history. Landing after the lease, it
   * appends its attempt to a delivery claimed and sent again meanwhile (given up at the lease,
   * that request was missing from the history: a review's known limit) — or, for a destination
   * that is not idempotent, settles the sweep's hold ("lease lost"), which would have left an
   * answer hookd saw to an operator. So is the release of a delivery whose send mark was
   * written — the sweep would hold one never sent as unknown; it is fenced by its token, and
   * one that lands after the sweep held the delivery puts it back (it was never sent). */
  bool until_it_lands = it->recording || (it->mark_written && ep_no_resend(it->ep));
  /* 0.1 s … 3.2 s; stopping (tries unbounded then, see below), and for another release, 0.1 s */
  int64_t delay = !until_it_lands || d->stop_ms
                      ? RECORD_RETRY_BASE_MS
                      : (int64_t)RECORD_RETRY_BASE_MS
                            << (it->record_tries < RECORD_TRIES ? it->record_tries : RECORD_TRIES);
  /* stopping, the writes are tried every 0.1 s for the grace period — not 6 × the store's busy
   * timeout (a SIGTERM with the store locked took 45 s), nor 6 tries in a few ms when the store
   * fails at once (a full disk): what is not written is redone after the restart, as after a
   * crash */
  if (d->stop_ms && hookd_mono_ms() - d->stop_ms >= d->cfg.shutdown_grace_ms) return false;
  /* (an outcome is not given up after its tries: a PostgreSQL failover takes 10-60 s) */
  if (!d->stop_ms && !until_it_lands && it->record_tries >= RECORD_TRIES) return false;
  if (!it->out.failed_write_ms) it->out.failed_write_ms = now;
  if (it->recording) d->write_failed_ms = hookd_mono_ms();
  it->record_tries++;
  it->retry_ms = now + delay;
  it->retry_next = d->record_retry;
  d->record_retry = it;
  it->ep->item_ops++; /* the endpoint waits for it, as for an op in the store */
  HOOKD_INC(outcome_write_retries);
  /* stopping, a write is tried every 0.1 s: a line for the first try and every tenth, not
   * ten a second for each delivery in flight (else every 6.4 s at most: a line each) */
  if (!d->stop_ms || it->record_tries == 1 || it->record_tries % 10 == 0)
    HLOG(HOOKD_LOG_WARN, it->recording ? "outcome.write_retry" : "release.write_retry",
         KV_DELIVERY(d, &it->c.d, it->ep->cfg.id), KV_ATTEMPT(&it->c.d, it->out.attempt_number),
         KV_S("error", hookd_store_strerror(it->rc)), KV_I("try", it->record_tries),
         KV_I("in_ms", delay));
  return true;
}

/* Writes again the outcomes whose time has come; returns the ms until the next one (1000 when
 * none). Stopping, none waits longer than RECORD_RETRY_BASE_MS: the grace period is short. */
static int64_t record_retry_due(hookd_dispatcher *d, int64_t now, bool stopping) {
  int64_t next = 1000;
  for (item **pp = &d->record_retry; *pp;) {
    item *it = *pp;
    if (stopping && it->retry_ms > now + RECORD_RETRY_BASE_MS)
      it->retry_ms = now + RECORD_RETRY_BASE_MS;
    if (it->retry_ms <= now) {
      *pp = it->retry_next;
      it->retry_next = NULL;
      it->ep->item_ops--; /* submit_item_op counts it again */
      /* (an answer past its lease at the writer: claims wait for it, outcomes_hold_claims) */
      it->hold_counted = it->recording && it->c.d.leased_until_ms <= now + 1000;
      d->outcomes_out += it->hold_counted;
      submit_item_op(d, it, it->recording ? ITEM_RECORD : ITEM_RELEASE);
      continue;
    }
    if (it->retry_ms - now < next) next = it->retry_ms - now;
    pp = &it->retry_next;
  }
  return next;
}

/* The endpoint was disabled in memory by an outcome whose disable did not reach the store (the
 * write failed, or a newer configuration declined it): the store still says enabled, so this
 * node must go on claiming for it. */
static void undo_disable(hookd_dispatcher *d, ep *e, const hookd_outcome *o, const char *event) {
  /* not when a newer configuration (an operator's PATCH) has been applied since */
  if (!o->disable_endpoint || e->gone || e->cfg.enabled || !e->disabled_by_outcome) return;
  e->disabled_by_outcome = false;
  e->cfg.enabled = true;
  sched_health_update(d, e);
  HLOG(HOOKD_LOG_WARN, event, KV_S("endpoint_id", e->cfg.id), KV_S("tenant_id", e->cfg.tenant_id));
}

/* A delivery the store now has delivered: counted, with its time from the event — a live one's
 * only: a replay delivered days after its event would fill the histogram's last bucket. */
static void count_delivered(const item *it, int64_t now_ms) {
  HOOKD_INC(delivered);
  if (!it->c.d.replay_cycle)
    hookd_hist_observe_ms(it->c.inbound ? &hookd_m.forwarded_after : &hookd_m.delivered_after,
                          now_ms - it->c.d.created_ms);
}

/* Deliveries held `unknown` apart from an attempt's outcome (a lease reclaim, a destination's
 * delete: an inbound destination that is not idempotent, whose request may have been sent):
 * counted and logged as an outcome's are — an operator alerting on
 * hookd_deliveries_unknown_total must hear of these too. */
void hookd_held_unknown(int n, const char *why) {
  if (n <= 0) return;
  HOOKD_ADD(unknown, (uint64_t)n);
  HLOG(HOOKD_LOG_WARN, "delivery.held_unknown", KV_I("count", n), KV_S("reason", why),
       KV_S("resolve", "GET /v1/inbox?state=unknown&since=..., then POST /v1/inbox/resolve"));
}

/* An item done with: freed, its endpoint scheduled (or freed, deleted and idle). */
static void item_finish(hookd_dispatcher *d, item *it) {
  ep *e = it->ep;
  hookd_publish_res_free(&it->ops[0]);
  hookd_publish_res_free(&it->ops[1]);
  hookd_egress_req_cleanup(&it->req);
  body_unshare(d, it);
  hookd_claimed_free(&it->c);
  free(it->endpoint_id);
  free(it->url);
  free(it);
  sched_ep_schedule(d, e);
  ep_maybe_free(d, e);
}

/* The least time between two rescans brought forward: this, or ten times as long as the last
 * one took (docs/postgres.md "Several nodes"); one asked for waits at most the second. */
#define STORE_CHANGE_GAP_MS 100
#define RESCAN_REQ_GAP_MAX_MS 1000

/* A rescan brought forward: by a change (another node's, a notification) or asked for (a
 * publish's endpoints past its fan-out's hints, a payload delete). A burst costs a rescan every
 * STORE_CHANGE_GAP_MS, not one each; and the rescans it brings hold the writer and this thread
 * at most a tenth of the time — a tenant publishing to 65 endpoints ten times a second asked for
 * rescans back to back, every tenant's writes waiting behind them. One asked for waits less: a
 * rescan's time counts its wait behind the writer's other work, and ten times it could be many
 * seconds — a second, or twice the rescan's time when longer (half the writer's time at most). */
static void rescan_soon(hookd_dispatcher *d, bool asked) {
  int64_t gap = 10 * d->rescan_took_ms;
  if (gap < STORE_CHANGE_GAP_MS) gap = STORE_CHANGE_GAP_MS;
  if (asked) {
    int64_t cap = 2 * d->rescan_took_ms > RESCAN_REQ_GAP_MAX_MS ? 2 * d->rescan_took_ms
                                                               : RESCAN_REQ_GAP_MAX_MS;
    if (gap > cap) gap = cap;
  }
  int64_t at = d->rescan_sent_ms + gap;
  if (at < d->next_rescan_ms) d->next_rescan_ms = at;
}

/* An item whose op was out while the wall clock stepped (move_items walks only the items queued,
 * in flight or waiting to write again) catches up at its end. An outcome's: its lease moved in
 * the store with the others on a step forward, and in memory on any step; its send time, which
 * the store compares with the endpoint's changes (HEALTH_CURRENT), moves with them. A send mark's
 * or a release's: its lease moves by the steps back alone (on a step forward, its stored lease
 * moved or not, it reads short: given back, nothing sent twice). */
static void catch_up_steps(hookd_dispatcher *d, item *it) {
  if (it->recording) {
    it->c.d.leased_until_ms += d->clock_net_ms - it->op_net_ms;
    it->out.sent_ms += d->clock_net_ms - it->op_net_ms;
  } else {
    it->c.d.leased_until_ms += d->clock_back_ms - it->op_back_ms;
  }
  it->op_net_ms = d->clock_net_ms;
  it->op_back_ms = d->clock_back_ms;
}

/* A write of the dispatcher's landed (rc: its op's): the store takes writes again — the outcomes
 * waiting out their backoff go now, not up to 6.4 s later (meanwhile, after a database restart,
 * another node's sweep took a lapsed lease and sent again a delivery whose 2xx waited here: a
 * review); at most once a second, so that a write failing for a reason of its own is not tried
 * again at every other one's. */
static void store_writes_again(hookd_dispatcher *d, int rc) {
  /* (the second counted on the monotonic clock: on the wall clock, a step back of N ms held the
   * hurry back N ms — a review) */
  if ((rc != 0 && rc != HOOKD_STORE_STALE) || !d->record_retry) return;
  int64_t mono = hookd_mono_ms(); /* (only with outcomes waiting: not at every write) */
  d->write_landed_ms = mono;
  if (d->retries_hurried_ms && mono - d->retries_hurried_ms < 1000) return;
  d->retries_hurried_ms = mono;
  int64_t now = disp_now(d);
  for (item *w = d->record_retry; w; w = w->retry_next)
    if (w->retry_ms > now) w->retry_ms = now;
}

static void on_item_done(hookd_dispatcher *d, item *it, bool recorded) {
  ep *e = it->ep;
  hookd_outcome *o = &it->out;
  e->item_ops--;
  d->outcomes_out -= it->hold_counted;
  it->hold_counted = false;
  catch_up_steps(d, it);
  for (int k = 0; k < 2; k++) { /* the operational events it published go now */
    for (size_t i = 0; recorded && it->rc == 0 && i < it->ops[k].n_endpoints; i++) {
      ep *to = ep_get(d, it->ops[k].endpoints[i]);
      if (to) set_due(d, to, it->ops[k].due_ms, false);
    }
    if (recorded && it->rc == 0 && it->ops[k].endpoints_truncated) rescan_soon(d, true);
    if (recorded && it->rc == 0 && it->ops[k].event_id) HOOKD_INC(ops_events);
    if (recorded && it->rc == 0 && it->ops[k].filters_over) /* (the ops tenant's filters) */
      HOOKD_ADD(filters_over, (uint64_t)it->ops[k].filters_over);
    hookd_publish_res_free(&it->ops[k]);
  }
  /* the first attempt's delay, once a delivery's first attempt row is written: a send whose
   * outcome was lost (a failing disk) and that went again counted twice, read at the send */
  if (recorded && it->rc == 0 && o->attempt_number == 1 && !it->c.d.replay_cycle &&
      !o->superseded)
    hookd_hist_observe_ms(&hookd_m.first_attempt_delay, it->first_delay_ms);
  if (recorded) {
    if (it->rc == HOOKD_STORE_STALE) {
      if (!e->gone && !it->record_tries) { /* after a retry: the failed write had committed */
        HOOKD_INC(stale_outcomes);
        HLOG(HOOKD_LOG_WARN, "outcome.stale", KV_DELIVERY(d, &it->c.d, e->cfg.id),
             KV_ATTEMPT(&it->c.d, o->attempt_number));
      }
      if (!it->record_tries) undo_disable(d, e, o, "endpoint.disable_not_recorded");
    } else if (it->rc == 0 && o->superseded) {
      /* the delivery moved on past this lease (claimed and sent again, an operator's resolve
       * of the sweep's hold): the answer is appended to its history, its state stands
       * (docs/architecture.md "Failure windows", docs/inbound.md) */
      HOOKD_INC(stale_outcomes);
      HLOG(HOOKD_LOG_WARN, "outcome.superseded", KV_DELIVERY(d, &it->c.d, e->cfg.id),
           KV_ATTEMPT(&it->c.d, o->superseded), KV_I("sent_as", o->attempt_number),
           KV_S("outcome", o->attempt.outcome), KV_I("status", o->attempt.http_status),
           KV_S("kept", "the delivery's state as it moved on meanwhile"));
      undo_disable(d, e, o, "endpoint.disable_not_recorded");
    } else if (it->rc != 0) {
      if (record_retry_later(d, it)) return;
      if (d->stop_ms) d->writes_given_up++;
      HLOG(HOOKD_LOG_ERROR, "outcome.write_failed", KV_DELIVERY(d, &it->c.d, e->cfg.id),
           KV_ATTEMPT(&it->c.d, o->attempt_number), KV_S("error", hookd_store_strerror(it->rc)),
           KV_I("tries", it->record_tries + 1));
      /* (stopping only: the lease expires and the delivery is attempted again after the
       * restart, at-least-once, that request missing from the history as after a crash) */
      undo_disable(d, e, o, "endpoint.disable_not_recorded");
    } else if (o->cancelled) {
      HLOG(HOOKD_LOG_INFO, "delivery.cancelled_in_flight", KV_DELIVERY(d, &it->c.d, e->cfg.id),
           KV_ATTEMPT(&it->c.d, o->attempt_number), KV_S("outcome", o->attempt.outcome),
           KV_I("delivered", o->to == HOOKD_DS_DELIVERED));
      if (o->to == HOOKD_DS_DELIVERED) count_delivered(it, o->now_ms); /* a 2xx is a 2xx */
      /* the store wrote no word of the answer on its endpoint (a cut-off outcome writes only
       * its delivery): a disable taken here at the answer is taken back, or the endpoint,
       * enabled in the store, would never be claimed for again on this node */
      undo_disable(d, e, o, "endpoint.disable_not_recorded");
      /* cut off (its payload deleted) while it was out: the lane's next may be claimable now
       * (its endpoint deleted, there is none) */
      if (it->c.d.ordering_key && e->cfg.ordered && !e->gone) set_due(d, e, disp_now(d), false);
    } else {
      /* stored: the endpoint is disabled in the store whatever configuration reached this
       * node before (a PATCH whose op ran before this one read it enabled, and its reply,
       * which came first, enabled it again here); one after it comes after this */
      if (o->disable_endpoint && !e->gone && o->disable_declined) {
        /* the store's configuration is newer than the answer, or its failing run is (another
         * node's success ended the one this node counted): it stays enabled, and this node's
         * run is over — its next failure begins one, written to the store */
        undo_disable(d, e, o, "endpoint.disable_superseded");
        if (o->failing_run_ended && e->failing_since_stored == o->failing_since_ms)
          e->failing_since = e->failing_since_stored = 0;
      } else if (o->disable_endpoint && !e->gone) {
        e->disabled_by_outcome = false;
        if (o->disabled_now) { /* this answer's store write disabled it: said once */
          HOOKD_INC(endpoints_disabled);
          HLOG(HOOKD_LOG_WARN, "endpoint.disabled", KV_S("endpoint_id", e->cfg.id),
               KV_S("tenant_id", e->cfg.tenant_id), KV_S("reason", o->disable_reason));
        }
        /* as the store's row */
        if (o->disabled_now) e->cfg.updated_ms = o->disabled_updated_ms;
        else if (o->now_ms > e->cfg.updated_ms) e->cfg.updated_ms = o->now_ms;
        if (e->cfg.enabled) {
          e->cfg.enabled = false;
          sched_release_queue(d, e);
        }
        sched_health_update(d, e);
      }
      /* its Retry-After pause is in the store now (or was refused there: the endpoint moved or
       * was enabled again after the request went): on a shared store, the store's word from
       * here on, so that an operator's enable through another node, which clears it there, ends
       * it here too (apply_pauses; a disable and enable between two rescans look like no change) */
      if (d->cfg.shared_store && o->pause_until_ms && o->pause_until_ms == e->paused_until &&
          !e->gone)
        e->pause_adopted = true;
      if (o->to == HOOKD_DS_DELIVERED) count_delivered(it, o->now_ms);
      if (o->to == HOOKD_DS_RETRYING) {
        HOOKD_INC(retries_scheduled);
        set_due(d, e, o->next_attempt_ms, false);
      }
      if (o->to == HOOKD_DS_UNKNOWN && !o->was_held) {
        HOOKD_INC(unknown);
        HLOG(HOOKD_LOG_WARN, "delivery.held_unknown", KV_DELIVERY(d, &it->c.d, e->cfg.id),
             KV_ATTEMPT(&it->c.d, o->attempt_number),
             KV_S("reason", "ambiguous outcome, destination not idempotent"));
      }
      if (o->to == HOOKD_DS_DEAD) {
        HOOKD_INC(dead[hookd_metrics_dead_index(o->dead_reason)]);
        if (it->c.inbound) HOOKD_INC(inbound_dead);
        HLOG(HOOKD_LOG_WARN, "delivery.dead", KV_DELIVERY(d, &it->c.d, e->cfg.id),
             KV_S("reason", o->dead_reason),
             KV_I("attempts", o->attempt_number ? o->attempt_number : it->c.d.attempt_count));
      }
      /* another delivery of an ordering lane may be claimable now: the next one, or, when this
       * one will be retried, an earlier one replayed while it was in flight */
      if (it->c.d.ordering_key && e->cfg.ordered)
        set_due(d, e, disp_now(d), false);
    }
  } else if (it->rc == 0 && !e->gone) {
    /* released: it is due again */
    set_due(d, e, it->c.d.next_attempt_ms ? it->c.d.next_attempt_ms : disp_now(d), false);
  } else if (it->rc != 0 && it->rc != HOOKD_STORE_STALE) {
    /* the release did not reach the store (busy, full): written again, like an outcome — else
     * the lease lapses and the sweep reclaims a delivery this node knows it never sent, which
     * for a non-idempotent destination is held as unknown ("lease lost") */
    if (record_retry_later(d, it)) return;
    if (d->stop_ms) d->writes_given_up++;
    HLOG(HOOKD_LOG_ERROR, "release.write_failed", KV_DELIVERY(d, &it->c.d, e->cfg.id),
         KV_S("error", hookd_store_strerror(it->rc)), KV_I("tries", it->record_tries + 1));
    if (!e->gone) set_due(d, e, it->c.d.leased_until_ms, false); /* reclaimed by then */
  }
  item_finish(d, it);
}

/* The send mark's commit (disp_mark_item): the request goes out now — unless the lease was
 * taken meanwhile (an endpoint deleted, a sweep after a store outage: dropped), the mark could
 * not be written (not sent: given back), or hookd is stopping, the endpoint is gone, disabled or
 * paused, or the lease too short for the request (given back; the mark stays behind a token the
 * next claim bumps). */
static void on_marked(hookd_dispatcher *d, item *it) {
  ep *e = it->ep;
  e->item_ops--;
  it->marking = false;
  catch_up_steps(d, it);
  int64_t now = disp_now(d);
  it->mark_written = it->rc == 0;
  /* what dispatch_ring checked before the mark, again after its commit (a slow or locked store
   * may have taken most of the lease: a request that outlived it would be held unknown by the
   * sweep while it is still in flight); the endpoint disabled or paused meanwhile sends nothing,
   * nor one whose breaker opened meanwhile (the probe goes only as the probe of its breaker) */
  bool breaker_ok = it->probe ? disp_probe(it) && e->br.state == HOOKD_BREAKER_HALF_OPEN
                              : e->br.state == HOOKD_BREAKER_CLOSED;
  if (it->rc == 0 && !d->stopping && !e->gone && e->cfg.enabled && e->paused_until <= now &&
      breaker_ok && disp_lease_room(it, e, now, d->cfg.lease_margin_ms)) {
    it->marked = true;
    if (disp_send_item(d, it, now) == 0) return;
  }
  if (disp_probe(it)) hookd_breaker_cancel_probe(&e->br); /* no outcome will give it back */
  /* the rate tokens dispatch_ring took pay for requests sent only */
  hookd_bucket_refund(&e->bucket);
  hookd_bucket_refund(&e->t->bucket);
  sched_sent_done(d, it);
  sched_health_update(d, e); /* (a disabled endpoint is not scheduled again to show it) */
  if (it->rc == HOOKD_STORE_STALE) {
    item_finish(d, it);
    return;
  }
  if (it->rc != 0)
    HLOG(HOOKD_LOG_WARN, "delivery.mark_failed", KV_DELIVERY(d, &it->c.d, e->cfg.id),
         KV_S("error", hookd_store_strerror(it->rc)));
  else if (!disp_lease_room(it, e, now, d->cfg.lease_margin_ms)) /* (a slow or locked store) */
    HLOG(HOOKD_LOG_INFO, "delivery.mark_late", KV_DELIVERY(d, &it->c.d, e->cfg.id),
         KV_I("lease_left_ms", it->c.d.leased_until_ms - now),
         KV_I("timeout_ms", e->cfg.timeout_ms),
         KV_S("action", "given back unsent: claimed again under a new lease"));
  disp_release_item(d, it);
}

static void apply_hints(hookd_dispatcher *d, hookd_due_hint *h, size_t n, bool authoritative,
                        int64_t snapshot_ms) {
  const char *k;
  void *v;
  if (authoritative) {
    /* endpoints absent from a full snapshot have nothing due (beyond what we hold); hints
     * that arrived after the snapshot was taken are kept */
    for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
      ep *e = v;
      if (e->next_due && e->next_due < snapshot_ms) e->next_due = 0;
    }
  }
  for (size_t i = 0; i < n; i++) {
    ep *e = ep_get(d, h[i].endpoint_id);
    if (e) set_due(d, e, h[i].due_ms, false);
  }
  if (authoritative)
    for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) sched_ep_schedule(d, v);
}

static int run_sweep(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  msg *m = arg;
  return be->reclaim_leases(c, NULL, m->now_ms, RECLAIM_BATCH, &m->hints, &m->n_hints,
                            &m->reclaimed, &m->held);
}

/* How far back a shared store's rescan reads endpoint changes from the latest it saw: another
 * node's clock (it wrote updated_at) may run behind this one's by this much. */
#define CONFIG_SKEW_MS 300000

static int run_rescan(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  msg *m = arg;
  /* (a second run of the op, its batch redone, forgets the first one's) */
  hookd_due_hints_free(m->hints, m->n_hints);
  hookd_endpoints_free(m->eps, m->n_eps);
  hookd_tenants_free(m->tenants, m->n_tenants);
  hookd_due_hints_free(m->pauses, m->n_pauses);
  free(m->votes);
  m->hints = NULL, m->eps = NULL, m->tenants = NULL, m->pauses = NULL, m->votes = NULL;
  m->n_hints = m->n_eps = m->n_tenants = m->n_pauses = m->n_votes = 0;
  m->clock_read = m->pauses_read = false;
  m->nodes = 0;
  if (m->d->cfg.shared_store) { /* docs/postgres.md "Several nodes" */
    int64_t since = m->d->config_seen_ms - CONFIG_SKEW_MS;
    int rc = be->endpoints_since(c, since > 0 ? since : 0, &m->eps, &m->n_eps);
    if (rc == 0) rc = be->tenant_list(c, &m->tenants, &m->n_tenants);
    if (rc == 0 && be->clock_ms) { /* "The clock guard": read between two reads of ours */
      int64_t db = 0, t0 = hookd_now_ms();
      rc = be->clock_ms(c, &db);
      int64_t t1 = hookd_now_ms();
      m->skew_ms = db - (t0 + t1) / 2;
      m->skew_err_ms = (t1 - t0 + 1) / 2;
      /* reads further apart than half the bound (the node stalled, or its clock stepped
       * between them) tell too little: this check is not counted nor stored */
      m->clock_read = rc == 0 && t1 >= t0 && t1 - t0 <= m->d->cfg.lease_margin_ms / 4;
      if (m->clock_read && be->clock_votes)
        rc = be->clock_votes(c, m->skew_ms, m->skew_err_ms, &m->votes, &m->n_votes);
    }
    if (rc == 0 && be->nodes_live) rc = be->nodes_live(c, &m->nodes);
    if (rc == 0 && be->endpoint_pauses) {
      rc = be->endpoint_pauses(c, m->now_ms, &m->pauses, &m->n_pauses);
      m->pauses_read = rc == 0;
    }
    if (rc) return rc;
  }
  return be->due_hints(c, m->now_ms, &m->hints, &m->n_hints);
}

/* A shared store's clock check (docs/postgres.md "The clock guard"): a node whose clock is
 * outvoted by the database's and the other live nodes' (it agrees with no strict majority of
 * them, nor with a half that holds the database) claims and sweeps nothing. */
static void check_clock(hookd_dispatcher *d, const msg *m) {
  /* a quarter of the margin: two nodes that claim are then within half of it of each other,
   * which is the room a request is sent with past its timeout (disp_lease_room) — the lease is
   * not taken over by the other's clock while the request may still be out (half the margin,
   * before: winners could be a whole margin apart) */
  int64_t bound = hookd_clock_bound_ms(d->cfg.lease_margin_ms);
  hookd_clock_voter self = {m->skew_ms, m->skew_err_ms};
  int agreeing, voters;
  bool skewed = !hookd_clock_vote(self, m->votes, m->n_votes, bound, &agreeing, &voters);
  bool store_off = !skewed && !hookd_clock_agree(self, (hookd_clock_voter){0, 0}, bound);
  /* (the state first, then its log: a request that follows the log meets the state) */
  atomic_store(&d->clock_outvoted, skewed && voters > 2);
  if (skewed && !d->clock_skewed)
    HLOG(HOOKD_LOG_WARN, "clock.skew", KV_I("skew_ms", m->skew_ms), KV_I("bound_ms", bound),
         KV_I("agreeing", agreeing), KV_I("voters", voters),
         KV_S("meanwhile", "no claim and no lease sweep on this node: its clock is off the "
                           "database's, and off most other nodes', by more than a quarter "
                           "of the lease margin"));
  else if (!skewed && d->clock_skewed)
    HLOG(HOOKD_LOG_INFO, "clock.skew_ok", KV_I("skew_ms", m->skew_ms), KV_I("bound_ms", bound),
         KV_I("agreeing", agreeing), KV_I("voters", voters));
  if (store_off && !d->store_clock_off)
    HLOG(HOOKD_LOG_WARN, "clock.store_skew", KV_I("skew_ms", m->skew_ms),
         KV_I("bound_ms", bound), KV_I("agreeing", agreeing), KV_I("voters", voters),
         KV_S("meanwhile", "claims go on: most nodes' clocks agree with this one's, and the "
                           "database's is the one off; set it right"));
  d->store_clock_off = store_off;
  d->clock_skewed = skewed;
  d->outvoted_skew_ms = skewed && voters > 2 ? m->skew_ms : 0;
  d->clock_checked = true;
  atomic_store(&d->clock_agrees, !skewed);
  HOOKD_INC(clock_checks);
  pthread_mutex_lock(&d->mu);
  d->stats.clock_skew_ms = m->skew_ms;
  pthread_mutex_unlock(&d->mu);
}

/* The number of nodes running on a shared store changed: every endpoint's limits are shared out
 * again (the tenants' at once after, by the rescan's tenant list). */
static void share_limits(hookd_dispatcher *d, int nodes) {
  if (nodes == d->nodes) return;
  HLOG(HOOKD_LOG_INFO, "nodes.counted", KV_I("nodes", nodes), KV_I("before", d->nodes));
  d->nodes = nodes;
  int64_t now = disp_now(d);
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    sched_ep_share(d, e, now);
    if (e->gone) continue;
    sched_health_update(d, e);
    sched_ep_ready(d, e); /* a larger share may free a slot now */
    sched_ep_schedule(d, e);
  }
  pthread_mutex_lock(&d->mu);
  d->stats.nodes = nodes;
  pthread_mutex_unlock(&d->mu);
}

/* A shared store's rescan: the Retry-After pauses other nodes stored (docs/postgres.md "Several
 * nodes"). A longer one than this node's holds it too: what it claimed for the endpoint goes
 * back, as at its own 429. (Read after the configuration: a new URL or an enable, which ends a
 * pause, cleared it in the store.) A pause in the store (adopted: another node's, or this
 * node's own once its write committed) ends here when the store no longer has it. */
static void apply_pauses(hookd_dispatcher *d, const hookd_due_hint *p, size_t n) {
  int64_t now = disp_now(d);
  /* a pause held in the store that the store no longer has (an operator enabled the endpoint
   * again, or moved it, through any node: a disable and enable between two rescans look like no
   * change here) or has shorter ends with it */
  const char *k;
  void *v;
  /* each stored pause marked on its endpoint first: one lookup each, not a scan of the list per
   * endpoint (20,000 paused endpoints took the dispatcher a second or more a rescan) */
  uint64_t gen = ++d->pause_gen;
  for (size_t j = n; j-- > 0;) { /* (backwards: the first of an endpoint's rows stands) */
    ep *e = ep_get(d, p[j].endpoint_id);
    if (!e) continue;
    e->pause_gen = gen;
    e->pause_stored = p[j].due_ms;
  }
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    if (!e->pause_adopted) continue;
    if (e->paused_until <= now) { /* over by itself */
      e->pause_adopted = false;
      continue;
    }
    int64_t stored = e->pause_gen == gen ? e->pause_stored : 0;
    if (stored >= e->paused_until) continue;
    e->paused_until = stored;
    e->pause_adopted = stored > now;
    if (!e->pause_adopted)
      HLOG(HOOKD_LOG_INFO, "endpoint.pause_lifted", KV_S("endpoint_id", e->cfg.id),
           KV_S("tenant_id", e->cfg.tenant_id), KV_S("reason", "lifted in the store"));
    if (e->gone) continue;
    sched_ep_ready(d, e);
    sched_ep_schedule(d, e);
    sched_health_update(d, e);
  }
  for (size_t i = 0; i < n; i++) {
    ep *e = ep_get(d, p[i].endpoint_id);
    if (!e || e->gone || p[i].due_ms <= now || p[i].due_ms <= e->paused_until) continue;
    bool begins = e->paused_until <= now;
    e->paused_until = p[i].due_ms;
    e->pause_adopted = true;
    if (begins) {
      HOOKD_INC(endpoint_pauses);
      HLOG(HOOKD_LOG_INFO, "endpoint.paused", KV_S("endpoint_id", e->cfg.id),
           KV_S("tenant_id", e->cfg.tenant_id), KV_I("for_ms", p[i].due_ms - now),
           KV_S("by", "another node"));
    }
    sched_release_queue(d, e);
    sched_ep_ready(d, e);
    sched_ep_schedule(d, e);
    sched_health_update(d, e);
  }
}

/* The latest endpoint change read back, from which the next rescan reads (less the skew
 * allowed): never past this node's own clock — one write by a node whose clock ran ahead
 * would move it for good, and every later change made on clocks that agree, a secret's
 * rotation included, would fall before the window, never read here. */
static void note_config_seen(hookd_dispatcher *d, int64_t updated_ms) {
  int64_t now = hookd_now_ms();
  int64_t v = updated_ms < now ? updated_ms : now;
  if (v > d->config_seen_ms) d->config_seen_ms = v;
}

/* The tenants deleted through another node (or by this one's API while the rescan read): the
 * rescan lists every tenant not deleted, and a tenant this node knew before the rescan was sent
 * — a committed one: the dispatcher learns of tenants only from the store or after a commit —
 * that the list lacks is gone. Kept, every tenant ever deleted elsewhere stayed, walked a few
 * times a second (docs/postgres.md "Several nodes"). */
static void forget_tenants_gone(hookd_dispatcher *d, const msg *m, uint64_t gen) {
  char **gone = NULL;
  size_t n = 0, cap = 0;
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->tenants, i, &k, &v)) != 0;) {
    const tenant *t = v;
    if (t->deleted || t->known_mono_ms >= m->sent_mono_ms || t->listed_gen == gen) continue;
    if (n == cap) {
      char **g = realloc(gone, (cap = cap ? 2 * cap : 16) * sizeof *g);
      if (!g) break;
      gone = g;
    }
    if (!(gone[n] = strdup(k))) break;
    n++;
  }
  /* (marked apart from the walk: a tenant marked may be freed, and the map changed) */
  for (size_t i = 0; i < n; i++) {
    sched_tenant_deleted(d, gone[i]);
    free(gone[i]);
  }
  free(gone);
}

/* A shared store's rescan: the endpoints and tenants other nodes changed, applied as this node's
 * API applies its own changes (an endpoint this node already holds as stored is left alone). */
static void apply_shared_config(hookd_dispatcher *d, msg *m) {
  uint64_t gen = ++d->rescans_applied;
  for (size_t i = 0; i < m->n_tenants; i++) {
    tenant *t = sched_tenant(d, m->tenants[i].id);
    if (t) sched_tenant_apply(d, t, &m->tenants[i]);
    if (t) t->listed_gen = gen;
  }
  if (d->cfg.shared_store) forget_tenants_gone(d, m, gen);
  for (size_t i = 0; i < m->n_eps; i++) {
    const hookd_endpoint *cfg = &m->eps[i];
    note_config_seen(d, cfg->updated_ms);
    ep *e = ep_get(d, cfg->id);
    if (e && !e->gone && !cfg->deleted_ms && e->cfg.updated_ms == cfg->updated_ms) continue;
    if (!e && cfg->deleted_ms) continue;
    ep_upsert(d, cfg);
  }
}

static void submit_maintenance(hookd_dispatcher *d, msg_type t, int64_t now) {
  msg *m = msg_new(d, t);
  if (!m) return;
  m->now_ms = now;
  m->op.run = t == MSG_SWEPT ? run_sweep : run_rescan;
  m->op.done = op_done_post;
  m->op.arg = m;
  if (t == MSG_SWEPT) d->sweeping = true;
  else d->rescanning = true;
  m->clock_gen = d->clock_gen;
  m->sent_mono_ms = hookd_mono_ms();
  d->store_ops++;
  hookd_storeq_submit(d->store->writer, &m->op);
}

/* ---------- steps of the wall clock (docs/architecture.md "Clocks") ---------- */

#define CLOCK_STEP_MS 1000
/* The two clocks read further apart than this (the thread descheduled between them) say
 * nothing of a step: that read is not compared. */
#define CLOCK_READ_SLACK_MS 50
#define LEASE_MOVE_RETRY_MS 250

static int run_move_leases(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  msg *m = arg;
  return be->lease_shift(c, m->d->node_id, m->due_ms, &m->reclaimed);
}

/* The items this node holds, moved by a step of the wall clock: when a request in flight went
 * out (compared with when an operator moved or enabled its endpoint again, health_since, written
 * on the new clock; and how long it has been out), when an outcome is written again, and the
 * leases of all of them — waiting in the queues, in flight, or waiting to write their outcome
 * again: each keeps the time it had left. A step forward moves this node's stored leases too; a
 * step back does not (written on the clock before it, they are the other nodes' to read, and
 * they read the time each has left — left as it was here, a lease read the step's length longer
 * and the node sent a request after the other nodes took it over: two at once, a review). One
 * whose op is out catches up at its end (catch_up_steps); one whose claim was queued before a
 * step forward (its rows are moved in the store, not here) is given back when its lease reads
 * short: a release and a claim more, nothing sent twice. */
static void move_items(hookd_dispatcher *d, int64_t delta_ms) {
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    for (int c = 0; c < CLS__COUNT; c++)
      for (item *it = e->q_head[c]; it; it = it->next) it->c.d.leased_until_ms += delta_ms;
  }
  for (hookd_egress_req *r = hookd_egress_live(d->eg); r; r = r->live_next) {
    item *it = r->user;
    it->sent_ms += delta_ms;
    it->c.d.leased_until_ms += delta_ms;
  }
  for (item *it = d->record_retry; it; it = it->retry_next) {
    it->retry_ms += delta_ms;
    it->out.sent_ms += delta_ms;
    it->c.d.leased_until_ms += delta_ms;
  }
}

/* The stored leases' move, once at a time; claims and sweeps wait for it (thread_main). */
static void submit_lease_move(hookd_dispatcher *d) {
  if (!d->lease_move_pending || d->lease_moving) return;
  msg *m = msg_new(d, MSG_LEASES_MOVED);
  if (!m) return; /* tried again at the next pass */
  m->due_ms = d->lease_move_pending;
  m->op.run = run_move_leases;
  m->op.done = op_done_post;
  m->op.arg = m;
  d->lease_moving = true;
  d->store_ops++;
  hookd_storeq_submit(d->store->writer, &m->op);
}

/* The wall clock moved by delta_ms against the monotonic one: what this thread times moves
 * with it, so that each wait keeps its length, and each lease held the time it has left. A step
 * forward moves this node's stored leases too: else a lease would look run out while its request
 * is still out, and be taken over and sent again. Claims and sweeps read the new time only once
 * the move has committed. */
static void clock_stepped(hookd_dispatcher *d, int64_t delta_ms) {
  HOOKD_INC(clock_steps);
  HLOG(HOOKD_LOG_WARN, "clock.stepped", KV_I("delta_ms", delta_ms),
       KV_S("node_id", d->node_id));
  sched_clock_step(d, delta_ms);
  if (d->next_sweep_ms) d->next_sweep_ms += delta_ms;
  if (d->next_rescan_ms) d->next_rescan_ms += delta_ms;
  if (d->rescan_sent_ms) d->rescan_sent_ms += delta_ms; /* (the change feed's gap) */
  d->next_stats_ms = 0;
  if (d->cfg.shared_store) {
    /* the clock guard's last check was of the old clock: none holds until the next, at once
     * (one read before the step, or across it, is void: clock_gen) */
    d->clock_gen++;
    d->clock_checked = false;
    if (d->outvoted_skew_ms) d->outvoted_skew_ms -= delta_ms; /* (the skew the step left) */
    atomic_store(&d->clock_agrees, false);
    d->next_rescan_ms = 0;
  }
  move_items(d, delta_ms);
  if (delta_ms <= 0) {
    d->clock_back_ms += delta_ms;
    /* retention keeps what is stamped from now on as much longer as the clock reads behind
     * where it was at the start, net of the steps forward (two time sources taking turns,
     * +5 s then -5 s, leave nothing behind: their sum grew without end) */
    d->clock_net_ms += delta_ms;
    if (-d->clock_net_ms > atomic_load(&d->stepped_back_ms))
      atomic_store(&d->stepped_back_ms, -d->clock_net_ms);
    /* what a cycle lived through is the net of the steps: a step forward set right again adds
     * nothing (else a year's mistake, corrected, ended max_age for a year); the time of the
     * latest moves with the clock, as every time this thread keeps */
    d->clock_forward_ms = d->clock_forward_ms + delta_ms > 0 ? d->clock_forward_ms + delta_ms : 0;
    if (d->clock_forward_at) d->clock_forward_at += delta_ms;
    return;
  }
  d->clock_net_ms += delta_ms;
  d->clock_forward_ms += delta_ms;
  d->clock_forward_at = disp_now(d); /* (on the new clock) */
  d->lease_move_pending += delta_ms;
  submit_lease_move(d);
}

bool hookd_dispatcher_clock_outvoted(hookd_dispatcher *d) {
  return d && d->cfg.shared_store && atomic_load(&d->clock_outvoted); /* (none: not started) */
}

bool hookd_dispatcher_clock_holds(hookd_dispatcher *d) {
  return d->cfg.shared_store && !atomic_load(&d->clock_agrees);
}

int64_t hookd_dispatcher_stepped_back_ms(hookd_dispatcher *d) {
  return atomic_load(&d->stepped_back_ms);
}

/* The dispatcher's time: the wall clock as of the thread's last check, carried on by the
 * monotonic clock. A pure read: a step is seen only by disp_clock_check, once a turn of the
 * loop, with no structure half-walked (seen at any read, a step moved every endpoint from inside
 * a health update holding its lock, and from inside a dispatch pass walking the ready ring). */
int64_t disp_now(hookd_dispatcher *d) { return (hookd_mono_us() + d->clock_offset_us) / 1000; }

static void disp_clock_check(hookd_dispatcher *d) {
  int64_t m0, now, m1;
  /* read again when descheduled between the reads (an offset from reads far apart is off by
   * the delay: a false step, or half of a true one); in µs, so that the time kept is the wall
   * clock's to the ms (one a ms behind saw a delivery just stored as due a ms later: a timer's
   * wake and a claim of its own for each, the acks' commits waiting behind them) */
  for (int tries = 0;; tries++) {
    m0 = hookd_mono_us(), now = hookd_now_us(), m1 = hookd_mono_us();
    if (m1 - m0 <= CLOCK_READ_SLACK_MS * 1000) break;
    if (tries == 3) return; /* a machine this loaded: compared at the next check */
  }
  /* a slow drift, as NTP slews the clock, is followed without a step; by reads close enough
   * (a ms) that the time kept does not wander back and forth with the estimate's noise */
  int64_t offset = now - m0 / 2 - m1 / 2, delta = (offset - d->clock_offset_us) / 1000;
  bool step = delta <= -CLOCK_STEP_MS || delta >= CLOCK_STEP_MS;
  if (!step && m1 - m0 > 1000) return;
  d->clock_offset_us = offset; /* first: what clock_stepped reads is on the new clock */
  if (step) clock_stepped(d, delta);
}

static void process_inbox(hookd_dispatcher *d) {
  pthread_mutex_lock(&d->mu);
  msg *m = d->in_head;
  d->in_head = d->in_tail = NULL;
  pthread_mutex_unlock(&d->mu);
  while (m) {
    msg *next = m->next;
    bool keep = false;
    switch (m->type) {
    case MSG_HINT: {
      ep *e = ep_get(d, m->endpoint_id);
      if (e) set_due(d, e, m->due_ms, false);
      free(m->endpoint_id);
      break;
    }
    case MSG_RESCAN_REQ: /* (a publish past the fan-out's hints, a payload delete) */
      rescan_soon(d, true);
      break;
    case MSG_STORE_CHANGED:
      if (m->due_ms) d->next_rescan_ms = 0; /* missed notifications: at once */
      else rescan_soon(d, false);
      break;
    case MSG_EVENT_PURGED:
      drop_event_items(d, m->due_ms);
      break;
    case MSG_ENDPOINT:
      ep_upsert(d, &m->ep);
      hookd_endpoint_free(&m->ep);
      break;
    case MSG_SYNC:
      m->sync_fn(m->sync_arg);
      break;
    case MSG_TENANT: {
      if (m->tenant_deleted) {
        sched_tenant_deleted(d, m->tenant.id);
      } else {
        tenant *t = sched_tenant(d, m->tenant.id);
        if (t) sched_tenant_apply(d, t, &m->tenant);
      }
      free(m->tenant.id);
      break;
    }
    case MSG_CLAIMED:
      d->store_ops--;
      store_writes_again(d, m->rc);
      on_claimed(d, m);
      break;
    case MSG_RECORDED:
    case MSG_RELEASED:
      d->store_ops--;
      keep = true; /* embedded in the item, freed with it */
      store_writes_again(d, m->item->rc);
      on_item_done(d, m->item, m->type == MSG_RECORDED);
      break;
    case MSG_MARKED:
      d->store_ops--;
      keep = true;
      store_writes_again(d, m->item->rc);
      on_marked(d, m->item);
      break;
    case MSG_SWEPT:
      d->store_ops--;
      d->sweeping = false;
      /* (every second: after a failure its batch commits a probe write — storeq.c) */
      store_writes_again(d, m->rc);
      if (m->rc == 0) {
        if (m->reclaimed) {
          HOOKD_ADD(leases_reclaimed, (uint64_t)m->reclaimed);
          HLOG(HOOKD_LOG_INFO, "leases.reclaimed", KV_I("count", m->reclaimed));
        }
        hookd_held_unknown(m->held, "a lease expired");
        apply_hints(d, m->hints, m->n_hints, false, 0);
        if (m->reclaimed >= RECLAIM_BATCH) d->next_sweep_ms = 0; /* more may be waiting */
      }
      hookd_due_hints_free(m->hints, m->n_hints);
      break;
    case MSG_LEASES_MOVED:
      d->store_ops--;
      d->lease_moving = false;
      if (m->rc == 0) {
        d->lease_move_pending -= m->due_ms; /* (a step since is still to move) */
        d->lease_move_failures = 0;
        HLOG(HOOKD_LOG_INFO, "clock.leases_moved", KV_I("count", m->reclaimed),
             KV_I("delta_ms", m->due_ms));
      } else {
        /* tried again; meanwhile nothing takes a lease over (no claim, no sweep) */
        /* (logged once, then once a minute: the store's own errors say why) */
        if (!d->lease_move_failures++ || hookd_mono_ms() - d->lease_move_logged_ms >= 60000) {
          HLOG(HOOKD_LOG_WARN, "clock.leases_move_failed", KV_I("delta_ms", m->due_ms),
               KV_S("error", hookd_store_strerror(m->rc)),
               KV_I("failures", (int64_t)d->lease_move_failures),
               KV_S("meanwhile", "no claim and no lease sweep on this node"));
          d->lease_move_logged_ms = hookd_mono_ms();
        }
        d->lease_move_retry_ms = hookd_mono_ms() + LEASE_MOVE_RETRY_MS;
      }
      break;
    case MSG_RESCANNED:
      d->store_ops--;
      d->rescanning = false;
      if (m->rc == 0) {
        if (m->clock_read && m->clock_gen == d->clock_gen) check_clock(d, m);
        if (m->nodes) share_limits(d, m->nodes); /* (before the tenants are applied below) */
        apply_shared_config(d, m); /* (first: the hints may name an endpoint it brings) */
        /* (only what was read: an empty list lifts every pause taken from the store) */
        if (m->pauses_read) apply_pauses(d, m->pauses, m->n_pauses);
        apply_hints(d, m->hints, m->n_hints, true, m->now_ms);
      }
      if (m->rc == 0) d->rescan_took_ms = hookd_mono_ms() - m->sent_mono_ms;
      hookd_due_hints_free(m->hints, m->n_hints);
      hookd_due_hints_free(m->pauses, m->n_pauses);
      free(m->votes);
      hookd_endpoints_free(m->eps, m->n_eps);
      hookd_tenants_free(m->tenants, m->n_tenants);
      break;
    }
    if (!keep) free(m);
    m = next;
  }
}

/* ---------- the loop ---------- */

/* The counts the loop keeps, published after each pass in which one changed (so that a
 * scrape's totals agree with the per-endpoint series beside them), under the lock the threads
 * posting to the dispatcher take: not on a pass that changed none. */
static void update_counts(hookd_dispatcher *d) {
  hookd_dispatcher_stats *p = &d->published;
  if (p->in_flight == d->in_flight && p->queued == d->queued &&
      p->endpoints == (int)d->eps.len && p->tenants == (int)d->tenants.len &&
      p->claimed_body_bytes == d->body_bytes &&
      p->breakers_open == d->breakers_open)
    return;
  p->in_flight = d->in_flight;
  p->queued = d->queued;
  p->endpoints = (int)d->eps.len;
  p->tenants = (int)d->tenants.len;
  p->claimed_body_bytes = d->body_bytes;
  p->breakers_open = d->breakers_open;
  pthread_mutex_lock(&d->mu);
  d->stats.in_flight = p->in_flight;
  d->stats.queued = p->queued;
  d->stats.endpoints = p->endpoints;
  d->stats.tenants = p->tenants;
  d->stats.claimed_body_bytes = p->claimed_body_bytes;
  d->stats.breakers_open = p->breakers_open;
  pthread_mutex_unlock(&d->mu);
}

/* Claims wait while an outcome of this node's waits to be written and its delivery's lease has
 * lapsed (or is about to): claimed again first, the delivery was sent again though its answer
 * was here (a review: 15 of 15 sent twice after a database restart of 25 s, past their 20 s
 * leases). The waiting outcomes are written first instead — the loop submits them before the
 * claims, the writer takes ops in order, and claims wait too while such an outcome is at the
 * writer (it may fail there alone, a claim behind it committing: a review) — and they settle the
 * sweep's reclaim of their lapsed lease as if it were theirs still (the store's late outcome).
 * Bounded: once the store has taken a write, OUTCOME_HOLD_MS at most, and then not again until
 * every such outcome is written (one failing for a reason of its own no longer holds them).
 * Another node's claim is not held by this (docs/postgres.md "Failure windows"). Returns 0 when
 * claims may go, else the ms after which to look again (at least 1: the loop never spins). */
#define OUTCOME_HOLD_MS 10000
static int64_t outcomes_hold_claims(hookd_dispatcher *d, int64_t now) {
  bool lapsing = d->outcomes_out > 0;
  for (item *w = d->record_retry; w && !lapsing; w = w->retry_next)
    lapsing = w->recording && w->c.d.leased_until_ms <= now + 1000;
  if (!lapsing) { /* (the clock read only when a hold ends: not at every pass) */
    if (d->claims_held_since_ms)
      HLOG(HOOKD_LOG_INFO, "claims.resumed",
           KV_I("held_ms", hookd_mono_ms() - d->claims_held_since_ms));
    d->claims_held_since_ms = d->claims_held_ms = 0;
    d->claims_hold_over = false;
    return 0;
  }
  if (d->claims_hold_over) return 0;
  int64_t mono = hookd_mono_ms();
  if (!d->claims_held_since_ms) {
    d->claims_held_since_ms = mono;
    HLOG(HOOKD_LOG_INFO, "claims.held",
         KV_S("reason", "answers waiting to be written past their leases go first"));
  }
  /* the bound starts when the store takes a write again */
  if (!d->claims_held_ms && d->write_landed_ms > d->write_failed_ms) d->claims_held_ms = mono;
  if (!d->claims_held_ms) return 1000; /* (the outcomes' retries and the landings wake it too) */
  int64_t left = OUTCOME_HOLD_MS - (mono - d->claims_held_ms);
  if (left > 0) return left;
  d->claims_hold_over = true;
  HLOG(HOOKD_LOG_WARN, "claims.hold_ended",
       KV_S("reason", "answers still not written 10 s after the store took writes again"));
  return 0;
}

/* Whether this node may claim and sweep leases: its stored leases moved by every step of its
 * clock so far, and, on a shared store, its clock checked against the database's and found
 * within the bound (docs/postgres.md "The clock guard"). */
static bool leases_current(const hookd_dispatcher *d) {
  if (d->lease_move_pending) return false;
  return !d->cfg.shared_store || (d->clock_checked && !d->clock_skewed);
}

/* What takes a walk over every endpoint: a few times a second. */
static void update_stats(hookd_dispatcher *d) {
  int64_t oldest = 0, oldest_held = 0, oldest_failing = 0, now = disp_now(d);
  int open = 0, paused = 0, slow = 0, failing = 0, disabled = 0;
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->tenants, i, &k, &v)) != 0;)
    ((tenant *)v)->slow_eps = 0; /* recounted below (a removed endpoint took its mark along) */
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    /* how far behind the sending is: what could be sent now. A disabled endpoint's deliveries
     * wait on purpose (they read as growing without end: a soak audit), and an open breaker or a
     * Retry-After pause holds them to its own time, as an inbox record's next_attempt_at */
    int64_t due = e->cfg.enabled ? e->next_due : 0;
    for (int c = 0; e->cfg.enabled && c < CLS__COUNT; c++) {
      int64_t q = e->q_head[c] ? e->q_head[c]->c.d.next_attempt_ms : 0;
      if (q && (!due || q < due)) due = q;
    }
    int64_t held = e->paused_until;
    if (e->br.state == HOOKD_BREAKER_OPEN) {
      int64_t probe = hookd_breaker_retry_at(&e->br, &d->breaker_cfg);
      if (probe > held) held = probe;
    } else if (e->br.state == HOOKD_BREAKER_HALF_OPEN && e->br.probes_in_flight > 0 &&
               held <= now) {
      /* its probe is out: the rest wait on its answer (read as pending, a hanging endpoint's
       * age moved from one gauge to the other at each probe, and both alerts broke: a review) */
      held = now + 1;
    }
    /* and how far behind what a broken receiver holds is (its breaker open, or paused) */
    if (due && due <= now && held > now && (!oldest_held || due < oldest_held)) oldest_held = due;
    if (due && due < held) due = held;
    if (due && due <= now && (!oldest || due < oldest)) oldest = due;
    /* (a disabled endpoint's breaker stays as it was, never asked again until it is enabled,
     * which resets it: not counted open) */
    open += e->cfg.enabled && e->br.state != HOOKD_BREAKER_CLOSED;
    disabled += !e->cfg.enabled && !e->gone;
    /* a failing run (5xx, timeouts, network errors, no success since) that a low-traffic
     * endpoint's breaker never sees: its retries wait out their backoff, due later, in no other
     * gauge (a review: down for days, nothing but a failure counter moving) */
    if (e->cfg.enabled && !e->gone && e->failing_since) {
      failing++;
      if (!oldest_failing || e->failing_since < oldest_failing) oldest_failing = e->failing_since;
    }
    paused += e->paused_until > now;
    /* a disabled endpoint's slow mark (never cleared: it gets no fast answers) holds back no
     * newcomer of its tenant, nor reads as slow in the gauge */
    bool slow_now = e->slow && e->cfg.enabled && !e->gone;
    slow += slow_now;
    e->t->slow_eps += slow_now;
  }
  d->breakers_open = open; /* the exact count (an endpoint removed took its breaker along) */
  /* while there is work the loop wakes for the next walk: idle between two events, it read a
   * gauge of the last walk for as long (an endpoint's pause seen 0 half a second, the oldest
   * due read as growing after it was sent). Not for a breaker: one with nothing left to send
   * stays open until a send asks it (and would keep an idle daemon waking for ever). */
  d->stats_busy = oldest || paused || d->in_flight || d->queued;
  pthread_mutex_lock(&d->mu);
  d->stats.oldest_due_ms = oldest;
  d->stats.oldest_held_ms = oldest_held;
  d->stats.walked_ms = now;
  d->stats.endpoints_paused = paused;
  d->stats.endpoints_slow = slow; /* (claims_held: the loop sets it as it changes) */
  d->stats.endpoints_failing = failing;
  d->stats.oldest_failing_ms = oldest_failing;
  d->stats.endpoints_disabled = disabled;
  pthread_mutex_unlock(&d->mu);
}

/* Claimed deliveries still waiting for a slot when their lease is about to run out go back to
 * the store (and are claimed again): a lease the sweep reclaims looks like a request that may
 * have been sent, which holds a non-idempotent destination's delivery as unknown. */
#define LEASE_RELEASE_GUARD_MS 2000
static void release_expiring(hookd_dispatcher *d, int64_t now) {
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
    ep *e = v;
    if (!e->queued) continue;
    /* a quarter of a short lease: released at once, the item would only be claimed again */
    int64_t guard = (2 * (int64_t)e->cfg.timeout_ms + d->cfg.lease_margin_ms) / 4;
    if (guard > LEASE_RELEASE_GUARD_MS) guard = LEASE_RELEASE_GUARD_MS;
    bool expiring = false;
    for (int c = 0; c < CLS__COUNT && !expiring; c++)
      for (item *it = e->q_head[c]; it && !expiring; it = it->next)
        expiring = it->c.d.leased_until_ms - now < guard;
    if (!expiring) continue;
    sched_release_queue(d, e);
    if (!e->next_due || e->next_due > now) e->next_due = now;
    sched_ep_ready(d, e);
    sched_ep_schedule(d, e);
  }
}

/* The egress read its sockets `ms` late (a stall: docs/architecture.md "A stall of hookd's
 * own"): the requests still in flight have it taken off how long they have been out and off
 * their latency, for the slow mark (not off sent_ms, which dates them against the endpoint's
 * changes: a review); said and counted. */
static void disp_stalled(hookd_dispatcher *d, int64_t ms) {
  for (hookd_egress_req *r = hookd_egress_live(d->eg); r; r = r->live_next)
    ((item *)r->user)->stall_credit_ms += ms;
  HOOKD_INC(egress_stalls);
  HLOG(HOOKD_LOG_WARN, "egress.stalled", KV_I("stalled_ms", ms),
       KV_I("timed_out", d->stall_ended), KV_I("in_flight", d->in_flight),
       KV_S("hint", "hookd did not run (SIGSTOP, a paused VM, swapping, an overloaded host): "
                    "the requests its stall timed out are retried, not held against their "
                    "endpoints"));
  d->stall_ended = 0;
}

static void *thread_main(void *arg) {
  hookd_dispatcher *d = arg;
  int64_t stop_ms = 0;
  for (;;) {
    disp_clock_check(d); /* a step is made up for before the inbox's outcomes read the time */
    process_inbox(d);
    bool stopping = d->stopping;
    if (stopping) {
      /* release whatever is queued, let flights land (for the grace period), wait for the
       * store */
      const char *k;
      void *v;
      for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) {
        ep *e = v;
        sched_release_queue(d, e);
        sched_ep_unlink(d, e);
      }
      if (!stop_ms) stop_ms = d->stop_ms = hookd_mono_ms();
      /* (requests only: a send mark still in the store is no request to abandon) */
      if (hookd_egress_live(d->eg) && hookd_mono_ms() - stop_ms >= d->cfg.shutdown_grace_ms) {
        HLOG(HOOKD_LOG_WARN, "shutdown.abandon_in_flight", KV_I("in_flight", d->in_flight),
             KV_I("grace_ms", d->cfg.shutdown_grace_ms));
        hookd_egress_abort_all(d->eg, "hookd shutting down: request abandoned after the grace "
                               "period, its outcome unknown", on_http_done, d);
      }
      if (d->in_flight == 0 && d->store_ops == 0 && !d->record_retry) break;
    }
    int64_t now = disp_now(d);
    /* this node's stored leases are moved before a claim or a sweep reads a time past them */
    if (d->lease_move_pending && !d->lease_moving && hookd_mono_ms() >= d->lease_move_retry_ms)
      submit_lease_move(d);
    bool current = leases_current(d);
    if (d->claims_shown == current) { /* its gauge at once: an idle loop walks for stats rarely */
      d->claims_shown = !current;
      pthread_mutex_lock(&d->mu);
      d->stats.claims_held = !current;
      pthread_mutex_unlock(&d->mu);
    }
    /* outcomes whose time has come go before this pass's claims (outcomes_hold_claims) */
    int64_t retry_in = record_retry_due(d, now, stopping);
    int64_t hold = stopping ? 0 : outcomes_hold_claims(d, now);
    bool claims_ok = current && !hold;
    if (!stopping) {
      sched_wake(d, now);
      if (claims_ok) sched_claim_due(d, now);
      sched_dispatch(d, now);
      if (current && !d->sweeping && now >= d->next_sweep_ms) {
        submit_maintenance(d, MSG_SWEPT, now);
        d->next_sweep_ms = now + d->cfg.sweep_interval_ms;
      }
      if (!d->rescanning && now >= d->next_rescan_ms) {
        submit_maintenance(d, MSG_RESCANNED, now);
        d->next_rescan_ms = now + d->cfg.rescan_interval_ms;
        d->rescan_sent_ms = now;
      }
    }
    if (now >= d->next_stats_ms) { /* the stats walk every endpoint: a few times a second */
      sched_mark_overdue(d, now); /* and requests in flight, likewise */
      if (!stopping) release_expiring(d, now);
      if (!stopping && sched_share_recheck(d)) sched_dispatch(d, now);
      update_stats(d);
      d->next_stats_ms = now + 200;
    }
    update_counts(d);
    /* (claims held: their due times would wake the loop at once for ever; it wakes for the
     * outcomes' retries, a write landing, or the hold's bound) */
    int64_t timeout = sched_next_timer(d, disp_now(d), claims_ok);
    if (current && hold && hold < timeout) timeout = hold;
    if (d->lease_move_pending && timeout > LEASE_MOVE_RETRY_MS) timeout = LEASE_MOVE_RETRY_MS;
    if (retry_in < timeout) timeout = retry_in;
    /* (claims held by the clock guard: the next rescan checks the clock again; the sweep's time,
     * passed, would wake the loop at once for ever; a rescan the change feed brought forward
     * wakes it too. Not while stopping: none is sent then) */
    if (current && !d->sweeping && d->next_sweep_ms - now < timeout)
      timeout = d->next_sweep_ms - now;
    if (!stopping && !d->rescanning && d->next_rescan_ms - now < timeout)
      timeout = d->next_rescan_ms - now;
    /* claimed deliveries waiting: their leases are watched at every stats tick */
    if ((d->queued || d->stats_busy) && d->next_stats_ms - now < timeout)
      timeout = d->next_stats_ms - now;
    if (timeout < 0) timeout = 0;
    int64_t stalled = hookd_egress_poll(d->eg, stopping ? 100 : (int)timeout, on_http_done, d);
    if (stalled) disp_stalled(d, stalled);
  }
  pthread_mutex_lock(&d->mu); /* (hookd_dispatcher_stop waits for this, bounded) */
  d->exited = true;
  pthread_cond_signal(&d->exited_cv);
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

/* ---------- start / stop ---------- */

typedef struct boot {
  hookd_dispatcher *d;
  hookd_endpoint *eps;
  size_t n_eps;
  hookd_tenant *tenants;
  size_t n_tenants;
  hookd_due_hint *hints;
  size_t n_hints;
  int reclaimed, held;
  char why[200]; /* the store's word on a load that failed */
} boot;

static int run_boot_load(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  boot *b = arg;
  /* (a batch redone runs it again: what the first run read goes) */
  hookd_tenants_free(b->tenants, b->n_tenants);
  hookd_endpoints_free(b->eps, b->n_eps);
  b->tenants = NULL, b->eps = NULL, b->n_tenants = b->n_eps = 0;
  int rc = be->tenant_list(c, &b->tenants, &b->n_tenants);
  rc = rc ? rc : be->endpoints_since(c, 0, &b->eps, &b->n_eps);
  if (rc) snprintf(b->why, sizeof b->why, "%s", be->errmsg(c));
  return rc;
}

static int run_boot_reclaim(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  boot *b = arg;
  return be->reclaim_leases(c, b->d->node_id, hookd_now_ms(), RECLAIM_BATCH, &b->hints,
                            &b->n_hints, &b->reclaimed, &b->held);
}

/* At start: the enabled endpoints whose URL the egress policy refuses as written (scheme, port,
 * an address given literally; a name is judged when resolved, at each connection) — a restart
 * with a narrower policy (--allow-http left out, a CIDR gone from --egress-allow) makes each of
 * their deliveries DEAD `blocked` at its next attempt: said once, before that happens. */
static void boot_policy_check(const hookd_dispatcher_config *cfg, const hookd_endpoint *eps,
                              size_t n) {
  if (!cfg->egress.url_check) return;
  size_t refused = 0;
  char first[160] = "", rule[48] = "", others[700] = ""; /* (ids of up to 128 bytes) */
  for (size_t i = 0; i < n; i++) {
    char why[48];
    if (eps[i].deleted_ms || !eps[i].enabled || !eps[i].url ||
        cfg->egress.url_check(cfg->egress.addr_check_ctx, eps[i].url, why, sizeof why) == 0)
      continue;
    if (!refused++) {
      snprintf(first, sizeof first, "%s", eps[i].id);
      snprintf(rule, sizeof rule, "%s", why);
    } else if (refused <= 5) {
      size_t used = strlen(others);
      snprintf(others + used, sizeof others - used, "%s%s", used ? "," : "", eps[i].id);
    }
  }
  if (!refused) return;
  HLOG(HOOKD_LOG_WARN, "egress.endpoints_refused", KV_I("count", (int64_t)refused),
       KV_S("endpoint_id", first), KV_S("rule", rule), KV_S("also", others[0] ? others : NULL),
       KV_S("effect", "the egress policy refuses these endpoints' URLs: each of their deliveries "
                      "goes DEAD (blocked) at its next attempt — restore the policy "
                      "(--allow-http, --egress-ports, --egress-allow) or fix the URLs"));
}

/* Everything the dispatcher holds, freed: after its thread has ended, or when its start failed
 * part way (what the boot had loaded by then: tenants, endpoints, their health). */
static void disp_free(hookd_dispatcher *d) {
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&d->eps, i, &k, &v)) != 0;) ep_free(d, v);
  hookd_strmap_free(&d->eps);
  hookd_strmap_free(&d->bodies); /* empty: every item was freed before the loop ended */
  for (size_t i = 0; (i = hookd_strmap_next(&d->tenants, i, &k, &v)) != 0;) {
    tenant *t = v;
    free(t->id);
    free(t);
  }
  hookd_strmap_free(&d->tenants);
  for (size_t i = 0; (i = hookd_strmap_next(&d->health, i, &k, &v)) != 0;) free(v);
  hookd_strmap_free(&d->health);
  free(d->heap);
  free(d->later);
  free(d->wake);
  hookd_egress_free(d->eg);
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->exited_cv);
  pthread_mutex_destroy(&d->health_mu);
  free(d->node_id);
  free(d);
}

hookd_dispatcher *hookd_dispatcher_start(const hookd_dispatcher_config *cfg, char *err,
                                         size_t errlen) {
  hookd_dispatcher *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->cfg = *cfg;
  d->nodes = d->stats.nodes = 1; /* (a shared store's count comes with the first rescan) */
  d->clock_offset_us = hookd_now_us() - hookd_mono_us(); /* disp_now's first read: no step */
  if (!d->cfg.sweep_interval_ms) d->cfg.sweep_interval_ms = 1000;
  /* before any body is seen, a claim may bring the largest: the first claims are not let past
   * the byte bound by a guess of small bodies */
  d->claim_bytes_avg = d->cfg.max_body_bytes > 0 ? d->cfg.max_body_bytes : 1 << 20;
  if (!d->cfg.rescan_interval_ms) d->cfg.rescan_interval_ms = 30000;
  if (d->cfg.tenant_max_in_flight <= 0) d->cfg.tenant_max_in_flight = d->cfg.max_in_flight;
  hookd_breaker_cfg_defaults(&d->breaker_cfg);
  if (cfg->breaker.window_ms) d->breaker_cfg.window_ms = cfg->breaker.window_ms;
  if (cfg->breaker.min_requests) d->breaker_cfg.min_requests = cfg->breaker.min_requests;
  if (cfg->breaker.failure_percent > 0)
    d->breaker_cfg.failure_percent = cfg->breaker.failure_percent;
  if (cfg->breaker.cooldown_ms) d->breaker_cfg.cooldown_ms = cfg->breaker.cooldown_ms;
  d->store = cfg->store;
  d->node_id = strdup(cfg->node_id);
  pthread_mutex_init(&d->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&d->exited_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&d->health_mu, NULL);
  hookd_strmap_init(&d->eps);
  hookd_strmap_init(&d->tenants);
  hookd_strmap_init(&d->health);
  hookd_strmap_init(&d->bodies);
  d->eg = hookd_egress_new(&cfg->egress);
  if (!d->node_id || !d->eg) {
    snprintf(err, errlen, "cannot start the egress");
    goto fail;
  }

  /* 1. tenants and endpoints */
  boot b = {.d = d};
  if (hookd_storeq_run_sync(d->store->writer, run_boot_load, &b) != 0) {
    /* (its reads may have succeeded and its commit failed: what they read is freed) */
    hookd_tenants_free(b.tenants, b.n_tenants);
    hookd_endpoints_free(b.eps, b.n_eps);
    if (!b.why[0]) hookd_storeq_last_error(d->store->writer, b.why, sizeof b.why);
    snprintf(err, errlen, "cannot load endpoints: %s", b.why[0] ? b.why : "storage error");
    goto fail;
  }
  for (size_t i = 0; i < b.n_tenants; i++) {
    tenant *t = sched_tenant(d, b.tenants[i].id);
    if (t) sched_tenant_apply(d, t, &b.tenants[i]);
  }
  hookd_tenants_free(b.tenants, b.n_tenants);
  for (size_t i = 0; i < b.n_eps; i++) {
    note_config_seen(d, b.eps[i].updated_ms);
    if (!b.eps[i].deleted_ms) ep_upsert(d, &b.eps[i]);
  }
  boot_policy_check(cfg, b.eps, b.n_eps);
  hookd_endpoints_free(b.eps, b.n_eps);

  /* 2. leases this node held before it stopped (a crash or kill -9) are void now — on a store
   * of its own. On a shared store they run out first (the sweep takes them then, on any node):
   * the node lock came free when the server saw the old session end, which says nothing of the
   * old process — cut off from the database but not from its receivers, it still sent what it
   * had claimed while a start under its id sent the same deliveries again (a review: two
   * requests at once) */
  int total = 0, held = 0;
  while (!d->cfg.shared_store) {
    b.hints = NULL;
    b.n_hints = 0;
    if (hookd_storeq_run_sync(d->store->writer, run_boot_reclaim, &b) != 0) {
      snprintf(err, errlen, "cannot release old leases");
      goto fail;
    }
    hookd_due_hints_free(b.hints, b.n_hints);
    total += b.reclaimed;
    held += b.held;
    if (b.reclaimed < RECLAIM_BATCH) break;
  }
  hookd_held_unknown(held, "hookd stopped while their requests may have been sent");
  if (total) {
    HOOKD_ADD(leases_reclaimed, (uint64_t)total);
    HLOG(HOOKD_LOG_INFO, "leases.released_at_start", KV_I("count", total),
         KV_S("node_id", d->node_id));
  }
  /* 3. every endpoint starts due now; the first claim (or the first rescan) tells the truth */
  d->next_rescan_ms = 0;
  d->next_sweep_ms = hookd_now_ms() + d->cfg.sweep_interval_ms;

  if (pthread_create(&d->thread, NULL, thread_main, d) != 0) {
    snprintf(err, errlen, "cannot start the dispatcher thread");
    goto fail;
  }
  pthread_setname_np(d->thread, "dispatcher");
  return d;
fail:
  disp_free(d);
  return NULL;
}

int hookd_dispatcher_stop(hookd_dispatcher *d) {
  if (!d) return 0;
  d->stopping = true;
  hookd_egress_wakeup(d->eg);
  /* on the monotonic clock: a step of the wall clock moves nothing */
  struct timespec until =
      hookd_mono_deadline(d->cfg.shutdown_grace_ms + HOOKD_DISPATCHER_STOP_MARGIN_MS);
  /* (a wait on the loop's own word, then a join: ThreadSanitizer knows no timed join) */
  pthread_mutex_lock(&d->mu);
  while (!d->exited)
    if (pthread_cond_timedwait(&d->exited_cv, &d->mu, &until) == ETIMEDOUT) break;
  bool exited = d->exited;
  pthread_mutex_unlock(&d->mu);
  if (!exited) return -1;
  pthread_join(d->thread, NULL);
  process_inbox(d); /* hints posted after the loop ended */
  int lost = d->writes_given_up;
  disp_free(d);
  return lost;
}

/* daemon.c — start-up, the signal loop and graceful shutdown.
 *
 * Start: block signals (every thread inherits the mask; only this thread takes them) → HTTP
 * server ("startup.bound"; /healthz "starting", every other route 503 not_ready) → take the
 * store's single-process lock (SQLite) → open the store (a PostgreSQL server not up yet waited
 * for, WAL recovery, migrations) → load API keys, creating the first admin key if there is
 * none → destination policy → dispatcher (rebuilds its index from the store) → every route →
 * "listening" → ready.
 * Stop (SIGTERM/SIGINT): not ready → stop accepting → wait for requests waiting on a commit →
 * stop the server → stop the dispatcher (in-flight requests finish and are recorded, queued
 * ones released) → drain and close the store → exit 0. */
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/ids.h"
#include "daemon/api.h"
#include "daemon/app.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/outbox.h"
#include "store/storeq.h"

typedef struct keys_load {
  hookd_auth *auth;
  uint64_t gen;
  bool every_row; /* the start's: revoked keys too (a lockdown is no first start) */
  hookd_api_key *keys;
  size_t n;
} keys_load;

static int run_keys_list(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  keys_load *k = arg;
  k->gen = hookd_auth_begin_load(k->auth);
  atomic_fetch_add_explicit(&hookd_m.config_reads[0], 1, memory_order_relaxed);
  return be->api_key_list(c, k->every_row ? 0 : hookd_now_ms() - HOOKD_AUTH_EXPIRED_KEPT_MS,
                          &k->keys, &k->n);
}

/* The bootstrap key, audited in the same transaction as any key creation (actor "system"). */
static int run_key_create(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  const hookd_api_key *k = arg;
  char detail[HOOKD_KEY_DETAIL_MAX];
  hookd_auth_key_detail(k->role, k->tenants, 0, detail, sizeof detail);
  hookd_audit a = {.at_ms = k->created_ms, .actor = "system", .action = "key.create",
                   .target = k->id, .detail = detail};
  int rc = be->api_key_create(c, k);
  return rc ? rc : be->audit_append(c, &a);
}

typedef struct sources_load {
  hookd_source *v;
  size_t n;
} sources_load;

static int run_sources_list(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  sources_load *l = arg;
  atomic_fetch_add_explicit(&hookd_m.config_reads[1], 1, memory_order_relaxed);
  return be->source_list(c, &l->v, &l->n);
}

/* Sources changed by another node (or by this one) reach the receive path's cache. */
static bool source_alive(const char *id, void *sources) {
  hookd_source_rt *rt = hookd_source_cache_get(sources, id);
  hookd_source_rt_release(rt);
  return rt != NULL;
}

static int refresh_sources(hookd_app *app) {
  sources_load l = {0};
  uint64_t since = hookd_source_cache_generation(app->sources); /* before the list is read */
  int rc = hookd_storeq_run_sync(app->store->reader, run_sources_list, &l);
  if (rc == 0) {
    hookd_source_cache_sync(app->sources, l.v, l.n, since);
    hookd_sources_free(l.v, l.n);
    /* the refusals of sources gone (deleted through another node) go with them */
    hookd_rejections_prune(app->rejections, source_alive, app->sources);
  }
  return rc;
}

typedef struct purge {
  int64_t before_ms;
  int64_t after_seq; /* where the walk goes on; 0 when it is done */
  int purged;
} purge;

/* 200 records an op: each goes with its event, forwards and attempts, and an op holds the writer
 * (1,000 took it 116-191 ms, and every ack waited behind it: a retention audit) */
static int run_inbox_purge(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  purge *p = arg;
  return be->inbox_purge(c, p->before_ms, 200, &p->after_seq, &p->purged);
}

static int run_event_purge(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  purge *p = arg;
  return be->event_purge(c, p->before_ms, hookd_now_ms(), 1000, &p->after_seq, &p->purged);
}

static int run_event_expire(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  purge *p = arg;
  /* fewer events per op than the other walks: each takes its whole fan-out and history */
  return be->event_expire(c, p->before_ms, 25, &p->after_seq, &p->purged);
}

/* 500 rows an op: a version row is small (no body, nothing hangs off it) */
static int run_object_versions_purge(hookd_store_conn *c, const hookd_store_backend *be,
                                     void *arg) {
  purge *p = arg;
  bool more = false;
  int rc = be->object_versions_purge(c, p->before_ms, 500, &p->purged, &more);
  p->after_seq = more ? 1 : 0;
  return rc;
}

static int run_lane_versions_purge(hookd_store_conn *c, const hookd_store_backend *be,
                                   void *arg) {
  purge *p = arg;
  bool more = false;
  int rc = be->lane_versions_purge(c, p->before_ms, hookd_now_ms(), 500, &p->purged, &more);
  p->after_seq = more ? 1 : 0;
  return rc;
}

/* The shortest event retention that keeps an event's id and Idempotency-Keys taken as long as
 * the API's other keyed writes keep theirs (HOOKD_KEPT_MS): under it, a warning at start. */
#define HOOKD_DEDUP_FLOOR_S (HOOKD_KEPT_MS / 1000)

/* A SIGTERM or SIGINT waits (blocked) for the signal loop: a retention walk, which runs on the
 * same thread, stops between batches for it — a first purge of a large backlog takes minutes,
 * and the next walk resumes where the window says. */
static bool stop_pending(void) {
  sigset_t set;
  return sigpending(&set) == 0 &&
         (sigismember(&set, SIGTERM) == 1 || sigismember(&set, SIGINT) == 1);
}

static bool refresh_config(hookd_app *app);
static void finish_deletes(hookd_app *app);

#define TICK_MS 2000      /* the main loop's round of duties; a failed reload is tried again */
#define RELOAD_GAP_MS 100 /* between two reloads SIGHUPs asked for: a burst of changes costs few */

/* ms until the API keys and sources are to be read again (0: now): every --reload-interval-ms;
 * after a SIGHUP (an operator's, or the change feed's: on_store_change) at once, but
 * RELOAD_GAP_MS after the last at least; after a failed read, TICK_MS after it. */
static int64_t reload_in(const hookd_app *app, int64_t now) {
  int64_t after = app->cfg->reload_interval_ms;
  if (app->reload_failed && after > TICK_MS) after = TICK_MS;
  if (app->reload_asked && after > RELOAD_GAP_MS) after = RELOAD_GAP_MS;
  int64_t due = app->refreshed_ms + after;
  return due > now ? due - now : 0;
}

/* The main thread's duties are due: their round (TICK_MS), a reload, or a SIGHUP to take. */
static bool tick_due(hookd_app *app) {
  sigset_t set;
  int64_t now = hookd_mono_ms();
  return now - app->ticked_ms >= TICK_MS || reload_in(app, now) == 0 ||
         (sigpending(&set) == 0 && sigismember(&set, SIGHUP) == 1);
}

/* a seq walk from the start, to read what it kept: once an hour, or once a window when that is
 * shorter (a row kept when a walk passed it — a delivery then still owed, or touched inside the
 * window — waited an hour, past a 2-minute window: a soak review), but not more often than every
 * 5 minutes (every walk would read every kept row again) */
#define WALK_FULL_EVERY_MS (3600 * 1000)
#define WALK_FULL_MIN_MS (300 * 1000)

/* The stop's watchdog. The main thread takes SIGTERM between its duties, and a duty that writes
 * (a delete's step, a retention batch, a reload) waits for the store: a PostgreSQL write waiting
 * on a lock no timeout ends held it there, the signal pending and nothing stopping, until a
 * SIGKILL; and the relay's and the replayer's stops wait for their store ops unbounded. So from
 * the moment a stop signal is pending (or taken), the whole stop gets what its bounded parts
 * add up to — the drain (30 s), the answers' flush (2 s), the dispatcher's grace and margin —
 * and 15 s more; past that it ends the process, exit 1, as the stop's other stalls do
 * (docs/architecture.md "Shutdown"). */
#define STOP_DRAIN_MS 30000 /* the stop waits this long for requests waiting on a commit */
#define STOP_FLUSH_MS 2000  /* and this long for the answers given to go out */

static void *stop_watch(void *arg) {
  hookd_app *app = arg;
  int64_t bound = STOP_DRAIN_MS + STOP_FLUSH_MS + (int64_t)app->cfg->shutdown_grace_s * 1000 +
                  HOOKD_DISPATCHER_STOP_MARGIN_MS + 15000;
  int64_t seen = 0;
  while (!atomic_load(&app->stop_watch_done)) {
    struct timespec nap = {0, 250 * 1000 * 1000};
    nanosleep(&nap, NULL);
    int64_t now = hookd_mono_ms(), began = atomic_load(&app->stop_began_ms);
    if (!seen && stop_pending()) seen = now;
    if (began && (!seen || began < seen)) seen = began;
    if (seen && now - seen > bound) {
      HLOG(HOOKD_LOG_ERROR, "shutdown.store_stalled", KV_I("after_ms", now - seen),
           KV_S("why", "the stop did not end in time: a store write that never returned (a "
                       "PostgreSQL statement waiting on a lock) held it"));
      hookd_log_flush(2000); /* the line that says why goes out first */
      _exit(1);
    }
  }
  return NULL;
}

/* A retention walk the store failed (the next round goes again): counted, and said with the
 * walk's name (its line's, "inbox.purged") and the store's words. */
static void retention_failed(hookd_app *app, const char *walk) {
  char err[256];
  hookd_storeq_last_error(app->store->writer, err, sizeof err);
  atomic_fetch_add_explicit(&hookd_m.retention_failures, 1, memory_order_relaxed);
  HLOG(HOOKD_LOG_WARN, "retention.failed", KV_S("walk", walk), KV_S("error", err),
       KV_S("meanwhile", "the walk goes again at the next round, in a minute"));
}

/* One retention walk, in small batches, until nothing older than the window is left to it.
 * Returns false when a stop signal cut it short. Between batches the main loop's duties go on
 * (the API keys and sources reloaded when due or asked for): a first purge of a large backlog
 * takes minutes, and a revoked key must stop working meanwhile. A walk in seq order (wc set)
 * goes on where the one before ended its last full (or trimmed) batch, and from the start once
 * an hour (once a window, when shorter: WALK_FULL_EVERY_MS): the rows it keeps (a forward still
 * open, an event a disabled endpoint still owes: months of them) were read again, every one,
 * every minute (a review). */
static bool purge_walk(hookd_app *app, int64_t now_ms, int64_t retention_s,
                       int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                       _Atomic uint64_t *counter, const char *msg, hookd_walk_cursor *wc) {
  int64_t mono = hookd_mono_ms();
  bool full = !wc || mono >= wc->full_at_ms;
  purge p = {.before_ms = now_ms - retention_s * 1000, .after_seq = full ? 0 : wc->resume_seq};
  int64_t total = 0, reached = p.after_seq;
  bool stopped = false, failed = false;
  do {
    if ((stopped = stop_pending())) break;
    p.purged = 0;
    if ((failed = hookd_storeq_run_sync(app->store->writer, run, &p) != 0)) {
      retention_failed(app, msg);
      break;
    }
    atomic_fetch_add_explicit(counter, (uint64_t)p.purged, memory_order_relaxed);
    total += p.purged;
    if (p.after_seq) reached = p.after_seq;
    if (tick_due(app) && refresh_config(app)) finish_deletes(app); /* (not for a reload only) */
  } while (p.after_seq != 0);
  if (wc && !stopped && !failed) {
    wc->resume_seq = reached;
    if (full) {
      int64_t every = retention_s * 1000;
      if (every > WALK_FULL_EVERY_MS) every = WALK_FULL_EVERY_MS;
      if (every < WALK_FULL_MIN_MS) every = WALK_FULL_MIN_MS;
      wc->full_at_ms = mono + every;
    }
  }
  if (total) HLOG(HOOKD_LOG_INFO, msg, KV_I("count", total)); /* one line per walk */
  return !stopped;
}

static int run_replay_purge(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  purge *p = arg;
  bool more = false;
  int rc = be->replay_purge(c, p->before_ms, hookd_now_ms(), 5000, &p->purged, &more);
  p->after_seq = more ? 1 : 0;
  return rc;
}

static int run_keys_purge(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  purge *p = arg;
  bool more = false;
  int rc = be->api_key_purge(c, p->before_ms, 1000, &p->purged, &more);
  p->after_seq = more ? 1 : 0;
  return rc;
}

static int run_answers_purge(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  purge *p = arg;
  bool more = false;
  int rc = be->answer_purge(c, p->before_ms, 1000, &p->purged, &more);
  p->after_seq = more ? 1 : 0;
  return rc;
}

/* a step ahead this old is the right time: a day — a wrong step that a bad time source keeps for
 * hours purges nothing early, and a right one (a clock behind at the start set right, a VM's
 * suspension) keeps data a day longer at most (an hour before: a +5-day step kept past it would
 * have purged 2-day-old payloads of a 7-day retention, a review) */
#define RETENTION_STEP_TRUSTED_MS (24 * 3600 * 1000LL)

/* The deliveries a disabled endpoint still owes of expired events (the claim expires the others),
 * found on the scan connection — a read of the open deliveries of the disabled endpoints, which
 * a backlog makes long, holds no ack back — then made DEAD expired on the writer, 500 at a time
 * (expired by retention's held-back clock, stamped with the time of now): their events then
 * come under retention. */
typedef struct owed {
  int64_t before_ms, *seqs;
  int n, expired;
} owed;

static int run_owed_read(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  owed *o = arg;
  free(o->seqs);
  return be->owed_expired(c, o->before_ms, 500, &o->seqs, &o->n);
}

static int run_owed_expire(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  owed *o = arg;
  return be->expire_owed(c, o->seqs, o->n, o->before_ms, hookd_now_ms(), &o->expired);
}

/* While the main thread waits on the scan connection (an API walk may run ahead of the read):
 * its duties go on, and a stop interrupts the wait's op (false). */
static bool owed_go_on(void *arg) {
  hookd_app *app = arg;
  if (stop_pending()) return false;
  if (tick_due(app) && refresh_config(app)) finish_deletes(app);
  return true;
}

static bool expire_owed(hookd_app *app, int64_t now_ms) {
  owed o = {.before_ms = now_ms};
  int64_t total = 0;
  bool stopped = false;
  do {
    if ((stopped = stop_pending())) break;
    o.n = o.expired = 0;
    if (hookd_storeq_run_polled(app->store->scan, run_owed_read, &o, owed_go_on, app) != 0) {
      if (!stop_pending()) retention_failed(app, "deliveries.expired_owed");
      break;
    }
    if (!o.n) break;
    if (hookd_storeq_run_sync(app->store->writer, run_owed_expire, &o) != 0) {
      retention_failed(app, "deliveries.expired_owed");
      break;
    }
    atomic_fetch_add_explicit(&hookd_m.dead[M_DEAD_EXPIRED], (uint64_t)o.expired,
                              memory_order_relaxed);
    total += o.expired;
    if (tick_due(app) && refresh_config(app)) finish_deletes(app);
  } while (o.n == 500 && o.expired > 0); /* (none expired of a full read: read again next time) */
  free(o.seqs);
  if (total) HLOG(HOOKD_LOG_INFO, "deliveries.expired_owed", KV_I("count", total));
  return !stopped;
}

typedef struct windows_op {
  int64_t mine[3], used[3];
} windows_op;

static int run_retention_windows(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  windows_op *w = arg;
  return be->retention_windows(c, w->mine, w->used);
}

/* The windows the walks go by (inbox, payload, event, in s): this node's, or on a shared store
 * the longest of the running nodes' (docs/postgres.md "Several nodes": with each node's own, the
 * shortest won over every node's records). false: not known (the store failed) — no walk. */
static bool retention_windows(hookd_app *app, int64_t used[3]) {
  windows_op w = {.mine = {app->cfg->inbox_retention_s, app->cfg->payload_retention_s,
                           app->cfg->event_retention_s}};
  memcpy(w.used, w.mine, sizeof w.used);
  if (app->store->be->retention_windows &&
      hookd_storeq_run_sync(app->store->writer, run_retention_windows, &w) != 0)
    return false;
  memcpy(used, w.used, sizeof w.used);
  if (memcmp(used, app->retention_used, sizeof w.used) != 0) {
    memcpy(app->retention_used, used, sizeof w.used);
    if (memcmp(used, w.mine, sizeof w.used) != 0)
      HLOG(HOOKD_LOG_WARN, "retention.longer_window", KV_I("inbox_retention_s", used[0]),
           KV_I("payload_retention_s", used[1]), KV_I("event_retention_s", used[2]),
           KV_S("why", "another node running on the store keeps records longer (0: off): its "
                       "windows are walked by — give the nodes one configuration"));
  }
  return true;
}

/* Retention of dedup records with their inbound events (I9) and of objects' newest versions,
 * the expiry of what disabled endpoints owe of expired events, and, when set, of settled
 * outbound events: their payloads, then the events themselves (O17)
 * and their ordered lanes' versions; the answers kept under API writes' Idempotency-Keys past
 * their 24 hours; the items of replay jobs that ended a week ago (docs/replay.md). */
static void purge_old(hookd_app *app) {
  /* a shared store: not while this node's clock is outvoted or not checked yet — every node's
   * records go by it (docs/postgres.md "The clock guard") */
  bool outvoted = hookd_dispatcher_clock_holds(app->disp);
  if (outvoted && !app->retention_held) {
    app->retention_held = true;
    if (atomic_load(&hookd_m.clock_checks) == 0) /* (the start's: an info) */
      HLOG(HOOKD_LOG_INFO, "retention.held",
           KV_S("why", "this node's clock is not checked against the store's clock vote yet: "
                       "the retention walks, which delete by it, wait for the first check"));
    else
      HLOG(HOOKD_LOG_WARN, "retention.held",
           KV_S("why", "this node's clock is outvoted by the store's clock vote (or not checked "
                       "since it stepped): the retention walks, which delete by it, wait"));
  } else if (!outvoted && app->retention_held) {
    app->retention_held = false;
    HLOG(HOOKD_LOG_INFO, "retention.resumed");
  }
  /* this node's windows recorded even while it is held (the store's clock stamps them): the
   * others walk by the longest of the running nodes', this one's among them (a review) */
  int64_t used[3]; /* inbox, payload, event */
  bool windows = retention_windows(app, used);
  if (outvoted || !windows) return;
  uint64_t failures = atomic_load(&hookd_m.retention_failures);
  /* now, as far as the monotonic clock has run since the start: a step forward of the wall
   * clock purges nothing early; one that lasts a day is taken as the right time (a clock
   * that was behind when hookd started, set right since) and becomes the reference
   * (docs/architecture.md "Clocks") */
  int64_t wall = hookd_now_ms(), mono = hookd_mono_ms();
  bool rebased;
  int64_t now = hookd_bounded_clock_read(&app->retention_clock, wall, mono, &rebased);
  if (rebased)
    HLOG(HOOKD_LOG_WARN, "retention.clock_rebased",
         KV_S("why", "the wall clock has read ahead of the time run for a day: taken as right"));
  if (wall - now >= 1000)
    HLOG(HOOKD_LOG_WARN, "retention.clock_ahead", KV_I("ahead_ms", wall - now),
         KV_S("hint", "the wall clock reads past the time run since the start: retention "
                      "purges by the latter until that has lasted a day"));
  /* what was stamped while the clock read behind looks that much older: kept that much longer */
  int64_t behind = app->retention_clock.behind_max;
  int64_t back = hookd_dispatcher_stepped_back_ms(app->disp);
  if (back > behind) behind = back;
  if (behind != app->retention_behind_logged) {
    app->retention_behind_logged = behind;
    HLOG(HOOKD_LOG_WARN, "retention.clock_was_behind", KV_I("behind_ms", behind),
         KV_S("hint", "records stamped then look older than they are: retention keeps "
                      "everything this much longer until the next start"));
  }
  /* (while it still reads behind, the time read holds that much back already) */
  int64_t held = hookd_bounded_clock_behind(&app->retention_clock, wall, mono);
  if (behind > held) now -= behind - held;
  if (!purge_walk(app, now, used[0], run_inbox_purge, &hookd_m.inbox_purged, "inbox.purged",
                  &app->inbox_walk) ||
      !purge_walk(app, now, used[0], run_object_versions_purge,
                  &hookd_m.versions_purged, "object_versions.purged", NULL))
    return;
  /* (with --event-ttl-s set: without, no event published since expires; one published under an
   * earlier setting expires at its claim) */
  if (app->cfg->event_ttl_s > 0 && !expire_owed(app, now)) return;
  if (used[1] > 0 && !purge_walk(app, now, used[1], run_event_purge, &hookd_m.payloads_purged,
                                 "payload.purged", &app->payload_walk))
    return;
  if (used[2] > 0 &&
      (!purge_walk(app, now, used[2], run_event_expire, &hookd_m.events_expired, "event.expired",
                   &app->expire_walk) ||
       !purge_walk(app, now, used[2], run_lane_versions_purge, &hookd_m.versions_purged,
                   "lane_versions.purged", NULL)))
    return;
  /* the answers kept under an API write's Idempotency-Key: by this clock, not by each write's
   * (a node started days ahead dropped every node's at its next keyed write, a review) */
  if (!purge_walk(app, now, HOOKD_KEPT_MS / 1000, run_answers_purge, &hookd_m.answers_purged,
                  "kept_answers.purged", NULL))
    return;
  /* keys a week past their expiry (listed expired until then; their audit rows stay) */
  if (!purge_walk(app, now, 7 * 86400, run_keys_purge, &hookd_m.keys_purged, "api_keys.purged",
                  NULL))
    return;
  if (!purge_walk(app, now, HOOKD_REPLAY_ITEMS_KEEP_MS / 1000, run_replay_purge,
                  &hookd_m.replay_purged, "replay.items_purged", NULL))
    return;
  if (atomic_load(&hookd_m.retention_failures) != failures) return; /* (not whole) */
  atomic_store(&app->retention_walked_ms, hookd_now_ms());
  HLOG(HOOKD_LOG_DEBUG, "retention.walked", KV_I("inbox_retention_s", used[0]),
       KV_I("payload_retention_s", used[1]), KV_I("event_retention_s", used[2]));
}

/* A shared store's retention indexes (docs/postgres.md "Retention's indexes"): a walk that
 * finds one missing does nothing and asks for it; it is built here, a step at each round of the
 * main loop, concurrently with the writes. true once every one asked for is ready: the walks then
 * run at once, not a minute later. */
static bool indexes_step(hookd_app *app) {
  char err[400];
  int rc = hookd_store_indexes_step(app->store, err, sizeof err);
  if (rc > 0) HLOG(HOOKD_LOG_INFO, "retention.indexes_ready");
  else if (rc < 0)
    HLOG(HOOKD_LOG_WARN, "retention.index_failed", KV_S("error", err),
         KV_S("meanwhile", "the retention walks that need it wait; built again in a minute"));
  return rc > 0;
}

/* *stored (may be NULL): the store's key rows, revoked and refused ones too. */
static int refresh_keys(hookd_app *app, size_t *stored) {
  /* counting the store's rows (the start's bootstrap_key): every one, revoked ones too — read
   * as the reloads read them, a store whose keys were all revoked looked new, and its restart
   * made and printed a new admin key (CI caught it) */
  keys_load k = {.auth = app->auth, .every_row = stored != NULL};
  int rc = hookd_storeq_run_sync(app->store->reader, run_keys_list, &k);
  if (rc == 0) {
    if (stored) *stored = k.n;
    hookd_auth_set_keys(app->auth, k.keys, k.n, k.gen);
    hookd_api_keys_free(k.keys, k.n);
  }
  return rc;
}

/* A failing checkpoint loses nothing but lets the WAL grow until the disk is full
 * (docs/architecture.md, failure windows): logged when it starts, then at most once a minute
 * with the count while it goes on, and when a checkpoint succeeds again. */
static void watch_checkpoints(hookd_app *app) {
  hookd_store_health h;
  hookd_store_health_get(app->store, &h);
  int64_t now = hookd_mono_ms();
  uint64_t fresh = h.checkpoint_failures - app->ckpt_failures_logged;
  if (fresh && (!app->ckpt_failing || now - app->ckpt_logged_ms >= 60000)) {
    HLOG(HOOKD_LOG_ERROR, "store.checkpoint_failed", KV_S("error", h.checkpoint_error),
         KV_I("failures", (int64_t)fresh), KV_I("wal_bytes", h.wal_bytes),
         KV_S("impact", "nothing is lost, but the WAL grows until a checkpoint succeeds"));
    app->ckpt_failures_logged = h.checkpoint_failures;
    app->ckpt_logged_ms = now;
    app->ckpt_failing = true;
  } else if (app->ckpt_failing && !h.checkpoint_failing) {
    HLOG(HOOKD_LOG_INFO, "store.checkpoint_recovered", KV_I("wal_bytes", h.wal_bytes));
    app->ckpt_failures_logged = h.checkpoint_failures;
    app->ckpt_failing = false;
  }
}

static int run_backlog(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  return be->backlog_count ? be->backlog_count(c, HOOKD_BACKLOG_CAP, arg) : HOOKD_STORE_OK;
}

/* The backlog gauge's count (docs/metrics.md hookd_deliveries_backlog), on the scan connection:
 * a count of a large backlog holds up no API read and no write. A failed count leaves the last
 * one, its age growing. */
static void count_backlog(hookd_app *app) {
  int64_t n = 0;
  if (hookd_storeq_run_sync(app->store->scan, run_backlog, &n) != 0) return;
  atomic_store(&app->backlog, n);
  atomic_store(&app->backlog_read_mono_ms, hookd_mono_ms());
}

/* The store's heartbeat (docs/architecture.md "Clocks"). */
typedef struct heartbeat_op {
  int64_t now_ms, last_ms, moved;
  bool at_start;
} heartbeat_op;

#define HEARTBEAT_EVERY_MS 60000
#define HEARTBEAT_GAP_MS (5 * 60000) /* a start after a longer gap moves the failing windows */

static int run_heartbeat(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  heartbeat_op *h = arg;
  return be->heartbeat(c, h->now_ms, h->at_start, HEARTBEAT_GAP_MS, &h->last_ms, &h->moved);
}

/* Stamps the store (a failure is the next minute's to mend: a stamp up to a minute older reads
 * at most a minute's more gap); at the start, says what the stamp found. */
static void heartbeat(hookd_app *app, bool at_start) {
  if (!app->store->be->heartbeat) return; /* (a shared store: its clock guard instead) */
  heartbeat_op h = {.now_ms = hookd_now_ms(), .at_start = at_start};
  if (hookd_storeq_run_sync(app->store->writer, run_heartbeat, &h) != 0 || !at_start ||
      !h.last_ms)
    return;
  if (h.now_ms - h.last_ms > HEARTBEAT_GAP_MS)
    HLOG(h.moved ? HOOKD_LOG_WARN : HOOKD_LOG_INFO, "clock.gap_at_start",
         KV_I("gap_s", (h.now_ms - h.last_ms) / 1000), KV_I("endpoints_moved", h.moved),
         KV_S("why", "hookd did not run for this long, or the clock was set ahead meanwhile: "
                     "the failing windows of the endpoints failing then are moved on by it, so "
                     "the gap does not count toward their disable"));
  else if (h.last_ms - h.now_ms > 60000)
    HLOG(HOOKD_LOG_WARN, "clock.behind_store", KV_I("behind_s", (h.last_ms - h.now_ms) / 1000),
         KV_S("why", "the wall clock reads before this store's last run (a snapshot restored, "
                     "the clock set back, NTP not answered yet): deliveries scheduled on the "
                     "later clock wait that much longer; POST …/deliveries/{id}/replay sends "
                     "one now, a replay job many"));
}

static int run_delete_step(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  return be->delete_step(c, hookd_now_ms(), HOOKD_DELETE_STEP, arg);
}

/* The delete walk (docs/architecture.md "Deletes"): what a delete left of a large backlog is
 * cancelled, then its attempts' URLs cut, one bounded writer op at a time, so another tenant's
 * ack waits for one step at most; it stops between steps for a stop signal (the next start goes
 * on), and after 10 s, for the main loop's other duties (retention), to go on at its next
 * turn. */
static void finish_deletes(hookd_app *app) {
  hookd_delete_step s;
  static int64_t total; /* of the endpoint being walked, across turns (the main thread's only) */
  int64_t until = hookd_mono_ms() + 10000, t0 = hookd_mono_ms();
  while (!stop_pending() && hookd_mono_ms() < until &&
         hookd_storeq_run_sync(app->store->writer, run_delete_step, &s) == 0 && s.found) {
    if (s.urls) { /* a step of the URL walk (docs/architecture.md "Deletes") */
      if (s.finished)
        HLOG(HOOKD_LOG_INFO, "tenant.urls_cut", KV_S("tenant_id", s.tenant_id),
             KV_I("attempts", s.urls_total));
      if (tick_due(app)) refresh_config(app);
      /* paced: the writer's time is the acks' three times out of four (the API shows the URLs
       * cut already; back to back, the steps of 500,000 attempts tripled the p50 of another
       * tenant's acks for 10 s) */
      int64_t took = hookd_mono_ms() - t0, nap_ms = took * 3 < 60 ? took * 3 : 60;
      struct timespec nap = {.tv_sec = 0, .tv_nsec = (long)nap_ms * 1000000L};
      if (!s.finished && nap_ms > 0) nanosleep(&nap, NULL);
      t0 = hookd_mono_ms();
      continue;
    }
    t0 = hookd_mono_ms();
    if (s.counts.cancelled > 0) HOOKD_ADD(cancelled, (uint64_t)s.counts.cancelled);
    total += s.counts.cancelled;
    if (s.finished) {
      HLOG(HOOKD_LOG_INFO, "endpoint.cancel_finished", KV_S("endpoint_id", s.endpoint_id),
           KV_I("cancelled", total));
      total = 0;
    }
    if (tick_due(app)) refresh_config(app);
  }
}

typedef struct stamps {
  int64_t keys, sources;
} stamps;

static int run_stamps(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  stamps *s = arg;
  return be->config_stamps(c, &s->keys, &s->sources);
}

/* One reload round: each table read again when its change stamp moved since its last read
 * (docs/architecture.md "Shutdown"), or whatever the stamps say when forced (a SIGHUP) or when
 * they cannot be read. The stamps are read before the rows: a change committed between the two
 * moves a stamp past the one kept, and is read at the next round. A table whose read failed
 * keeps no stamp (-1): read at the next round. Returns 0, or -1 when a read failed. */
static int reload_config(hookd_app *app, bool forced) {
  stamps s = {-1, -1};
  if (hookd_storeq_run_sync(app->store->reader, run_stamps, &s) != 0) s.keys = s.sources = -1;
  int rc = 0;
  if (forced || s.keys < 0 || s.keys != app->keys_stamp) {
    bool ok = refresh_keys(app, NULL) == 0;
    app->keys_stamp = ok ? s.keys : -1;
    rc = ok ? rc : -1;
  }
  if (forced || s.sources < 0 || s.sources != app->sources_stamp) {
    bool ok = refresh_sources(app) == 0;
    app->sources_stamp = ok ? s.sources : -1;
    rc = ok ? rc : -1;
  }
  return rc;
}

/* The main thread's periodic duties: keys created or revoked by `hookd keys`, and sources
 * changed by another node, take effect (reload_in: a pending SIGHUP is taken here, one reload
 * answers every SIGHUP before it); every TICK_MS the store's checkpoints are watched. Returns
 * whether that round came (the caller's other duties go with it), not a reload alone. */
static bool refresh_config(hookd_app *app) {
  sigset_t h;
  sigemptyset(&h);
  sigaddset(&h, SIGHUP);
  struct timespec none = {0, 0};
  if (sigtimedwait(&h, NULL, &none) == SIGHUP) app->reload_asked = true;
  int64_t now = hookd_mono_ms();
  if (reload_in(app, now) == 0) {
    bool ok = reload_config(app, app->reload_asked) == 0;
    app->refreshed_ms = now;
    app->reload_asked = false;
    app->reload_failed = !ok; /* (a revocation must not wait --reload-interval-ms more) */
  }
  now = hookd_mono_ms();
  if (now - app->ticked_ms < TICK_MS) return false;
  watch_checkpoints(app);
  app->ticked_ms = now;
  return true;
}

/* The change feed of a shared store (its own thread): a change another node committed is read by
 * the dispatcher's rescan at once, a change to the API keys or sources by the main thread (a
 * SIGHUP to it); the feed's link going down and up again is logged once each (while down, the
 * periodic rescan and reload read the changes). */
static void on_store_change(void *arg, int what, int64_t seq) {
  hookd_app *app = arg;
  if (what == HOOKD_STORE_WATCH_PURGED) { /* an event's payload deleted (through any node) */
    hookd_dispatcher_event_purged(app->disp, seq);
    return;
  }
  /* (pending SIGHUPs fold into one: a burst of changes costs one reload or two) */
  if (what == HOOKD_STORE_WATCH_KEYS || what == HOOKD_STORE_WATCH_UP)
    pthread_kill(app->main_thread, SIGHUP);
  if (what == HOOKD_STORE_WATCH_KEYS) return;
  if (what == HOOKD_STORE_WATCH_DOWN &&
      atomic_exchange(&app->watch_state, HOOKD_WATCH_DOWN) != HOOKD_WATCH_DOWN)
    HLOG(HOOKD_LOG_WARN, "store.watch_down",
         KV_S("meanwhile", "changes made through other nodes arrive at the next rescan "
                           "(--rescan-interval-ms); reconnecting"));
  else if (what == HOOKD_STORE_WATCH_UP &&
           atomic_exchange(&app->watch_state, HOOKD_WATCH_LISTENING) == HOOKD_WATCH_DOWN)
    HLOG(HOOKD_LOG_INFO, "store.watch_up");
  /* listening again (or for the first time): what was sent meanwhile is read at once */
  if (what != HOOKD_STORE_WATCH_DOWN)
    hookd_dispatcher_store_changed(app->disp, what == HOOKD_STORE_WATCH_UP);
}

/* The first start of a store with no key and no --api-key creates an admin key and shows it
 * once. A store whose keys were all revoked is not a first start: a new admin key printed there
 * would undo the lockdown (keys are made with `hookd keys create`). */
static int bootstrap_key(hookd_app *app, size_t stored) {
  if (app->cfg->api_key[0] || hookd_auth_count(app->auth) > 0) return 0;
  if (stored > 0) {
    HLOG(HOOKD_LOG_WARN, "auth.no_active_key",
         KV_S("hint", "every API key of this store is revoked or refused: create one with "
                      "`hookd keys create`"));
    return 0;
  }
  char token[64];
  hookd_api_key k = {0};
  char id[HOOKD_ID_MAX];
  if (hookd_auth_generate(token, k.hash) != 0) return -1;
  hookd_id_new("key", hookd_now_ms(), id);
  k.id = id;
  k.role = (char *)"admin";
  k.name = (char *)"bootstrap";
  k.created_ms = hookd_now_ms();
  if (hookd_storeq_run_sync(app->store->writer, run_key_create, &k) != 0) return -1;
  int shown = printf("hookd: created the first admin API key (%s). It is shown only this once:\n"
                     "  %s\n", id, token);
  shown = shown > 0 && fflush(stdout) == 0 && !hookd_auth_stdout_is_null();
  OPENSSL_cleanse(token, sizeof token);
  HLOG(HOOKD_LOG_WARN, "auth.bootstrap_key_created", KV_S("key_id", id));
  if (!shown) /* stdout closed or full: nobody has the key; it opens nothing, and a new one is
               * made with `hookd keys create` */
    HLOG(HOOKD_LOG_ERROR, "auth.bootstrap_key_unshown", KV_S("key_id", id),
         KV_S("hint", "stdout could not be written: revoke this key and create one with "
                      "`hookd keys create`"));
  return refresh_keys(app, NULL);
}

/* A commit the store cannot say happened (an I/O error while committing): leave at once, as
 * PostgreSQL does on a failed fsync. The next start's recovery decides whether it happened;
 * every client of the batch sees its connection close (ambiguous: it retries, and publishes and
 * provider deliveries are deduplicated), none is answered "failed" for what may be written. */
static void on_unknown_commit(const char *error) {
  HLOG(HOOKD_LOG_ERROR, "store.commit_unknown", KV_S("error", error),
       KV_S("action", "exiting; the next start recovers the store"));
  hookd_log_flush(2000); /* the line that says why goes out first */
  _exit(1);
}

/* A sync of the store's files failed (hookd_storeq_lost_sync): pages the kernel was given may
 * never reach the disk, and a later sync would say they had — stop before anything builds on
 * them; the next start copies the WAL into the database again. */
static void on_lost_sync(const char *error) {
  HLOG(HOOKD_LOG_ERROR, "store.sync_failed", KV_S("error", error),
       KV_S("action", "exiting; the next start copies the WAL into the database again"));
  hookd_log_flush(2000); /* the line that says why goes out first */
  _exit(1);
}

/* The store's files were removed or replaced under it: nothing more may be acknowledged. */
static void on_store_gone(const char *what) {
  HLOG(HOOKD_LOG_ERROR, "store.file_gone", KV_S("error", what),
       KV_S("action", "exiting: what was written since is in no file a name reaches; restore the "
                      "store from a backup (a start refuses the remains: docs/architecture.md)"));
  hookd_log_flush(2000);
  _exit(1);
}

/* A store op or batch failed: one log line with the backend's error text (a locked or full
 * disk, I/O errors), at most one a second (a failing store fails every op), the rest counted;
 * and once a batch commits again, store.recovered with the failures not logged since the last
 * line (before, a review, they were never said, nor the recovery). */
static void on_store_failure(const char *queue, const char *what, const char *error) {
  static _Atomic int64_t last_ms;
  static _Atomic uint64_t suppressed;
  if (!error) {
    HLOG(HOOKD_LOG_INFO, "store.recovered", KV_S("queue", queue),
         KV_I("failures_not_logged", atomic_exchange(&suppressed, 0)));
    atomic_store(&last_ms, 0); /* (the next failure said at once) */
    return;
  }
  HOOKD_INC(store_errors);
  int64_t now = hookd_mono_ms(), last = atomic_load(&last_ms);
  if ((last && now - last < 1000) || !atomic_compare_exchange_strong(&last_ms, &last, now)) {
    atomic_fetch_add(&suppressed, 1);
    return;
  }
  HLOG(HOOKD_LOG_ERROR, "store.error", KV_S("queue", queue), KV_S("what", what),
       KV_S("error", error), KV_I("suppressed", atomic_exchange(&suppressed, 0)));
}

/* An upgrade's migrations begin: said before they run (one may take minutes on a large store,
 * and a stop waits for the one under way). */
static void on_store_migrating(int64_t from, int64_t to) {
  HLOG(HOOKD_LOG_INFO, "store.migrating", KV_I("from", from), KV_I("to", to));
}

/* The start waits for a PostgreSQL server not up yet (docs/postgres.md "Failure windows"), for
 * up to wait_s (--store-wait-s). */
static void on_store_waiting(const char *reason, int wait_s) {
  HLOG(HOOKD_LOG_WARN, "startup.store_waiting", KV_S("reason", reason),
       KV_I("wait_s", wait_s));
}

/* A commit whose answer the link to a PostgreSQL store lost, settled by asking the server
 * (docs/postgres.md "Failure windows"): rare, and worth a line each (its batch's clients were
 * answered by what the server said). */
static void on_settled_commit(const char *queue, bool committed) {
  HLOG(HOOKD_LOG_WARN, "store.commit_settled", KV_S("queue", queue),
       KV_S("outcome", committed ? "committed" : "rolled_back"));
}

/* A batch that took 100 ms or more (HOOKD_STOREQ_SLOW_US): every request it held waited that
 * long. Logged at most once a second (the rest counted in the next line's "suppressed" and all
 * in hookd_store_slow_batches_total); commit_ms is the commit and its fsync — the disk's —,
 * run_ms the ops before it. */
static void on_slow_batch(const char *queue, size_t ops, int64_t run_us, int64_t commit_us) {
  static _Atomic int64_t last_ms;
  static _Atomic uint64_t suppressed;
  int64_t now = hookd_mono_ms(), last = atomic_load(&last_ms);
  if ((last && now - last < 1000) || !atomic_compare_exchange_strong(&last_ms, &last, now)) {
    atomic_fetch_add(&suppressed, 1);
    return;
  }
  HLOG(HOOKD_LOG_WARN, "store.slow_batch", KV_S("queue", queue), KV_I("ops", ops),
       KV_I("run_ms", run_us / 1000), KV_I("commit_ms", commit_us / 1000),
       KV_I("suppressed", atomic_exchange(&suppressed, 0)));
}

/* Every connection hookd accepts and every delivery in flight holds a file descriptor. The
 * usual soft limit (1,024) is below the defaults (--max-connections 4,096 + --max-in-flight
 * 1,024): idle inbound connections then took every descriptor and deliveries failed to connect
 * to healthy receivers. The soft limit is raised to the hard one, as a process may; a hard
 * limit below what the configuration needs is logged (raise it: ulimit -Hn, LimitNOFILE=).
 * Returns how many connections libcurl's cache may keep open after use (CURLMOPT_MAXCONNECTS):
 * up to max(--max-in-flight, 1024), but no more than the limit leaves beside the HTTP server's
 * connections and the requests in flight — kept connections to healthy receivers filled a limit
 * of 1,024 that the check below passed (--max-connections 256, --max-in-flight 64), and /healthz
 * waited 18 s for a descriptor (a review). */
static long raise_fd_limit(const hookd_config *cfg) {
  long pool = cfg->max_in_flight > 1024 ? cfg->max_in_flight : 1024;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return pool;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit want = rl;
    want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  /* the store, its WAL, the listener, wake-up pipes, logs: a few dozen */
  rlim_t need = (rlim_t)cfg->max_connections + (rlim_t)cfg->max_in_flight + 64;
  long room = rl.rlim_cur > need ? (long)(rl.rlim_cur - need > 1048576 ? 1048576
                                                                        : rl.rlim_cur - need)
                                 : 0;
  /* 16 at least; past the limit already (warned below), an eighth of it: the HTTP server's
   * connections rarely all come at once, and 16 kept connections lose keep-alive to every busy
   * receiver of a machine whose hard limit is 4,096 (a review) */
  long eighth = (long)(rl.rlim_cur / 8 > 1048576 ? 1048576 : rl.rlim_cur / 8);
  long least = rl.rlim_cur < need && eighth > 16 ? eighth : 16;
  long fitted = room >= pool ? pool : room > least ? room : least < pool ? least : pool;
  if (rl.rlim_cur < need)
    HLOG(HOOKD_LOG_WARN, "startup.fd_limit", KV_I("limit", (int64_t)rl.rlim_cur),
         KV_I("needed", (int64_t)need), KV_I("egress_pool", fitted),
         KV_S("hint", "connections and deliveries past the limit fail: raise the hard limit "
                      "(ulimit -Hn, systemd LimitNOFILE=) or lower --max-connections"));
  else if (fitted < pool)
    HLOG(HOOKD_LOG_INFO, "startup.egress_pool", KV_I("limit", (int64_t)rl.rlim_cur),
         KV_I("egress_pool", fitted), KV_I("wanted", pool),
         KV_S("why", "connections kept open to receivers are fitted to what the descriptor "
                     "limit leaves: raise it to keep more"));
  return fitted;
}

int hookd_serve(const hookd_config *cfg) {
  hookd_log_level = cfg->log_level;
  /* libcurl's global init (at the first handle) reads SSLKEYLOGFILE and writes every
   * connection's TLS secrets there: a debugging aid that, left in a service's environment,
   * lets whoever reads the file decrypt captured deliveries. Removed before any handle exists
   * (and before any thread: unsetenv is not thread-safe). */
  const char *keylog = getenv("SSLKEYLOGFILE");
  if (keylog) {
    HLOG(HOOKD_LOG_WARN, "config.sslkeylogfile_ignored", KV_S("file", keylog),
         KV_S("why", "TLS secrets are not written to disk: the variable is removed"));
    unsetenv("SSLKEYLOGFILE");
  }
  /* the credentials read into cfg, wiped from the environment (/proc/<pid>/environ, a core
   * dump) while no thread runs (unsetenv is not thread-safe); HOOKD_MASTER_KEY kept in memory */
  hookd_config_wipe_secret_env();
  hookd_master_key_env_take();
  long egress_pool = raise_fd_limit(cfg);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  /* (SIGHUP ignored by the parent, as nohup does: its default again, so that the blocked signal
   * stays pending for sigtimedwait instead of being discarded) */
  signal(SIGHUP, SIG_DFL);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* a write past the file-size limit (RLIMIT_FSIZE) fails with EFBIG, a store error answered
   * 503 like a full disk's, instead of killing the daemon */
  signal(SIGXFSZ, SIG_IGN);
  /* a log reader that stops reading must not stop a thread (docs/api.md "Logs"); started with
   * the signals blocked, as every thread of the daemon */
  hookd_log_async_start();

  hookd_app app = {.cfg = cfg, .started_ms = hookd_now_ms(), .started_mono_ms = hookd_mono_ms(),
                   .main_thread = pthread_self()};
  hookd_outbox *outbox = NULL; /* the transactional outbox's relay (docs/outbox.md) */
  pthread_t watch; /* the stop's watchdog (stop_watch), from the main loop on */
  bool watch_started = false;
  app.retention_clock = (hookd_bounded_clock){.wall_ref = app.started_ms,
                                              .mono_ref = hookd_mono_ms(),
                                              .trust_ms = RETENTION_STEP_TRUSTED_MS};
  app.json_limits.max_depth = (size_t)cfg->max_json_depth;
  char err[512] = "";
  int exit_code = 1;
  hookd_store_lockset lock = {-1, -1, NULL};

  /* the egress policy's flags (--egress-allow, --egress-ports, --resolve…) are checked before
   * anything is opened: a typo must not leave a store, a master key and a bootstrap admin key
   * printed by a start that then failed */
  app.dest = hookd_destinations_new(cfg, err, sizeof err);
  if (!app.dest) goto fail;
  /* (said before anything is opened: a variable that replaced the file's store would otherwise
   * be said only once that store was made and migrated, or not at all if it failed) */
  if (cfg->env_typos[0])
    HLOG(HOOKD_LOG_WARN, "config.unknown_variable", KV_S("variables", cfg->env_typos),
         KV_S("why", "no option reads these: a typo of the option's variable named beside each? "
                     "(hookd serve --help lists them)"));
  if (cfg->env_over_file[0])
    HLOG(HOOKD_LOG_WARN, "config.environment_over_file", KV_S("variables", cfg->env_over_file),
         KV_S("why", "the environment's values replace the --config file's (flag > environment "
                     "> file): unset them, or give the value there"));
  if (cfg->argv_secrets[0]) /* (their values overwritten in argv once read: config.c) */
    HLOG(HOOKD_LOG_WARN, "config.secret_in_argv", KV_S("options", cfg->argv_secrets),
         KV_S("why", "a command line is visible to every local user until it is read: give "
                     "credentials through the environment or a --config file"));
  if (hookd_keyring_check(cfg, err, sizeof err) != 0) goto fail; /* (the same for the key) */
  /* The listener opens before the store: recovering a large WAL or running a migration may take
   * a while, and a supervisor's liveness probe (/healthz) must be answered meanwhile; every
   * other route answers 503 not_ready until the start is complete ("listening" is logged).
   * Before the store's lock, too, which creates the store's file: a start refused its address
   * must not leave an empty store behind. */
  hookd_server_config hc = {.host = cfg->listen_host,
                            .port = cfg->listen_port,
                            .idle_timeout_s = cfg->header_timeout_s,
                            .request_timeout_s = cfg->request_timeout_s,
                            .max_connections = cfg->max_connections,
                            .max_connections_per_ip = cfg->max_connections_per_ip,
                            .max_body = cfg->max_body_bytes,
                            .max_buffered = cfg->max_buffered_bytes,
                            .max_head_bytes = cfg->max_header_bytes,
                            .max_headers = cfg->max_headers,
                            .max_url_len = cfg->max_url_len,
                            .gate = hookd_api_gate,
                            .too_large = hookd_api_too_large,
                            .handler = hookd_api_handle,
                            .app = &app};
  app.srv = hookd_server_start(&hc, err, sizeof err);
  if (!app.srv) goto fail;
  HLOG(HOOKD_LOG_INFO, "startup.bound", KV_S("host", cfg->listen_host),
       KV_I("port", hookd_server_port(app.srv))); /* (port 0: the one the OS chose) */
  if (hookd_store_lock(cfg->store_url, &lock, err, sizeof err) != 0) goto fail;
  /* a stop asked for while the start waits for another process to let go of the store, or for
   * a PostgreSQL server to accept connections, ends it at once, cleanly (nothing was started):
   * a supervisor's grace period is shorter than the 30 s wait */
  /* (the store refuses another key's secrets, or secrets with no usable key, before migrating) */
  char key_id[HOOKD_KEY_ID_LEN], no_key[1024] = "";
  bool key_known = hookd_keyring_expected_id(cfg, key_id, no_key, sizeof no_key) == 0;
  hookd_store_config sc = {
      .url = cfg->store_url, .max_batch = cfg->store_batch, .stop_requested = stop_pending,
      .node_id = cfg->node_id, .wait_s = cfg->store_wait_s, .waiting = on_store_waiting,
      .migrating = on_store_migrating,
      .expect_key_id = key_known ? key_id : "", .no_key_why = no_key};
  hookd_storeq_set_unknown_commit_handler(on_unknown_commit);
  hookd_storeq_set_lost_sync_handler(on_lost_sync);
  hookd_storeq_set_store_gone_handler(on_store_gone);
  hookd_storeq_set_failure_handler(on_store_failure);
  hookd_storeq_set_settled_handler(on_settled_commit);
  hookd_storeq_set_slow_handler(on_slow_batch);
  int orc = hookd_store_open(&sc, &app.store, err, sizeof err);
  if (orc == HOOKD_STORE_STOPPED) {
    HLOG(HOOKD_LOG_INFO, "startup.stopped", KV_S("reason", err));
    exit_code = 0;
    goto fail;
  }
  if (orc != 0) goto fail;
  if (app.store->schema_to != app.store->schema_from) /* an upgrade (a new store: from 0) */
    HLOG(HOOKD_LOG_INFO, "store.migrated", KV_I("from", app.store->schema_from),
         KV_I("to", app.store->schema_to), KV_I("ms", app.store->migrate_ms));
  if (app.store->not_durable[0]) /* (said at every start: a test server's, never production's) */
    HLOG(HOOKD_LOG_WARN, "store.not_durable", KV_S("why", app.store->not_durable));
  unsigned store_mode = 0; /* a store made by an older hookd, or restored under umask 022 */
  if (!strncmp(cfg->store_url, "sqlite:", 7) &&
      hookd_keyring_file_loose(cfg->store_url + 7, &store_mode)) {
    char octal[8];
    snprintf(octal, sizeof octal, "%04o", store_mode);
    HLOG(HOOKD_LOG_WARN, "store.file_readable", KV_S("file", cfg->store_url + 7),
         KV_S("mode", octal),
         KV_S("why", "it holds payloads and people's data: readable by group or others; chmod "
                     "600 it (its -wal and -shm files take its mode)"));
  }
  if (cfg->config_loose_mode) { /* (as the master key file's: keyring.c) */
    char octal[8];
    snprintf(octal, sizeof octal, "%04o", cfg->config_loose_mode);
    HLOG(HOOKD_LOG_WARN, "config.file_readable", KV_S("file", cfg->config_loose_path),
         KV_S("mode", octal),
         KV_S("why", "it holds a credential: readable by group or others; chmod 600 it"));
  }
  if (hookd_keyring_load(cfg, app.store, &app.keyring, err, sizeof err) != 0) goto fail;
  /* held in app.keyring from now on: the variable's copy (hookd_master_key_env_take) wiped */
  hookd_master_key_env_forget();
  if (hookd_cursor_key_derive(app.keyring.key.key, sizeof app.keyring.key.key,
                              &app.cursor_key) != 0) {
    snprintf(err, sizeof err, "cannot derive the list cursor key");
    goto fail;
  }
  app.auth = hookd_auth_new(cfg->api_key);
  /* /metrics without a token answers whoever reaches the port: on loopback, the host's own;
   * listening wider (providers must reach /in/), every tenant's endpoint ids and health */
  const char *lh = cfg->listen_host;
  if (!cfg->metrics_token[0] && !hookd_config_loopback(cfg))
    HLOG(HOOKD_LOG_WARN, "config.metrics_public", KV_S("listen", lh),
         KV_S("advice", "set --metrics-token (HOOKD_METRICS_TOKEN): /metrics answers anyone "
                        "who reaches this address"));
  /* hookd speaks plain HTTP: beyond loopback, keys and secrets cross the network as they are
   * unless a proxy in front ends TLS (an operator review: only /metrics was said) */
  if (!hookd_config_loopback(cfg))
    HLOG(HOOKD_LOG_INFO, "config.plain_http", KV_S("listen", lh),
         KV_S("advice", "hookd's listener is plain HTTP: API keys, the secrets the API shows and "
                        "payloads cross the network in clear unless TLS ends in front of it (a "
                        "reverse proxy or load balancer on this host or its private network)"));
  /* an admin key given by flag lives in memory only (no `keys revoke`): a short one is a
   * guessable admin password — said at every start (generated keys have 32 random bytes), and
   * refused beyond loopback (hookd_config_load) */
  if (cfg->api_key[0] && strlen(cfg->api_key) < 16)
    HLOG(HOOKD_LOG_WARN, "config.weak_api_key", KV_I("length", (int64_t)strlen(cfg->api_key)),
         KV_S("advice", "use 16 characters or more, e.g. `openssl rand -hex 24`"));
  size_t stored_keys = 0;
  if (!app.auth || refresh_keys(&app, &stored_keys) != 0 ||
      bootstrap_key(&app, stored_keys) != 0) {
    snprintf(err, sizeof err, "cannot load API keys");
    goto fail;
  }
  app.sources = hookd_source_cache_new(&app.keyring);
  app.rejections = hookd_rejections_new(app.started_ms);
  if (!app.sources || !app.rejections || refresh_sources(&app) != 0) {
    snprintf(err, sizeof err, "cannot load inbound sources");
    goto fail;
  }
  app.refreshed_ms = app.ticked_ms = hookd_mono_ms(); /* both read: the next reload is due later */
  app.keys_stamp = app.sources_stamp = -1;            /* (read before the stamps: read again) */
  /* a node stopped while holding the writer lock holds every node's writes up to 10 s
   * (docs/postgres.md "Failure windows"): a lease margin below that lets another node's sweep
   * take leases whose answers (2xx) were waiting to be written, and send them again */
  if (hookd_store_is_postgres(cfg->store_url) && cfg->lease_margin_ms < 10000)
    HLOG(HOOKD_LOG_WARN, "config.lease_margin_short", KV_I("lease_margin_ms", cfg->lease_margin_ms),
         KV_S("why", "below the 10 s a stopped node may hold the shared store's writes: a "
                     "delivery answered meanwhile may be sent again"));

  hookd_dispatcher_config dc = {
      .store = app.store,
      .node_id = cfg->node_id,
      .max_in_flight = cfg->max_in_flight,
      .tenant_max_in_flight = cfg->tenant_max_in_flight,
      .disable_failing_after_ms = cfg->disable_failing_after_s * 1000,
      .ops_tenant = cfg->ops_tenant[0] ? cfg->ops_tenant : NULL,
      .shutdown_grace_ms = (int64_t)cfg->shutdown_grace_s * 1000,
      .max_claimed_bytes = (int64_t)cfg->max_claimed_bytes,
      .max_body_bytes = (int64_t)cfg->max_body_bytes,
      .breaker = {.window_ms = cfg->breaker_window_ms,
                  .min_requests = cfg->breaker_min_requests,
                  .failure_percent = cfg->breaker_failure_percent,
                  .cooldown_ms = cfg->breaker_cooldown_ms,
                  .probes = 1},
      .lease_margin_ms = cfg->lease_margin_ms,
      .max_claim_ops = cfg->max_store_queue / 4 > 16 ? cfg->max_store_queue / 4 : 16,
      .rescan_interval_ms = cfg->rescan_interval_ms,
      .shared_store = hookd_store_is_postgres(cfg->store_url),
      .max_timeout_ms = cfg->max_timeout_ms,
      .keyring = &app.keyring,
      .svix_headers = cfg->svix_headers,
      .egress = {.connect_timeout_ms = cfg->connect_timeout_ms,
                 .conn_max_age_s = cfg->egress_conn_max_age_s,
                 .max_response_bytes = cfg->max_response_bytes,
                 .excerpt_bytes = HOOKD_EXCERPT_READ,
                 .user_agent = "hookd/" HOOKD_VERSION,
                 .max_connects = egress_pool,
                 .addr_check = hookd_destinations_addr_check,
                 .addr_check_ctx = app.dest,
                 .url_check = hookd_destinations_url_check,
                 .proxy = cfg->egress_proxy[0] ? cfg->egress_proxy : NULL,
                 .ca_file = cfg->egress_ca_file[0] ? cfg->egress_ca_file : NULL,
                 .resolve_list = hookd_destinations_resolve_list,
                 .resolve_ctx = app.dest},
  };
  heartbeat(&app, true); /* before the dispatcher reads the failing windows */
  app.disp = hookd_dispatcher_start(&dc, err, sizeof err);
  if (!app.disp) goto fail;
  /* a shared store's changes reach the dispatcher at once (docs/postgres.md "Several nodes") */
  if (!cfg->no_change_feed &&
      hookd_store_watch(app.store, on_store_change, &app, err, sizeof err) < 0)
    goto fail;
  /* (a shared store: jobs other nodes confirmed or left are stepped within a rescan's time) */
  app.replayer = hookd_replayer_start(
      app.store, app.disp, hookd_store_is_postgres(cfg->store_url) ? cfg->rescan_interval_ms : 0,
      err, sizeof err);
  if (!app.replayer) goto fail;
  outbox = hookd_outbox_start(&app, err, sizeof err); /* (none unless --outbox-url) */
  if (!outbox && err[0]) goto fail;

  atomic_store(&app.started, true); /* every route may run now */
  atomic_store(&app.ready, true);
  char store_shown[300];
  hookd_store_url_shown(cfg->store_url, store_shown, sizeof store_shown);
  HLOG(HOOKD_LOG_INFO, "listening", KV_S("host", cfg->listen_host),
       KV_I("port", hookd_server_port(app.srv)), KV_S("store", store_shown),
       KV_S("node_id", cfg->node_id), KV_S("version", HOOKD_VERSION));
  /* an event deleted frees its id and Idempotency-Keys: a producer's retry, or an outbox relaying
   * again, after the window is a new event (docs/api.md "Event retention") */
  if (cfg->event_retention_s > 0 && cfg->event_retention_s < HOOKD_DEDUP_FLOOR_S)
    HLOG(HOOKD_LOG_WARN, "config.short_event_retention",
         KV_I("event_retention_s", cfg->event_retention_s),
         KV_I("dedup_floor_s", HOOKD_DEDUP_FLOOR_S));

  int64_t next_purge = 0, next_backlog = 0;
  int64_t next_heartbeat = hookd_mono_ms() + HEARTBEAT_EVERY_MS;
  watch_started = pthread_create(&watch, NULL, stop_watch, &app) == 0;
  for (;;) {
    int64_t now = hookd_mono_ms(), wait = TICK_MS - (now - app.ticked_ms);
    int64_t reload = reload_in(&app, now);
    if (reload < wait) wait = reload;
    if (wait < 0) wait = 0;
    struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
    int sig = sigtimedwait(&sigs, NULL, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      atomic_store(&app.stop_began_ms, hookd_mono_ms());
      /* not ready and closing to new requests before it says so: a request sent once the line
       * is out is refused not_ready, not taken (a test's keep-alive request met the moment
       * between and waited on a locked store: 503 storage_unavailable) */
      atomic_store(&app.ready, false);
      hookd_server_quiesce(app.srv);
      HLOG(HOOKD_LOG_INFO, "shutdown.begin", KV_S("signal", sig == SIGTERM ? "TERM" : "INT"));
      break;
    }
    if (sig == SIGHUP) { /* (said: an operator sees it taken) */
      app.reload_asked = true;
      HLOG(HOOKD_LOG_INFO, "reload.signal",
           KV_S("action", "API keys and sources read again, the backlog counted again"));
      count_backlog(&app); /* at once (a round that only reloads does no other duty) */
      next_backlog = hookd_mono_ms() + HOOKD_BACKLOG_EVERY_MS;
    }
    if (!refresh_config(&app)) continue; /* (a reload only) */
    finish_deletes(&app);
    if (indexes_step(&app)) next_purge = 0; /* (the walks that waited for them go now) */
    hookd_bounded_clock_note(&app.retention_clock, hookd_now_ms(), hookd_mono_ms());
    if (hookd_mono_ms() >= next_purge) {
      purge_old(&app);
      next_purge = hookd_mono_ms() + 60 * 1000;
    }
    if (hookd_mono_ms() >= next_heartbeat) {
      heartbeat(&app, false);
      next_heartbeat = hookd_mono_ms() + HEARTBEAT_EVERY_MS;
    }
    if (hookd_mono_ms() >= next_backlog) {
      count_backlog(&app);
      next_backlog = hookd_mono_ms() + HOOKD_BACKLOG_EVERY_MS;
    }
  }
  exit_code = 0;

fail:
  hookd_master_key_env_forget(); /* (a start that failed before the keyring took it) */
  if (exit_code != 0 && err[0]) {
    HLOG(HOOKD_LOG_ERROR, "startup.failed", KV_S("error", err));
    if (isatty(STDERR_FILENO)) fprintf(stderr, "hookd: %s\n", err); /* the log is JSON lines */
  }
  atomic_store(&app.ready, false);
  if (app.srv) {
    hookd_server_quiesce(app.srv);
    int64_t deadline = hookd_mono_ms() + STOP_DRAIN_MS;
    while (hookd_server_suspended(app.srv) > 0 && hookd_mono_ms() < deadline) {
      /* a long scan (a list by type, a replay job's snapshot or breakdown) is cut short: its
       * request gets a 503 to retry elsewhere or later, and the drain waits for commits only */
      hookd_store_interrupt_scans(app.store);
      struct timespec nap = {0, 10 * 1000 * 1000};
      nanosleep(&nap, NULL); /* bounded drain: requests waiting on a commit */
    }
    int waiting = hookd_server_suspended(app.srv);
    if (waiting > 0) {
      /* The store has not answered for 30 s. Their replies would reach a freed server, so leave
       * now without freeing anything: none of them was acknowledged, and what did commit is
       * in the store (the next start recovers the WAL). */
      HLOG(HOOKD_LOG_ERROR, "shutdown.store_stalled", KV_I("requests_waiting", (int64_t)waiting));
      hookd_log_flush(2000); /* the line that says why goes out first */
      _exit(1);
    }
    /* the answers just given go out before the daemon stops (that closes every connection: a
     * client of a committed publish would see it cut, not its 202); bounded, a client that does
     * not read cannot hold the stop */
    int64_t flushed_by = hookd_mono_ms() + STOP_FLUSH_MS;
    while (hookd_server_unsent(app.srv) > 0 && hookd_mono_ms() < flushed_by) {
      struct timespec nap = {0, 5 * 1000 * 1000};
      nanosleep(&nap, NULL);
    }
    hookd_server_stop(app.srv);
  }
  if (hookd_outbox_stop(outbox)) { /* (before the writer and the dispatcher its publishes use) */
    /* publishes the store never answered within the grace: their outcomes would reach the
     * freed dispatcher. Nothing of them was acknowledged; their rows were not deleted */
    HLOG(HOOKD_LOG_ERROR, "shutdown.store_stalled",
         KV_S("why", "the outbox relay's publishes did not return within the shutdown grace"));
    hookd_log_flush(2000); /* the line that says why goes out first */
    _exit(1);
  }
  hookd_replayer_stop(app.replayer); /* before the dispatcher it hints */
  hookd_store_unwatch(app.store);    /* likewise */
  int lost = hookd_dispatcher_stop(app.disp);
  if (lost < 0) {
    /* a store op that never returned (a PostgreSQL write waiting on a lock): nothing it holds
     * was acknowledged; what committed is in the store */
    HLOG(HOOKD_LOG_ERROR, "shutdown.store_stalled",
         KV_S("why", "the dispatcher's store writes did not return within the grace period "
                     "and 30 s more"));
    hookd_log_flush(2000); /* the line that says why goes out first */
    _exit(1);
  }
  if (lost > 0) { /* a supervisor must see a shutdown that did not complete */
    HLOG(HOOKD_LOG_ERROR, "shutdown.incomplete", KV_I("writes_lost", lost),
         KV_S("why", "the store failed: after the restart their deliveries are sent again, or "
                     "held unknown for a destination that is not idempotent"));
    exit_code = 1;
  }
  if (app.disp) heartbeat(&app, false); /* a stop's stamp: the next start reads the gap by it */
  hookd_destinations_free(app.dest);
  hookd_source_cache_free(app.sources);
  hookd_rejections_free(app.rejections);
  hookd_store_health last;
  hookd_store_close_checked(app.store, &last);
  if (last.checkpoint_failing) /* the next start copies the WAL before writing, or refuses */
    HLOG(HOOKD_LOG_ERROR, "store.checkpoint_failed", KV_S("error", last.checkpoint_error),
         KV_I("wal_bytes", last.wal_bytes),
         KV_S("impact", "the WAL is kept: the next start copies it into the database first"));
  hookd_auth_free(app.auth);
  OPENSSL_cleanse(&app.keyring, sizeof app.keyring);
  OPENSSL_cleanse(&app.cursor_key, sizeof app.cursor_key);
  hookd_store_unlock(&lock); /* after the store: see hookd_store_lock */
  if (watch_started) {
    atomic_store(&app.stop_watch_done, true);
    pthread_join(watch, NULL);
  }
  if (exit_code == 0) HLOG(HOOKD_LOG_INFO, "shutdown.complete", KV_I("exit", 0));
  hookd_log_async_stop();
  return exit_code;
}

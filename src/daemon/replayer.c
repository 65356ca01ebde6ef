/* replayer.c — runs replay jobs (docs/replay.md).
 *
 * One thread. Each step is one writer op (store backend's replay_step): every running job
 * whose token bucket allows moves its next items back to pending (or records why one was
 * skipped), and jobs left with nothing complete. The thread then hints the dispatcher for the
 * endpoints touched and sleeps until the earliest job's next item is due (50 ms – 1 s), or
 * until a confirm or resume wakes it; with no job running it sleeps until woken (a shared store:
 * for idle_ms at most, so that it steps the jobs other nodes confirmed or left). The buckets
 * live in the job rows, so the rate holds across restarts. */
#include "daemon/replayer.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "store/storeq.h"

#define STEP_MIN_MS 50   /* at most 20 steps a second however fast the jobs */
#define STEP_MAX_MS 1000 /* and a look at least every second while one runs */
#define RETRY_MS 1000    /* after a failed step (the store) */

struct hookd_replayer {
  hookd_store *store;
  hookd_dispatcher *disp;
  int idle_ms; /* > 0: the longest sleep with no job running */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  bool woken, stopping;
};

static int run_step(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  return be->replay_step(c, hookd_now_ms(), arg);
}

/* Returns how long to sleep: -1 = until woken. */
static int64_t step(hookd_replayer *r) {
  hookd_replay_step_res res = {0};
  int rc = hookd_storeq_run_sync(r->store->writer, run_step, &res);
  if (rc) {
    hookd_replay_step_res_free(&res);
    HLOG(HOOKD_LOG_WARN, "replay.step_failed", KV_S("error", hookd_store_strerror(rc)));
    return RETRY_MS;
  }
  for (size_t i = 0; i < res.n_hints; i++)
    hookd_dispatcher_hint(r->disp, res.hints[i].endpoint_id, res.hints[i].due_ms);
  atomic_fetch_add_explicit(&hookd_m.replays, (uint64_t)res.replayed, memory_order_relaxed);
  atomic_fetch_add_explicit(&hookd_m.replay_skipped, (uint64_t)res.skipped,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&hookd_m.replay_recalled, (uint64_t)res.recalled,
                            memory_order_relaxed);
  for (size_t i = 0; i < res.n_completed; i++)
    HLOG(HOOKD_LOG_INFO, "replay.completed", KV_S("replay_id", res.completed[i]));
  int64_t wait = r->idle_ms > 0 ? r->idle_ms : -1;
  if (res.next_ms) {
    wait = res.next_ms - hookd_now_ms();
    if (wait < STEP_MIN_MS) wait = STEP_MIN_MS;
    if (wait > STEP_MAX_MS) wait = STEP_MAX_MS;
  }
  hookd_replay_step_res_free(&res);
  return wait;
}

static void *main_loop(void *arg) {
  hookd_replayer *r = arg;
  pthread_mutex_lock(&r->mu);
  while (!r->stopping) {
    r->woken = false;
    pthread_mutex_unlock(&r->mu);
    int64_t wait = step(r);
    pthread_mutex_lock(&r->mu);
    if (wait < 0) {
      while (!r->woken && !r->stopping) pthread_cond_wait(&r->cv, &r->mu);
      continue;
    }
    struct timespec ts = hookd_mono_deadline(wait);
    while (!r->woken && !r->stopping) {
      if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != 0) break; /* timed out */
    }
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

hookd_replayer *hookd_replayer_start(hookd_store *store, hookd_dispatcher *disp, int idle_ms,
                                     char *err, size_t errlen) {
  hookd_replayer *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "replayer: out of memory");
    return NULL;
  }
  r->store = store;
  r->disp = disp;
  r->idle_ms = idle_ms;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&r->thread, NULL, main_loop, r) != 0) {
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
    snprintf(err, errlen, "replayer: cannot start its thread");
    return NULL;
  }
  pthread_setname_np(r->thread, "hookd-replay");
  return r;
}

void hookd_replayer_wake(hookd_replayer *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->woken = true;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

void hookd_replayer_stop(hookd_replayer *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->stopping = true;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
  pthread_join(r->thread, NULL);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

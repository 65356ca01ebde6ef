/* test_destination.c — the resolver pool of destination checks (destination.c): a bounded
 * queue, so that names whose DNS never answers cannot queue every other check behind them, and
 * shared out by asker, so that one asker's cannot take every thread or the whole queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "daemon/config.h"
#include "daemon/destination.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int held, released, checked, busy;

/* Holds its resolver thread until released, as a lookup that never answers would. */
static void done_hold(hookd_dest_check *c, void *arg) {
  (void)c, (void)arg;
  pthread_mutex_lock(&mu);
  held++;
  pthread_cond_broadcast(&cv);
  while (!released) pthread_cond_wait(&cv, &mu);
  checked++;
  pthread_mutex_unlock(&mu);
}

static void done_count(hookd_dest_check *c, void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  if (c->rc == HOOKD_DEST_BUSY) busy++;
  else checked++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

/* The counters reset, and a pool from the defaults (with the test name pinned: resolved on a
 * resolver thread, no DNS). */
static hookd_destinations *new_pool(hookd_config *cfg) {
  pthread_mutex_lock(&mu);
  held = released = checked = busy = 0;
  pthread_mutex_unlock(&mu);
  hookd_config_defaults(cfg);
  cfg->resolve[cfg->n_resolve++] = strdup("hook.test:443:93.184.216.34");
  char err[256];
  hookd_destinations *d = hookd_destinations_new(cfg, err, sizeof err);
  assert_non_null(d);
  return d;
}

static void queue_is_bounded(void **s) {
  (void)s;
  hookd_config cfg;
  hookd_destinations *d = new_pool(&cfg);
  enum { N = 4 + HOOKD_DEST_QUEUE_MAX + 1 };
  hookd_dest_check *checks = calloc(N, sizeof *checks);
  for (int i = 0; i < N; i++) {
    checks[i].url = strdup("https://hook.test/hook"); /* pinned: no DNS in the test */
    checks[i].done = i < 4 ? done_hold : done_count;
    /* (askers enough that neither their threads nor their places in the queue bind here) */
    snprintf(checks[i].who, sizeof checks[i].who, "key_%d",
             i < 4 ? i : 4 + (i - 4) % (HOOKD_DEST_QUEUE_MAX / HOOKD_DEST_WHO_QUEUED + 1));
  }
  /* every resolver thread held */
  for (int i = 0; i < 4; i++) hookd_destinations_check_async(d, &checks[i]);
  pthread_mutex_lock(&mu);
  while (held < 4) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  /* the queue fills; the next check is answered at once, busy */
  for (int i = 4; i < N - 1; i++) hookd_destinations_check_async(d, &checks[i]);
  hookd_destinations_check_async(d, &checks[N - 1]);
  pthread_mutex_lock(&mu);
  assert_int_equal(busy, 1);
  assert_int_equal(checked, 0);
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  hookd_destinations_free(d); /* the threads finish the queue before they stop */
  assert_int_equal(checked, N - 1);
  for (int i = 0; i < N; i++) {
    if (i < N - 1) assert_int_equal(checks[i].rc, 0);
    free(checks[i].url);
  }
  free(checks);
  hookd_config_free(&cfg);
}

/* One asker whose checks hold (names that never answer) has two of the four threads and its
 * places in the queue; a second such asker gets one thread, not the last idle one: another
 * asker's check goes through meanwhile, and the first holder's next check past its places is
 * answered busy at once. */
static void shared_out_by_asker(void **s) {
  (void)s;
  hookd_config cfg;
  hookd_destinations *d = new_pool(&cfg);
  enum { HOG = HOOKD_DEST_WHO_RUNNING + HOOKD_DEST_WHO_QUEUED + 1 };
  hookd_dest_check hog[HOG], hog2[2], other;
  memset(hog, 0, sizeof hog);
  memset(hog2, 0, sizeof hog2);
  memset(&other, 0, sizeof other);
  for (int i = 0; i < HOG; i++) {
    hog[i].url = strdup("https://hook.test/hook");
    hog[i].done = i < HOOKD_DEST_WHO_RUNNING ? done_hold : done_count;
    snprintf(hog[i].who, sizeof hog[i].who, "key_hog");
  }
  for (int i = 0; i < HOOKD_DEST_WHO_RUNNING; i++) hookd_destinations_check_async(d, &hog[i]);
  pthread_mutex_lock(&mu);
  while (held < HOOKD_DEST_WHO_RUNNING) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  for (int i = HOOKD_DEST_WHO_RUNNING; i < HOG; i++) hookd_destinations_check_async(d, &hog[i]);
  pthread_mutex_lock(&mu);
  assert_int_equal(busy, 1); /* its last: past its places in the queue */
  assert_int_equal(checked, 0); /* the others wait for its held threads, not on a free one */
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < 2; i++) {
    hog2[i].url = strdup("https://hook.test/hook");
    hog2[i].done = done_hold;
    snprintf(hog2[i].who, sizeof hog2[i].who, "key_hog2");
    hookd_destinations_check_async(d, &hog2[i]);
  }
  pthread_mutex_lock(&mu);
  while (held < HOOKD_DEST_WHO_RUNNING + 1) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  other.url = strdup("https://hook.test/hook");
  other.done = done_count;
  snprintf(other.who, sizeof other.who, "key_other");
  hookd_destinations_check_async(d, &other);
  /* the other asker: on the thread left free (within 10 s, else the rule kept none: a failure,
   * not a hang) */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&mu);
  while (checked < 1 && pthread_cond_timedwait(&cv, &mu, &until) == 0) {
  }
  int got = checked;
  pthread_mutex_unlock(&mu);
  assert_int_equal(got, 1);
  assert_int_equal(other.rc, 0);
  pthread_mutex_lock(&mu);
  assert_int_equal(held, HOOKD_DEST_WHO_RUNNING + 1); /* the second holder's second waits */
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  hookd_destinations_free(d);
  assert_int_equal(checked, HOG + 2); /* all but the busy one; the other asker's; hog2's */
  for (int i = 0; i < HOG; i++) free(hog[i].url);
  for (int i = 0; i < 2; i++) free(hog2[i].url);
  free(other.url);
  hookd_config_free(&cfg);
}

/* A URL with nothing to resolve (an address for host, or refused by its shape) is judged at
 * once, on the caller's thread, taking no place in the queue. */
static void nothing_to_resolve_is_judged_at_once(void **s) {
  (void)s;
  hookd_config cfg;
  hookd_destinations *d = new_pool(&cfg);
  /* every thread held, and the asker's places in the queue all taken: a check that needed
   * either would wait, or be answered busy */
  enum { HOLD = 4, MINE = HOOKD_DEST_WHO_QUEUED };
  hookd_dest_check held_c[HOLD], mine[MINE];
  memset(held_c, 0, sizeof held_c);
  memset(mine, 0, sizeof mine);
  for (int i = 0; i < HOLD; i++) {
    held_c[i].url = strdup("https://hook.test/hook");
    held_c[i].done = done_hold;
    snprintf(held_c[i].who, sizeof held_c[i].who, "h%d", i);
    hookd_destinations_check_async(d, &held_c[i]);
  }
  pthread_mutex_lock(&mu);
  while (held < HOLD) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < MINE; i++) {
    mine[i].url = strdup("https://hook.test/hook");
    mine[i].done = done_count;
    snprintf(mine[i].who, sizeof mine[i].who, "t");
    hookd_destinations_check_async(d, &mine[i]);
  }
  hookd_dest_check ok = {.url = strdup("https://93.184.216.34/hook"), .done = done_count},
                   bad = {.url = strdup("https://127.0.0.1/hook"), .done = done_count};
  snprintf(ok.who, sizeof ok.who, "t");
  snprintf(bad.who, sizeof bad.who, "t");
  hookd_destinations_check_async(d, &ok);
  hookd_destinations_check_async(d, &bad);
  pthread_mutex_lock(&mu);
  assert_int_equal(busy, 0);    /* no place in the queue taken */
  assert_int_equal(checked, 2); /* both judged, on this thread: no resolver thread is free */
  pthread_mutex_unlock(&mu);
  assert_int_equal(ok.rc, 0);
  assert_int_equal(bad.rc, -1);
  assert_string_equal(bad.err.rule, "loopback");
  pthread_mutex_lock(&mu);
  released = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  hookd_destinations_free(d);
  assert_int_equal(checked, 2 + MINE + HOLD);
  for (int i = 0; i < HOLD; i++) free(held_c[i].url);
  for (int i = 0; i < MINE; i++) free(mine[i].url);
  free(ok.url);
  free(bad.url);
  hookd_config_free(&cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(queue_is_bounded),
                                     cmocka_unit_test(shared_out_by_asker),
                                     cmocka_unit_test(nothing_to_resolve_is_judged_at_once)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

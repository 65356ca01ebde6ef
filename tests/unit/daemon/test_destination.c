/* test_destination.c — the resolver pool of destination checks (destination.c): a bounded
 * queue, so that names whose DNS never answers cannot queue every other check behind them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
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
  pthread_mutex_unlock(&mu);
}

static void queue_is_bounded(void **s) {
  (void)s;
  hookd_config cfg;
  hookd_config_defaults(&cfg);
  char err[256];
  hookd_destinations *d = hookd_destinations_new(&cfg, err, sizeof err);
  assert_non_null(d);
  enum { N = 4 + HOOKD_DEST_QUEUE_MAX + 1 };
  hookd_dest_check *checks = calloc(N, sizeof *checks);
  for (int i = 0; i < N; i++) {
    checks[i].url = strdup("https://93.184.216.34/hook"); /* a literal: no DNS in the test */
    checks[i].done = i < 4 ? done_hold : done_count;
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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(queue_is_bounded)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

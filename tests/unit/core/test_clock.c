/* test_clock.c — retention's bounded "now": a step forward of the wall clock does not move it
 * ahead of the monotonic time run since the reference; a step back is taken as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/clock.h"

static void bounded_by_the_monotonic_clock(void **st) {
  (void)st;
  const int64_t wall0 = 1796000000000, mono0 = 5000, day = 86400000;
  /* no step: the wall clock as it reads */
  assert_int_equal(hookd_clock_bounded(wall0 + 60000, mono0 + 60000, wall0, mono0),
                   wall0 + 60000);
  /* a step forward of five days a minute in: a minute on, not five days */
  assert_int_equal(hookd_clock_bounded(wall0 + 5 * day + 60000, mono0 + 60000, wall0, mono0),
                   wall0 + 60000);
  /* a step back of an hour: taken (retention waits longer; nothing goes early) */
  assert_int_equal(hookd_clock_bounded(wall0 - 3600000 + 60000, mono0 + 60000, wall0, mono0),
                   wall0 - 3600000 + 60000);
  /* the live clocks: bounded by a reference read now, the wall clock within a few ms */
  int64_t w = hookd_now_ms(), m = hookd_mono_ms();
  int64_t b = hookd_clock_bounded(hookd_now_ms(), hookd_mono_ms(), w, m);
  assert_true(b >= w && b - w < 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(bounded_by_the_monotonic_clock)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

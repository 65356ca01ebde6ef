/* test_clock.c — retention's bounded "now": a step forward of the wall clock does not move it
 * ahead of the monotonic time run since the reference (until it has lasted an hour: then it is
 * the reference); a step back is taken as it is. */
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

/* A step ahead is held back for trust_ms; one that lasts becomes the reference (a clock that
 * was behind at the start and was set right); one set back before that never moved it. */
static void a_lasting_step_becomes_the_reference(void **st) {
  (void)st;
  const int64_t wall0 = 1796000000000, mono0 = 5000, hour = 3600000, day = 24 * hour;
  hookd_bounded_clock c = {.wall_ref = wall0, .mono_ref = mono0, .trust_ms = hour};
  bool rebased;
  /* set a day ahead a minute in: held back, and still at 59 minutes */
  assert_int_equal(hookd_bounded_clock_read(&c, wall0 + day + 60000, mono0 + 60000, &rebased),
                   wall0 + 60000);
  assert_false(rebased);
  int64_t at = mono0 + 60000 + hour - 60000;
  assert_int_equal(hookd_bounded_clock_read(&c, wall0 + day + hour, at, &rebased), wall0 + hour);
  assert_false(rebased);
  /* an hour after it was first seen: taken as right */
  at = mono0 + 60000 + hour;
  assert_int_equal(hookd_bounded_clock_read(&c, wall0 + day + hour + 60000, at, &rebased),
                   wall0 + day + hour + 60000);
  assert_true(rebased);
  /* and it runs on from there */
  assert_int_equal(hookd_bounded_clock_read(&c, wall0 + day + hour + 120000, at + 60000, &rebased),
                   wall0 + day + hour + 120000);
  assert_false(rebased);
  /* a step set back before its hour moves nothing: the wait starts over at the next one */
  hookd_bounded_clock d = {.wall_ref = wall0, .mono_ref = mono0, .trust_ms = hour};
  hookd_bounded_clock_read(&d, wall0 + day, mono0 + 1000, &rebased);
  assert_int_equal(hookd_bounded_clock_read(&d, wall0 + 2000, mono0 + 2000, &rebased),
                   wall0 + 2000);
  assert_int_equal(d.ahead_since, 0);
  assert_int_equal(hookd_bounded_clock_read(&d, wall0 + day, mono0 + hour + 3000, &rebased),
                   wall0 + hour + 3000);
  assert_false(rebased);
}

/* What was stamped while the wall clock read behind looks older by as much once it is set right:
 * behind_max keeps the most it read behind (seen by a note while it lasts, or by the reference
 * moving), so retention keeps everything that much longer. */
static void a_clock_behind_delays_retention(void **st) {
  (void)st;
  const int64_t wall0 = 1796000000000, mono0 = 5000, hour = 3600000, day = 24 * hour;
  hookd_bounded_clock c = {.wall_ref = wall0, .mono_ref = mono0, .trust_ms = hour};
  bool rebased;
  hookd_bounded_clock_note(&c, wall0 + 500, mono0 + 1000); /* half a second: noise */
  assert_int_equal(c.behind_max, 0);
  hookd_bounded_clock_note(&c, wall0 - 5 * day + 2000, mono0 + 2000); /* five days behind */
  assert_int_equal(c.behind_max, 5 * day);
  /* while it still reads behind, the time read holds all of it back already (not twice) */
  assert_int_equal(hookd_bounded_clock_behind(&c, wall0 - 5 * day + 2500, mono0 + 2500), 5 * day);
  /* set right: the time is the wall clock's, and the five days stay noted */
  assert_int_equal(hookd_bounded_clock_read(&c, wall0 + 3000, mono0 + 3000, &rebased),
                   wall0 + 3000);
  assert_int_equal(c.behind_max, 5 * day);
  /* started two days behind, set right, taken as right an hour later: two days noted */
  hookd_bounded_clock d = {.wall_ref = wall0 - 2 * day, .mono_ref = mono0, .trust_ms = hour};
  hookd_bounded_clock_read(&d, wall0 + 60000, mono0 + 60000, &rebased);
  assert_int_equal(d.behind_max, 0);
  hookd_bounded_clock_read(&d, wall0 + hour + 60000, mono0 + hour + 60000, &rebased);
  assert_true(rebased);
  assert_int_equal(d.behind_max, 2 * day);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(bounded_by_the_monotonic_clock),
                                     cmocka_unit_test(a_lasting_step_becomes_the_reference),
                                     cmocka_unit_test(a_clock_behind_delays_retention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_metrics.c — the latency histograms: an observation lands in the first bucket whose bound
 * it does not pass, to the microsecond where it was measured so (a 1.9 ms attempt read as 1 ms
 * fell under le="0.001"), and the sum keeps every microsecond. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/metrics.h"

static void buckets_to_the_microsecond(void **st) {
  (void)st;
  hookd_hist h;
  memset(&h, 0, sizeof h);
  hookd_hist_observe_us(&h, 1000); /* on the 1 ms bound: under it */
  hookd_hist_observe_us(&h, 1001); /* past it: the 5 ms bucket */
  hookd_hist_observe_us(&h, 1900);
  hookd_hist_observe_us(&h, -5);   /* a clock that went back counts as 0 */
  assert_int_equal(h.bucket[0], 2);
  assert_int_equal(h.bucket[1], 2);
  assert_int_equal(h.count, 4);
  assert_int_equal(h.sum_us, 1000 + 1001 + 1900);
  /* whole milliseconds (a wall-clock difference) as before */
  hookd_hist_observe_ms(&h, 1);
  hookd_hist_observe_ms(&h, 2);
  assert_int_equal(h.bucket[0], 3);
  assert_int_equal(h.bucket[1], 3);
  assert_int_equal(h.sum_us, 1000 + 1001 + 1900 + 3000);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(buckets_to_the_microsecond)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

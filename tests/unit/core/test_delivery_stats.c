/* test_delivery_stats.c — an endpoint's delivery counts as its stats route shows them: clamped
 * at the bound and marked, and the success rate — none from a count past the bound, the DEAD
 * ones never attempted left out of it (a review read 0.5 for 0.75, and 0.0 for a delivery
 * superseded before any attempt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/delivery_stats.h"

static hookd_delivery_counts counts(int64_t delivered, int64_t dead, int64_t unsent) {
  hookd_delivery_counts c = {0};
  c.by_state[HOOKD_DS_DELIVERED] = delivered;
  c.by_state[HOOKD_DS_DEAD] = dead;
  c.by_state[HOOKD_DS_PENDING] = 7; /* in neither */
  c.dead_unsent = unsent;
  return c;
}

static void rate(void **st) {
  (void)st;
  double r = -1;
  hookd_delivery_counts c = counts(3, 1, 0);
  assert_true(hookd_delivery_success_rate(&c, 0, &r));
  assert_true(r == 0.75);
  c = counts(2, 1, 0); /* rounded to 4 places */
  assert_true(hookd_delivery_success_rate(&c, 0, &r));
  assert_true(r == 0.6667);
  c = counts(0, 1, 1); /* superseded before any attempt: no failure, no rate */
  assert_false(hookd_delivery_success_rate(&c, 0, &r));
  c = counts(1, 2, 1);
  assert_true(hookd_delivery_success_rate(&c, 0, &r));
  assert_true(r == 0.5);
  c = counts(0, 0, 0);
  assert_false(hookd_delivery_success_rate(&c, 0, &r));
}

static void clamped(void **st) {
  (void)st;
  unsigned capped;
  hookd_delivery_counts c = counts(30000, 10000, 0); /* read up to cap + 1 = 10,001 */
  c.by_state[HOOKD_DS_DELIVERED] = 10001;
  hookd_delivery_counts_clamp(&c, 10000, &capped);
  assert_int_equal(c.by_state[HOOKD_DS_DELIVERED], 10000);
  assert_int_equal(c.by_state[HOOKD_DS_DEAD], 10000); /* exactly the bound: not past it */
  assert_int_equal(capped, 1u << HOOKD_DS_DELIVERED);
  double r;
  assert_false(hookd_delivery_success_rate(&c, capped, &r)); /* a bound in a ratio: none */
  /* a state the rate does not read, past the bound: the rate stands */
  c = counts(3, 1, 0);
  c.by_state[HOOKD_DS_PENDING] = 10001;
  hookd_delivery_counts_clamp(&c, 10000, &capped);
  assert_int_equal(capped, 1u << HOOKD_DS_PENDING);
  assert_true(hookd_delivery_success_rate(&c, capped, &r));
  c = counts(3, 10001, 10001);
  hookd_delivery_counts_clamp(&c, 10000, &capped);
  assert_int_equal(capped, 1u << HOOKD_DS_DEAD | 1u << HOOKD_DS__COUNT);
  assert_false(hookd_delivery_success_rate(&c, capped, &r));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rate),
      cmocka_unit_test(clamped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_isolation_logic.c — the pure parts of isolation: token buckets hold their rate and
 * burst; the circuit breaker opens on a failure ratio with a minimum count, probes after the
 * cool-down, closes on a successful probe and reopens on a failed one (and only a probe decides,
 * half-open); the weighted share of a used-up budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/breaker.h"
#include "core/bucket.h"
#include "core/share.h"

/* A rate near zero (stored before the API's floor) waits at most an hour: now + wait must not
 * overflow, nor the conversion wrap to a negative wait that would bypass the limit. */
static void bucket_wait_is_bounded(void **s) {
  (void)s;
  const double rates[] = {1.0842022708573195e-16, 1e-300, 5e-324, HOOKD_BUCKET_MIN_RATE};
  for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
    hookd_bucket b;
    int64_t now = 1796048288014;
    hookd_bucket_init(&b, rates[i], 1, now);
    assert_true(hookd_bucket_take(&b, now));
    assert_false(hookd_bucket_take(&b, now));
    int64_t w = hookd_bucket_wait_ms(&b, now);
    assert_true(w > 0);
    assert_true(w <= HOOKD_BUCKET_MAX_WAIT_MS);
  }
}

/* A time read before the last one seen (a late dispatch pass's "now", beside a fresh check of
 * the same bucket) credits nothing twice: one token per 20 ms holds. */
static void bucket_earlier_time_credits_nothing_twice(void **s) {
  (void)s;
  hookd_bucket b;
  hookd_bucket_init(&b, 50, 1, 0); /* a token every 20 ms, burst 1 */
  assert_true(hookd_bucket_take(&b, 0));
  assert_int_equal(hookd_bucket_wait_ms(&b, 25), 0); /* the next token, at 20 */
  assert_true(hookd_bucket_take(&b, 5));              /* taken at the pass's earlier time */
  assert_int_equal(hookd_bucket_wait_ms(&b, 25), 20); /* nothing credited again */
  assert_false(hookd_bucket_take(&b, 25));
  assert_true(hookd_bucket_take(&b, 45));
}

static void bucket_rate_and_burst(void **s) {
  hookd_bucket b;
  hookd_bucket_init(&b, 10, 5, 0); /* 10/s, burst 5 */
  int taken = 0;
  for (int i = 0; i < 20; i++) taken += hookd_bucket_take(&b, 0);
  assert_int_equal(taken, 5); /* the burst */
  assert_int_equal(hookd_bucket_wait_ms(&b, 0), 100);
  assert_false(hookd_bucket_take(&b, 99));
  assert_true(hookd_bucket_take(&b, 100));
  /* a token given back (a request not sent after all) goes at once, never past the burst */
  hookd_bucket_refund(&b);
  assert_true(hookd_bucket_take(&b, 100));
  assert_false(hookd_bucket_take(&b, 100));
  for (int i = 0; i < 9; i++) hookd_bucket_refund(&b);
  taken = 0;
  for (int i = 0; i < 9; i++) taken += hookd_bucket_take(&b, 100);
  assert_int_equal(taken, 5);
  /* over 10 s at most 10/s + burst go through, however often we ask */
  taken = 0;
  for (int64_t t = 100; t <= 10100; t += 7) taken += hookd_bucket_take(&b, t);
  assert_true(taken >= 99 && taken <= 100 + 5);
  /* unlimited */
  hookd_bucket u;
  hookd_bucket_init(&u, 0, 1, 0);
  for (int i = 0; i < 1000; i++) assert_true(hookd_bucket_take(&u, 0));
  assert_int_equal(hookd_bucket_wait_ms(&u, 0), 0);
  /* lowering the burst clamps the saved tokens */
  hookd_bucket_init(&b, 10, 50, 0);
  hookd_bucket_set(&b, 10, 2, 0);
  assert_true(hookd_bucket_take(&b, 0));
  assert_true(hookd_bucket_take(&b, 0));
  assert_false(hookd_bucket_take(&b, 0));
}

/* The defaults with a 1 s cool-down and the minimum count given; b closed at 0. */
static hookd_breaker_cfg breaker_at(int min_requests, hookd_breaker *b) {
  hookd_breaker_cfg c;
  hookd_breaker_cfg_defaults(&c);
  c.min_requests = min_requests;
  c.cooldown_ms = 1000;
  hookd_breaker_init(b, 0);
  return c;
}

/* A spaced rate limit taken a millisecond after each token is due keeps its rate (burst 1 exactly
 * lost the millisecond each time: 200/s gave ~167/s), and never sends two closer than the spacing
 * allows. */
static void bucket_spacing_keeps_its_rate_when_late(void **s) {
  (void)s;
  for (double rate = 5; rate <= 500; rate *= 10) {
    hookd_bucket b;
    hookd_bucket_init(&b, rate, hookd_bucket_spacing_burst(rate), 0);
    int taken = 0;
    int64_t now = 0, last = -1000000, min_gap = 1000000;
    while (now < 10000) {
      int64_t wait = hookd_bucket_wait_ms(&b, now);
      now += wait + 1; /* woken a millisecond late */
      if (hookd_bucket_take(&b, now)) {
        if (now - last < min_gap) min_gap = now - last;
        last = now;
        taken++;
      }
    }
    assert_true(taken >= (int)(rate * 10 * 0.97)); /* ten seconds' worth, near enough */
    double spacing = 1000.0 / rate, floor = spacing - 10.5;
    if (floor < spacing / 2 - 1) floor = spacing / 2 - 1;
    assert_true((double)min_gap >= floor);
  }
  /* the burst itself: 1 for a slow rate, half a token more at most */
  assert_true(hookd_bucket_spacing_burst(1.0 / 60) < 1.001);
  assert_true(hookd_bucket_spacing_burst(1e6) == 1.5);
}

/* A share of failures exactly at the configured percent opens it, for every percent (55 of 100
 * at 55%: in floating point 0.55 * 100 is above 55, and it stayed closed). */
static void breaker_opens_at_the_exact_percent(void **s) {
  for (int pct = 1; pct <= 100; pct++) {
    for (int total = 1; total <= 200; total++) {
      if ((pct * total) % 100) continue; /* a whole number of failures only */
      int fails = pct * total / 100;
      hookd_breaker b;
      hookd_breaker_cfg c = breaker_at(total, &b);
      c.failure_percent = pct;
      for (int i = 0; i < total - fails; i++) hookd_breaker_record(&b, &c, true, false, false, 1);
      for (int i = 0; i < fails - 1; i++) hookd_breaker_record(&b, &c, false, true, false, 1);
      assert_int_equal(b.state, HOOKD_BREAKER_CLOSED); /* below the count until the last */
      hookd_breaker_record(&b, &c, false, true, false, 1);
      if (b.state != HOOKD_BREAKER_OPEN) fail_msg("%d of %d failed at %d%%: closed", fails, total, pct);
      /* one failure fewer, the last a success: under the share, closed */
      hookd_breaker_init(&b, 0);
      for (int i = 0; i < total - fails + 1; i++) hookd_breaker_record(&b, &c, true, false, false, 1);
      for (int i = 0; i < fails - 1; i++) hookd_breaker_record(&b, &c, false, true, false, 1);
      assert_int_equal(b.state, HOOKD_BREAKER_CLOSED);
    }
  }
  (void)s;
}

static void breaker_cycle(void **s) {
  hookd_breaker b;
  hookd_breaker_cfg c = breaker_at(4, &b);
  /* below the minimum count nothing is decided, even with only failures */
  for (int i = 0; i < 3; i++) assert_false(hookd_breaker_record(&b, &c, false, true, false, 10));
  assert_int_equal(b.state, HOOKD_BREAKER_CLOSED);
  /* the 4th failure reaches the minimum: open */
  assert_true(hookd_breaker_record(&b, &c, false, true, false, 20));
  assert_int_equal(b.state, HOOKD_BREAKER_OPEN);
  assert_int_equal(b.opens, 1);
  assert_false(hookd_breaker_allow(&b, &c, 500));
  assert_int_equal(hookd_breaker_retry_at(&b, &c), 1020);
  /* after the cool-down: one probe only */
  assert_true(hookd_breaker_allow(&b, &c, 1020));
  assert_int_equal(b.state, HOOKD_BREAKER_HALF_OPEN);
  assert_false(hookd_breaker_allow(&b, &c, 1021));
  /* the probe fails: open again */
  assert_true(hookd_breaker_record(&b, &c, false, true, true, 1100));
  assert_int_equal(b.state, HOOKD_BREAKER_OPEN);
  assert_true(hookd_breaker_allow(&b, &c, 2100));
  /* a successful probe closes it */
  assert_true(hookd_breaker_record(&b, &c, true, false, true, 2200));
  assert_int_equal(b.state, HOOKD_BREAKER_CLOSED);
  assert_true(hookd_breaker_allow(&b, &c, 2201));
  /* a mixed window under the ratio stays closed; neutral outcomes do not count */
  for (int i = 0; i < 6; i++) hookd_breaker_record(&b, &c, true, false, false, 2300);
  for (int i = 0; i < 5; i++) hookd_breaker_record(&b, &c, false, true, false, 2300);
  for (int i = 0; i < 50; i++) hookd_breaker_record(&b, &c, false, false, false, 2300);
  assert_int_equal(b.state, HOOKD_BREAKER_CLOSED);
  /* a success never opens it, even one that completes the count at the ratio (5 of 10): the
   * next failure does */
  hookd_breaker_init(&b, 3000);
  c.min_requests = 10;
  for (int i = 0; i < 5; i++) hookd_breaker_record(&b, &c, false, true, false, 3000);
  for (int i = 0; i < 4; i++) hookd_breaker_record(&b, &c, true, false, false, 3000);
  assert_false(hookd_breaker_record(&b, &c, true, false, false, 3000));
  assert_int_equal(b.state, HOOKD_BREAKER_CLOSED);
  assert_true(hookd_breaker_record(&b, &c, false, true, false, 3000));
  assert_int_equal(b.state, HOOKD_BREAKER_OPEN);
  hookd_breaker_init(&b, 2300);
  c.min_requests = 4;
  /* the window restarts: old failures are forgotten */
  hookd_breaker_record(&b, &c, false, true, false, 2300 + c.window_ms);
  assert_int_equal(b.failures, 1);
  assert_int_equal(b.successes, 0);
}

/* A step of the wall clock moves a breaker's and a bucket's times: the cool-down keeps its
 * length (a step back of an hour no longer holds an open breaker an hour more), and a step
 * forward refills a bucket no more than the time that passed. */
static void clock_step_keeps_lengths(void **s) {
  hookd_breaker b;
  hookd_breaker_cfg c = breaker_at(1, &b);
  assert_true(hookd_breaker_record(&b, &c, false, true, false, 10000));
  assert_int_equal(hookd_breaker_retry_at(&b, &c), 11000);
  hookd_breaker_shift(&b, -3600000); /* the clock went back an hour at 10500 */
  assert_int_equal(hookd_breaker_retry_at(&b, &c), 11000 - 3600000);
  assert_false(hookd_breaker_allow(&b, &c, 10500 - 3600000));
  assert_true(hookd_breaker_allow(&b, &c, 11000 - 3600000));
  hookd_bucket k;
  hookd_bucket_init(&k, 1, 1, 0);
  assert_true(hookd_bucket_take(&k, 0));
  hookd_bucket_shift(&k, 3600000); /* forward an hour at 0: no time passed */
  assert_false(hookd_bucket_take(&k, 3600000 + 10));
  assert_int_equal(hookd_bucket_wait_ms(&k, 3600000 + 10), 990);
}

/* Half-open, only the probe decides: outcomes of requests sent before the breaker opened (a
 * timeout may outlast the cool-down) neither close it nor reopen it under the probe. */
static void breaker_half_open_ignores_late_outcomes(void **s) {
  (void)s;
  hookd_breaker b;
  hookd_breaker_cfg c = breaker_at(2, &b);
  hookd_breaker_record(&b, &c, false, true, false, 10);
  hookd_breaker_record(&b, &c, false, true, false, 20);
  assert_int_equal(b.state, HOOKD_BREAKER_OPEN);
  assert_true(hookd_breaker_allow(&b, &c, 1020)); /* the probe goes */
  assert_int_equal(b.state, HOOKD_BREAKER_HALF_OPEN);
  /* a late failure: still half-open, the probe still counted (no second probe) */
  assert_false(hookd_breaker_record(&b, &c, false, true, false, 1030));
  assert_int_equal(b.state, HOOKD_BREAKER_HALF_OPEN);
  assert_false(hookd_breaker_allow(&b, &c, 1031));
  /* a late success does not close it either */
  assert_false(hookd_breaker_record(&b, &c, true, false, false, 1040));
  assert_int_equal(b.state, HOOKD_BREAKER_HALF_OPEN);
  /* the probe's own outcome does */
  assert_true(hookd_breaker_record(&b, &c, true, false, true, 1050));
  assert_int_equal(b.state, HOOKD_BREAKER_CLOSED);
}

/* The retry and replay budgets' share: room while the budget has some; once it is taken, a
 * holder of nothing may take one, and each holder up to its weighted share. */
static void share_of_a_used_budget(void **s) {
  (void)s;
  assert_true(hookd_share_allows(2, 1, 1, 1, 1));   /* room left */
  assert_false(hookd_share_allows(2, 2, 2, 1, 1));  /* alone, at the budget */
  assert_true(hookd_share_allows(2, 2, 0, 1, 2));   /* another holds it all: its first */
  assert_true(hookd_share_allows(13, 25, 0, 1, 26)); /* many hold one each: up to twice */
  assert_false(hookd_share_allows(13, 26, 0, 1, 27));
  assert_false(hookd_share_allows(2, 3, 1, 1, 2));  /* half of 2 is 1 */
  assert_true(hookd_share_allows(10, 12, 6, 3, 4)); /* weight 3 of 4: 7 */
  assert_false(hookd_share_allows(10, 12, 7, 3, 4));
  assert_false(hookd_share_allows(10, 12, 3, 1, 4)); /* weight 1 of 4: 2 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bucket_earlier_time_credits_nothing_twice),
      cmocka_unit_test(bucket_rate_and_burst),
      cmocka_unit_test(bucket_wait_is_bounded),
      cmocka_unit_test(bucket_spacing_keeps_its_rate_when_late),
      cmocka_unit_test(breaker_cycle),
      cmocka_unit_test(breaker_opens_at_the_exact_percent),
      cmocka_unit_test(breaker_half_open_ignores_late_outcomes),
      cmocka_unit_test(clock_step_keeps_lengths),
      cmocka_unit_test(share_of_a_used_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

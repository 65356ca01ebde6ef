/* test_backoff.c — full-jitter backoff: ceilings, bounds, overflow safety, and distribution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/backoff.h"
#include "core/ids.h"

static void ceiling_doubles_until_cap(void **s) {
  assert_int_equal(hookd_backoff_ceiling_ms(1000, 60000, 1), 1000);
  assert_int_equal(hookd_backoff_ceiling_ms(1000, 60000, 2), 2000);
  assert_int_equal(hookd_backoff_ceiling_ms(1000, 60000, 6), 32000);
  assert_int_equal(hookd_backoff_ceiling_ms(1000, 60000, 7), 60000);
  assert_int_equal(hookd_backoff_ceiling_ms(1000, 60000, 1000), 60000); /* no overflow */
  assert_int_equal(hookd_backoff_ceiling_ms(1000, 60000, 0), 1000);
  /* an odd cap: the doubling below it is kept (2, 4), then the cap */
  assert_int_equal(hookd_backoff_ceiling_ms(2, 5, 2), 4);
  assert_int_equal(hookd_backoff_ceiling_ms(2, 5, 3), 5);
  assert_int_equal(hookd_backoff_ceiling_ms(INT64_MAX / 2, INT64_MAX, 3), INT64_MAX);
}

static void delay_within_bounds(void **s) {
  for (int attempt = 1; attempt < 40; attempt++) {
    int64_t ceil = hookd_backoff_ceiling_ms(500, 3600000, attempt);
    for (int i = 0; i < 200; i++) {
      int64_t d = hookd_backoff_delay_ms(500, 3600000, attempt, hookd_random_u64());
      assert_true(d >= 0 && d <= ceil);
    }
    /* extremes of the random input map to the extremes of the range */
    assert_int_equal(hookd_backoff_delay_ms(500, 3600000, attempt, 0), 0);
    assert_int_equal(hookd_backoff_delay_ms(500, 3600000, attempt, (uint64_t)ceil), ceil);
  }
}

/* Full jitter is uniform over [0, ceiling]: ten equal buckets each get about a tenth, and the
 * mean is about half the ceiling. (Deterministic bounds: 100k samples, ±15 % per bucket.) */
static void jitter_is_uniform(void **s) {
  const int n = 100000;
  int buckets[10] = {0};
  double sum = 0;
  for (int i = 0; i < n; i++) {
    int64_t d = hookd_backoff_delay_ms(1000, 60000, 5, hookd_random_u64()); /* ceil 16000 */
    sum += (double)d;
    int b = (int)(d * 10 / 16001);
    buckets[b]++;
  }
  for (int b = 0; b < 10; b++) assert_true(buckets[b] > n / 10 * 0.85 && buckets[b] < n / 10 * 1.15);
  double mean = sum / n;
  assert_true(mean > 7600 && mean < 8400);
}

/* The 4xx statuses a policy retries: a list of three-digit 4xx codes, round trip, refusals. */
static void retry_statuses(void **s) {
  (void)s;
  hookd_retry_policy p;
  hookd_retry_policy_defaults(&p);
  assert_false(hookd_retry_policy_retries(&p, 409));
  assert_int_equal(hookd_retry_statuses_parse("409,423,499,400", p.retry_4xx), 0);
  assert_true(hookd_retry_policy_retries(&p, 409));
  assert_true(hookd_retry_policy_retries(&p, 499));
  assert_true(hookd_retry_policy_retries(&p, 400));
  assert_false(hookd_retry_policy_retries(&p, 404));
  assert_false(hookd_retry_policy_retries(&p, 509));
  assert_false(hookd_retry_policy_retries(&p, 309));
  char out[64];
  hookd_retry_statuses_format(p.retry_4xx, out, sizeof out);
  assert_string_equal(out, "400,409,423,499");
  uint64_t bits[2];
  /* 410 listed: retried (instead of disabling the endpoint, the dispatcher's) */
  assert_int_equal(hookd_retry_statuses_parse("410", bits), 0);
  hookd_retry_policy q = p;
  q.retry_4xx[0] = bits[0];
  q.retry_4xx[1] = bits[1];
  assert_true(hookd_retry_policy_retries(&q, 410));
  const char *bad[] = {"408", "429", "500", "399", "40", "4090", "409,", ",409", "409;423",
                       "409, 423", "abc"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (hookd_retry_statuses_parse(bad[i], bits) == 0) fail_msg("\"%s\" accepted", bad[i]);
  assert_int_equal(hookd_retry_statuses_parse(NULL, bits), 0);
  assert_int_equal(hookd_retry_statuses_parse("", bits), 0);
  assert_true(bits[0] == 0 && bits[1] == 0);
  hookd_retry_statuses_format(bits, out, sizeof out);
  assert_string_equal(out, "");
}

static void policy_check(void **s) {
  hookd_retry_policy p;
  hookd_retry_policy_defaults(&p);
  assert_null(hookd_retry_policy_check(&p));
  p.max_attempts = 0;
  assert_string_equal(hookd_retry_policy_check(&p), "max_attempts");
  hookd_retry_policy_defaults(&p);
  p.cap_ms = p.base_ms - 1;
  assert_string_equal(hookd_retry_policy_check(&p), "backoff_cap_ms");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ceiling_doubles_until_cap),
      cmocka_unit_test(delay_within_bounds),
      cmocka_unit_test(jitter_is_uniform),
      cmocka_unit_test(policy_check),
      cmocka_unit_test(retry_statuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

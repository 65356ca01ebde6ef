/* test_delivery_state.c — the state machine refuses illegal transitions, and the post-attempt
 * decision follows the policy (attempts, age, expiry, Retry-After cap, 410). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/delivery_state.h"

static void transitions(void **s) {
  hookd_dstate to;
  /* legal */
  assert_int_equal(hookd_dstate_next(HOOKD_DS_PENDING, HOOKD_DT_SUCCESS, &to), 0);
  assert_int_equal(to, HOOKD_DS_DELIVERED);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_PENDING, HOOKD_DT_RETRY, &to), 0);
  assert_int_equal(to, HOOKD_DS_RETRYING);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_RETRYING, HOOKD_DT_RETRY, &to), 0);
  assert_int_equal(to, HOOKD_DS_RETRYING);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_RETRYING, HOOKD_DT_DEAD, &to), 0);
  assert_int_equal(to, HOOKD_DS_DEAD);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DEAD, HOOKD_DT_REPLAY, &to), 0);
  assert_int_equal(to, HOOKD_DS_PENDING);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DELIVERED, HOOKD_DT_REPLAY, &to), 0);
  assert_int_equal(to, HOOKD_DS_PENDING);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_PENDING, HOOKD_DT_CANCEL, &to), 0);
  assert_int_equal(to, HOOKD_DS_CANCELLED);
  /* illegal */
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DELIVERED, HOOKD_DT_SUCCESS, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DELIVERED, HOOKD_DT_RETRY, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DEAD, HOOKD_DT_SUCCESS, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DEAD, HOOKD_DT_CANCEL, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_PENDING, HOOKD_DT_REPLAY, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_RETRYING, HOOKD_DT_REPLAY, &to), -1);
  for (int t = 0; t < HOOKD_DT__COUNT; t++)
    assert_int_equal(hookd_dstate_next(HOOKD_DS_CANCELLED, (hookd_dtrigger)t, &to), -1);
  /* unknown: only an operator moves it (resolve, dead, replay) */
  assert_int_equal(hookd_dstate_next(HOOKD_DS_RETRYING, HOOKD_DT_HOLD, &to), 0);
  assert_int_equal(to, HOOKD_DS_UNKNOWN);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_UNKNOWN, HOOKD_DT_RESOLVE, &to), 0);
  assert_int_equal(to, HOOKD_DS_DELIVERED);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_UNKNOWN, HOOKD_DT_REPLAY, &to), 0);
  assert_int_equal(to, HOOKD_DS_PENDING);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_UNKNOWN, HOOKD_DT_RETRY, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_UNKNOWN, HOOKD_DT_SUCCESS, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DELIVERED, HOOKD_DT_RESOLVE, &to), -1);
  assert_int_equal(hookd_dstate_next(HOOKD_DS_DEAD, HOOKD_DT_HOLD, &to), -1);
  assert_int_equal(hookd_dstate_next((hookd_dstate)99, HOOKD_DT_SUCCESS, &to), -1);
}

static void names(void **s) {
  for (int i = 0; i < HOOKD_DS__COUNT; i++) {
    hookd_dstate back;
    assert_int_equal(hookd_dstate_parse(hookd_dstate_name((hookd_dstate)i), &back), 0);
    assert_int_equal(back, i);
  }
  hookd_dstate x;
  assert_int_equal(hookd_dstate_parse("sending", &x), -1);
}

static hookd_retry_policy policy(void) {
  hookd_retry_policy p = {.max_attempts = 3, .base_ms = 1000, .cap_ms = 8000,
                          .max_age_ms = 60000, .retry_after_cap_ms = 5000};
  return p;
}

static void decide(void **s) {
  hookd_retry_policy p = policy();
  hookd_delivery_view v = {.state = HOOKD_DS_PENDING, .cycle_attempts = 0,
                           .cycle_started_ms = 1000000, .expires_ms = 0};
  hookd_decision d;
  int64_t now = 1000000;

  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 204), -1, now, 0, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DELIVERED);

  /* 503: retry within [now, now + base] */
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 503), -1, now, 12345, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_RETRYING);
  assert_true(d.next_attempt_ms >= now && d.next_attempt_ms <= now + 1000);

  /* Retry-After honoured, and capped by the policy */
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 429), 3000, now, 0, false, &d), 0);
  assert_int_equal(d.next_attempt_ms, now + 3000);
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 429), 999999, now, 0, false, &d), 0);
  assert_int_equal(d.next_attempt_ms, now + 5000);
  /* ... as a lower bound: a shorter Retry-After than the backoff's draw (900 of [0, 1000]) does
   * not bring the attempt forward */
  assert_int_equal(
      hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 429), 100, now, 900, false, &d), 0);
  assert_int_equal(d.next_attempt_ms, now + 900);
  /* a cap of 0 ignores it: the backoff alone */
  p.retry_after_cap_ms = 0;
  assert_int_equal(
      hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 503), 3000, now, 500, false, &d), 0);
  assert_int_equal(d.next_attempt_ms, now + 500);
  p.retry_after_cap_ms = 5000;

  /* 400 → dead, permanent; 410 → dead and disable the endpoint */
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 400), -1, now, 0, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);
  assert_string_equal(d.dead_reason, "permanent");
  assert_false(d.disable_endpoint);
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 410), -1, now, 0, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);
  assert_true(d.disable_endpoint);
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_BLOCKED, 0), -1, now, 0, false, &d), 0);
  assert_string_equal(d.dead_reason, "blocked");

  /* third failure of a 3-attempt policy → dead */
  v.state = HOOKD_DS_RETRYING;
  v.cycle_attempts = 2;
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_TIMEOUT, 0), -1, now, 0, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);
  assert_string_equal(d.dead_reason, "max_attempts");

  /* age: the next attempt would land beyond max_age → dead */
  v.cycle_attempts = 1;
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 500), 5000,
                                v.cycle_started_ms + 58000, 0, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);
  assert_string_equal(d.dead_reason, "max_age");
  /* a backoff draw past the max age (1999 ms with 500 ms left) is one last attempt at it; past
   * the max age, DEAD */
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 500), -1,
                                v.cycle_started_ms + 59500, 1999, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_RETRYING);
  assert_int_equal(d.next_attempt_ms, v.cycle_started_ms + 60000);
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 500), -1,
                                v.cycle_started_ms + 60001, 0, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);
  assert_string_equal(d.dead_reason, "max_age");
  /* ... but not when the receiver asked for later than the max age, even with a longer draw
   * (1999 ms) than its Retry-After (1000 ms, with 500 ms left): not called before it asked */
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 500), 1000,
                                v.cycle_started_ms + 59500, 1999, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);
  assert_string_equal(d.dead_reason, "max_age");
  /* a Retry-After inside the max age keeps the last attempt at it */
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 500), 300,
                                v.cycle_started_ms + 59500, 1999, false, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_RETRYING);
  assert_int_equal(d.next_attempt_ms, v.cycle_started_ms + 60000);

  /* event expiry */
  v.expires_ms = now + 2000;
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 500), 3000, now, 0, false, &d), 0);
  assert_string_equal(d.dead_reason, "expired");

  /* an ambiguous outcome at a non-idempotent destination is held, not retried; a clear
   * failure (an HTTP answer) still is retried, and success is success */
  v.state = HOOKD_DS_RETRYING;
  v.expires_ms = 0;
  v.cycle_attempts = 0;
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_TIMEOUT, 0), -1, now, 0, true, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_UNKNOWN);
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 200), -1, now, 0, true, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DELIVERED);
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 400), -1, now, 0, true, &d), 0);
  assert_int_equal(d.next, HOOKD_DS_DEAD);

  /* a terminal view cannot take an outcome */
  v.state = HOOKD_DS_DELIVERED;
  v.expires_ms = 0;
  assert_int_equal(hookd_decide(&p, &v, hookd_classify(HOOKD_NET_OK, 200), -1, now, 0, false, &d), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(transitions),
      cmocka_unit_test(names),
      cmocka_unit_test(decide),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

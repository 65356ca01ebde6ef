/* test_retry_after.c — Retry-After in both forms (delta-seconds, the three HTTP-date forms),
 * and garbage that must be refused so the caller falls back to its own backoff; RFC 3339 times
 * (as given, and as a filter's bound). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/retry_after.h"
#include "core/timefmt.h"

/* 1994-11-06T08:49:37Z */
#define T0 784111777LL

static void seconds(void **s) {
  int64_t d;
  assert_int_equal(hookd_retry_after_parse("120", 0, &d), 0);
  assert_int_equal(d, 120000);
  assert_int_equal(hookd_retry_after_parse("  0 ", 0, &d), 0);
  assert_int_equal(d, 0);
  assert_int_equal(hookd_retry_after_parse("99999999999999999999999", 0, &d), 0);
  assert_true(d > 0 && d <= 10LL * 366 * 24 * 3600 * 1000); /* clamped, no overflow */
}

static void http_dates(void **s) {
  int64_t d, now = (T0 - 10) * 1000;
  assert_int_equal(hookd_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", now, &d), 0);
  assert_int_equal(d, 10000);
  assert_int_equal(hookd_retry_after_parse("Sunday, 06-Nov-94 08:49:37 GMT", now, &d), 0);
  assert_int_equal(d, 10000);
  assert_int_equal(hookd_retry_after_parse("Sun Nov  6 08:49:37 1994", now, &d), 0);
  assert_int_equal(d, 10000);
  /* a date in the past means "now" */
  assert_int_equal(hookd_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", now + 60000, &d), 0);
  assert_int_equal(d, 0);
  /* sub-second remainder: the delay reaches the date exactly */
  assert_int_equal(hookd_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", now + 9500, &d), 0);
  assert_int_equal(d, 500);
}

static void garbage(void **s) {
  int64_t d = 42;
  const char *bad[] = {"", " ", "-5", "1.5", "12abc", "abc", "Sun, 32 Nov 1994 08:49:37 GMT",
                       "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
                       "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37",
                       "Mon, 29 Feb 2023 00:00:00 GMT", "tomorrow", "0x10", NULL};
  for (int i = 0; bad[i]; i++) assert_int_equal(hookd_retry_after_parse(bad[i], 0, &d), -1);
  assert_int_equal(hookd_retry_after_parse(NULL, 0, &d), -1);
  assert_int_equal(d, 42);
}

static void rfc3339(void **s) {
  int64_t ms;
  char buf[HOOKD_RFC3339_MAX];
  assert_int_equal(hookd_parse_rfc3339("1994-11-06T08:49:37Z", &ms), 0);
  assert_int_equal(ms, T0 * 1000);
  assert_int_equal(hookd_parse_rfc3339("1994-11-06T10:49:37.250+02:00", &ms), 0);
  assert_int_equal(ms, T0 * 1000 + 250);
  hookd_fmt_rfc3339_ms(T0 * 1000 + 7, buf);
  assert_string_equal(buf, "1994-11-06T08:49:37.007Z");
  assert_int_equal(hookd_parse_rfc3339("1994-11-06", &ms), -1);
  /* an offset cannot carry the instant out of years 1..9999 (it could not be written back) */
  assert_int_equal(hookd_parse_rfc3339("0001-01-01T00:00:00+00:01", &ms), -1);
  assert_int_equal(hookd_parse_rfc3339("9999-12-31T23:59:59-00:01", &ms), -1);
  assert_int_equal(hookd_parse_rfc3339("0001-01-01T00:00:00Z", &ms), 0);
  assert_int_equal(hookd_parse_rfc3339("9999-12-31T23:59:59+00:01", &ms), 0);
  assert_int_equal(hookd_parse_rfc3339("1994-13-06T08:49:37Z", &ms), -1);
  assert_int_equal(hookd_parse_rfc3339("1994-11-06T08:49:37Zjunk", &ms), -1);
  /* a leap second only at 23:59:60 UTC, at whatever local time that is; read as :59 */
  assert_int_equal(hookd_parse_rfc3339("2016-12-31T23:59:60Z", &ms), 0);
  int64_t before;
  assert_int_equal(hookd_parse_rfc3339("2016-12-31T23:59:59Z", &before), 0);
  assert_true(ms == before);
  assert_int_equal(hookd_parse_rfc3339("2016-12-31T18:59:60-05:00", &ms), 0);
  assert_int_equal(hookd_parse_rfc3339("2017-01-01T05:29:60+05:30", &ms), 0);
  assert_int_equal(hookd_parse_rfc3339("2024-01-01T00:00:60Z", &ms), -1);
  assert_int_equal(hookd_parse_rfc3339("2016-12-31T23:59:60+01:00", &ms), -1);
}

/* A filter's bound: a part of a ms rounds up ([since, until) over ms times stays exact). */
static void rfc3339_bound(void **s) {
  (void)s;
  int64_t ms;
  assert_int_equal(hookd_parse_rfc3339_bound("1994-11-06T08:49:37.1375Z", &ms), 0);
  assert_int_equal(ms, T0 * 1000 + 138);
  assert_int_equal(hookd_parse_rfc3339("1994-11-06T08:49:37.1375Z", &ms), 0);
  assert_int_equal(ms, T0 * 1000 + 137); /* (a time given is cut, as before) */
  assert_int_equal(hookd_parse_rfc3339_bound("1994-11-06T08:49:37.137000Z", &ms), 0);
  assert_int_equal(ms, T0 * 1000 + 137); /* zeros past the ms are no part of one */
  assert_int_equal(hookd_parse_rfc3339_bound("1994-11-06T08:49:37.0000001Z", &ms), 0);
  assert_int_equal(ms, T0 * 1000 + 1);
  assert_int_equal(hookd_parse_rfc3339_bound("1994-11-06T08:49:37Z", &ms), 0);
  assert_int_equal(ms, T0 * 1000);
  assert_int_equal(hookd_parse_rfc3339_bound("1994-11-06T08:49Z", &ms), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seconds),
      cmocka_unit_test(http_dates),
      cmocka_unit_test(garbage),
      cmocka_unit_test(rfc3339),
      cmocka_unit_test(rfc3339_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

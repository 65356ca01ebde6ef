/* test_version.c — object versions for late events (version.c): which values are numbers,
 * exact decimal comparison, date-times as instants, and what never compares. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/version.h"

static int kind_of(const char *in, char *out, size_t cap) {
  int kind = -1;
  assert_int_equal(hookd_version_normalize(in, out, cap, &kind), 0);
  return kind;
}

static void decimals_are_numbers(void **s) {
  char out[64];
  const char *numbers[] = {"0", "17", "0042", "-3.5", "1e+21", "2E-7", "9007199254740993"};
  for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++) {
    assert_int_equal(kind_of(numbers[i], out, sizeof out), HOOKD_VERSION_NUMBER);
    assert_string_equal(out, numbers[i]);
  }
  /* what strtod would have taken for a number, and is not one here */
  const char *texts[] = {"v2", "nan", "inf", "0x10", " 1", "1 ", "+1", "1.", ".5", "1e", "",
                         "1e1234567890", "2024-13-01T00:00:00Z",
                         /* 20 exponent digits: refused before the exponent could overflow
                          * (UBSan aborts this test on a signed overflow) */
                         "1e99999999999999999999", "1e-9999799979999979979"};
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    assert_int_equal(kind_of(texts[i], out, sizeof out), HOOKD_VERSION_TEXT);
    assert_string_equal(out, texts[i]);
  }
}

static void numbers_compare_by_exact_value(void **s) {
  assert_int_equal(hookd_version_cmp_decimal("9", "10"), -1); /* bytes would say 1 */
  assert_int_equal(hookd_version_cmp_decimal("10", "9"), 1);
  assert_int_equal(hookd_version_cmp_decimal("0010", "10"), 0);
  assert_int_equal(hookd_version_cmp_decimal("10.50", "1.05e1"), 0);
  assert_int_equal(hookd_version_cmp_decimal("-0", "0.000"), 0);
  assert_int_equal(hookd_version_cmp_decimal("-2", "-10"), 1);
  assert_int_equal(hookd_version_cmp_decimal("-2", "1"), -1);
  assert_int_equal(hookd_version_cmp_decimal("0", "-1e-300"), 1);
  /* beyond 2^53, where doubles merge neighbours */
  assert_int_equal(hookd_version_cmp_decimal("9007199254740992", "9007199254740993"), -1);
  assert_int_equal(hookd_version_cmp_decimal("1700000000000000001", "1700000000000000100"), -1);
  assert_int_equal(
      hookd_version_cmp_decimal("123456789012345678901234567890.1", "123456789012345678901234567890"),
      1);
  assert_int_equal(hookd_version_cmp_decimal("1e21", "999999999999999999999"), 1);
  assert_int_equal(hookd_version_cmp_decimal("0.1", "0.10000000000000001"), -1);
  assert_int_equal(hookd_version_cmp_decimal("5e-324", "0"), 1);
  assert_int_equal(hookd_version_cmp_decimal("1e999999999", "1e999999998"), 1);
  /* not decimals: no answer */
  assert_int_equal(hookd_version_cmp_decimal("nan", "1"), 2);
  assert_int_equal(hookd_version_cmp_decimal("1", "0x10"), 2);
  assert_int_equal(hookd_version_cmp_decimal(NULL, "1"), 2);
}

static void date_times_compare_as_instants(void **s) {
  char a[64], b[64];
  /* Shopify's X-Shopify-Triggered-At carries nanoseconds */
  assert_int_equal(kind_of("2024-03-29T18:00:27.877041743Z", a, sizeof a), HOOKD_VERSION_NUMBER);
  assert_string_equal(a, "1711735227.877041743");
  assert_int_equal(kind_of("2024-03-29T18:00:27.8770417431Z", b, sizeof b),
                   HOOKD_VERSION_NUMBER);
  assert_true(hookd_version_older(a, HOOKD_VERSION_NUMBER, b, HOOKD_VERSION_NUMBER));
  /* half a second later, and a byte comparison would say earlier */
  kind_of("2024-03-29T18:00:00Z", a, sizeof a);
  kind_of("2024-03-29T18:00:00.5Z", b, sizeof b);
  assert_string_equal(a, "1711735200");
  assert_true(hookd_version_older(a, HOOKD_VERSION_NUMBER, b, HOOKD_VERSION_NUMBER));
  assert_false(hookd_version_older(b, HOOKD_VERSION_NUMBER, a, HOOKD_VERSION_NUMBER));
  /* offsets: 12:00+07:00 is 05:00Z, older than 06:00Z */
  kind_of("2024-03-29T12:00:00+07:00", a, sizeof a);
  kind_of("2024-03-29T06:00:00Z", b, sizeof b);
  assert_true(hookd_version_older(a, HOOKD_VERSION_NUMBER, b, HOOKD_VERSION_NUMBER));
  /* trailing zeros of the fraction change nothing */
  kind_of("2024-03-29T06:00:00.500Z", a, sizeof a);
  kind_of("2024-03-29T06:00:00.5Z", b, sizeof b);
  assert_string_equal(a, b);
  /* a leap second is text: 23:59:60.2 would read as 23:59:59.2, before 23:59:59.7 */
  assert_int_equal(kind_of("2016-12-31T23:59:60.2Z", a, sizeof a), HOOKD_VERSION_TEXT);
  /* too small a buffer: no version */
  int kind;
  assert_int_equal(hookd_version_normalize("2024-03-29T06:00:00Z", a, 8, &kind), -1);
  assert_int_equal(hookd_version_normalize("123456789", a, 9, &kind), -1);
}

static void only_like_kinds_compare(void **s) {
  /* text never compares: "v10" would sort before "v9", "1.10.0" before "1.9.0" */
  assert_false(hookd_version_older("v10", HOOKD_VERSION_TEXT, "v9", HOOKD_VERSION_TEXT));
  assert_false(hookd_version_older("1.10.0", HOOKD_VERSION_TEXT, "1.9.0", HOOKD_VERSION_TEXT));
  assert_false(hookd_version_older("a", HOOKD_VERSION_TEXT, "b", HOOKD_VERSION_TEXT));
  /* equal is not older: a redelivered version goes through to the duplicate check */
  assert_false(hookd_version_older("7", HOOKD_VERSION_NUMBER, "7.0", HOOKD_VERSION_NUMBER));
  /* a number against text, or a stored "number" that is not a decimal (rows written by the old
   * rule, strtod's "nan"): no comparison, the event goes through */
  assert_false(hookd_version_older("1", HOOKD_VERSION_NUMBER, "v2", HOOKD_VERSION_TEXT));
  assert_false(hookd_version_older("1", HOOKD_VERSION_NUMBER, "nan", HOOKD_VERSION_NUMBER));
  assert_false(hookd_version_older(NULL, HOOKD_VERSION_TEXT, "a", HOOKD_VERSION_TEXT));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decimals_are_numbers),
      cmocka_unit_test(numbers_compare_by_exact_value),
      cmocka_unit_test(date_times_compare_as_instants),
      cmocka_unit_test(only_like_kinds_compare),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

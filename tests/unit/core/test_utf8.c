/* test_utf8.c — well-formed UTF-8 sequences, the scrub of error messages quoting input, and the
 * order of strings by UTF-16 code units (JavaScript's sort). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "core/utf8.h"

static void lengths(void **st) {
  (void)st;
  assert_int_equal(hookd_utf8_len("a", 1), 1);
  assert_int_equal(hookd_utf8_len("\xc3\xa9", 2), 2);
  assert_int_equal(hookd_utf8_len("\xc3\xa9", 1), 0); /* cut short */
  assert_int_equal(hookd_utf8_len("\xe2\x82\xac", 3), 3);
  assert_int_equal(hookd_utf8_len("\xf0\x9f\x98\x80", 4), 4);
  assert_int_equal(hookd_utf8_len("\xc0\xaf", 2), 0);         /* overlong */
  assert_int_equal(hookd_utf8_len("\xed\xa0\x80", 3), 0);     /* a surrogate */
  assert_int_equal(hookd_utf8_len("\xf4\x90\x80\x80", 4), 0); /* past U+10FFFF */
  assert_int_equal(hookd_utf8_len("\x80", 1), 0);
}

/* A message cut mid-character, and bytes no UTF-8 allows, become '?': what jansson then takes. */
static void utf8_scrub(void **st) {
  (void)st;
  char cut[] = "unknown field \"a\xc3\xa9\xc3\" x";
  assert_int_equal(hookd_utf8_scrub(cut), 1);
  assert_string_equal(cut, "unknown field \"a\xc3\xa9?\" x");
  char bad[] = "\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe0\x80\xaf \xff";
  assert_int_equal(hookd_utf8_scrub(bad), 2 + 3 + 4 + 3 + 1);
  json_t *v = json_string(bad);
  assert_non_null(v);
  json_decref(v);
  char good[] = "ok \xe2\x82\xac \xf0\x9f\x98\x80 \xed\x9f\xbf \xf4\x8f\xbf\xbf";
  char copy[sizeof good];
  memcpy(copy, good, sizeof good);
  assert_int_equal(hookd_utf8_scrub(copy), 0);
  assert_string_equal(copy, good);
}

/* JavaScript's order: as bytes but between U+E000..U+FFFF and beyond U+FFFF (surrogates first). */
static int cmp(const char *a, const char *b) { return hookd_utf16_cmp(a, strlen(a), b, strlen(b)); }

static void utf16_order(void **st) {
  (void)st;
  assert_true(cmp("a", "b") < 0);
  assert_true(cmp("ab", "a") > 0); /* a prefix first */
  assert_int_equal(cmp("", ""), 0);
  assert_int_equal(cmp("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"), 0);
  assert_true(cmp("\xef\xbc\x81", "\xf0\x9f\x98\x80") > 0); /* U+FF01 after U+1F600 */
  assert_true(cmp("\xee\x80\x80", "\xf0\x90\x80\x80") > 0); /* U+E000 after U+10000 */
  assert_true(cmp("\xed\x9f\xbf", "\xf0\x90\x80\x80") < 0); /* U+D7FF before, as bytes */
  assert_true(cmp("x\xef\xbc\x81", "x\xf0\x9f\x98\x80y") > 0);
  assert_true(cmp("\xc3\xa9", "z") > 0);                     /* é after z, as bytes */
  assert_true(cmp("\xff", "\xef\xbc\x81") < 0); /* a malformed byte: the unit of its value */
  assert_int_equal(hookd_utf16_ranges("plain", 5), 0);
  assert_int_equal(hookd_utf16_ranges("\xef\xbc\x81", 3), HOOKD_UTF16_HIGH_BMP);
  assert_int_equal(hookd_utf16_ranges("\xf0\x9f\x98\x80 \xee\x80\x80", 8),
                   HOOKD_UTF16_HIGH_BMP | HOOKD_UTF16_ASTRAL);
}

/* Any bytes, malformed ones too (a form's decoded value is any bytes), are ordered consistently:
 * antisymmetric and transitive over every triple of 60 strings of the bytes where the two
 * orders and malformed sequences meet (a review found a < b, b < c and not a < c). */
static void utf16_order_is_total(void **st) {
  (void)st;
  static const unsigned char alphabet[] = {0x41, 0x80, 0xBF, 0xC3, 0xA9, 0xED, 0x9F, 0xEE,
                                           0xEF, 0xBC, 0x81, 0xF0, 0x90, 0x9F, 0x98, 0xFF};
  char s[60][8];
  size_t len[60];
  uint32_t x = 12345;
  for (int i = 0; i < 60; i++) {
    len[i] = (size_t)(i % 7) + 1;
    for (size_t k = 0; k < len[i]; k++) {
      x = x * 1103515245u + 12345u;
      s[i][k] = (char)alphabet[(x >> 16) % sizeof alphabet];
    }
  }
  for (int a = 0; a < 60; a++)
    for (int b = 0; b < 60; b++) {
      int ab = hookd_utf16_cmp(s[a], len[a], s[b], len[b]);
      int ba = hookd_utf16_cmp(s[b], len[b], s[a], len[a]);
      assert_true((ab < 0) == (ba > 0) && (ab == 0) == (ba == 0));
      for (int c = 0; c < 60 && ab < 0; c++)
        if (hookd_utf16_cmp(s[b], len[b], s[c], len[c]) < 0)
          assert_true(hookd_utf16_cmp(s[a], len[a], s[c], len[c]) < 0);
    }
  const char *ta = "\xED\x9F\xBF\xF0\x90\x80\x80\xC3\xBF", *tb = "\xEE\x80\x80\xED\x9F\xBF\xFF",
             *tc = "\xEE\xC4\x80"; /* the review's triple */
  if (cmp(ta, tb) < 0 && cmp(tb, tc) < 0) assert_true(cmp(ta, tc) < 0);
  if (cmp(ta, tb) > 0 && cmp(tb, tc) > 0) assert_true(cmp(ta, tc) > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lengths),
      cmocka_unit_test(utf8_scrub),
      cmocka_unit_test(utf16_order),
      cmocka_unit_test(utf16_order_is_total),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_utf8.c — well-formed UTF-8 sequences and the scrub of error messages quoting input. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lengths),
      cmocka_unit_test(utf8_scrub),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

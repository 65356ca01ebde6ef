/* test_pg_arr.c — the PostgreSQL backend's array literals (pg_rows.c): what one statement over
 * many rows binds as a single text parameter ($n::text[], $n::bigint[]). Any text must come
 * back as itself, so every element is quoted and its quotes and backslashes escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store/postgres/pg_int.h"

static void test_empty(void **state) {
  (void)state;
  pg_arr a;
  pg_arr_init(&a);
  assert_string_equal(pg_arr_done(&a), "{}");
  pg_arr_free(&a);
}

static void test_numbers(void **state) {
  (void)state;
  pg_arr a;
  pg_arr_init(&a);
  pg_arr_i64(&a, 1);
  pg_arr_i64(&a, -42);
  pg_arr_i64(&a, INT64_MAX);
  assert_string_equal(pg_arr_done(&a), "{1,-42,9223372036854775807}");
  pg_arr_free(&a);
}

/* NULL is a NULL element; the text "NULL", commas, braces, spaces, quotes and backslashes are
 * text (quoted, the last two escaped) */
static void test_text_quoted(void **state) {
  (void)state;
  pg_arr a;
  pg_arr_init(&a);
  pg_arr_text(&a, "ep_1");
  pg_arr_text(&a, NULL);
  pg_arr_text(&a, "NULL");
  pg_arr_text(&a, "a,b {c} d");
  pg_arr_text(&a, "say \"hi\" \\o/");
  pg_arr_text(&a, "");
  assert_string_equal(pg_arr_done(&a),
                      "{\"ep_1\",NULL,\"NULL\",\"a,b {c} d\",\"say \\\"hi\\\" \\\\o/\",\"\"}");
  pg_arr_free(&a);
}

/* many elements: the buffer grows, and the literal is whole */
static void test_grows(void **state) {
  (void)state;
  pg_arr a;
  pg_arr_init(&a);
  for (int i = 0; i < 10000; i++) pg_arr_i64(&a, i);
  const char *s = pg_arr_done(&a);
  assert_non_null(s);
  assert_int_equal(s[0], '{');
  assert_int_equal(s[strlen(s) - 1], '}');
  assert_non_null(strstr(s, ",9998,9999}"));
  assert_int_equal(strncmp(s, "{0,1,2,", 7), 0);
  pg_arr_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_numbers),
      cmocka_unit_test(test_text_quoted),
      cmocka_unit_test(test_grows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

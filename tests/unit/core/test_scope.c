/* test_scope.c — a new key's tenant scope built one id at a time (what POST /v1/keys and
 * `hookd keys create` share): an id named twice kept once, at most 64 ids given, at most 511
 * bytes; and the name rule both apply (shown text, 200 bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/scope.h"
#include "core/shown_text.h"

static int add(hookd_scope_builder *b, const char *id, char *err, size_t len) {
  return hookd_scope_add(b, id, strlen(id), err, len);
}

static void a_repeat_is_kept_once(void **st) {
  (void)st;
  char err[160];
  hookd_scope_builder b = {0};
  assert_int_equal(add(&b, "acme", err, sizeof err), 0);
  assert_int_equal(add(&b, "acme", err, sizeof err), 0);
  assert_string_equal(b.csv, "acme");
  assert_string_equal(hookd_scope_single(b.csv), "acme"); /* a scope of one stays one */
  assert_int_equal(add(&b, "acme-prod", err, sizeof err), 0);
  assert_int_equal(add(&b, "acm", err, sizeof err), 0); /* a prefix is another id */
  assert_int_equal(add(&b, "acme", err, sizeof err), 0);
  assert_string_equal(b.csv, "acme,acme-prod,acm");
  assert_int_equal(hookd_scope_check(b.csv, err, sizeof err), 0);
}

static void bad_ids_too_many_and_too_long_are_refused(void **st) {
  (void)st;
  char err[160];
  hookd_scope_builder b = {0};
  assert_int_equal(add(&b, "", err, sizeof err), -1);
  assert_int_equal(add(&b, "a b", err, sizeof err), -1);
  assert_non_null(strstr(err, "is not a tenant id"));
  assert_int_equal(hookd_scope_add(&b, "a,b", 3, err, sizeof err), -1);
  for (int i = 0; i < HOOKD_SCOPE_IDS_MAX; i++) assert_int_equal(add(&b, "a", err, sizeof err), 0);
  assert_int_equal(add(&b, "a", err, sizeof err), -1); /* the 65th, a repeat or not */
  assert_non_null(strstr(err, "more than 64 tenant ids"));

  hookd_scope_builder l = {0};
  char id[16];
  for (int i = 0; i < 51; i++) { /* 51 ids of 9 bytes with their commas: 458 bytes */
    snprintf(id, sizeof id, "f%07d", i);
    assert_int_equal(add(&l, id, err, sizeof err), 0);
  }
  char last[64];
  memset(last, 'x', 52); /* 458 + 1 + 52 = 511: fits */
  last[52] = '\0';
  assert_int_equal(add(&l, last, err, sizeof err), 0);
  assert_int_equal(strlen(l.csv), HOOKD_SCOPE_MAX);
  assert_int_equal(add(&l, "y", err, sizeof err), -1); /* 513 */
  assert_non_null(strstr(err, "more than a key can hold"));
  assert_int_equal(add(&l, "f0000000", err, sizeof err), 0); /* held already: nothing added */
}

static void names(void **st) {
  (void)st;
  assert_true(hookd_shown_name_ok(""));
  assert_true(hookd_shown_name_ok("portal of acme \xc3\xa9"));
  assert_false(hookd_shown_name_ok("a\nb"));            /* C0 */
  assert_false(hookd_shown_name_ok("a\x7f"));           /* DEL */
  assert_false(hookd_shown_name_ok("a\xc2\x85"));       /* C1 (NEL) */
  assert_false(hookd_shown_name_ok("a\xe2\x80\xae"));   /* U+202E */
  assert_false(hookd_shown_name_ok("a\xe2\x81\xa6"));   /* U+2066 */
  assert_false(hookd_shown_name_ok("a\xe2\x80\xa8"));   /* U+2028 */
  assert_false(hookd_shown_name_ok("bad\xff"));         /* not UTF-8 */
  char longest[HOOKD_SHOWN_NAME_MAX + 2];
  memset(longest, 'n', HOOKD_SHOWN_NAME_MAX);
  longest[HOOKD_SHOWN_NAME_MAX] = '\0';
  assert_true(hookd_shown_name_ok(longest));
  strcat(longest, "n");
  assert_false(hookd_shown_name_ok(longest));
  bool visible = true;
  assert_true(hookd_shown_text_ok("\xc2\xa0 ", false, &visible));
  assert_false(visible); /* blanks alone: nothing to read */
  assert_true(hookd_shown_text_ok("a\tb\n", true, NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_repeat_is_kept_once),
      cmocka_unit_test(bad_ids_too_many_and_too_long_are_refused),
      cmocka_unit_test(names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_cursor.c — opaque list cursors: a sealed position opens to itself under its key only;
 * an altered, foreign (another key, list or scope) or malformed cursor is refused; nothing of
 * the position shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/cursor.h"

static hookd_cursor_key key_of(unsigned char fill) {
  unsigned char master[32];
  memset(master, fill, sizeof master);
  hookd_cursor_key k;
  assert_int_equal(hookd_cursor_key_derive(master, sizeof master, &k), 0);
  return k;
}

static void round_trip(void **st) {
  (void)st;
  hookd_cursor_key k = key_of(1);
  const int64_t seqs[] = {1, 2, 41, 1000000007, INT64_MAX};
  for (size_t i = 0; i < sizeof seqs / sizeof *seqs; i++) {
    char c[HOOKD_CURSOR_LEN + 1];
    assert_int_equal(hookd_cursor_seal(&k, 'e', NULL, seqs[i], c), 0);
    assert_int_equal(strlen(c), HOOKD_CURSOR_LEN);
    int64_t back = 0;
    assert_int_equal(hookd_cursor_open(&k, 'e', NULL, c, &back), 0);
    assert_true(back == seqs[i]);
  }
  char c[HOOKD_CURSOR_LEN + 1];
  assert_int_equal(hookd_cursor_seal(&k, 'e', NULL, 0, c), -1); /* no position 0 */
}

static void refused(void **st) {
  (void)st;
  hookd_cursor_key k = key_of(1), other = key_of(2);
  char c[HOOKD_CURSOR_LEN + 1], d[HOOKD_CURSOR_LEN + 1];
  assert_int_equal(hookd_cursor_seal(&k, 'e', NULL, 41, c), 0);
  assert_int_equal(hookd_cursor_seal(&k, 'e', NULL, 42, d), 0);
  int64_t seq;
  /* neighbours share nothing visible: about half their bits differ */
  int diff = 0;
  for (int i = 0; i < HOOKD_CURSOR_LEN; i++) diff += c[i] != d[i];
  assert_true(diff > HOOKD_CURSOR_LEN / 2);
  /* another list's cursor */
  char a[HOOKD_CURSOR_LEN + 1];
  assert_int_equal(hookd_cursor_seal(&k, 'a', NULL, 41, a), 0);
  assert_int_equal(hookd_cursor_open(&k, 'e', NULL, a, &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'a', NULL, a, &seq), 0);
  assert_true(seq == 41);
  /* another master key's cursor */
  assert_int_equal(hookd_cursor_open(&other, 'e', NULL, c, &seq), -1);
  /* each digit altered */
  for (int i = 0; i < HOOKD_CURSOR_LEN; i++) {
    char t[HOOKD_CURSOR_LEN + 1];
    memcpy(t, c, sizeof t);
    t[i] = t[i] == '0' ? '1' : '0';
    assert_int_equal(hookd_cursor_open(&k, 'e', NULL, t, &seq), -1);
  }
  /* malformed: a number, short, long, upper case, empty */
  const char *bad[] = {"41", "", "0123456789abcdef0123456789abcde",
                       "0123456789abcdef0123456789abcdef0", "0123456789ABCDEF0123456789ABCDEF"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(hookd_cursor_open(&k, 'e', NULL, bad[i], &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'e', NULL, NULL, &seq), -1);
}

/* One tenant's cursor is refused by another tenant's list, and by the unscoped one (and back);
 * an empty scope is none. */
static void scoped(void **st) {
  (void)st;
  hookd_cursor_key k = key_of(1);
  char a[HOOKD_CURSOR_LEN + 1], b[HOOKD_CURSOR_LEN + 1], none[HOOKD_CURSOR_LEN + 1];
  assert_int_equal(hookd_cursor_seal(&k, 'e', "tenant_a", 41, a), 0);
  assert_int_equal(hookd_cursor_seal(&k, 'e', "tenant_b", 41, b), 0);
  assert_int_equal(hookd_cursor_seal(&k, 'e', NULL, 41, none), 0);
  assert_string_not_equal(a, b);
  int64_t seq = 0;
  assert_int_equal(hookd_cursor_open(&k, 'e', "tenant_a", a, &seq), 0);
  assert_true(seq == 41);
  assert_int_equal(hookd_cursor_open(&k, 'e', "tenant_b", a, &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'e', "tenant_", a, &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'e', NULL, a, &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'i', "tenant_a", a, &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'e', "tenant_a", none, &seq), -1);
  assert_int_equal(hookd_cursor_open(&k, 'e', "", none, &seq), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(round_trip), cmocka_unit_test(refused),
                                     cmocka_unit_test(scoped)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_ids.c — generated ids: their shape, their order across a step back of the wall clock
 * (docs/architecture.md "Clocks": ids only grow within a process), and a millisecond's floor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/ids.h"

static void shape(void **s) {
  (void)s;
  char id[HOOKD_ID_MAX];
  assert_int_equal(hookd_id_new("dlv", 1700000000000, id), 0);
  assert_true(hookd_id_generated(id, "dlv"));
  assert_int_equal(strlen(id), 4 + 26);
  assert_false(hookd_id_generated(id, "evt"));
}

static void ids_grow_across_a_step_back(void **s) {
  (void)s;
  char a[HOOKD_ID_MAX], b[HOOKD_ID_MAX], c[HOOKD_ID_MAX], later[HOOKD_ID_MAX];
  const int64_t t = 1800000000000; /* later than every id the test made before */
  assert_int_equal(hookd_id_new("dlv", t, a), 0);
  assert_int_equal(hookd_id_new("dlv", t - 3600 * 1000, b), 0); /* an hour back */
  assert_true(memcmp(b, a, 4 + 10) >= 0); /* the time part: carried on, not an hour back */
  assert_int_equal(hookd_id_new("dlv", t + 60000, later), 0); /* the clock ahead again */
  assert_true(memcmp(later, a, 4 + 10) > 0);
  assert_true(strcmp(later, b) > 0);
  /* another prefix, the clock behind again: not before the last */
  assert_int_equal(hookd_id_new("rpl", t - 5000, c), 0);
  assert_true(memcmp(c + 4, later + 4, 10) >= 0);
}

/* The random part is drawn afresh: two ids of one millisecond share nothing but the time. */
static void ids_of_one_millisecond_share_nothing_but_the_time(void **s) {
  (void)s;
  char x[HOOKD_ID_MAX], y[HOOKD_ID_MAX];
  const int64_t t = 1900000000000;
  assert_int_equal(hookd_id_new("evt", t, x), 0);
  assert_int_equal(hookd_id_new("evt", t, y), 0);
  assert_memory_not_equal(x + 4 + 10, y + 4 + 10, 16); /* (80 random bits each) */
}

/* The floor of a millisecond: at or before every id made then, after every id made before. */
static void a_floor_bounds_the_ids_of_its_millisecond(void **s) {
  (void)s;
  char f[HOOKD_ID_MAX], g[HOOKD_ID_MAX], id[HOOKD_ID_MAX];
  const int64_t t = 2000000000000; /* later than every id the test made before */
  hookd_id_floor("dlv", t, f);
  hookd_id_floor("dlv", t + 1, g);
  assert_true(hookd_id_generated(f, "dlv"));
  assert_string_equal(f + 4 + 10, "0000000000000000");
  assert_int_equal(hookd_id_new("dlv", t, id), 0);
  assert_true(strcmp(f, id) <= 0);
  assert_true(strcmp(id, g) < 0);
  hookd_id_floor("dlv", -5, f); /* clamped */
  assert_string_equal(f, "dlv_00000000000000000000000000");
  hookd_id_floor("dlv", INT64_MAX, g);
  assert_true(strcmp(id, g) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shape),
      cmocka_unit_test(ids_grow_across_a_step_back),
      cmocka_unit_test(ids_of_one_millisecond_share_nothing_but_the_time),
      cmocka_unit_test(a_floor_bounds_the_ids_of_its_millisecond),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

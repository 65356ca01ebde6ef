/* test_ids.c — generated ids: their shape, and their order across a step back of the wall
 * clock (docs/architecture.md "Clocks": ids only grow within a process). */
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
  assert_memory_equal(a, b, 4 + 10); /* the time part: the latest seen */
  assert_true(strcmp(b, a) > 0);      /* and after it, in the order made */
  assert_int_equal(hookd_id_new("dlv", t + 1, later), 0); /* the clock caught up */
  assert_true(strcmp(later, a) > 0);
  assert_true(memcmp(later, a, 4 + 10) > 0);
  /* another prefix shares the time */
  assert_int_equal(hookd_id_new("rpl", t - 5000, c), 0);
  assert_true(memcmp(c + 4, later + 4, 10) == 0);
}

static void ids_of_one_millisecond_keep_their_order(void **s) {
  (void)s;
  char prev[HOOKD_ID_MAX], id[HOOKD_ID_MAX];
  const int64_t t = 1900000000000;
  assert_int_equal(hookd_id_new("evt", t, prev), 0);
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(hookd_id_new("evt", t, id), 0);
    if (strcmp(id, prev) <= 0) fail_msg("%s after %s", id, prev);
    assert_memory_equal(id, prev, 4 + 10);
    memcpy(prev, id, sizeof id);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shape),
      cmocka_unit_test(ids_grow_across_a_step_back),
      cmocka_unit_test(ids_of_one_millisecond_keep_their_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

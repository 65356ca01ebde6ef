/* test_buf.c — the growable buffer: its hard maximum, and memory never past what it can use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/buf.h"

/* A body of exactly the maximum is held in max + 1 bytes (room for the NUL), not doubled past
 * it; one byte more is refused. */
static void capped_at_max(void **s) {
  (void)s;
  hookd_buf b;
  hookd_buf_init(&b, 1000);
  char chunk[100];
  memset(chunk, 'x', sizeof chunk);
  for (int i = 0; i < 10; i++)
    assert_int_equal(hookd_buf_append(&b, chunk, sizeof chunk), HOOKD_BUF_OK);
  assert_int_equal(b.len, 1000);
  assert_true(b.cap <= 1001);
  assert_int_equal(b.data[1000], '\0');
  assert_int_equal(hookd_buf_append(&b, "y", 1), HOOKD_BUF_TOOBIG);
  hookd_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(capped_at_max),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

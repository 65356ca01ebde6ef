/* test_envelope.c — the "data" member's bytes within a stored envelope (envelope.c): exactly
 * the stored bytes, with or without a schema version, whatever the id and type hold; nothing for
 * bytes hookd did not write as an envelope. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/envelope.h"

static void expect_data(const char *env, const char *want) {
  const char *d = NULL;
  size_t n = 0;
  assert_true(hookd_envelope_data(env, strlen(env), &d, &n));
  assert_int_equal(n, strlen(want));
  assert_memory_equal(d, want, n);
}

static void the_data_bytes(void **s) {
  (void)s;
  expect_data("{\"id\":\"evt_1\",\"type\":\"a.b\",\"timestamp\":\"2026-12-07T23:00:00.000Z\","
              "\"data\":{\"amount\":1e+02,\"n\":9007199254740993}}",
              "{\"amount\":1e+02,\"n\":9007199254740993}");
  expect_data("{\"id\":\"evt_1\",\"type\":\"a.b\",\"schema_version\":\"2024-07-01\","
              "\"timestamp\":\"2026-12-07T23:00:00Z\",\"data\":[1,2]}",
              "[1,2]");
  expect_data("{\"id\":\"e\",\"type\":\"t\",\"schema_version\":2,\"timestamp\":\"2026-12-07T23:"
              "00:00Z\",\"data\":\"a string\"}",
              "\"a string\"");
  expect_data("{\"id\":\"e\",\"type\":\"t\",\"timestamp\":\"2026-12-07T23:00:00Z\",\"data\":null}",
              "null");
  /* an id that holds the member's text, escaped as every quote in a string is */
  expect_data("{\"id\":\"x\\\",\\\"timestamp\\\":\\\"y\\\",\\\"data\\\":1\",\"type\":\"t\","
              "\"timestamp\":\"2026-12-07T23:00:00Z\",\"data\":{\"k\":\"\\\",\\\"data\\\":\"}}",
              "{\"k\":\"\\\",\\\"data\\\":\"}");
}

static void not_an_envelope(void **s) {
  (void)s;
  const char *bad[] = {"", "{}", "[1]", "{\"id\":\"e\",\"type\":\"t\",\"data\":1}",
                       "{\"id\":\"e\",\"type\":\"t\",\"timestamp\":\"x\",\"data\":}",
                       "{\"id\":\"e\",\"type\":\"t\",\"timestamp\":\"x\",\"data\":1",
                       "{\"type\":\"t\",\"timestamp\":\"x\",\"data\":1}",
                       "{\"id\":\"e\",\"type\":\"t\",\"timestamp\":\"a\"b\",\"data\":1}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *d = "untouched";
    size_t n = 9;
    assert_false(hookd_envelope_data(bad[i], strlen(bad[i]), &d, &n));
    assert_string_equal(d, "untouched");
    assert_int_equal(n, 9);
  }
  const char *d;
  size_t n;
  assert_false(hookd_envelope_data(NULL, 0, &d, &n));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(the_data_bytes),
                                     cmocka_unit_test(not_an_envelope)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_jsonio.c — bounded JSON input (depth, NUL, UTF-8, duplicate keys, huge integers) and the
 * deterministic compact output (order kept, shortest round-trip reals, escaping). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/jsonio.h"

static hookd_json_limits lim = {.max_depth = 8};

static json_t *parse(const char *s, char *err) { return hookd_json_parse(s, strlen(s), &lim, err); }

static void refusals(void **st) {
  char err[HOOKD_JSON_ERR_MAX];
  assert_null(parse("[[[[[[[[[1]]]]]]]]]", err));
  assert_non_null(strstr(err, "deeper than 8"));
  json_t *ok = parse("[[[[[[[[1]]]]]]]]", err); /* exactly 8 */
  assert_non_null(ok);
  json_decref(ok);
  /* brackets inside strings do not count */
  ok = parse("{\"a\":\"[[[[[[[[[[[[[[\"}", err);
  assert_non_null(ok);
  json_decref(ok);
  assert_null(parse("{\"a\":1,\"a\":2}", err));
  assert_non_null(strstr(err, "duplicate"));
  assert_null(parse("{\"a\":\"\\u0000\"}", err));
  assert_null(parse("\"\xff\xfe\"", err));
  assert_non_null(strstr(err, "UTF-8"));
  assert_null(parse("{\"a\":1", err));
  assert_null(parse("123456789012345678901234567890", err));
  char withnul[] = "{\"a\":1}\0";
  assert_null(hookd_json_parse(withnul, sizeof withnul - 1, &lim, err));
  assert_non_null(strstr(err, "NUL"));
}

/* A provider's body: integers stay exact; one beyond 64 bits makes the whole body lossy. */
static void provider_bodies(void **st) {
  char err[HOOKD_JSON_ERR_MAX];
  bool lossy = true;
  const char *b = "{\"a\":9007199254740993,\"b\":9007199254740992,\"c\":1.5}";
  json_t *v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, err);
  assert_non_null(v);
  assert_false(lossy);
  assert_true(json_is_integer(json_object_get(v, "a")));
  assert_int_equal(json_integer_value(json_object_get(v, "a")), 9007199254740993LL);
  assert_int_equal(json_integer_value(json_object_get(v, "b")), 9007199254740992LL);
  json_decref(v);
  b = "{\"a\":123456789012345678901234567890}";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, err);
  assert_non_null(v);
  assert_true(lossy);
  assert_true(json_is_real(json_object_get(v, "a")));
  json_decref(v);
  /* other errors are errors */
  b = "{\"a\":1,\"a\":2}";
  assert_null(hookd_json_parse_body(b, strlen(b), &lim, &lossy, err));
  assert_non_null(strstr(err, "duplicate"));
}

static void dump(void **st) {
  char err[HOOKD_JSON_ERR_MAX];
  json_t *v = parse("{ \"z\" : 1, \"a\" : [ true, null, 1.1, 0.1, 1e300, -0.0, 2.5e-7, 3.0 ],"
                    " \"s\" : \"q\\\"\\\\\\n\\u0001é\" }", err);
  assert_non_null(v);
  hookd_buf b;
  hookd_buf_init(&b, 1 << 20);
  assert_int_equal(hookd_json_dump(v, &b), 0);
  assert_string_equal(hookd_buf_str(&b),
                      "{\"z\":1,\"a\":[true,null,1.1,0.1,1e+300,-0.0,2.5e-07,3.0],"
                      "\"s\":\"q\\\"\\\\\\n\\u0001é\"}");
  hookd_buf_free(&b);
  json_decref(v);
}

static void buffer_limit(void **st) {
  hookd_buf b;
  hookd_buf_init(&b, 4);
  assert_int_equal(hookd_buf_puts(&b, "abcd"), 0);
  assert_int_equal(hookd_buf_puts(&b, "e"), HOOKD_BUF_TOOBIG);
  assert_string_equal(hookd_buf_str(&b), "abcd");
  assert_int_equal(hookd_buf_printf(&b, "%d", 1), HOOKD_BUF_TOOBIG);
  hookd_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(refusals),
      cmocka_unit_test(provider_bodies),
      cmocka_unit_test(dump),
      cmocka_unit_test(buffer_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_jsonio.c — bounded JSON input (depth, NUL, UTF-8, duplicate keys, huge integers, a parse
 * out of memory told from a refusal) and the deterministic compact output (order kept, shortest
 * round-trip reals, escaping). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
  json_t *v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_false(lossy);
  assert_true(json_is_integer(json_object_get(v, "a")));
  assert_int_equal(json_integer_value(json_object_get(v, "a")), 9007199254740993LL);
  assert_int_equal(json_integer_value(json_object_get(v, "b")), 9007199254740992LL);
  json_decref(v);
  /* a byte order mark before the text is ignored (RFC 8259 8.1), not a syntax error */
  b = "\xef\xbb\xbf{\"a\":1}";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_false(lossy);
  assert_int_equal(json_integer_value(json_object_get(v, "a")), 1);
  json_decref(v);
  /* read with doubles: a number of magnitude 2^53 or more is null (nothing keys on it), the
   * smaller ones are exact and kept */
  b = "{\"a\":123456789012345678901234567890,\"n\":[9007199254740993,-9007199254740992,"
      "9007199254740991,5,{\"v\":1700000000000000100,\"w\":2.5}]}";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_true(lossy);
  assert_true(json_is_null(json_object_get(v, "a")));
  json_t *n = json_object_get(v, "n");
  assert_true(json_is_null(json_array_get(n, 0)));
  assert_true(json_is_null(json_array_get(n, 1)));
  assert_true(json_real_value(json_array_get(n, 2)) == 9007199254740991.0);
  assert_true(json_real_value(json_array_get(n, 3)) == 5.0);
  assert_true(json_is_null(json_object_get(json_array_get(n, 4), "v")));
  assert_true(json_real_value(json_object_get(json_array_get(n, 4), "w")) == 2.5);
  json_decref(v);
  /* a number no double holds is an error (jansson stops there: what follows goes unchecked);
   * so is a syntax error after a large integer */
  char huge[600];
  snprintf(huge, sizeof huge, "{\"a\":1%0400d}", 0);
  assert_null(hookd_json_parse_body(huge, strlen(huge), &lim, &lossy, NULL, err));
  assert_false(lossy);
  b = "{\"a\":123456789012345678901234567890,}";
  assert_null(hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err));
  assert_false(lossy);
  /* valid JSON that is not I-JSON is read, lossy: a duplicate key (the last stands), \u0000 and
   * lone surrogates as U+FFFD; a pair, and an escaped backslash before "u", stay as they are */
  b = "{\"a\":1,\"a\":2,\"n\":\"x\\u0000y\",\"h\":\"\\ud83d!\",\"l\":\"\\uDE00\","
      "\"p\":\"\\ud83d\\ude00\",\"e\":\"\\\\u0000\",\"big\":123456789012345678901234567890}";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_true(lossy);
  assert_true(json_number_value(json_object_get(v, "a")) == 2.0); /* a double: "big" */
  assert_string_equal(json_string_value(json_object_get(v, "n")), "x\xef\xbf\xbdy");
  assert_string_equal(json_string_value(json_object_get(v, "h")), "\xef\xbf\xbd!");
  assert_string_equal(json_string_value(json_object_get(v, "l")), "\xef\xbf\xbd");
  assert_string_equal(json_string_value(json_object_get(v, "p")), "\xf0\x9f\x98\x80");
  assert_string_equal(json_string_value(json_object_get(v, "e")), "\\u0000");
  assert_true(json_is_null(json_object_get(v, "big")));
  json_decref(v);
  /* \u0000 in a key too (jansson refuses it with a message of its own) */
  b = "{\"a\\u0000b\":1,\"o\":{\"\\u0000\":2}}";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_true(lossy);
  assert_true(json_integer_value(json_object_get(v, "a\xef\xbf\xbd" "b")) == 1);
  assert_true(json_integer_value(json_object_get(json_object_get(v, "o"), "\xef\xbf\xbd")) == 2);
  json_decref(v);
  /* other errors are errors, after such a read too */
  b = "{\"a\":1,\"a\":2,}";
  assert_null(hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err));
  assert_false(lossy);
  assert_non_null(strstr(err, "invalid JSON"));
  b = "{\"a\":\"\\q\"}";
  bool deep = true;
  assert_null(hookd_json_parse_body(b, strlen(b), &lim, &lossy, &deep, err));
  assert_false(lossy);
  assert_false(deep);
  /* refused for its depth alone: told apart (the receive path keeps such a body as bytes) */
  char nest[200] = "";
  for (int i = 0; i < 40; i++) strcat(nest, "[");
  for (int i = 0; i < 40; i++) strcat(nest, "]");
  assert_null(hookd_json_parse_body(nest, strlen(nest), &lim, &lossy, &deep, err));
  assert_true(deep);
  /* a top-level scalar is JSON (RFC 8259): read, not refused; one beyond 64 bits is lossy */
  b = "\"ping\"";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_false(lossy);
  assert_string_equal(json_string_value(v), "ping");
  json_decref(v);
  b = " 42 ";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_int_equal(json_integer_value(v), 42);
  json_decref(v);
  b = "123456789012345678901234567890";
  v = hookd_json_parse_body(b, strlen(b), &lim, &lossy, NULL, err);
  assert_non_null(v);
  assert_true(lossy);
  json_decref(v);
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

/* The API's answers: each real's shortest text in ECMAScript's layout, ".0" after a whole one,
 * the sign of a zero kept; strings and integers as the body's writer writes them; NULL (a value
 * whose build failed) is no text, as json_dumps answered. */
static void dump_shown(void **st) {
  char err[HOOKD_JSON_ERR_MAX];
  json_t *v = parse("{ \"z\" : 9223372036854775807, \"n\" : -9223372036854775808,"
                    " \"a\" : [ 1.1, 0.1, 1e300, -0.0, 0.0, 2.5e-7, 3.0, 100.0, 1e21, 1e20, 15.9,"
                    " 5e-324, 1.7976931348623157e308 ],"
                    " \"s\" : \"q\\\"\\\\\\n\\u0001\\u001f\x7f\xe2\x80\xa8\xf0\x9f\x98\x80\" }", err);
  assert_non_null(v);
  char *s = hookd_json_text_shown(v);
  assert_string_equal(s, "{\"z\":9223372036854775807,\"n\":-9223372036854775808,"
                         "\"a\":[1.1,0.1,1e+300,-0.0,0.0,2.5e-7,3.0,100.0,1e+21,"
                         "100000000000000000000.0,15.9,5e-324,1.7976931348623157e+308],"
                         "\"s\":\"q\\\"\\\\\\n\\u0001\\u001f\x7f\xe2\x80\xa8\xf0\x9f\x98\x80\"}");
  free(s);
  json_decref(v);
  assert_null(hookd_json_text_shown(NULL));
  hookd_buf b;
  hookd_buf_init(&b, 64);
  assert_int_not_equal(hookd_json_dump_shown(NULL, &b), 0);
  hookd_buf_free(&b);
}

/* The shortest digits at a power of two, whose gap below is half the gap above: the nearest
 * 16-digit decimal lies beyond the narrow half-gap below while the next one up reads back, so 16
 * digits, not 17 (node: String(2 ** -24) is 5.960464477539063e-8). */
static void shortest_at_powers_of_two(void **st) {
  static const struct {
    int e;
    const char *text;
  } cases[] = {
      {-24, "5.960464477539063e-08"},   {-44, "5.684341886080802e-14"},
      {89, "6.189700196426902e+26"},    {-1017, "7.120236347223045e-307"},
      {976, "6.386688990511104e+293"},  {122, "5.316911983139664e+36"},
  };
  char out[32], neg[40];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double d = ldexp(1, cases[i].e);
    hookd_json_fmt_double(d, out);
    if (strcmp(out, cases[i].text) != 0)
      fail_msg("2^%d: got %s, want %s", cases[i].e, out, cases[i].text);
    hookd_json_fmt_double(-d, out);
    snprintf(neg, sizeof neg, "-%s", cases[i].text);
    assert_string_equal(out, neg);
  }
  char digits[17];
  int e, k = hookd_json_shortest(ldexp(1, -24), digits, &e);
  assert_int_equal(k, 16);
  assert_memory_equal(digits, "5960464477539063", 16);
  assert_int_equal(e, -8);
}

/* The search as it was, digit count by digit count (the oracle for the one-round fast path):
 * the nearest p-digit decimal, or, below a power of two, the next one up. */
static int shortest_oracle(double d, char digits[17], int *exp10) {
  char tmp[40], s[40];
  int p, e = 0, m;
  d = fabs(d);
  int narrow_below = frexp(d, &m) == 0.5 && d > DBL_MIN;
  for (p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
    digits[0] = tmp[0];
    if (p > 1) memcpy(digits + 1, tmp + 2, (size_t)(p - 1));
    e = (int)strtol(strchr(tmp, 'e') + 1, NULL, 10);
    double r = strtod(tmp, NULL);
    if (r == d || p == 17) break;
    if (!narrow_below || r > d) continue;
    char up[17];
    memcpy(up, digits, 17);
    int i = p - 1, ne = e;
    while (i >= 0 && up[i] == '9') up[i--] = '0';
    if (i >= 0) {
      up[i]++;
    } else {
      up[0] = '1';
      ne++;
    }
    snprintf(s, sizeof s, "%c.%.*se%d", up[0], p - 1, up + 1, ne);
    if (strtod(s, NULL) == d) {
      memcpy(digits, up, (size_t)p);
      e = ne;
      break;
    }
  }
  while (p > 1 && digits[p - 1] == '0') p--;
  *exp10 = e;
  return p;
}

static void check_shortest(double d) {
  char a[17], b[17];
  int ea, eb, ka = hookd_json_shortest(d, a, &ea), kb = shortest_oracle(d, b, &eb);
  if (ka != kb || ea != eb || memcmp(a, b, (size_t)ka) != 0)
    fail_msg("%.17g: %.*s e%d, the digit-by-digit search gives %.*s e%d", d, ka, a, ea, kb, b,
             eb);
}

/* The fast path (the 15-digit nearest, when it reads back, stripped of its zeros) gives the
 * digits the digit-by-digit search gives: random doubles of every exponent, decimals of few
 * digits, powers of two, the edges of the normal range and subnormals. */
static void shortest_fast_path_matches_the_search(void **st) {
  (void)st;
  uint64_t x = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    double d;
    memcpy(&d, &x, sizeof d);
    if (isfinite(d) && d != 0) check_shortest(d);
    check_shortest((double)(x % 100000000) / 1000.0 + 0.5); /* few digits */
    check_shortest((double)(x >> 11) * 0x1p-53 * 1e-300);  /* below and near DBL_MIN */
  }
  for (int e = -1074; e <= 1023; e++) {
    check_shortest(ldexp(1, e));
    check_shortest(nextafter(ldexp(1, e), 0));
    check_shortest(nextafter(ldexp(1, e), INFINITY));
  }
  const double edges[] = {DBL_MIN, DBL_MAX, DBL_TRUE_MIN, 0.1, 0.3, 1e21, 1e-7, 123456789012345.0,
                          1234567890123456.0, 12345678901234567.0, 5e-324, 9007199254740993.0};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_shortest(edges[i]);
}

/* hookd_json_fmt_double writes printf's "%.*g" layout by hand since it takes its digits from
 * hookd_json_shortest: the bytes of every other real are unchanged. The expected texts are what
 * "%.{k}g" writes (k the digit count), checked here against printf itself too. */
static void fmt_keeps_printf_layout(void **st) {
  static const struct {
    double d;
    const char *text;
  } cases[] = {
      {100, "1e+02"},        {123456, "123456.0"},       {1234.5, "1234.5"},
      {0.0001, "0.0001"},    {0.000123, "0.000123"},     {0.00001, "1e-05"},
      {1e16, "1e+16"},       {1e21, "1e+21"},            {9007199254740993.0, "9007199254740992.0"},
      {5e-324, "5e-324"},    {1.7976931348623157e308, "1.7976931348623157e+308"},
      {-2.5, "-2.5"},        {0.1 + 0.2, "0.30000000000000004"},
  };
  char out[32], want[40], digits[17];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hookd_json_fmt_double(cases[i].d, out);
    assert_string_equal(out, cases[i].text);
    int e, k = hookd_json_shortest(cases[i].d, digits, &e);
    snprintf(want, sizeof want, "%.*g", k, cases[i].d);
    if (!strpbrk(want, ".e")) strcat(want, ".0");
    assert_string_equal(out, want);
  }
}

/* Whichever of jansson's allocations fails, the parse says "out of memory" (an answer to try
 * again, 503), never a refusal of the text: before, most such failures came back with no message
 * at all, a string's as "invalid token" (a 400 for a valid body; the outbox relay marked its row
 * refused for good), and one while a long string was read dropped a character of it and the
 * value was taken, a byte short. */
static void out_of_memory(void **st) {
  static const char *const texts[] = {
      "{\"a\":[1,2.5,true,null,\"x\"],\"b\":{\"c\":\"abcdefghijklmnopqrstuvwxyz\"}}",
      "[\"abcdefghijklmnopqrstuvwxyz\",{\"k\":-1}]"};
  char err[HOOKD_JSON_ERR_MAX];
  for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
    int failed = 0;
    for (unsigned n = 1; n < 1000; n++) {
      hookd_json_fail_alloc_in(n);
      err[0] = '\0';
      json_t *v = parse(texts[t], err);
      hookd_json_fail_alloc_in(0);
      if (v) { /* (fewer allocations than n: the parse whole) */
        char *out = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(out, texts[t]);
        free(out);
        json_decref(v);
        break;
      }
      failed++;
      assert_string_equal(err, HOOKD_JSON_ERR_NOMEM);
      assert_true(hookd_json_out_of_memory(err));
    }
    assert_true(failed >= 5);
  }
  /* the provider's reads as well */
  bool lossy, deep;
  hookd_json_fail_alloc_in(1);
  assert_null(hookd_json_parse_body("{\"a\":1}", 7, &lim, &lossy, &deep, err));
  assert_true(hookd_json_out_of_memory(err));
  assert_false(deep);
  /* a text that is not JSON is no memory failure */
  assert_null(parse("{\"a\":", err));
  assert_false(hookd_json_out_of_memory(err));
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
      cmocka_unit_test(shortest_at_powers_of_two),
      cmocka_unit_test(shortest_fast_path_matches_the_search),
      cmocka_unit_test(fmt_keeps_printf_layout),
      cmocka_unit_test(buffer_limit),
      cmocka_unit_test(dump_shown),
      cmocka_unit_test(out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_jcs.c — RFC 8785 canonical JSON (jcs.c): the RFC's §3.2.2 sample object, its §3.2.3
 * UTF-16 sorting example, the number table of Appendix B (IEEE 754 bit patterns and their
 * ECMAScript text), every power of two against node (jcs_pow2.inc), the "weird" sorting sample
 * of the RFC's reference test data (with "</script>"), string escaping, a round-trip property of
 * the number formatter, and integers above 2^53 written exactly (hookd's one deviation). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/inbound.h"

static char *canon(const char *json, size_t flags) {
  json_error_t e;
  json_t *v = json_loads(json, flags | JSON_DECODE_ANY, &e);
  if (!v) fail_msg("parse: %s", e.text);
  hookd_buf b;
  hookd_buf_init(&b, 1 << 20);
  assert_int_equal(hookd_jcs(v, &b), 0);
  json_decref(v);
  return hookd_buf_steal(&b);
}

static void rfc_sample(void **st) {
  /* RFC 8785 §3.2.2 */
  char *out = canon(
      "{\n  \"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, "
      "0.000000000000000000000000001],\n"
      "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
      "  \"literals\": [null, true, false]\n}",
      0);
  assert_string_equal(out,
                      "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,"
                      "4.5,0.002,1e-27],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\"
                      "\\\"/\"}");
  free(out);
}

static void rfc_sorting(void **st) {
  /* RFC 8785 §3.2.3: the emoji (D83D DE00 in UTF-16) sorts before U+FB33, though its UTF-8
   * bytes (F0 …) are greater than U+FB33's (EF …). */
  char *out = canon(
      "{\"\\u20ac\": \"Euro Sign\", \"\\r\": \"Carriage Return\", \"\\ufb33\": "
      "\"Hebrew Letter Dalet With Dagesh\", \"1\": \"One\", \"\\ud83d\\ude00\": "
      "\"Emoji: Grinning Face\", \"\\u0080\": \"Control\", \"\\u00f6\": "
      "\"Latin Small Letter O With Diaeresis\"}",
      0);
  assert_string_equal(out,
                      "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
                      "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\",\"\xe2\x82\xac\":"
                      "\"Euro Sign\",\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
                      "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}");
  free(out);
}

static void weird_sorting(void **st) {
  /* The RFC's reference test data (cyberphone/json-canonicalization, testdata weird.json), whose
   * expected output is published as hex. */
  char *out = canon(
      "{\"\\u20ac\": \"Euro Sign\", \"\\r\": \"Carriage Return\", \"\\u000a\": "
      "\"Newline\", \"1\": \"One\", \"\\u0080\": \"Control\\u007f\", "
      "\"\\ud83d\\ude02\": \"Smiley\", \"\\u00f6\": \"Latin Small Letter O With "
      "Diaeresis\", \"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\", "
      "\"</script>\": \"Browser Challenge\"}",
      0);
  static const char hex[] =
      "7b225c6e223a224e65776c696e65222c225c72223a2243617272696167652052657475726e222c2231223a224f"
      "6e65222c223c2f7363726970743e223a2242726f77736572204368616c6c656e6765222c22c280223a22436f6e"
      "74726f6c7f222c22c3b6223a224c6174696e20536d616c6c204c6574746572204f205769746820446961657265"
      "736973222c22e282ac223a224575726f205369676e222c22f09f9882223a22536d696c6579222c22efacb3223a"
      "22486562726577204c65747465722044616c6574205769746820446167657368227d";
  char got[sizeof hex];
  assert_int_equal(strlen(out) * 2, strlen(hex));
  for (size_t i = 0; out[i]; i++) snprintf(got + 2 * i, 3, "%02x", (unsigned char)out[i]);
  assert_string_equal(got, hex);
  free(out);
}

static double from_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static void appendix_b(void **st) {
  static const struct {
    uint64_t bits;
    const char *text;
  } table[] = {
      {0x0000000000000000ULL, "0"},
      {0x8000000000000000ULL, "0"}, /* -0 */
      {0x0000000000000001ULL, "5e-324"},
      {0x8000000000000001ULL, "-5e-324"},
      {0x7fefffffffffffffULL, "1.7976931348623157e+308"},
      {0xffefffffffffffffULL, "-1.7976931348623157e+308"},
      {0x4340000000000000ULL, "9007199254740992"},
      {0xc340000000000000ULL, "-9007199254740992"},
      {0x4430000000000000ULL, "295147905179352830000"},
      {0x44b52d02c7e14af5ULL, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6ULL, "1e+23"},
      {0x44b52d02c7e14af7ULL, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4eULL, "999999999999999700000"},
      {0x444b1ae4d6e2ef4fULL, "999999999999999900000"},
      {0x444b1ae4d6e2ef50ULL, "1e+21"},
      {0x3eb0c6f7a0b5ed8cULL, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8dULL, "0.000001"},
      {0x41b3de4355555553ULL, "333333333.3333332"},
      {0x41b3de4355555554ULL, "333333333.33333325"},
      {0x41b3de4355555555ULL, "333333333.3333333"},
      {0x41b3de4355555556ULL, "333333333.3333334"},
      {0x41b3de4355555557ULL, "333333333.33333343"},
      {0xbecbf647612f3696ULL, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959ULL, "1424953923781206.2"}, /* round to even */
  };
  char out[32];
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    hookd_jcs_number(from_bits(table[i].bits), out);
    assert_string_equal(out, table[i].text);
  }
  /* a few more layouts */
  static const struct {
    double d;
    const char *text;
  } more[] = {
      {1e21, "1e+21"},   {1e20, "100000000000000000000"},
      {1e-7, "1e-7"},    {0.000001, "0.000001"},
      {1.5, "1.5"},      {-2, "-2"},
      {0.1, "0.1"},      {123e-20, "1.23e-18"},
      {1e300, "1e+300"}, {4.5, "4.5"},
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
    hookd_jcs_number(more[i].d, out);
    assert_string_equal(out, more[i].text);
  }
}

/* Powers of two have a gap below half the gap above, so the nearest p-digit decimal may not
 * read back while the next one up does: ECMAScript then writes p digits, not 17. All 2,098 of
 * them (and their negatives) against node's String(2 ** e); 46 differed before the fix. */
static void powers_of_two(void **st) {
  static const char *const pow2[] = {
#include "jcs_pow2.inc"
  };
  assert_int_equal(sizeof pow2 / sizeof pow2[0], 1023 + 1074 + 1);
  char out[32], neg[40];
  for (int e = -1074; e <= 1023; e++) {
    const char *want = pow2[e + 1074];
    hookd_jcs_number(ldexp(1, e), out);
    if (strcmp(out, want) != 0) fail_msg("2^%d: got %s, want %s", e, out, want);
    hookd_jcs_number(-ldexp(1, e), out);
    snprintf(neg, sizeof neg, "-%s", want);
    if (strcmp(out, neg) != 0) fail_msg("-2^%d: got %s, want %s", e, out, neg);
  }
  /* by name: the audit's three examples and eight more of the 46, then both ends of the range,
   * the smallest normal (equal gaps) and its double (the first narrow gap below) */
  static const struct {
    int e;
    const char *text;
  } cases[] = {
      {-24, "5.960464477539063e-8"},      {-44, "5.684341886080802e-14"},
      {89, "6.189700196426902e+26"},      {-1017, "7.120236347223045e-307"},
      {-509, "5.966672584960166e-154"},   {-140, "7.174648137343064e-43"},
      {-77, "6.617444900424222e-24"},     {122, "5.316911983139664e+36"},
      {305, "6.518515124270356e+91"},     {574, "6.183260036827614e+172"},
      {976, "6.386688990511104e+293"},    {-1074, "5e-324"},
      {1023, "8.98846567431158e+307"},    {-1022, "2.2250738585072014e-308"},
      {-1021, "4.450147717014403e-308"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hookd_jcs_number(ldexp(1, cases[i].e), out);
    if (strcmp(out, cases[i].text) != 0)
      fail_msg("2^%d: got %s, want %s", cases[i].e, out, cases[i].text);
  }
}

static void number_round_trip(void **st) {
  /* Every finite double's text reads back as the same double. */
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  char out[32];
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double d = from_bits(x);
    if (d != d || d - d != 0) continue; /* NaN, Inf */
    hookd_jcs_number(d, out);
    assert_true(strlen(out) < 32);
    if (d == 0)
      assert_string_equal(out, "0");
    else
      assert_true(strtod(out, NULL) == d);
  }
}

/* Integral doubles below 2^53 take a fast path: it must write exactly what the general
 * algorithm writes (the integer in full), checked against printf's exact integer text. */
static void integer_fast_path(void **st) {
  (void)st;
  char out[32], want[40];
  static const double edges[] = {1, 9, 10, 99, 100, 1e15, 1e15 + 1, 123456789012345.0,
                                 4503599627370496.0, 9007199254740991.0, 1700000000, 4200};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    for (int sign = 1; sign >= -1; sign -= 2) {
      double d = sign * edges[i];
      hookd_jcs_number(d, out);
      snprintf(want, sizeof want, "%.0f", d);
      assert_string_equal(out, want);
    }
  }
  uint64_t x = 0x2545f4914f6cdd1dULL;
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double d = (double)(x >> (11 + (i % 40))); /* integers of every magnitude below 2^53 */
    hookd_jcs_number(d, out);
    snprintf(want, sizeof want, "%.0f", d);
    assert_string_equal(out, want);
    assert_true(strtod(out, NULL) == d);
  }
}

static void integers_and_values(void **st) {
  hookd_buf b;
  hookd_buf_init(&b, 1024);
  /* integers and reals alike (integers above 2^53: big_integers_exact) */
  json_t *v = json_pack("[I,I,i,f]", (json_int_t)9007199254740992LL, (json_int_t)-42, 0, -0.0);
  assert_int_equal(hookd_jcs(v, &b), 0);
  assert_string_equal(hookd_buf_str(&b), "[9007199254740992,-42,0,0]");
  json_decref(v);

  /* escaping: the named escapes, \u00xx lower case for other controls, DEL and '/' literal */
  hookd_buf_reset(&b);
  v = json_stringn("\x00\x08\x09\x0a\x0c\x0d\x1f\x7f/\"\\", 11);
  assert_int_equal(hookd_jcs(v, &b), 0);
  assert_string_equal(hookd_buf_str(&b), "\"\\u0000\\b\\t\\n\\f\\r\\u001f\x7f/\\\"\\\\\"");
  json_decref(v);

  /* nested members are sorted at every level; arrays keep their order */
  char *out = canon("{\"b\":[{\"z\":1,\"a\":2}, 3],\"a\":{\"d\":true,\"c\":null}}", 0);
  assert_string_equal(out, "{\"a\":{\"c\":null,\"d\":true},\"b\":[{\"a\":2,\"z\":1},3]}");
  free(out);
  /* prefixes sort first; U+FFFF after the astral emoji */
  out = canon("{\"ab\":1,\"a\":2,\"\\uffff\":3,\"\\ud83d\\ude00\":4,\"\":5}",
              JSON_DECODE_INT_AS_REAL);
  assert_string_equal(out, "{\"\":5,\"a\":2,\"ab\":1,\"\xf0\x9f\x98\x80\":4,\"\xef\xbf\xbf\":3}");
  free(out);

  /* invalid UTF-8 cannot be canonicalised */
  hookd_buf_reset(&b);
  v = json_stringn_nocheck("a\xff", 2);
  assert_int_equal(hookd_jcs(v, &b), -1);
  json_decref(v);
  /* nor can an output beyond the buffer's maximum be written */
  hookd_buf small;
  hookd_buf_init(&small, 4);
  v = json_string("too long");
  assert_int_equal(hookd_jcs(v, &small), HOOKD_BUF_TOOBIG);
  json_decref(v);
  hookd_buf_free(&small);
  hookd_buf_free(&b);
}

/* hookd's one deviation from RFC 8785: an integer held exactly whose magnitude is above 2^53 is
 * written with its own digits instead of rounded through a double, so events differing only in
 * it do not share a canonical form (and a hash). Within ±2^53, and for reals, RFC 8785's text. */
static void big_integers_exact(void **st) {
  char *a = canon("{\"amount\":9007199254740993}", 0);
  char *b = canon("{\"amount\":9007199254740992}", 0);
  assert_string_equal(a, "{\"amount\":9007199254740993}");
  assert_string_equal(b, "{\"amount\":9007199254740992}");
  free(a);
  free(b);
  a = canon("[9007199254740993,-9007199254740993,9007199254740994,1700000000000000001,"
            "9223372036854775807,-9223372036854775808]",
            0);
  assert_string_equal(a, "[9007199254740993,-9007199254740993,9007199254740994,"
                         "1700000000000000001,9223372036854775807,-9223372036854775808]");
  free(a);

  /* within ±2^53 (both ends included) an integer is written as its double is */
  static const json_int_t within[] = {9007199254740992LL, -9007199254740992LL, 9007199254740991LL,
                                      -9007199254740991LL, 1700000000000LL, -1, 0};
  char want[32];
  for (size_t i = 0; i < sizeof within / sizeof within[0]; i++) {
    json_t *v = json_integer(within[i]);
    hookd_buf buf;
    hookd_buf_init(&buf, 64);
    assert_int_equal(hookd_jcs(v, &buf), 0);
    hookd_jcs_number((double)within[i], want);
    assert_string_equal(hookd_buf_str(&buf), want);
    hookd_buf_free(&buf);
    json_decref(v);
  }

  /* reals stay RFC 8785's: an exponent or a fraction, or integers parsed as reals */
  a = canon("[9007199254740993.0,1152921504606846976e0]", 0);
  assert_string_equal(a, "[9007199254740992,1152921504606847000]");
  free(a);
  a = canon("{\"amount\":9007199254740993}", JSON_DECODE_INT_AS_REAL);
  assert_string_equal(a, "{\"amount\":9007199254740992}");
  free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rfc_sample),         cmocka_unit_test(rfc_sorting),
      cmocka_unit_test(weird_sorting),      cmocka_unit_test(appendix_b),
      cmocka_unit_test(powers_of_two),      cmocka_unit_test(number_round_trip),
      cmocka_unit_test(integer_fast_path),  cmocka_unit_test(integers_and_values),
      cmocka_unit_test(big_integers_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

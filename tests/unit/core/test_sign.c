/* test_sign.c — Standard Webhooks signing against the specification's published vector, and
 * verification: tampering, wrong secret, rotation (several signatures), timestamps; the HMAC and
 * SHA-256 helpers against RFC 2202 / RFC 4231 / FIPS 180-2 vectors, repeatedly (their
 * algorithms are fetched once and their contexts reused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/b64.h"
#include "core/sign.h"

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define MSG_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define TS 1614265330
#define BODY "{\"test\": 2432232314}"
#define EXPECTED "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void published_vector(void **s) {
  hookd_hmac_key k;
  char sig[HOOKD_SIG_MAX];
  assert_int_equal(hookd_secret_parse(SECRET, &k), 0);
  assert_int_equal(hookd_sign_v1(&k, MSG_ID, TS, BODY, strlen(BODY), sig), 0);
  assert_string_equal(sig, EXPECTED);
}

static void verify(void **s) {
  hookd_hmac_key k, other;
  assert_int_equal(hookd_secret_parse(SECRET, &k), 0);
  char fresh[HOOKD_SECRET_MAX];
  assert_int_equal(hookd_secret_generate(fresh), 0);
  assert_int_equal(strncmp(fresh, "whsec_", 6), 0);
  assert_int_equal(hookd_secret_parse(fresh, &other), 0);
  assert_int_equal(other.len, 32);

  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS + 10, 300), HOOKD_VERIFY_OK);
  /* tampered byte */
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, "{\"test\": 2432232315}",
                                   strlen(BODY), TS, 300), HOOKD_VERIFY_MISMATCH);
  /* wrong secret */
  assert_int_equal(hookd_verify_v1(&other, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS, 300), HOOKD_VERIFY_MISMATCH);
  /* either key may match (receiver rotation) */
  hookd_hmac_key both[2] = {other, k};
  assert_int_equal(hookd_verify_v1(both, 2, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS, 300), HOOKD_VERIFY_OK);
  /* any number of keys: the matching one tenth (a list of 8 once stopped there) */
  hookd_hmac_key ten[10];
  for (int i = 0; i < 9; i++) ten[i] = other;
  ten[9] = k;
  assert_int_equal(hookd_verify_v1(ten, 10, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS, 300), HOOKD_VERIFY_OK);
  assert_int_equal(hookd_verify_v1(ten, 9, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS, 300), HOOKD_VERIFY_MISMATCH);
  /* several signatures in the header (sender rotation): any may match */
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330",
                                   "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= " EXPECTED, BODY,
                                   strlen(BODY), TS, 300), HOOKD_VERIFY_OK);
  /* stale and future timestamps */
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS + 301, 300), HOOKD_VERIFY_STALE);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS - 301, 300), HOOKD_VERIFY_FUTURE);
  /* malformed */
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "16x", EXPECTED, BODY, strlen(BODY), TS, 300),
                   HOOKD_VERIFY_MALFORMED);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", "v2,abc", BODY, strlen(BODY), TS,
                                   300), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(hookd_verify_v1(&k, 1, "", "1614265330", EXPECTED, BODY, strlen(BODY), TS, 300),
                   HOOKD_VERIFY_MALFORMED);
}

/* Tolerance and clock at the ends of int64_t: the exact answer, and no now ± tolerance overflow
 * (UBSan aborts the test on one). */
static void extreme_tolerance(void **s) {
  hookd_hmac_key k;
  assert_int_equal(hookd_secret_parse(SECRET, &k), 0);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS + 10, INT64_MAX), HOOKD_VERIFY_OK);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY), -10,
                                   INT64_MAX), HOOKD_VERIFY_OK);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   INT64_MIN, 300), HOOKD_VERIFY_FUTURE);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   INT64_MAX, 300), HOOKD_VERIFY_STALE);
  assert_int_equal(hookd_ts_check(INT64_MAX, INT64_MIN, INT64_MAX), HOOKD_VERIFY_FUTURE);
  assert_int_equal(hookd_ts_check(INT64_MIN, INT64_MAX, INT64_MAX), HOOKD_VERIFY_STALE);
  assert_int_equal(hookd_ts_check(INT64_MIN + 1, 0, INT64_MAX), HOOKD_VERIFY_OK);
  assert_int_equal(hookd_ts_check(INT64_MIN, 0, INT64_MAX), HOOKD_VERIFY_STALE);
  assert_int_equal(hookd_ts_check(100, 401, 300), HOOKD_VERIFY_STALE);
  assert_int_equal(hookd_ts_check(100, 400, 300), HOOKD_VERIFY_OK);
  assert_int_equal(hookd_ts_check(701, 400, 300), HOOKD_VERIFY_FUTURE);
  /* a tolerance of 0 (or less) is no "off switch" for the receivers' kit: exact time only */
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS + 3600, 0), HOOKD_VERIFY_STALE);
  assert_int_equal(hookd_verify_v1(&k, 1, MSG_ID, "1614265330", EXPECTED, BODY, strlen(BODY),
                                   TS, -5), HOOKD_VERIFY_OK);
}

/* A secret whose base64 would decode past the key buffer is refused, not truncated. */
static void hex(const unsigned char *in, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", in[i]);
}

/* RFC 2202 test 2 (SHA-1) and RFC 4231 test 2 (SHA-256, SHA-512): key "Jefe", data split in two
 * parts; each computed twice, interleaved, so a reused context that kept state would show. */
static void hmac_vectors(void **s) {
  (void)s;
  const void *parts[] = {"what do ya want ", "for nothing?"};
  size_t lens[] = {16, 12};
  struct {
    hookd_md md;
    int len;
    const char *want;
  } v[] = {
      {HOOKD_MD_SHA1, 20, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
      {HOOKD_MD_SHA256, 32, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {HOOKD_MD_SHA512, 64,
       "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"},
  };
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
      unsigned char mac[64];
      char got[129];
      assert_int_equal(hookd_hmac(v[i].md, "Jefe", 4, parts, lens, 2, mac), v[i].len);
      hex(mac, (size_t)v[i].len, got);
      assert_string_equal(got, v[i].want);
    }
  }
  unsigned char mac[64];
  assert_int_equal(hookd_hmac((hookd_md)7, "Jefe", 4, parts, lens, 2, mac), -1);
}

static void sha256_vectors(void **s) {
  (void)s;
  unsigned char h[32];
  char got[65];
  assert_int_equal(hookd_sha256("abc", 3, h), 0);
  hex(h, 32, got);
  assert_string_equal(got, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert_int_equal(hookd_sha256("", 0, h), 0);
  hex(h, 32, got);
  assert_string_equal(got, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void oversized_secret(void **s) {
  char big[6 + 200 + 1];
  memcpy(big, "whsec_", 6);
  memset(big + 6, 'A', 172); /* 172 chars -> 129 bytes */
  big[6 + 172] = '\0';
  hookd_hmac_key k;
  assert_int_equal(hookd_secret_parse(big, &k), -1);
  big[6 + 168] = '\0'; /* 168 chars -> 126 bytes: fits */
  assert_int_equal(hookd_secret_parse(big, &k), 0);
  assert_int_equal(k.len, 126);
  /* HOOKD_KEY_MAX (128) bytes fit, as sign.h says: 172 chars with "=" padding */
  memset(big + 6, 'A', 172);
  memcpy(big + 6 + 170, "==", 3); /* 170 chars + "==" -> 127 bytes */
  assert_int_equal(hookd_secret_parse(big, &k), 0);
  assert_int_equal(k.len, 127);
  memset(big + 6, 'A', 172);
  memcpy(big + 6 + 171, "=", 2); /* 171 chars + "=" -> 128 bytes */
  assert_int_equal(hookd_secret_parse(big, &k), 0);
  assert_int_equal(k.len, 128);
}

static void base64(void **s) {
  unsigned char out[16];
  char enc[HOOKD_B64_ENCLEN(5)];
  hookd_b64_encode((const unsigned char *)"hello", 5, enc);
  assert_string_equal(enc, "aGVsbG8=");
  assert_int_equal(hookd_b64_decode("aGVsbG8=", 8, out), 5);
  assert_memory_equal(out, "hello", 5);
  assert_int_equal(hookd_b64_decode("aGVsbG8", 7, out), -1);
  assert_int_equal(hookd_b64_decode("aGV=bG8=", 8, out), -1);
  assert_int_equal(hookd_b64_decode("aGVsbG=x", 8, out), -1);
  assert_int_equal(hookd_b64_decode("", 0, out), 0);
  /* canonical only: bits the padding leaves unused must be zero (one spelling per value) */
  assert_int_equal(hookd_b64_decode("aGVsbG9=", 8, out), -1);
  assert_int_equal(hookd_b64_decode("aA==", 4, out), 1);
  assert_int_equal(hookd_b64_decode("aB==", 4, out), -1);
  assert_int_equal(hookd_b64_decode("aGVsbA==", 8, out), 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(published_vector),
      cmocka_unit_test(verify),
      cmocka_unit_test(extreme_tolerance),
      cmocka_unit_test(oversized_secret),
      cmocka_unit_test(hmac_vectors),
      cmocka_unit_test(sha256_vectors),
      cmocka_unit_test(base64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

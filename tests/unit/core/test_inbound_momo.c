/* test_inbound_momo.c — MoMo IPN signature (inbound_momo.c). MoMo publishes no fixed test vector,
 * so the expected signature was computed with the openssl command line over the raw string of
 * MoMo's IPN documentation (fields in its order, numbers in decimal, UTF-8 as sent):
 *   printf '%s' 'accessKey=ACCESSKEY123&amount=50000&extraData=&message=Thành công.&orderId=ORD1&orderInfo=pay with MoMo&orderType=momo_wallet&partnerCode=MOMO&payType=qr&requestId=REQ1&responseTime=1721720663942&resultCode=0&transId=4088878653'
 *     | openssl dgst -sha256 -hmac 'SECRETKEY456' */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/inbound.h"

#define SECRET "ACCESSKEY123:SECRETKEY456"
#define SIG "e54179de24e9f1d5d51fc54611d068ebdf88a9483c86e3a0a1fa25b71c981ce6"

static char last_reason[128];

/* The vector's responseTime, in seconds: the clock of its IPN's verification. */
#define SIGNED_S 1721720663LL
static int64_t verify_now = SIGNED_S + 5;

static int verify(const char *body, const char *const *secrets, size_t n) {
  hookd_in_header h[] = {{"Content-Type", "application/json"}};
  hookd_in_request r = {.method = "POST",
                        .url = "https://shop.example.com/momo_ipn",
                        .headers = h,
                        .n_headers = 1,
                        .body = body,
                        .body_len = strlen(body),
                        .now_s = verify_now};
  hookd_in_secrets s = {secrets, n};
  hookd_verify_result res;
  int rc = hookd_in_verify(HOOKD_PROVIDER_MOMO, &r, &s, 0, NULL, &res);
  assert_int_equal(rc, res.rc);
  assert_null(strstr(res.reason, "SECRETKEY"));
  snprintf(last_reason, sizeof last_reason, "%s", res.reason);
  return rc;
}

static void body_with(char *out, size_t n, const char *amount, const char *sig) {
  snprintf(out, n,
           "{\"partnerCode\":\"MOMO\",\"orderId\":\"ORD1\",\"requestId\":\"REQ1\",\"amount\":%s,"
           "\"orderInfo\":\"pay with MoMo\",\"orderType\":\"momo_wallet\",\"transId\":4088878653,"
           "\"resultCode\":0,\"message\":\"Thành công.\",\"payType\":\"qr\","
           "\"responseTime\":1721720663942,\"extraData\":\"\",\"signature\":\"%s\"}",
           amount, sig);
}

/* A valid IPN signed more than 3 days before now, or more than a day after, is refused: the
 * inbox keeps its record 4 days at least, so a captured IPN sent again after its purge is not
 * a new event (docs/inbound.md). */
static void momo_signed_time(void **st) {
  (void)st;
  char body[1024];
  const char *one[] = {SECRET};
  body_with(body, sizeof body, "50000", SIG);
  verify_now = SIGNED_S + HOOKD_IN_IPN_MAX_AGE_S;
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_OK);
  verify_now = SIGNED_S + HOOKD_IN_IPN_MAX_AGE_S + 1;
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_STALE);
  assert_string_equal(last_reason, "momo: responseTime is more than 3 days old");
  verify_now = SIGNED_S - HOOKD_IN_IPN_MAX_AHEAD_S;
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_OK);
  verify_now = SIGNED_S - HOOKD_IN_IPN_MAX_AHEAD_S - 2;
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_FUTURE);
  verify_now = SIGNED_S + 5;
}

static void momo(void **st) {
  char body[1024];
  const char *one[] = {SECRET}, *wrong[] = {"ACCESSKEY123:SECRETKEY457"},
             *wrong_access[] = {"ACCESSKEY124:SECRETKEY456"},
             *rot[] = {"ACCESSKEY123:OLDSECRET", SECRET};
  body_with(body, sizeof body, "50000", SIG);
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(verify(body, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify(body, wrong_access, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify(body, rot, 2), HOOKD_VERIFY_OK);
  /* tampered amount */
  body_with(body, sizeof body, "50001", SIG);
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MISMATCH);
  /* the amount as a JSON real of the same value signs the same text, but MoMo sends integers:
   * a handler reading a long, or a decimal (50000.00000000000001), would see what was not sent */
  body_with(body, sizeof body, "5e4", SIG);
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  body_with(body, sizeof body, "50000.00000000000001", SIG);
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  /* malformed: no signature, short signature, a signed field of the wrong type, not JSON */
  body_with(body, sizeof body, "50000", "abc");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  body_with(body, sizeof body, "[50000]", SIG);
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify("{\"orderId\":\"ORD1\"}", one, 1), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify("not json", one, 1), HOOKD_VERIFY_MALFORMED);
  /* a secret without the access key part */
  const char *nokey[] = {"SECRETKEY456"};
  body_with(body, sizeof body, "50000", SIG);
  assert_int_equal(verify(body, nokey, 1), HOOKD_VERIFY_MISMATCH);
}

/* body with `from` replaced by `to` (once) */
static void body_edit(char *out, size_t n, const char *from, const char *to) {
  char body[1024];
  body_with(body, sizeof body, "50000", SIG);
  char *at = strstr(body, from);
  assert_non_null(at);
  snprintf(out, n, "%.*s%s%s", (int)(at - body), body, to, at + strlen(from));
}

/* A case-insensitive binder (Json.NET, System.Text.Json web defaults) would read an unsigned
 * "ResultCode" next to the signed "resultCode": such bodies, and signed numbers sent as another
 * type, are malformed. */
static void unsigned_look_alikes(void **st) {
  const char *one[] = {SECRET};
  char body[1200];
  static const char *const added[] = {
      ",\"ResultCode\":0}", ",\"RESULTCODE\":0}", ",\"Amount\":99999999}",
      ",\"transid\":1}",    ",\"Signature\":\"x\"}",
      ",\"re\xc5\xbfultCode\":0}", /* U+017F, which .NET folds onto 's' */
  };
  for (size_t i = 0; i < sizeof added / sizeof added[0]; i++) {
    body_edit(body, sizeof body, "}", added[i]); /* the body's only '}' closes it */
    assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  }
  /* an unrelated extra field is not signed data and not a look-alike */
  body_edit(body, sizeof body, "}", ",\"partnerUserId\":\"u1\"}");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_OK);
  /* the signed numbers as strings (same signed text), or missing */
  body_edit(body, sizeof body, "\"resultCode\":0", "\"resultCode\":\"0\"");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  body_with(body, sizeof body, "\"50000\"", SIG);
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  body_edit(body, sizeof body, "\"transId\":4088878653", "\"transId\":\"4088878653\"");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  body_edit(body, sizeof body, "\"responseTime\":1721720663942,", "");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
}

/* Valid JSON that is not I-JSON: a lone surrogate escape (a merchant's orderInfo cut inside an
 * emoji) is read as U+FFFD, as other providers' bodies are; the signed text has U+FFFD's bytes
 * there, as a signer that writes strings as UTF-8 (Node's Buffer) makes it. A \u0000 is refused
 * (no signer writes one; read as U+FFFD, it verified where the signer's U+FFFD was re-spelt). A
 * field sent twice stays refused, and every refusal names its problem. */
static void not_ijson(void **st) {
  const char *one[] = {SECRET};
  char body[1200];
  body_edit(body, sizeof body, "}", ",\"partnerUserId\":\"u\\udc00\"}");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_OK);
  body_edit(body, sizeof body, "}", ",\"partnerUserId\":\"u\\u0000\"}");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_string_equal(last_reason, "momo: a \\u0000 escape in the body");
  char cut[1200];
  body_edit(cut, sizeof cut, "pay with MoMo", "pay with MoMo\\ud83d");
  char *sig = strstr(cut, SIG);
  assert_non_null(sig);
  memcpy(sig, "0b1cb1e1d6a9b966c14f44ce4ee20c4580821ded9ba95d24a61fe5f9b7d69623", 64);
  assert_int_equal(verify(cut, one, 1), HOOKD_VERIFY_OK);
  /* the same signed text, its cut emoji re-spelt as a NUL: refused, not verified */
  char nul[1200];
  snprintf(nul, sizeof nul, "%s", cut);
  char *esc = strstr(nul, "\\ud83d");
  assert_non_null(esc);
  memcpy(esc, "\\u0000", 6);
  assert_int_equal(verify(nul, one, 1), HOOKD_VERIFY_MALFORMED);
  /* a byte order mark before the body is passed over, as for other providers' bodies */
  char bom[1300];
  snprintf(bom, sizeof bom, "\xef\xbb\xbf%s", cut);
  assert_int_equal(verify(bom, one, 1), HOOKD_VERIFY_OK);
  body_edit(body, sizeof body, "}", ",\"partnerUserId\":\"a\",\"partnerUserId\":\"b\"}");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_string_equal(last_reason, "momo: a field is sent twice");
  body_edit(body, sizeof body, "}", ",\"big\":18446744073709551617}");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_string_equal(last_reason, "momo: an integer beyond 64 bits");
  body_edit(body, sizeof body, "}", ",\"x\":tru}");
  assert_int_equal(verify(body, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_string_equal(last_reason, "momo: body is not valid JSON");
  assert_int_equal(verify("[1]", one, 1), HOOKD_VERIFY_MALFORMED);
  assert_string_equal(last_reason, "momo: body is not a JSON object");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(momo),
      cmocka_unit_test(momo_signed_time),
      cmocka_unit_test(unsigned_look_alikes),
      cmocka_unit_test(not_ijson),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

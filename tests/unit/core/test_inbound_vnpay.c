/* test_inbound_vnpay.c — VNPay IPN vnp_SecureHash (inbound_vnpay.c). VNPay publishes no test
 * vector, so the expected hash was computed with the openssl command line over the data string
 * VNPay's PHP reference builds (vnp_ parameters but the hash ones, sorted, PHP urlencode):
 *   printf '%s' 'vnp_Amount=1000000&vnp_BankCode=NCB&vnp_OrderInfo=Thanh+toan+don+hang%3A5%7Ex&vnp_PayDate=20240101120000&vnp_ResponseCode=00&vnp_TmnCode=DEMO1234&vnp_TransactionNo=14226112&vnp_TxnRef=ORDER5'
 *     | openssl dgst -sha512 -hmac 'VNPAYTESTHASHSECRET'
 * The query below sends the parameters out of order, with %20, '+', a lower-case escape and a
 * raw '~', so decoding and PHP's re-encoding (space as '+', '~' as %7E) are both exercised. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/inbound.h"

#define SECRET "VNPAYTESTHASHSECRET"
#define HASH                                                                                     \
  "2f315d803a13dfe6849f2801644ff3da50a35698455dda4c9faaf912f461951dafa6b76c30e4442ab65b8e0b7c8c" \
  "7c733c915232d52360d664dd8ea0bfd1b145"
#define PARAMS                                                                                   \
  "vnp_TxnRef=ORDER5&vnp_Amount=1000000&utm_source=mail&vnp_BankCode=NCB&vnp_OrderInfo=Thanh%"   \
  "20toan+don%20hang%3a5~x&vnp_PayDate=20240101120000&vnp_ResponseCode=00&vnp_TmnCode=DEMO1234&" \
  "vnp_TransactionNo=14226112&vnp_SecureHashType=HmacSHA512"

/* The vector's vnp_PayDate (2024-01-01 12:00:00 in Vietnam, GMT+7), in Unix seconds: the clock of
 * its IPN's verification. */
#define PAID_S 1704085200LL
static int64_t verify_now = PAID_S + 5;

static int verify_q(const char *query, const char *url, const char *const *secrets, size_t n) {
  hookd_in_request r = {
      .method = "GET", .url = url, .query = query, .body = "", .now_s = verify_now};
  hookd_in_secrets s = {secrets, n};
  hookd_verify_result res;
  int rc = hookd_in_verify(HOOKD_PROVIDER_VNPAY, &r, &s, 0, NULL, &res);
  assert_int_equal(rc, res.rc);
  assert_null(strstr(res.reason, HASH));
  return rc;
}

/* A valid IPN paid more than 3 days before now, or more than a day after, is refused
 * (docs/inbound.md); vnp_PayDate is Vietnam's time, GMT+7. */
static void vnpay_signed_time(void **st) {
  (void)st;
  const char *one[] = {SECRET};
  const char *q = PARAMS "&vnp_SecureHash=" HASH;
  verify_now = PAID_S + HOOKD_IN_IPN_MAX_AGE_S;
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_OK);
  verify_now = PAID_S + HOOKD_IN_IPN_MAX_AGE_S + 1;
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_STALE);
  verify_now = PAID_S - HOOKD_IN_IPN_MAX_AHEAD_S;
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_OK);
  verify_now = PAID_S - HOOKD_IN_IPN_MAX_AHEAD_S - 1;
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_FUTURE);
  verify_now = PAID_S + 5;
}

static void vnpay(void **st) {
  const char *one[] = {SECRET}, *wrong[] = {"VNPAYTESTHASHSECREX"}, *rot[] = {"OLD", SECRET};
  const char *q = PARAMS "&vnp_SecureHash=" HASH;
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(verify_q(q, NULL, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify_q(q, NULL, rot, 2), HOOKD_VERIFY_OK);
  /* from the URL when no separate query is given */
  char url[1024];
  snprintf(url, sizeof url, "https://shop.example.com/vnpay_ipn?%s#frag", q);
  assert_int_equal(verify_q(NULL, url, one, 1), HOOKD_VERIFY_OK);
  /* tampered amount */
  char t[1024];
  snprintf(t, sizeof t, "%s", q);
  char *amount = strstr(t, "vnp_Amount=1000000");
  amount[strlen("vnp_Amount=100000")] = '1';
  assert_int_equal(verify_q(t, NULL, one, 1), HOOKD_VERIFY_MISMATCH);
  /* an added vnp_ parameter is signed data too; a non-vnp one is not */
  assert_int_equal(verify_q(PARAMS "&vnp_Extra=1&vnp_SecureHash=" HASH, NULL, one, 1),
                   HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify_q(PARAMS "&other=1&vnp_SecureHash=" HASH, NULL, one, 1), HOOKD_VERIFY_OK);
  /* upper-case hex */
  char up[1024];
  snprintf(up, sizeof up, "%s", q);
  for (char *p = strstr(up, "vnp_SecureHash=") + 15; *p; p++)
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 32);
  assert_int_equal(verify_q(up, NULL, one, 1), HOOKD_VERIFY_OK);
  /* malformed: no hash, short hash, duplicate parameter, bad escape, no query */
  assert_int_equal(verify_q(PARAMS, NULL, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify_q(PARAMS "&vnp_SecureHash=abcd", NULL, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify_q("vnp_Amount=1&" PARAMS "&vnp_SecureHash=" HASH, NULL, one, 1),
                   HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify_q(PARAMS "&vnp_X=%zz&vnp_SecureHash=" HASH, NULL, one, 1),
                   HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify_q(NULL, "https://shop.example.com/vnpay_ipn", one, 1),
                   HOOKD_VERIFY_MALFORMED);
}

static int verify_body(const char *method, const char *query, const char *body) {
  const char *one[] = {SECRET};
  hookd_in_request r = {
      .method = method, .query = query, .body = body, .body_len = strlen(body),
      .now_s = verify_now};
  hookd_in_secrets s = {one, 1};
  hookd_verify_result res;
  return hookd_in_verify(HOOKD_PROVIDER_VNPAY, &r, &s, 0, NULL, &res);
}

/* Nothing signs a body: a POST carrying one (e.g. a signed query replayed from a customer's
 * vnp_ReturnUrl with a body of the sender's choosing) is refused. */
static void body_refused(void **st) {
  const char *q = PARAMS "&vnp_SecureHash=" HASH;
  assert_int_equal(verify_body("POST", q, ""), HOOKD_VERIFY_OK);
  assert_int_equal(verify_body("POST", q, "vnp_TxnRef=ORDER9&vnp_ResponseCode=00"),
                   HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify_body("GET", q, "x"), HOOKD_VERIFY_MALFORMED);
}

/* A name that a handler's parser reads as a signed vnp_ name — PHP turns "vnp.X", "vnp X",
 * " vnp_X" and "vnp[X" into vnp_X, ASP.NET matches any case — is refused, as is any name
 * outside [A-Za-z0-9_]; so is a vnp_SecureHashType (not signed) that is not an algorithm name. */
static void look_alikes(void **st) {
  const char *one[] = {SECRET};
  static const char *const bad[] = {
      "vnp.ResponseCode=00",   "vnp+ResponseCode=00",  "+vnp_ResponseCode=00",
      "vnp%5BResponseCode=00", "vnp%2EResponseCode=00", "VNP_ResponseCode=00",
      "Vnp_ResponseCode=00",   "vnpResponseCode=00",    "VNP=1",
      "a-b=1",                 "x%00y=1",               "vnp_TxnRef%00=1",
      "=00",                   "=",                     "%C3%A9=1",
      "vnp=1",
  };
  char q[1024];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(q, sizeof q, "%s&%s&vnp_SecureHash=%s", PARAMS, bad[i], HASH);
    assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_MALFORMED);
  }
  /* other parameters in [A-Za-z0-9_] stay allowed (and are not forwarded) */
  assert_int_equal(verify_q(PARAMS "&xvnp_A=1&utm_2=b&vnp_SecureHash=" HASH, NULL, one, 1),
                   HOOKD_VERIFY_OK);
  const char *no_type = "vnp_TxnRef=ORDER5&vnp_Amount=1000000&vnp_BankCode=NCB&vnp_OrderInfo="
                        "Thanh%20toan+don%20hang%3a5~x&vnp_PayDate=20240101120000&vnp_"
                        "ResponseCode=00&vnp_TmnCode=DEMO1234&vnp_TransactionNo=14226112";
  snprintf(q, sizeof q, "%s&vnp_SecureHashType=Hmac+SHA512&vnp_SecureHash=%s", no_type, HASH);
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_MALFORMED);
  snprintf(q, sizeof q, "%s&vnp_SecureHashType=&vnp_SecureHash=%s", no_type, HASH);
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_MALFORMED);
  snprintf(q, sizeof q, "%s&vnp_SecureHashType=SHA512&vnp_SecureHash=%s", no_type, HASH);
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_OK);
}

/* The forward is the signed text, then the hash type and hash; nothing else of the query. */
static void forward(void **st) {
  const char *one[] = {SECRET};
  hookd_in_request r = {
      .method = "GET", .query = PARAMS "&vnp_SecureHash=" HASH, .now_s = verify_now};
  hookd_buf out;
  hookd_buf_init(&out, 65536);
  assert_int_equal(hookd_in_vnpay_forward(&r, false, &out, NULL), 0);
  assert_string_equal(hookd_buf_str(&out),
                      "vnp_Amount=1000000&vnp_BankCode=NCB&vnp_OrderInfo=Thanh+toan+don+hang%3A5%"
                      "7Ex&vnp_PayDate=20240101120000&vnp_ResponseCode=00&vnp_TmnCode=DEMO1234&"
                      "vnp_TransactionNo=14226112&vnp_TxnRef=ORDER5&vnp_SecureHashType=HmacSHA512&"
                      "vnp_SecureHash=" HASH);
  /* the forward, read as a query, verifies */
  assert_int_equal(verify_q(hookd_buf_str(&out), NULL, one, 1), HOOKD_VERIFY_OK);
  /* without a hash type; a query that does not parse gives nothing to forward */
  hookd_buf_reset(&out);
  r.query = "vnp_TxnRef=A&vnp_SecureHash=00";
  size_t signed_len = 99;
  assert_int_equal(hookd_in_vnpay_forward(&r, false, &out, &signed_len), 0);
  assert_string_equal(hookd_buf_str(&out), "vnp_TxnRef=A&vnp_SecureHash=00");
  assert_int_equal(signed_len, strlen("vnp_TxnRef=A"));
  hookd_buf_reset(&out);
  r.query = "vnp_SecureHash=00";
  assert_int_equal(hookd_in_vnpay_forward(&r, false, &out, NULL), 0);
  assert_string_equal(hookd_buf_str(&out), "vnp_SecureHash=00");
  r.query = "VNP_X=1&vnp_SecureHash=00";
  assert_int_equal(hookd_in_vnpay_forward(&r, false, &out, NULL), -1);
  r.query = "vnp_TxnRef=A";
  assert_int_equal(hookd_in_vnpay_forward(&r, false, &out, NULL), -1);
  hookd_buf_free(&out);
}

/* An empty hash secret keys the HMAC with "": a vnp_SecureHash anyone can compute is refused. */
static void empty_secret(void **st) {
  const char *empty[] = {""}, *with_real[] = {"", SECRET};
  const char *data = "vnp_Amount=1000000&vnp_ResponseCode=00&vnp_TxnRef=ORDER5";
  const void *parts[] = {data};
  size_t lens[] = {strlen(data)};
  unsigned char mac[64];
  char q[512];
  int n = snprintf(q, sizeof q, "%s&vnp_SecureHash=", data);
  assert_int_equal(hookd_hmac(HOOKD_MD_SHA512, "", 0, parts, lens, 1, mac), 64);
  for (int i = 0; i < 64; i++) n += snprintf(q + n, sizeof q - (size_t)n, "%02x", mac[i]);
  assert_int_equal(verify_q(q, NULL, empty, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify_q(q, NULL, with_real, 2), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify_q(PARAMS "&vnp_SecureHash=" HASH, NULL, with_real, 2), HOOKD_VERIFY_OK);
}

/* A value with characters the reference encoders disagree on: the hash as VNPay's PHP, Java,
 * .NET or Node.js sample would compute it is taken; a text none of them writes is not. */
static void encoder_flavours(void **st) {
  const char *one[] = {SECRET};
  const char *texts[] = {
      "a+%281%29%2A%21%7E%27b", /* PHP urlencode */
      "a+%281%29*%21%7E%27b",   /* Java URLEncoder */
      "a+(1)*!%7E%27b",         /* .NET WebUtility.UrlEncode */
      "a+(1)*!~'b",             /* Node.js encodeURIComponent, %20 as '+' */
      "a+%281%29%2a%21%7e%27b", /* lower-case escapes: nobody's */
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    char data[256];
    snprintf(data, sizeof data, "vnp_Amount=1&vnp_OrderInfo=%s&vnp_TxnRef=X", texts[i]);
    const void *parts[] = {data};
    size_t lens[] = {strlen(data)};
    unsigned char mac[64];
    assert_int_equal(hookd_hmac(HOOKD_MD_SHA512, SECRET, strlen(SECRET), parts, lens, 1, mac), 64);
    char q[512];
    int n = snprintf(q, sizeof q, "vnp_TxnRef=X&vnp_OrderInfo=a%%20%%281%%29%%2A%%21~%%27b"
                                  "&vnp_Amount=1&vnp_SecureHash=");
    for (int j = 0; j < 64; j++) n += snprintf(q + n, sizeof q - (size_t)n, "%02x", mac[j]);
    assert_int_equal(verify_q(q, NULL, one, 1), i < 4 ? HOOKD_VERIFY_OK : HOOKD_VERIFY_MISMATCH);
  }
}

/* The hex HMAC-SHA512 of data under SECRET, into hex[129]. */
static void mac_hex(const char *data, char hex[129]) {
  const void *parts[] = {data};
  size_t lens[] = {strlen(data)};
  unsigned char mac[64];
  assert_int_equal(hookd_hmac(HOOKD_MD_SHA512, SECRET, strlen(SECRET), parts, lens, 1, mac), 64);
  for (int i = 0; i < 64; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

/* An empty value (vnp_BankTranNo=): VNPay's PHP sample signs it, its Java and .NET samples
 * leave it out. Either text verifies; when only the text without it matched, the forward leaves
 * it out too (nobody signed it), else it is forwarded as signed. */
static void empty_values(void **st) {
  (void)st;
  const char *one[] = {SECRET};
  hookd_in_secrets s = {one, 1};
  char hex[129], q[512];
  hookd_verify_result res;
  hookd_buf out;
  hookd_buf_init(&out, 65536);
  hookd_in_request r = {.method = "GET", .query = q, .body = "", .now_s = verify_now};
  struct {
    const char *signs, *query, *forward;
    bool without_empty;
  } cases[] = {
      /* signed with the empty value (PHP): forwarded with it */
      {"vnp_Amount=1&vnp_BankTranNo=&vnp_TxnRef=X", "vnp_TxnRef=X&vnp_BankTranNo=&vnp_Amount=1",
       "vnp_Amount=1&vnp_BankTranNo=&vnp_TxnRef=X", false},
      /* signed without it (Java, .NET): forwarded without it */
      {"vnp_Amount=1&vnp_TxnRef=X", "vnp_TxnRef=X&vnp_BankTranNo=&vnp_Amount=1",
       "vnp_Amount=1&vnp_TxnRef=X", true},
      /* an empty value added to a query that had none: not signed, not forwarded */
      {"vnp_Amount=1&vnp_TxnRef=X", "vnp_TxnRef=X&vnp_Amount=1&vnp_Zz=",
       "vnp_Amount=1&vnp_TxnRef=X", true},
      /* the Java sample's text: '*' kept, the empty value left out */
      {"vnp_Amount=1&vnp_OrderInfo=a*b&vnp_TxnRef=X",
       "vnp_TxnRef=X&vnp_BankTranNo=&vnp_OrderInfo=a%2Ab&vnp_Amount=1",
       "vnp_Amount=1&vnp_OrderInfo=a%2Ab&vnp_TxnRef=X", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mac_hex(cases[i].signs, hex);
    snprintf(q, sizeof q, "%s&vnp_SecureHash=%s", cases[i].query, hex);
    assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_VNPAY, &r, &s, 0, NULL, &res),
                     HOOKD_VERIFY_OK);
    assert_int_equal(res.signed_without_empty, cases[i].without_empty);
    hookd_buf_reset(&out);
    size_t signed_len = 0;
    assert_int_equal(hookd_in_vnpay_forward(&r, res.signed_without_empty, &out, &signed_len), 0);
    char want[512];
    snprintf(want, sizeof want, "%s&vnp_SecureHash=%s", cases[i].forward, hex);
    assert_string_equal(hookd_buf_str(&out), want);
    assert_int_equal(signed_len, strlen(cases[i].forward));
    /* the forward, read as a query, verifies on its own */
    assert_int_equal(verify_q(hookd_buf_str(&out), NULL, one, 1), HOOKD_VERIFY_OK);
  }
  /* an empty value taken away from a text that signed it: no text matches */
  mac_hex("vnp_Amount=1&vnp_BankTranNo=&vnp_TxnRef=X", hex);
  snprintf(q, sizeof q, "vnp_TxnRef=X&vnp_Amount=1&vnp_SecureHash=%s", hex);
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_MISMATCH);
  /* a value emptied: neither text matches */
  mac_hex("vnp_Amount=1&vnp_BankTranNo=7&vnp_TxnRef=X", hex);
  snprintf(q, sizeof q, "vnp_TxnRef=X&vnp_BankTranNo=&vnp_Amount=1&vnp_SecureHash=%s", hex);
  assert_int_equal(verify_q(q, NULL, one, 1), HOOKD_VERIFY_MISMATCH);
  hookd_buf_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(vnpay),
      cmocka_unit_test(vnpay_signed_time),
      cmocka_unit_test(empty_secret),
      cmocka_unit_test(body_refused),
      cmocka_unit_test(look_alikes),
      cmocka_unit_test(forward),
      cmocka_unit_test(encoder_flavours),
      cmocka_unit_test(empty_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

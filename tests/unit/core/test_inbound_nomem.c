/* test_inbound_nomem.c — a valid provider request is never refused for hookd's own memory
 * failure.
 * malloc, calloc and realloc are wrapped at link time (-Wl,--wrap, this binary only:
 * CMakeLists.txt) so that the Nth allocation the code under test makes fails. Each verifier whose
 * code allocates (Twilio, VNPay, MoMo, Discord) is run on a request it accepts with each of its
 * allocations failing in turn: the result is HOOKD_VERIFY_OK (the failure absorbed) or
 * HOOKD_VERIFY_INTERNAL, which the receive path answers 503 (VNPay "99") so that the provider
 * retries — never MISMATCH or MALFORMED, a 401 (VNPay "97") that a provider takes as final. The
 * valid requests are the vectors of test_inbound_twilio.c, test_inbound_vnpay.c and
 * test_inbound_momo.c, and a Discord request signed here by OpenSSL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "core/inbound.h"
#include "core/sign.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

static long fail_at = -1; /* the allocation (0-based) that fails, or -1 */
static long allocs;       /* allocations made since the count was reset */

static int failing(void) { return fail_at >= 0 && allocs++ == fail_at; }
void *__wrap_malloc(size_t n) { return failing() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return failing() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return failing() ? NULL : __real_realloc(p, n); }

typedef int (*verify_fn)(void *arg);
static char reason[128]; /* the last verification's */

/* Runs verify with each of its allocations failing in turn, up to the first run that made no
 * allocation fail (which must accept). Returns how many runs had a failure. */
static long sweep(verify_fn verify, void *arg, const char *what) {
  for (long n = 0;; n++) {
    allocs = 0;
    fail_at = n;
    int rc = verify(arg);
    fail_at = -1;
    bool hit = allocs > n;
    if (!hit) {
      if (rc != HOOKD_VERIFY_OK)
        fail_msg("%s: refused (%d: %s) with no allocation failing", what, rc, reason);
      return n;
    }
    if (rc != HOOKD_VERIFY_OK && rc != HOOKD_VERIFY_INTERNAL)
      fail_msg("%s: allocation %ld failing gave %d (%s), not OK or INTERNAL", what, n, rc, reason);
  }
}

static int run_g(hookd_provider p, const hookd_in_request *r, const char *secret,
                 const hookd_generic_hmac *g) {
  const char *one[] = {secret};
  hookd_in_secrets s = {one, 1};
  hookd_verify_result res;
  int rc = hookd_in_verify(p, r, &s, 0, g, &res);
  assert_int_equal(rc, res.rc);
  snprintf(reason, sizeof reason, "%s", res.reason);
  return rc;
}

static int run(hookd_provider p, const hookd_in_request *r, const char *secret) {
  return run_g(p, r, secret, NULL);
}

/* Twilio's documented form vector (test_inbound_twilio.c). */
static int twilio(void *arg) {
  (void)arg;
  const char *form = "To=%2B18005551212&CallSid=CA1234567890ABCDE&Digits=1234&"
                     "From=%2B14158675309&Caller=%2B14158675309";
  hookd_in_header h[] = {{"Content-Type", "application/x-www-form-urlencoded"},
                         {"X-Twilio-Signature", "RSOYDt4T1cUTdK1PDd93/VVr8B8="}};
  hookd_in_request r = {.method = "POST", .url = "https://mycompany.com/myapp.php?foo=1&bar=2",
                        .headers = h, .n_headers = 2, .body = form, .body_len = strlen(form),
                        .now_s = 1700000000};
  return run(HOOKD_PROVIDER_TWILIO, &r, "12345");
}

/* test_inbound_vnpay.c's vector. */
static int vnpay(void *arg) {
  (void)arg;
  const char *q =
      "vnp_TxnRef=ORDER5&vnp_Amount=1000000&utm_source=mail&vnp_BankCode=NCB&vnp_OrderInfo=Thanh%"
      "20toan+don%20hang%3a5~x&vnp_PayDate=20240101120000&vnp_ResponseCode=00&vnp_TmnCode=DEMO1234&"
      "vnp_TransactionNo=14226112&vnp_SecureHashType=HmacSHA512&vnp_SecureHash="
      "2f315d803a13dfe6849f2801644ff3da50a35698455dda4c9faaf912f461951dafa6b76c30e4442ab65b8e0b7c8c"
      "7c733c915232d52360d664dd8ea0bfd1b145";
  hookd_in_request r = {.method = "GET", .query = q, .body = "", .now_s = 1704085200LL + 5};
  return run(HOOKD_PROVIDER_VNPAY, &r, "VNPAYTESTHASHSECRET");
}

/* test_inbound_momo.c's vector. */
static int momo(void *arg) {
  (void)arg;
  const char *body =
      "{\"partnerCode\":\"MOMO\",\"orderId\":\"ORD1\",\"requestId\":\"REQ1\",\"amount\":50000,"
      "\"orderInfo\":\"pay with MoMo\",\"orderType\":\"momo_wallet\",\"transId\":4088878653,"
      "\"resultCode\":0,\"message\":\"Thành công.\",\"payType\":\"qr\","
      "\"responseTime\":1721720663942,\"extraData\":\"\",\"signature\":"
      "\"e54179de24e9f1d5d51fc54611d068ebdf88a9483c86e3a0a1fa25b71c981ce6\"}";
  hookd_in_header h[] = {{"Content-Type", "application/json"}};
  hookd_in_request r = {.method = "POST", .url = "https://shop.example.com/momo_ipn",
                        .headers = h, .n_headers = 1, .body = body, .body_len = strlen(body),
                        .now_s = 1721720663LL + 5};
  return run(HOOKD_PROVIDER_MOMO, &r, "ACCESSKEY123:SECRETKEY456");
}

typedef struct discord_req {
  char pub[65], sig[129];
} discord_req;

#define DISCORD_TS "1700000000"
#define DISCORD_BODY "{\"id\":\"1190000000000000000\",\"type\":1,\"application_id\":\"42\"}"

static int discord(void *arg) {
  discord_req *d = arg;
  hookd_in_header h[] = {{"X-Signature-Ed25519", d->sig}, {"X-Signature-Timestamp", DISCORD_TS}};
  hookd_in_request r = {.method = "POST", .url = "https://hooks.example.com/discord",
                        .headers = h, .n_headers = 2, .body = DISCORD_BODY,
                        .body_len = strlen(DISCORD_BODY), .now_s = 1700000000};
  return run(HOOKD_PROVIDER_DISCORD, &r, d->pub);
}

/* Standard Webhooks with an asymmetric key (v1a, Ed25519): its signed text is allocated */
typedef struct standard_req {
  char pub[HOOKD_ED_SECRET_MAX], sig[100];
} standard_req;

#define SW_BODY "{\"type\":\"invoice.paid\"}"

static int standard(void *arg) {
  standard_req *d = arg;
  hookd_in_header h[] = {{"webhook-id", "msg_1"}, {"webhook-timestamp", "1700000000"},
                         {"webhook-signature", d->sig}, {"Content-Type", "application/json"}};
  hookd_in_request r = {.method = "POST", .url = "https://hooks.example.com/sw", .headers = h,
                        .n_headers = 4, .body = SW_BODY, .body_len = strlen(SW_BODY),
                        .now_s = 1700000000};
  return run(HOOKD_PROVIDER_STANDARD, &r, d->pub);
}

/* A generic source checking HTTP Basic credentials: the decoded credentials are allocated */
static int basic(void *arg) {
  (void)arg;
  hookd_in_header h[] = {{"Authorization", "Basic dXNlcjpwYXNzd29yZA=="}}; /* user:password */
  hookd_in_request r = {.method = "POST", .url = "https://hooks.example.com/g", .headers = h,
                        .n_headers = 1, .body = "{}", .body_len = 2, .now_s = 1700000000};
  hookd_generic_hmac g = {.mode = HOOKD_GENERIC_BASIC, .header = "Authorization"};
  return run_g(HOOKD_PROVIDER_GENERIC, &r, "user:password", &g);
}

static void tohex(const unsigned char *in, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", in[i]);
}

static void valid_requests_survive_each_allocation_failing(void **st) {
  (void)st;
  /* each sweep made at least one allocation fail: the verifier allocates, the wrap is in place */
  assert_true(sweep(twilio, NULL, "twilio") > 0);
  assert_true(sweep(vnpay, NULL, "vnpay") > 0);
  assert_true(sweep(momo, NULL, "momo") > 0);

  /* a Discord request signed by OpenSSL (its allocations made before the sweep) */
  discord_req d;
  EVP_PKEY *k = NULL;
  EVP_PKEY_CTX *kc = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
  assert_non_null(kc);
  assert_int_equal(EVP_PKEY_keygen_init(kc), 1);
  assert_int_equal(EVP_PKEY_keygen(kc, &k), 1);
  EVP_PKEY_CTX_free(kc);
  unsigned char pub[32], sig[64];
  size_t len = sizeof pub;
  assert_int_equal(EVP_PKEY_get_raw_public_key(k, pub, &len), 1);
  tohex(pub, 32, d.pub);
  EVP_MD_CTX *mc = EVP_MD_CTX_new();
  const char *msg = DISCORD_TS DISCORD_BODY;
  len = sizeof sig;
  assert_int_equal(EVP_DigestSignInit(mc, NULL, NULL, NULL, k), 1);
  assert_int_equal(EVP_DigestSign(mc, sig, &len, (const unsigned char *)msg, strlen(msg)), 1);
  EVP_MD_CTX_free(mc);
  EVP_PKEY_free(k);
  tohex(sig, 64, d.sig);
  assert_true(sweep(discord, &d, "discord") > 0);

  standard_req sw;
  char whsk[HOOKD_ED_SECRET_MAX];
  assert_int_equal(hookd_ed25519_generate(whsk, sw.pub), 0);
  assert_int_equal(hookd_sign_v1a(whsk, "msg_1", 1700000000, SW_BODY, strlen(SW_BODY), sw.sig), 0);
  assert_true(sweep(standard, &sw, "standard v1a") > 0);
  assert_true(sweep(basic, NULL, "generic basic") > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_requests_survive_each_allocation_failing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_inbound_discord.c — Ed25519 and Discord's interaction signatures (inbound_discord.c).
 * The raw helper is checked against RFC 8032 §7.1 TEST 1 and TEST 2; Discord's scheme
 * (signature over X-Signature-Timestamp + body) with key pairs generated here by OpenSSL and
 * signatures made here with EVP_DigestSign, independent of the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "core/inbound.h"

static void unhex(const char *h, unsigned char *out) {
  size_t n = strlen(h) / 2;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(h + 2 * i, "%2x", &v);
    out[i] = (unsigned char)v;
  }
}

static void tohex(const unsigned char *in, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", in[i]);
}

static void rfc8032(void **st) {
  unsigned char pub[32], sig[64];
  /* TEST 1: empty message */
  unhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", pub);
  unhex(
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701c"
      "f9b46bd25bf5f0595bbe24655141438e7a100b",
      sig);
  assert_int_equal(hookd_ed25519_verify(pub, "", 0, sig), 1);
  assert_int_equal(hookd_ed25519_verify(pub, NULL, 0, sig), 1);
  assert_int_equal(hookd_ed25519_verify(pub, "x", 1, sig), 0);
  sig[0] ^= 1;
  assert_int_equal(hookd_ed25519_verify(pub, "", 0, sig), 0);
  /* TEST 2: one byte, 0x72 */
  unhex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", pub);
  unhex(
      "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0"
      "f11d8c387b2eaeb4302aeeb00d291612bb0c00",
      sig);
  assert_int_equal(hookd_ed25519_verify(pub, "\x72", 1, sig), 1);
  assert_int_equal(hookd_ed25519_verify(pub, "\x73", 1, sig), 0);
}

/* A fresh key pair: hex public key into pubhex (65 bytes). */
static EVP_PKEY *keygen(char *pubhex) {
  EVP_PKEY *k = NULL;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
  assert_non_null(ctx);
  assert_int_equal(EVP_PKEY_keygen_init(ctx), 1);
  assert_int_equal(EVP_PKEY_keygen(ctx, &k), 1);
  EVP_PKEY_CTX_free(ctx);
  unsigned char pub[32];
  size_t len = sizeof pub;
  assert_int_equal(EVP_PKEY_get_raw_public_key(k, pub, &len), 1);
  tohex(pub, 32, pubhex);
  return k;
}

static void sign_hex(EVP_PKEY *k, const char *ts, const char *body, char *sighex) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s%s", ts, body);
  unsigned char sig[64];
  size_t len = sizeof sig;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  assert_int_equal(EVP_DigestSignInit(ctx, NULL, NULL, NULL, k), 1);
  assert_int_equal(EVP_DigestSign(ctx, sig, &len, (const unsigned char *)msg, strlen(msg)), 1);
  EVP_MD_CTX_free(ctx);
  tohex(sig, 64, sighex);
}

static int verify(const char *ts, const char *sighex, const char *body, int64_t now,
                  const char *const *keys, size_t n) {
  hookd_in_header h[] = {{"X-Signature-Ed25519", sighex}, {"X-Signature-Timestamp", ts}};
  hookd_in_request r = {.method = "POST",
                        .url = "https://hooks.example.com/discord",
                        .headers = h,
                        .n_headers = 2,
                        .body = body,
                        .body_len = strlen(body),
                        .now_s = now};
  hookd_in_secrets s = {keys, n};
  hookd_verify_result res;
  int rc = hookd_in_verify(HOOKD_PROVIDER_DISCORD, &r, &s, 0, NULL, &res);
  assert_int_equal(rc, res.rc);
  return rc;
}

#define BODY "{\"id\":\"1190000000000000000\",\"type\":1,\"application_id\":\"42\"}"

static void discord(void **st) {
  char pub[65], other[65], sig[129];
  EVP_PKEY *k = keygen(pub), *k2 = keygen(other);
  sign_hex(k, "1700000000", BODY, sig);
  const char *one[] = {pub}, *wrong[] = {other}, *rot[] = {other, pub};
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000, rot, 2), HOOKD_VERIFY_OK);
  /* tampered body, tampered (signed) timestamp */
  assert_int_equal(verify("1700000000", sig,
                          "{\"id\":\"1190000000000000001\",\"type\":1,\"application_id\":\"42\"}",
                          1700000000, one, 1),
                   HOOKD_VERIFY_MISMATCH);
  assert_int_equal(verify("1700000001", sig, BODY, 1700000000, one, 1), HOOKD_VERIFY_MISMATCH);
  /* stale and future */
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000 + 301, one, 1), HOOKD_VERIFY_STALE);
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000 - 301, one, 1), HOOKD_VERIFY_FUTURE);
  /* malformed signature, timestamp, key */
  assert_int_equal(verify("1700000000", "abcd", BODY, 1700000000, one, 1), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(verify("17000x0000", sig, BODY, 1700000000, one, 1), HOOKD_VERIFY_MALFORMED);
  const char *badkey[] = {"not-hex"};
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000, badkey, 1), HOOKD_VERIFY_MISMATCH);
  /* upper-case hex signature is the same signature */
  for (char *p = sig; *p; p++)
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
  assert_int_equal(verify("1700000000", sig, BODY, 1700000000, one, 1), HOOKD_VERIFY_OK);
  EVP_PKEY_free(k);
  EVP_PKEY_free(k2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rfc8032),
      cmocka_unit_test(discord),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

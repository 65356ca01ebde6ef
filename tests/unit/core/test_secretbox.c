/* test_secretbox.c — sealing secrets at rest: round trip, no plaintext in the sealed text,
 * tampering, the wrong key and moved values (associated data) all fail to open. Also the
 * Ed25519 v1a signatures: sign/verify, tampering, key formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/secretbox.h"
#include "core/sign.h"

static void seal_round_trip(void **s) {
  hookd_master_key k, other;
  char text[64];
  assert_int_equal(hookd_master_key_generate(&k, text), 0);
  hookd_master_key parsed;
  assert_int_equal(hookd_master_key_parse(text, &parsed), 0);
  assert_memory_equal(parsed.key, k.key, 32);
  assert_string_equal(parsed.id, k.id);
  assert_int_equal(hookd_master_key_generate(&other, text), 0);

  const char *secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  char *sealed = hookd_seal(&k, secret, "ep_1");
  assert_non_null(sealed);
  assert_true(hookd_is_sealed(sealed));
  assert_null(strstr(sealed, "MfKQ9r8"));
  char id[HOOKD_KEY_ID_LEN];
  assert_int_equal(hookd_sealed_key_id(sealed, id), 0);
  assert_string_equal(id, k.id);
  char *open = hookd_unseal(&k, sealed, "ep_1");
  assert_string_equal(open, secret);
  free(open);
  /* two seals of the same secret differ (random nonce) */
  char *again = hookd_seal(&k, secret, "ep_1");
  assert_string_not_equal(again, sealed);
  free(again);
  /* wrong key, wrong associated data, tampered bytes */
  assert_null(hookd_unseal(&other, sealed, "ep_1"));
  assert_null(hookd_unseal(&k, sealed, "ep_2"));
  size_t n = strlen(sealed);
  sealed[n - 6] = sealed[n - 6] == 'A' ? 'B' : 'A';
  assert_null(hookd_unseal(&k, sealed, "ep_1"));
  assert_null(hookd_unseal(&k, "whsec_plain", "ep_1"));
  assert_null(hookd_unseal(&k, "sealed:v1:zz:AAAA", "ep_1"));
  free(sealed);
}

/* The wipe itself, on a buffer that stays alive so its bytes can be read afterwards. */
static void secret_wipe_zeroes_every_byte(void **s) {
  (void)s;
  char buf[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  size_t n = strlen(buf);
  hookd_secret_wipe(buf);
  for (size_t i = 0; i < n; i++) assert_int_equal(buf[i], 0);
  hookd_secret_wipe(NULL);
}

static void secret_free_takes_null_and_sealed_values(void **s) {
  (void)s;
  hookd_secret_free(NULL);
  hookd_master_key k;
  char text[64];
  assert_int_equal(hookd_master_key_generate(&k, text), 0);
  char *sealed = hookd_seal(&k, "whsec_c2VjcmV0", "ep_1");
  assert_non_null(sealed);
  hookd_secret_free(sealed); /* LeakSanitizer fails the run if it is not freed */
  hookd_secret_free(strdup("whsec_plain"));
}

static void master_key_formats(void **s) {
  hookd_master_key k;
  assert_int_equal(hookd_master_key_parse("  AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", &k), 0);
  assert_int_equal(
      hookd_master_key_parse("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", &k), 0);
  assert_int_equal(k.key[31], 0x1f);
  assert_int_equal(hookd_master_key_parse("short", &k), -1);
  /* hex digit by digit: a sign or a blank inside a pair is no digit (strtoul took "-0" as 0) */
  assert_int_equal(
      hookd_master_key_parse("-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0-0", &k),
      -1);
  assert_int_equal(
      hookd_master_key_parse("+f0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", &k),
      -1);
  assert_int_equal(
      hookd_master_key_parse("0 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", &k),
      -1);
  assert_int_equal(hookd_master_key_parse("AAAA", &k), -1);
  assert_int_equal(
      hookd_master_key_parse("zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", &k), -1);
}

static void ed25519_v1a(void **s) {
  char sk[HOOKD_ED_SECRET_MAX], pk[HOOKD_ED_SECRET_MAX], pk2[HOOKD_ED_SECRET_MAX], sig[100];
  assert_int_equal(hookd_ed25519_generate(sk, pk), 0);
  assert_int_equal(strncmp(sk, "whsk_", 5), 0);
  assert_int_equal(strncmp(pk, "whpk_", 5), 0);
  assert_int_equal(hookd_ed25519_public(sk, pk2), 0);
  assert_string_equal(pk, pk2);
  const char *body = "{\"a\":1}";
  assert_int_equal(hookd_sign_v1a(sk, "evt_1", 1700000000, body, strlen(body), sig), 0);
  assert_int_equal(strncmp(sig, "v1a,", 4), 0);
  assert_int_equal(hookd_verify_v1a(pk, "evt_1", "1700000000", sig, body, strlen(body), 1700000000, 300),
                   HOOKD_VERIFY_OK);
  assert_int_equal(hookd_verify_v1a(pk, "evt_2", "1700000000", sig, body, strlen(body), 1700000000, 300),
                   HOOKD_VERIFY_MISMATCH);
  assert_int_equal(hookd_verify_v1a(pk, "evt_1", "1700000000", sig, "{\"a\":2}", 7, 1700000000, 300),
                   HOOKD_VERIFY_MISMATCH);
  assert_int_equal(hookd_verify_v1a(pk, "evt_1", "1700000000", sig, body, strlen(body), 1700009999, 300),
                   HOOKD_VERIFY_STALE);
  assert_int_equal(
      hookd_verify_v1a(pk, "evt_1", "1700000000", sig, body, strlen(body), 1699990000, 300),
      HOOKD_VERIFY_FUTURE);
  assert_int_equal(hookd_verify_v1a(pk, "evt_1", "1700000000", "v1,abc", body, strlen(body), 1700000000, 300),
                   HOOKD_VERIFY_MALFORMED);
  assert_int_equal(hookd_sign_v1a("whsec_x", "evt_1", 1, "", 0, sig), -1);
  assert_int_equal(hookd_ed25519_public("whpk_AAAA", pk2), -1);
  /* each check hashes the body: copies of one signature are checked once, and only the first
   * HOOKD_V1A_MAX_SIGS distinct ones are checked at all */
  assert_int_equal(hookd_sign_v1a(sk, "evt_1", 1700000000, body, strlen(body), sig), 0);
  char hdr[4096] = "";
  char one[100] = "v1a,"; /* wrong signatures: a letter, then zero bytes */
  memset(one + 4, 'A', 86);
  memcpy(one + 90, "== ", 4);
  for (int i = 0; i < 40; i++) strcat(hdr, one); /* copies of one wrong signature, the right */
  strcat(hdr, sig);
  const char *keys[] = {"whpk_bad", pk2, pk};
  assert_int_equal(hookd_verify_v1a_any(keys, 3, "evt_1", "1700000000", hdr, body, strlen(body),
                                        1700000000, 300),
                   HOOKD_VERIFY_OK);
  hdr[0] = '\0';
  for (int i = 0; i < HOOKD_V1A_MAX_SIGS; i++) { /* as many distinct wrong ones, then the right */
    one[4] = (char)('B' + i);
    strcat(hdr, one);
  }
  strcat(hdr, sig);
  assert_int_equal(hookd_verify_v1a_any(keys, 3, "evt_1", "1700000000", hdr, body, strlen(body),
                                        1700000000, 300),
                   HOOKD_VERIFY_MISMATCH);
  assert_int_equal(hookd_verify_v1a_any(keys, 1, "evt_1", "1700000000", sig, body, strlen(body),
                                        1700000000, 300),
                   HOOKD_VERIFY_MALFORMED); /* no key */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seal_round_trip),
      cmocka_unit_test(master_key_formats),
      cmocka_unit_test(secret_wipe_zeroes_every_byte),
      cmocka_unit_test(secret_free_takes_null_and_sealed_values),
      cmocka_unit_test(ed25519_v1a),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

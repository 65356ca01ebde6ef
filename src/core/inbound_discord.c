/* inbound_discord.c — Discord interactions: X-Signature-Ed25519 (hex) is an Ed25519 signature
 * over X-Signature-Timestamp followed by the raw body, verified with the application's public
 * key (the configured secret, 64 hex characters). Ed25519 comes from OpenSSL 3's EVP
 * (EVP_PKEY_ED25519, one-shot EVP_DigestVerify). */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "core/inbound_int.h"

int hookd_ed25519_verify(const unsigned char pub[32], const void *msg, size_t len,
                         const unsigned char sig[64]) {
  EVP_PKEY *key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
  if (!key) return -1;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int rc = -1;
  if (ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1) {
    /* EVP_DigestVerify wants a non-NULL pointer even for an empty message. */
    rc = EVP_DigestVerify(ctx, sig, 64, msg ? msg : (const void *)"", len) == 1 ? 1 : 0;
  }
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return rc;
}

int hookd_in_verify_discord(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                            hookd_verify_result *out) {
  const char *sighex = hookd_in_header_get(req, "X-Signature-Ed25519");
  const char *ts = hookd_in_header_get(req, "X-Signature-Timestamp");
  if (!sighex || !ts)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           "discord: missing X-Signature-Ed25519 or X-Signature-Timestamp");
  size_t tslen = strlen(ts), siglen = strlen(sighex);
  int64_t t;
  if (hookd_in_parse_ts(ts, tslen, &t) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "discord: malformed X-Signature-Timestamp");
  sighex = hookd_in_trim(sighex, &siglen);
  unsigned char sig[64];
  if (hookd_hex_decode(sighex, siglen, sig, sizeof sig) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "discord: malformed X-Signature-Ed25519");
  out->timestamp_s = t;
  int rc = hookd_in_check_ts(t, req->now_s, tol);
  if (rc)
    return hookd_in_result(out, rc,
                           rc == HOOKD_VERIFY_STALE ? "discord: timestamp too old"
                                                    : "discord: timestamp in the future");
  if (req->body_len > SIZE_MAX - tslen - 1)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "discord: body too large");
  unsigned char *msg = malloc(tslen + req->body_len + 1);
  if (!msg) return hookd_in_result(out, HOOKD_VERIFY_INTERNAL, "discord: out of memory");
  memcpy(msg, ts, tslen);
  if (req->body_len) memcpy(msg + tslen, req->body, req->body_len);

  int match = 0, usable = 0;
  for (size_t i = 0; i < s->n && i < HOOKD_IN_MAX_SECRETS; i++) {
    unsigned char pub[32];
    size_t klen = strlen(s->v[i]);
    const char *k = hookd_in_trim(s->v[i], &klen);
    if (hookd_hex_decode(k, klen, pub, sizeof pub) != 0) continue;
    usable = 1;
    /* Every key is tried: verification time does not depend on which one matched. */
    match |= hookd_ed25519_verify(pub, msg, tslen + req->body_len, sig) == 1;
  }
  free(msg);
  if (!usable)
    return hookd_in_result(out, HOOKD_VERIFY_MISMATCH,
                           "discord: no usable public key (expected 64 hex characters)");
  return match ? hookd_in_result(out, HOOKD_VERIFY_OK, "discord: signature valid")
               : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "discord: signature does not match");
}

/* secretbox.c — AES-256-GCM sealing (see secretbox.h) on OpenSSL's EVP interface. */
#include "core/secretbox.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/b64.h"
#include "core/ids.h"
#include "core/num.h"
#include "core/sign.h"

#define PREFIX "sealed:v1:"
#define NONCE 12
#define TAG 16

static int key_id(hookd_master_key *k) {
  unsigned char h[32];
  if (hookd_sha256(k->key, sizeof k->key, h) != 0) return -1;
  for (int i = 0; i < 8; i++) snprintf(k->id + 2 * i, 3, "%02x", h[i]);
  return 0;
}

int hookd_master_key_parse(const char *text, hookd_master_key *out) {
  while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r') text++;
  size_t n = strlen(text);
  while (n && (text[n - 1] == ' ' || text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == '\t'))
    n--;
  unsigned char buf[64];
  int rc = -1;
  if (n == 64) {
    /* digit by digit: strtoul took " f", "+f" and "-1" (0xff) for a pair */
    rc = hookd_hex_decode(text, n, out->key, 32);
  } else if (n == 44 && hookd_b64_decode(text, n, buf) == HOOKD_MASTER_KEY_LEN) {
    memcpy(out->key, buf, HOOKD_MASTER_KEY_LEN);
    rc = 0;
  }
  /* (a text that failed may have left part of a key in either) */
  OPENSSL_cleanse(buf, sizeof buf);
  if (rc != 0) {
    OPENSSL_cleanse(out->key, sizeof out->key);
    return -1;
  }
  return key_id(out);
}

int hookd_master_key_generate(hookd_master_key *out, char text[64]) {
  if (hookd_random_bytes(out->key, sizeof out->key) != 0) return -1;
  hookd_b64_encode(out->key, sizeof out->key, text);
  return key_id(out);
}

bool hookd_is_sealed(const char *value) {
  return value && strncmp(value, PREFIX, sizeof PREFIX - 1) == 0;
}

int hookd_sealed_key_id(const char *value, char id[HOOKD_KEY_ID_LEN]) {
  if (!hookd_is_sealed(value)) return -1;
  const char *p = value + sizeof PREFIX - 1;
  const char *colon = strchr(p, ':');
  if (!colon || colon - p != HOOKD_KEY_ID_LEN - 1) return -1;
  memcpy(id, p, HOOKD_KEY_ID_LEN - 1);
  id[HOOKD_KEY_ID_LEN - 1] = '\0';
  return 0;
}

char *hookd_seal(const hookd_master_key *k, const char *plaintext, const char *aad) {
  size_t n = strlen(plaintext);
  unsigned char *raw = malloc(NONCE + n + TAG);
  char *out = malloc(sizeof PREFIX + HOOKD_KEY_ID_LEN + 1 + HOOKD_B64_ENCLEN(NONCE + n + TAG));
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  int len = 0, ok = raw && out && ctx && hookd_random_bytes(raw, NONCE) == 0;
  ok = ok && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, k->key, raw);
  if (ok && aad) ok = EVP_EncryptUpdate(ctx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad));
  ok = ok && EVP_EncryptUpdate(ctx, raw + NONCE, &len, (const unsigned char *)plaintext, (int)n);
  ok = ok && EVP_EncryptFinal_ex(ctx, raw + NONCE + len, &len);
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG, raw + NONCE + n);
  EVP_CIPHER_CTX_free(ctx);
  if (ok) {
    int o = snprintf(out, sizeof PREFIX + HOOKD_KEY_ID_LEN + 1, PREFIX "%s:", k->id);
    hookd_b64_encode(raw, NONCE + n + TAG, out + o);
  }
  if (raw) OPENSSL_cleanse(raw, NONCE + n + TAG);
  free(raw);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

char *hookd_unseal(const hookd_master_key *k, const char *sealed, const char *aad) {
  char id[HOOKD_KEY_ID_LEN];
  if (hookd_sealed_key_id(sealed, id) != 0 || strcmp(id, k->id) != 0) return NULL;
  const char *b64 = sealed + sizeof PREFIX - 1 + HOOKD_KEY_ID_LEN;
  size_t blen = strlen(b64);
  if (blen % 4 || blen / 4 * 3 < NONCE + TAG) return NULL;
  unsigned char *raw = malloc(blen / 4 * 3);
  if (!raw) return NULL;
  long rn = hookd_b64_decode(b64, blen, raw);
  if (rn < NONCE + TAG) {
    free(raw);
    return NULL;
  }
  size_t n = (size_t)rn - NONCE - TAG;
  char *out = malloc(n + 1);
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  int len = 0, ok = out && ctx;
  ok = ok && EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, k->key, raw);
  if (ok && aad) ok = EVP_DecryptUpdate(ctx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad));
  ok = ok && EVP_DecryptUpdate(ctx, (unsigned char *)out, &len, raw + NONCE, (int)n);
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG, raw + NONCE + n);
  ok = ok && EVP_DecryptFinal_ex(ctx, (unsigned char *)out + len, &len) > 0;
  EVP_CIPHER_CTX_free(ctx);
  OPENSSL_cleanse(raw, (size_t)rn);
  free(raw);
  if (!ok) {
    if (out) OPENSSL_cleanse(out, n + 1);
    free(out);
    return NULL;
  }
  out[n] = '\0';
  if (memchr(out, '\0', n)) { /* a secret never holds NUL */
    OPENSSL_cleanse(out, n);
    free(out);
    return NULL;
  }
  return out;
}

void hookd_secret_wipe(char *s) {
  if (s) OPENSSL_cleanse(s, strlen(s));
}

void hookd_secret_free(char *s) {
  hookd_secret_wipe(s);
  free(s);
}

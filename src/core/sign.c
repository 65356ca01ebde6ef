/* sign.c — HMAC helpers and Standard Webhooks v1 sign/verify on OpenSSL 3 EVP_MAC. */
#include "core/sign.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/b64.h"
#include "core/ids.h"

/* OpenSSL 3 looks an algorithm up by name (a locked provider query) whenever it is named in a
 * call (EVP_sha256(), an HMAC "digest" parameter). hookd fetches each one once and copies an
 * unkeyed HMAC context per use instead (the receive thread's CPU per inbound event fell ~8 %). */
static EVP_MD *sha256_md;
static EVP_MAC_CTX *hmac_tmpl[3]; /* by hookd_md, digest set, no key */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;

static void crypto_init(void) {
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
  EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  if (!mac) return;
  static const char *names[] = {[HOOKD_MD_SHA1] = "SHA1", [HOOKD_MD_SHA256] = "SHA256",
                                [HOOKD_MD_SHA512] = "SHA512"};
  for (int i = 0; i < 3; i++) {
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)names[i], 0),
        OSSL_PARAM_construct_end(),
    };
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    if (ctx && EVP_MAC_CTX_set_params(ctx, params) == 1) {
      hmac_tmpl[i] = ctx;
    } else {
      EVP_MAC_CTX_free(ctx);
    }
  }
  EVP_MAC_free(mac); /* the contexts hold their own reference */
}

int hookd_sha256(const void *p, size_t n, unsigned char out[32]) {
  pthread_once(&crypto_once, crypto_init);
  unsigned int len = 0;
  return sha256_md && EVP_Digest(p, n, out, &len, sha256_md, NULL) == 1 && len == 32 ? 0 : -1;
}

int hookd_hmac(hookd_md md, const void *key, size_t keylen, const void *const *parts,
               const size_t *lens, size_t n, unsigned char *out) {
  pthread_once(&crypto_once, crypto_init);
  if ((unsigned)md > HOOKD_MD_SHA512 || !hmac_tmpl[md]) return -1;
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(hmac_tmpl[md]);
  if (!ctx) return -1;
  size_t outlen = 0;
  int ok = EVP_MAC_init(ctx, key, keylen, NULL);
  for (size_t i = 0; ok && i < n; i++) ok = EVP_MAC_update(ctx, parts[i], lens[i]);
  ok = ok && EVP_MAC_final(ctx, out, &outlen, 64);
  EVP_MAC_CTX_free(ctx);
  return ok ? (int)outlen : -1;
}

int hookd_secret_parse(const char *secret, hookd_hmac_key *out) {
  if (strncmp(secret, "whsec_", 6) == 0) secret += 6;
  size_t len = strlen(secret);
  /* decoding writes 3 bytes per 4 characters before padding is subtracted: into a buffer with
   * room for that, then the key's own length is checked (up to HOOKD_KEY_MAX, 128 included) */
  unsigned char buf[HOOKD_KEY_MAX + 3];
  if (len == 0 || len / 4 * 3 > sizeof buf) return -1;
  long n = hookd_b64_decode(secret, len, buf);
  if (n <= 0 || n > HOOKD_KEY_MAX) {
    OPENSSL_cleanse(buf, sizeof buf);
    return -1;
  }
  memcpy(out->bytes, buf, (size_t)n);
  out->len = (size_t)n;
  OPENSSL_cleanse(buf, sizeof buf);
  return 0;
}

int hookd_secret_generate(char out[HOOKD_SECRET_MAX]) {
  unsigned char raw[32];
  if (hookd_random_bytes(raw, sizeof raw) != 0) return -1;
  memcpy(out, "whsec_", 6);
  hookd_b64_encode(raw, sizeof raw, out + 6);
  OPENSSL_cleanse(raw, sizeof raw);
  return 0;
}

static int mac_v1(const hookd_hmac_key *key, const char *msg_id, const char *ts,
                  const void *body, size_t body_len, unsigned char mac[64]) {
  const void *parts[] = {msg_id, ".", ts, ".", body};
  size_t lens[] = {strlen(msg_id), 1, strlen(ts), 1, body_len};
  return hookd_hmac(HOOKD_MD_SHA256, key->bytes, key->len, parts, lens, 5, mac);
}

int hookd_sign_v1(const hookd_hmac_key *key, const char *msg_id, int64_t timestamp,
                  const void *body, size_t body_len, char out[HOOKD_SIG_MAX]) {
  char ts[24];
  snprintf(ts, sizeof ts, "%lld", (long long)timestamp);
  unsigned char mac[64];
  if (mac_v1(key, msg_id, ts, body, body_len, mac) != 32) return -1;
  memcpy(out, "v1,", 3);
  hookd_b64_encode(mac, 32, out + 3);
  return 0;
}

int hookd_ct_equal(const void *a, size_t alen, const void *b, size_t blen) {
  return alen == blen && CRYPTO_memcmp(a, b, alen) == 0;
}

int hookd_ts_check(int64_t ts, int64_t now_s, int64_t tolerance_s) {
  /* The distance is taken in uint64_t, where the difference of any two int64_t values is exact:
   * no now ± tolerance is ever formed, so no value of either can overflow. */
  uint64_t tol = tolerance_s > 0 ? (uint64_t)tolerance_s : 0;
  if (ts < now_s && (uint64_t)now_s - (uint64_t)ts > tol) return HOOKD_VERIFY_STALE;
  if (ts > now_s && (uint64_t)ts - (uint64_t)now_s > tol) return HOOKD_VERIFY_FUTURE;
  return HOOKD_VERIFY_OK;
}

static int parse_ts(const char *s, int64_t *out) {
  if (!s || !*s || strlen(s) > 18) return -1;
  int64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return 0;
}

/* The checks before any signature: the headers are there, the timestamp within tolerance. */
static int check_headers(const char *msg_id, const char *timestamp, const char *sig_header,
                         int64_t now_s, int64_t tolerance_s) {
  int64_t ts;
  if (!msg_id || !*msg_id || !sig_header || parse_ts(timestamp, &ts) != 0)
    return HOOKD_VERIFY_MALFORMED;
  return hookd_ts_check(ts, now_s, tolerance_s); /* <= 0: exact, never "no window" */
}

/* The v1 entries of a webhook-signature header: 0 when there is none; otherwise 1, or 2 when
 * mac (32 bytes; NULL: none) equals one of them (constant time per entry). */
static int v1_entries(const char *sig_header, const unsigned char *mac) {
  int seen = 0, match = 0;
  for (const char *p = sig_header; *p;) {
    while (*p == ' ') p++;
    const char *end = p;
    while (*end && *end != ' ') end++;
    size_t len = (size_t)(end - p);
    if (len > 3 && memcmp(p, "v1,", 3) == 0 && len - 3 <= 88) {
      unsigned char sig[72];
      long n = hookd_b64_decode(p + 3, len - 3, sig);
      if (n > 0) {
        seen = 1;
        if (mac) match |= hookd_ct_equal(sig, (size_t)n, mac, 32);
      }
    }
    p = end;
  }
  return seen + match;
}

int hookd_verify_v1(const hookd_hmac_key *keys, size_t nkeys, const char *msg_id,
                    const char *timestamp, const char *sig_header, const void *body,
                    size_t body_len, int64_t now_s, int64_t tolerance_s) {
  int pre = check_headers(msg_id, timestamp, sig_header, now_s, tolerance_s);
  if (pre != HOOKD_VERIFY_OK) return pre;
  /* every key against every v1 entry (any number of keys) */
  int seen_v1 = v1_entries(sig_header, NULL), match = 0;
  unsigned char mac[64];
  for (size_t k = 0; k < nkeys && seen_v1; k++)
    if (mac_v1(&keys[k], msg_id, timestamp, body, body_len, mac) == 32)
      match |= v1_entries(sig_header, mac) > 1;
  OPENSSL_cleanse(mac, sizeof mac);
  if (!seen_v1) return HOOKD_VERIFY_MALFORMED;
  return match ? HOOKD_VERIFY_OK : HOOKD_VERIFY_MISMATCH;
}

const char *hookd_verify_strerror(int rc) {
  switch (rc) {
  case HOOKD_VERIFY_OK: return "signature valid";
  case HOOKD_VERIFY_MALFORMED: return "missing or malformed webhook headers";
  case HOOKD_VERIFY_STALE: return "timestamp too old";
  case HOOKD_VERIFY_FUTURE: return "timestamp too far in the future";
  case HOOKD_VERIFY_MISMATCH: return "no matching signature";
  case HOOKD_VERIFY_INTERNAL: return "out of memory";
  }
  return "unknown error";
}

/* ---------- Ed25519, v1a ---------- */

static EVP_PKEY *ed_key(const char *text, const char *prefix, int private_key) {
  size_t pl = strlen(prefix);
  if (strncmp(text, prefix, pl) != 0) return NULL;
  const char *b = text + pl;
  size_t len = strlen(b);
  unsigned char raw[48];
  if (len != 44 || hookd_b64_decode(b, len, raw) != 32) return NULL;
  EVP_PKEY *k = private_key ? EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, raw, 32)
                            : EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, 32);
  OPENSSL_cleanse(raw, sizeof raw);
  return k;
}

static int export_key(EVP_PKEY *k, const char *prefix, int private_key, char out[HOOKD_ED_SECRET_MAX]) {
  unsigned char raw[32];
  size_t len = sizeof raw;
  int ok = private_key ? EVP_PKEY_get_raw_private_key(k, raw, &len)
                       : EVP_PKEY_get_raw_public_key(k, raw, &len);
  if (!ok || len != 32) return -1;
  size_t pl = strlen(prefix);
  memcpy(out, prefix, pl);
  hookd_b64_encode(raw, 32, out + pl);
  OPENSSL_cleanse(raw, sizeof raw);
  return 0;
}

int hookd_ed25519_generate(char out_secret[HOOKD_ED_SECRET_MAX],
                           char out_public[HOOKD_ED_SECRET_MAX]) {
  EVP_PKEY *k = NULL;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
  int ok = ctx && EVP_PKEY_keygen_init(ctx) > 0 && EVP_PKEY_keygen(ctx, &k) > 0;
  ok = ok && export_key(k, "whsk_", 1, out_secret) == 0 && export_key(k, "whpk_", 0, out_public) == 0;
  EVP_PKEY_free(k);
  EVP_PKEY_CTX_free(ctx);
  return ok ? 0 : -1;
}

int hookd_ed25519_public(const char *whsk, char out_public[HOOKD_ED_SECRET_MAX]) {
  EVP_PKEY *k = ed_key(whsk, "whsk_", 1);
  int rc = k ? export_key(k, "whpk_", 0, out_public) : -1;
  EVP_PKEY_free(k);
  return rc;
}

static int signed_input(const char *msg_id, const char *ts, const void *body, size_t body_len,
                        unsigned char **out, size_t *out_len) {
  size_t il = strlen(msg_id), tl = strlen(ts);
  size_t n = il + 1 + tl + 1 + body_len;
  unsigned char *m = malloc(n ? n : 1);
  if (!m) return -1;
  memcpy(m, msg_id, il);
  m[il] = '.';
  memcpy(m + il + 1, ts, tl);
  m[il + 1 + tl] = '.';
  if (body_len) memcpy(m + il + tl + 2, body, body_len);
  *out = m;
  *out_len = n;
  return 0;
}

int hookd_sign_v1a(const char *whsk, const char *msg_id, int64_t timestamp, const void *body,
                   size_t body_len, char out[100]) {
  char ts[24];
  snprintf(ts, sizeof ts, "%lld", (long long)timestamp);
  EVP_PKEY *k = ed_key(whsk, "whsk_", 1);
  unsigned char *m = NULL, sig[64];
  size_t mlen = 0, slen = sizeof sig;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = k && ctx && signed_input(msg_id, ts, body, body_len, &m, &mlen) == 0 &&
           EVP_DigestSignInit(ctx, NULL, NULL, NULL, k) > 0 &&
           EVP_DigestSign(ctx, sig, &slen, m, mlen) > 0 && slen == 64;
  if (ok) {
    memcpy(out, "v1a,", 4);
    hookd_b64_encode(sig, 64, out + 4);
  }
  free(m);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(k);
  return ok ? 0 : -1;
}

bool hookd_ed25519_public_ok(const char *whpk) {
  EVP_PKEY *k = ed_key(whpk, "whpk_", 0);
  EVP_PKEY_free(k);
  return k != NULL;
}

int hookd_verify_v1a_any(const char *const *whpks, size_t n, const char *msg_id,
                         const char *timestamp, const char *sig_header, const void *body,
                         size_t body_len, int64_t now_s, int64_t tolerance_s) {
  int pre = check_headers(msg_id, timestamp, sig_header, now_s, tolerance_s);
  if (pre != HOOKD_VERIFY_OK) return pre;
  /* the distinct signatures first (a copy is not checked twice), at most HOOKD_V1A_MAX_SIGS */
  unsigned char sigs[HOOKD_V1A_MAX_SIGS][64];
  size_t nsigs = 0;
  for (const char *p = sig_header; *p && nsigs < HOOKD_V1A_MAX_SIGS;) {
    while (*p == ' ') p++;
    const char *end = p;
    while (*end && *end != ' ') end++;
    unsigned char sig[72];
    if ((size_t)(end - p) == 4 + 88 && memcmp(p, "v1a,", 4) == 0 &&
        hookd_b64_decode(p + 4, 88, sig) == 64) {
      bool copy = false;
      for (size_t i = 0; i < nsigs && !copy; i++) copy = memcmp(sigs[i], sig, 64) == 0;
      if (!copy) memcpy(sigs[nsigs++], sig, 64);
    }
    p = end;
  }
  unsigned char *m = NULL;
  size_t mlen = 0;
  if (signed_input(msg_id, timestamp, body, body_len, &m, &mlen) != 0)
    return HOOKD_VERIFY_INTERNAL; /* out of memory: not the request's fault */
  bool any_key = false, match = false;
  for (size_t k = 0; k < n && !match; k++) {
    EVP_PKEY *key = ed_key(whpks[k], "whpk_", 0);
    if (!key) continue;
    any_key = true;
    for (size_t i = 0; i < nsigs && !match; i++) {
      EVP_MD_CTX *ctx = EVP_MD_CTX_new();
      match = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) > 0 &&
              EVP_DigestVerify(ctx, sigs[i], 64, m, mlen) == 1;
      EVP_MD_CTX_free(ctx);
    }
    EVP_PKEY_free(key);
  }
  free(m);
  if (!any_key || !nsigs) return HOOKD_VERIFY_MALFORMED;
  return match ? HOOKD_VERIFY_OK : HOOKD_VERIFY_MISMATCH;
}

int hookd_verify_v1a(const char *whpk, const char *msg_id, const char *timestamp,
                     const char *sig_header, const void *body, size_t body_len, int64_t now_s,
                     int64_t tolerance_s) {
  return hookd_verify_v1a_any(&whpk, 1, msg_id, timestamp, sig_header, body, body_len, now_s,
                              tolerance_s);
}

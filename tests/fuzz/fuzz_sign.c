/* fuzz_sign.c — libFuzzer target for Standard Webhooks signatures (core/sign.c): webhook-id,
 * webhook-timestamp, webhook-signature and body as a sender controls them, and whsec_/whpk_
 * secret texts. The input is: a control byte, 8 bytes of timestamp, 8 of "now", then segments
 * ending at 0x01 — key bytes, id, a timestamp text, a signature header, a secret text — and the
 * body. Properties:
 *  - hookd_secret_parse reads whsec_<base64 of k> (and bare base64) back as k, and any text it
 *    accepts holds 1..HOOKD_KEY_MAX bytes, the base64 decoding of the text;
 *  - what hookd_sign_v1 signs verifies with the same key (alone, among others, between arbitrary
 *    other header entries) and not with a different key, another body or another id;
 *  - arbitrary headers give a HOOKD_VERIFY_* code; the tolerance check matches exact arithmetic
 *    (a tolerance of 0 accepts the exact second only);
 *  - hookd_sign_v1a likewise with its whpk_ public key and not with another one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/b64.h"
#include "core/sign.h"

static int is_code(int rc) { return rc <= HOOKD_VERIFY_OK && rc >= HOOKD_VERIFY_MISMATCH; }

/* whsec_ text of key bytes */
static void secret_text(const unsigned char *k, size_t n, char *out) {
  memcpy(out, "whsec_", 6);
  hookd_b64_encode(k, n, out + 6);
}

static void secrets(const unsigned char *kb, size_t kn, const char *text) {
  char s[HOOKD_B64_ENCLEN(HOOKD_KEY_MAX) + 8];
  hookd_hmac_key k;
  /* every key length HOOKD_KEY_MAX allows, 127 and 128 bytes included */
  if (kn >= 1 && kn <= HOOKD_KEY_MAX) {
    secret_text(kb, kn, s);
    check(hookd_secret_parse(s, &k) == 0 && k.len == kn && memcmp(k.bytes, kb, kn) == 0);
    check(hookd_secret_parse(s + 6, &k) == 0 && k.len == kn && memcmp(k.bytes, kb, kn) == 0);
  }
  if (hookd_secret_parse(text, &k) == 0) {
    check(k.len >= 1 && k.len <= HOOKD_KEY_MAX);
    const char *b = strncmp(text, "whsec_", 6) == 0 ? text + 6 : text;
    size_t bl = strlen(b);
    unsigned char *raw = malloc(3 * (bl / 4) + 1);
    if (!raw) abort();
    check(hookd_b64_decode(b, bl, raw) == (long)k.len && memcmp(raw, k.bytes, k.len) == 0);
    free(raw);
  }
}

static int verify(const hookd_hmac_key *keys, size_t n, const char *id, const char *ts,
                  const char *hdr, const char *body, size_t blen, int64_t now, int64_t tol) {
  int rc = hookd_verify_v1(keys, n, id, ts, hdr, body, blen, now, tol);
  check(is_code(rc));
  check(hookd_verify_strerror(rc) != NULL);
  return rc;
}

/* |ts - now| <= tol, in 128-bit arithmetic */
static void tolerance(int64_t ts, int64_t now, int64_t tol) {
  __int128 d = (__int128)ts - now, t = tol > 0 ? tol : 0;
  int want = d < -t ? HOOKD_VERIFY_STALE : d > t ? HOOKD_VERIFY_FUTURE : HOOKD_VERIFY_OK;
  check(hookd_ts_check(ts, now, tol) == want);
}

static void v1a(const unsigned char seed[32], const char *id, int64_t ts, const char *tstext,
                const char *hdr, const char *body, size_t blen, const char *pk_text) {
  char sk[HOOKD_ED_SECRET_MAX], pk[HOOKD_ED_SECRET_MAX], sk2[HOOKD_ED_SECRET_MAX],
      pk2[HOOKD_ED_SECRET_MAX], sig[100];
  unsigned char other[32];
  memcpy(sk, "whsk_", 5);
  hookd_b64_encode(seed, 32, sk + 5);
  memcpy(other, seed, 32);
  other[0] ^= 1;
  memcpy(sk2, "whsk_", 5);
  hookd_b64_encode(other, 32, sk2 + 5);
  check(hookd_ed25519_public(sk, pk) == 0 && hookd_ed25519_public(sk2, pk2) == 0);
  check(strncmp(pk, "whpk_", 5) == 0 && strlen(pk) == 49 && strcmp(pk, pk2) != 0);
  check(hookd_sign_v1a(sk, id, ts, body, blen, sig) == 0);
  check(strncmp(sig, "v1a,", 4) == 0 && strlen(sig) == 92);
  char tsbuf[24];
  snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
  check(hookd_verify_v1a(pk, id, tsbuf, sig, body, blen, ts, 0) == HOOKD_VERIFY_OK);
  check(hookd_verify_v1a(pk2, id, tsbuf, sig, body, blen, ts, 0) == HOOKD_VERIFY_MISMATCH);
  size_t hl = strlen(hdr);
  char *multi = malloc(hl + 2 + sizeof sig);
  if (!multi) abort();
  memcpy(multi, hdr, hl);
  multi[hl] = ' ';
  strcpy(multi + hl + 1, sig);
  check(hookd_verify_v1a(pk, id, tsbuf, multi, body, blen, ts, 0) == HOOKD_VERIFY_OK);
  free(multi);
  /* arbitrary header and public key text: a code, and never a match without our signature */
  int rc = hookd_verify_v1a(pk, id, tstext, hdr, body, blen, ts, 0);
  check(is_code(rc) && rc != HOOKD_VERIFY_OK);
  rc = hookd_verify_v1a(pk_text, id, tstext, hdr, body, blen, ts, 0);
  check(is_code(rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 17 || size > 4096) return 0;
  uint8_t ctl = data[0];
  int64_t ts_raw, now;
  memcpy(&ts_raw, data + 1, 8);
  memcpy(&now, data + 9, 8);
  const uint8_t *p = data + 17;
  size_t left = size - 17;
  char *kseg = segment(&p, &left);
  size_t kn = strlen(kseg); /* key bytes: the segment up to a NUL */
  char *id = segment(&p, &left);
  char *tstext = segment(&p, &left);
  char *hdr = segment(&p, &left);
  char *text = segment(&p, &left);
  const char *body = (const char *)p;
  size_t blen = left;

  secrets((const unsigned char *)kseg, kn, text);
  tolerance(ts_raw, now, (int64_t)(ctl & 0x7f) * 37 - 100);

  /* a signed message: its key, a different one (first byte changed: HMAC pads keys with zeros,
   * so a key differing only in trailing zero bytes would be the same key) */
  hookd_hmac_key keys[3];
  memset(keys, 0, sizeof keys);
  keys[0].len = kn ? (kn > HOOKD_KEY_MAX ? HOOKD_KEY_MAX : kn) : 1;
  memcpy(keys[0].bytes, kseg, keys[0].len);
  keys[1] = keys[0];
  keys[1].bytes[0] ^= 0x80;
  keys[2] = keys[1];
  keys[2].bytes[keys[2].len - 1] ^= 0x01;
  int64_t ts = (int64_t)((uint64_t)ts_raw % 1000000000000000000ULL); /* at most 18 digits */
  char tsbuf[24];
  snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
  char sig[HOOKD_SIG_MAX];
  const char *mid = *id ? id : "msg_1";
  check(hookd_sign_v1(&keys[0], mid, ts, body, blen, sig) == 0);
  check(strncmp(sig, "v1,", 3) == 0 && strlen(sig) == 47);
  check(verify(keys, 1, mid, tsbuf, sig, body, blen, ts, 0) == HOOKD_VERIFY_OK);
  check(verify(keys + 1, 2, mid, tsbuf, sig, body, blen, ts, 0) == HOOKD_VERIFY_MISMATCH);
  hookd_hmac_key rot[3] = {keys[1], keys[2], keys[0]};
  check(verify(rot, 3, mid, tsbuf, sig, body, blen, ts, 0) == HOOKD_VERIFY_OK);
  /* between other entries of the header */
  size_t hl = strlen(hdr);
  char *multi = malloc(2 * hl + 2 + HOOKD_SIG_MAX);
  if (!multi) abort();
  memcpy(multi, hdr, hl);
  multi[hl] = ' ';
  memcpy(multi + hl + 1, sig, 47);
  multi[hl + 48] = ' ';
  memcpy(multi + hl + 49, hdr, hl + 1);
  check(verify(keys, 1, mid, tsbuf, multi, body, blen, ts, 0) == HOOKD_VERIFY_OK);
  free(multi);
  /* another body, another id */
  char *body2 = malloc(blen + 1);
  if (!body2) abort();
  if (blen) memcpy(body2, body, blen);
  body2[blen] = 'x';
  check(verify(keys, 1, mid, tsbuf, sig, body2, blen + 1, ts, 0) == HOOKD_VERIFY_MISMATCH);
  if (blen) check(verify(keys, 1, mid, tsbuf, sig, body, blen - 1, ts, 0) == HOOKD_VERIFY_MISMATCH);
  free(body2);
  size_t il = strlen(mid);
  char *id2 = malloc(il + 2);
  if (!id2) abort();
  memcpy(id2, mid, il);
  memcpy(id2 + il, "x", 2);
  check(verify(keys, 1, id2, tsbuf, sig, body, blen, ts, 0) == HOOKD_VERIFY_MISMATCH);
  free(id2);
  /* the timestamp window: inside it the signature decides, outside it the window does */
  int64_t tol = (int64_t)(ctl & 0x7f) * 37;
  int win = hookd_ts_check(ts, now, tol); /* 0: the exact second only */
  check(verify(keys, 1, mid, tsbuf, sig, body, blen, now, tol) == win);

  /* arbitrary header fields: a code, and never OK (the fuzzer does not forge HMAC-SHA256) */
  int rc = verify(keys, 3, id, tstext, hdr, body, blen, now, (ctl & 1) ? 300 : 0);
  check(rc != HOOKD_VERIFY_OK);
  (void)verify(keys, 0, id, tstext, hdr, body, blen, ts, 0);

  if (ctl & 0x80) {
    unsigned char seed[32] = {0};
    memcpy(seed, kseg, kn < 32 ? kn : 32);
    v1a(seed, mid, ts, tstext, hdr, body, blen, text);
  }

  free(kseg);
  free(id);
  free(tstext);
  free(hdr);
  free(text);
  return 0;
}

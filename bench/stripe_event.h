/* stripe_event.h — the Stripe-style event the inbound benchmark sends, shared by
 * bench/inbound_sign.c (pre-signs requests for wrk) and bench/openloop.c (signs each request as
 * it leaves). Header-only; needs OpenSSL's libcrypto.
 *
 * The body is PREFIX + event id + SUFFIX, a JSON document of exactly `bytes` bytes shaped like a
 * Stripe `invoice.paid` event; ids have a fixed length (STRIPE_ID_LEN), so every body has the
 * same size. The signature is Stripe's: header
 *   Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 * (tests/blackbox/lib/providers.mjs signs the same way). */
#ifndef BENCH_STRIPE_EVENT_H
#define BENCH_STRIPE_EVENT_H

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "evt_" + 8-character run tag + "_" + 12 digits */
#define STRIPE_ID_LEN 25

typedef struct {
  char prefix[64];
  char *suffix; /* malloc'd */
  size_t suffix_len;
  size_t bytes; /* whole body */
} stripe_template;

/* Builds the template of a `bytes`-byte body (bytes >= 512) created at `created` (unix s). */
static int stripe_template_init(stripe_template *t, size_t bytes, long long created) {
  static const char head[] = "{\"id\":\"";
  char tail[1024];
  int n = snprintf(tail, sizeof tail,
                   "\",\"object\":\"event\",\"api_version\":\"2024-06-20\",\"created\":%lld,"
                   "\"type\":\"invoice.paid\",\"livemode\":false,\"pending_webhooks\":1,"
                   "\"request\":{\"id\":null,\"idempotency_key\":null},"
                   "\"data\":{\"object\":{\"id\":\"in_1PbenchINV0000000000000\",\"object\":\"invoice\","
                   "\"amount_paid\":4200,\"currency\":\"usd\",\"customer\":\"cus_QbenchCUS00000\","
                   "\"status\":\"paid\",\"description\":\"",
                   created);
  size_t fixed = sizeof head - 1 + STRIPE_ID_LEN + (size_t)n + 4; /* + "\"}}}" */
  if (n < 0 || bytes < fixed + 1 || bytes < 512) return -1;
  snprintf(t->prefix, sizeof t->prefix, "%s", head);
  t->bytes = bytes;
  t->suffix_len = bytes - (sizeof head - 1) - STRIPE_ID_LEN;
  t->suffix = malloc(t->suffix_len + 1);
  if (!t->suffix) return -1;
  memcpy(t->suffix, tail, (size_t)n);
  size_t pad = t->suffix_len - (size_t)n - 4;
  memset(t->suffix + n, 'x', pad);
  memcpy(t->suffix + n + pad, "\"}}}", 5);
  return 0;
}

/* The id of request i of run `tag` (8 characters). */
static void stripe_event_id(char out[STRIPE_ID_LEN + 1], const char *tag, unsigned long long i) {
  snprintf(out, STRIPE_ID_LEN + 1, "evt_%.8s_%012llu", tag, i % 1000000000000ULL);
}

/* Writes the body for `id` into out (t->bytes + 1 bytes). */
static void stripe_body(const stripe_template *t, const char *id, char *out) {
  size_t p = strlen(t->prefix);
  memcpy(out, t->prefix, p);
  memcpy(out + p, id, STRIPE_ID_LEN);
  memcpy(out + p + STRIPE_ID_LEN, t->suffix, t->suffix_len + 1);
}

/* hex HMAC-SHA256(secret, "<ts>.<body>") into out (65 bytes). */
static void stripe_sign(const char *secret, long long ts, const char *body, size_t len,
                        char out[65]) {
  char tsbuf[32];
  int tn = snprintf(tsbuf, sizeof tsbuf, "%lld.", ts);
  unsigned char mac[32];
  unsigned int ml = 32;
  /* HMAC over two pieces without copying the body (OpenSSL's HMAC_* API: deprecated in 3.0
   * but present, and shorter than EVP_MAC). */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  HMAC_CTX *h = HMAC_CTX_new();
  HMAC_Init_ex(h, secret, (int)strlen(secret), EVP_sha256(), NULL);
  HMAC_Update(h, (const unsigned char *)tsbuf, (size_t)tn);
  HMAC_Update(h, (const unsigned char *)body, len);
  HMAC_Final(h, mac, &ml);
  HMAC_CTX_free(h);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hx[mac[i] >> 4];
    out[2 * i + 1] = hx[mac[i] & 15];
  }
  out[64] = '\0';
}

#endif

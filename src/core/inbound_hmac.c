/* inbound_hmac.c — the HMAC-family inbound verifiers: Standard Webhooks / Svix (through
 * sign.h's hookd_verify_v1), Stripe, GitHub, Shopify, Slack, GitLab (shared token), Paddle
 * Billing, Zoom and the configurable generic HMAC. Each computes one MAC per configured secret
 * and compares every received signature against every MAC in constant time, without stopping
 * at the first match. Reasons name the failed check, never a value. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/b64.h"
#include "core/inbound_int.h"

/* One MAC per usable secret. */
typedef struct macset {
  unsigned char mac[HOOKD_IN_MAX_SECRETS][64];
  size_t n;
  size_t len;
} macset;

static void macs_compute(hookd_md md, const hookd_in_secrets *s, const void *const *parts,
                         const size_t *lens, size_t nparts, macset *m) {
  m->n = 0;
  m->len = 0;
  for (size_t i = 0; i < s->n && m->n < HOOKD_IN_MAX_SECRETS; i++) {
    int n = hookd_hmac(md, s->v[i], strlen(s->v[i]), parts, lens, nparts, m->mac[m->n]);
    if (n > 0) {
      m->len = (size_t)n;
      m->n++;
    }
  }
}

/* 1 + the index of the first MAC sig equals, 0 when none; examines every MAC. */
static int macs_match(const macset *m, const unsigned char *sig, size_t siglen) {
  int match = 0;
  for (size_t i = 0; i < m->n; i++)
    if (hookd_ct_equal(sig, siglen, m->mac[i], m->len) && !match) match = (int)i + 1;
  return match;
}

static void macs_clear(macset *m) { OPENSSL_cleanse(m, sizeof *m); }

static int ts_failure(hookd_verify_result *out, int rc, const char *stale, const char *future) {
  return hookd_in_result(out, rc, rc == HOOKD_VERIFY_STALE ? stale : future);
}

/* Strips a case-insensitive prefix; NULL when absent. */
static const char *after_prefix(const char *v, const char *prefix) {
  size_t n = strlen(prefix);
  return strncasecmp(v, prefix, n) == 0 ? v + n : NULL;
}

/* ---- Standard Webhooks / Svix ---------------------------------------------------------- */

/* Standard Webhooks secrets are padded base64 (hookd_secret_parse bounds the length). */
static int key_fits(const char *secret) {
  if (strncmp(secret, "whsec_", 6) == 0) secret += 6;
  return strlen(secret) % 4 == 0;
}

void hookd_in_standard_headers(const hookd_in_request *req, const char **id, const char **ts,
                               const char **sig) {
  *id = hookd_in_header_get(req, "webhook-id");
  *ts = hookd_in_header_get(req, "webhook-timestamp");
  *sig = hookd_in_header_get(req, "webhook-signature");
  if (!*id && !*ts && !*sig) {
    *id = hookd_in_header_get(req, "svix-id");
    *ts = hookd_in_header_get(req, "svix-timestamp");
    *sig = hookd_in_header_get(req, "svix-signature");
  }
}

int hookd_in_verify_standard(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                             hookd_verify_result *out) {
  const char *id, *ts, *sig;
  hookd_in_standard_headers(req, &id, &ts, &sig);
  if (!id || !ts || !sig)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           "standard: missing webhook-id, -timestamp or -signature header");
  int64_t t;
  if (hookd_in_parse_ts(ts, strlen(ts), &t) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "standard: malformed timestamp");
  out->timestamp_s = t;

  hookd_hmac_key keys[HOOKD_IN_MAX_SECRETS];
  size_t nkeys = 0, npub = 0;
  for (size_t i = 0; i < s->n && nkeys < HOOKD_IN_MAX_SECRETS; i++)
    if (strncmp(s->v[i], "whpk_", 5) != 0 && key_fits(s->v[i]) &&
        hookd_secret_parse(s->v[i], &keys[nkeys]) == 0)
      nkeys++;
  const char *body = req->body ? req->body : "";
  int rc, rc_h = -1, rc_a = -1;
  /* symmetric (v1): hookd_verify_v1 takes at most 8 keys at once */
  for (size_t off = 0; off < nkeys; off += 8) {
    size_t k = nkeys - off < 8 ? nkeys - off : 8;
    rc_h = hookd_verify_v1(keys + off, k, id, ts, sig, body, req->body_len, req->now_s, tol);
    if (rc_h != HOOKD_VERIFY_MISMATCH) break;
  }
  OPENSSL_cleanse(keys, sizeof keys);
  /* asymmetric (v1a): whpk_ public keys, any may match (the signed text built once) */
  const char *pub[HOOKD_IN_MAX_SECRETS];
  for (size_t i = 0; i < s->n && i < HOOKD_IN_MAX_SECRETS; i++)
    if (strncmp(s->v[i], "whpk_", 5) == 0) pub[npub++] = s->v[i];
  if (npub && rc_h != HOOKD_VERIFY_OK)
    rc_a = hookd_verify_v1a_any(pub, npub, id, ts, sig, body, req->body_len, req->now_s, tol);
  if (!nkeys && !npub)
    return hookd_in_result(out, HOOKD_VERIFY_MISMATCH,
                           "standard: no usable secret (expected whsec_<base64> or whpk_<base64>)");
  /* one scheme's match wins; both check the same timestamp first; a signature of a scheme that
   * did not match is a mismatch; no signature of either scheme is malformed */
  if (rc_h == HOOKD_VERIFY_OK || rc_a == HOOKD_VERIFY_OK)
    rc = HOOKD_VERIFY_OK;
  else if (rc_h == HOOKD_VERIFY_STALE || rc_h == HOOKD_VERIFY_FUTURE)
    rc = rc_h;
  else if (rc_a == HOOKD_VERIFY_STALE || rc_a == HOOKD_VERIFY_FUTURE)
    rc = rc_a;
  else if (rc_h == HOOKD_VERIFY_INTERNAL || rc_a == HOOKD_VERIFY_INTERNAL)
    rc = HOOKD_VERIFY_INTERNAL; /* a key not checked: not a mismatch */
  else if (rc_h == HOOKD_VERIFY_MISMATCH || rc_a == HOOKD_VERIFY_MISMATCH)
    rc = HOOKD_VERIFY_MISMATCH;
  else
    rc = HOOKD_VERIFY_MALFORMED;
  switch (rc) {
  case HOOKD_VERIFY_OK: return hookd_in_result(out, rc, "standard: signature valid");
  case HOOKD_VERIFY_STALE: return hookd_in_result(out, rc, "standard: timestamp too old");
  case HOOKD_VERIFY_FUTURE: return hookd_in_result(out, rc, "standard: timestamp in the future");
  case HOOKD_VERIFY_MALFORMED:
    return hookd_in_result(out, rc, "standard: malformed headers or no v1/v1a signature");
  case HOOKD_VERIFY_INTERNAL: return hookd_in_result(out, rc, "standard: out of memory");
  default: return hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "standard: no signature matches");
  }
}

/* ---- Stripe ------------------------------------------------------------------------------ */

int hookd_in_verify_stripe(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                           hookd_verify_result *out) {
  const char *h = hookd_in_header_get(req, "Stripe-Signature");
  if (!h) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "stripe: missing Stripe-Signature");
  const char *t = NULL;
  size_t tlen = 0;
  const char *v1[HOOKD_IN_MAX_SIGS];
  size_t v1len[HOOKD_IN_MAX_SIGS], nv1 = 0;
  const char *p = h;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *item = hookd_in_trim(p, &len);
    if (len > 2 && memcmp(item, "t=", 2) == 0 && !t) {
      t = item + 2;
      tlen = len - 2;
    } else if (len > 3 && memcmp(item, "v1=", 3) == 0 && nv1 < HOOKD_IN_MAX_SIGS) {
      v1[nv1] = item + 3;
      v1len[nv1++] = len - 3;
    }
    if (!end) break;
    p = end + 1;
  }
  int64_t ts;
  if (!t || hookd_in_parse_ts(t, tlen, &ts) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "stripe: missing or malformed t=");
  if (!nv1) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "stripe: no v1 signature");
  out->timestamp_s = ts;
  int rc = hookd_in_check_ts(ts, req->now_s, tol);
  if (rc)
    return ts_failure(out, rc, "stripe: timestamp too old", "stripe: timestamp in the future");

  macset m;
  const void *parts[] = {t, ".", req->body ? req->body : ""};
  size_t lens[] = {tlen, 1, req->body_len};
  macs_compute(HOOKD_MD_SHA256, s, parts, lens, 3, &m);
  int match = 0;
  for (size_t i = 0; i < nv1; i++) {
    unsigned char sig[32];
    if (hookd_hex_decode(v1[i], v1len[i], sig, sizeof sig) == 0)
      match |= macs_match(&m, sig, 32);
  }
  macs_clear(&m);
  return match ? hookd_in_result(out, HOOKD_VERIFY_OK, "stripe: signature valid")
               : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "stripe: no v1 signature matches");
}

/* ---- GitHub, Shopify: a MAC of the body alone --------------------------------------------- */

static int body_mac_match(const hookd_in_request *req, const hookd_in_secrets *s, hookd_md md,
                          const unsigned char *sig, size_t siglen) {
  macset m;
  const void *parts[] = {req->body ? req->body : ""};
  size_t lens[] = {req->body_len};
  macs_compute(md, s, parts, lens, 1, &m);
  int match = macs_match(&m, sig, siglen);
  macs_clear(&m);
  return match;
}

int hookd_in_verify_github(const hookd_in_request *req, const hookd_in_secrets *s,
                           hookd_verify_result *out) {
  const char *h = hookd_in_header_get(req, "X-Hub-Signature-256");
  if (!h)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "github: missing X-Hub-Signature-256");
  const char *hex = after_prefix(h, "sha256=");
  unsigned char sig[32];
  size_t len = hex ? strlen(hex) : 0;
  if (hex) hex = hookd_in_trim(hex, &len);
  if (!hex || hookd_hex_decode(hex, len, sig, sizeof sig) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "github: malformed X-Hub-Signature-256");
  return body_mac_match(req, s, HOOKD_MD_SHA256, sig, sizeof sig)
             ? hookd_in_result(out, HOOKD_VERIFY_OK, "github: signature valid")
             : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "github: signature does not match");
}

int hookd_in_verify_shopify(const hookd_in_request *req, const hookd_in_secrets *s,
                            hookd_verify_result *out) {
  const char *h = hookd_in_shopify_header(req, "Hmac-Sha256");
  if (!h)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           "shopify: missing X-Shopify-Hmac-Sha256 (or Shopify-Hmac-Sha256)");
  size_t len = strlen(h);
  h = hookd_in_trim(h, &len);
  unsigned char sig[48];
  long n = len == 44 ? hookd_b64_decode(h, len, sig) : -1;
  if (n != 32)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "shopify: malformed X-Shopify-Hmac-Sha256");
  return body_mac_match(req, s, HOOKD_MD_SHA256, sig, 32)
             ? hookd_in_result(out, HOOKD_VERIFY_OK, "shopify: signature valid")
             : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "shopify: signature does not match");
}

/* ---- Slack and Zoom: "v0=" hex of "v0:<timestamp>:<body>" ---------------------------------- */

static int v0_scheme(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                     const char *sig_header, const char *ts_header, int allow_ms,
                     const char *const reasons[7], hookd_verify_result *out) {
  const char *h = hookd_in_header_get(req, sig_header);
  const char *ts = hookd_in_header_get(req, ts_header);
  if (!h || !ts) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, reasons[0]);
  size_t tslen = strlen(ts);
  int64_t t;
  if (hookd_in_parse_ts(ts, tslen, &t) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, reasons[1]);
  if (allow_ms && t >= 100000000000LL) t /= 1000; /* milliseconds */
  const char *hex = after_prefix(h, "v0=");
  size_t len = hex ? strlen(hex) : 0;
  if (hex) hex = hookd_in_trim(hex, &len);
  unsigned char sig[32];
  if (!hex || hookd_hex_decode(hex, len, sig, sizeof sig) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, reasons[2]);
  out->timestamp_s = t;
  int rc = hookd_in_check_ts(t, req->now_s, tol);
  if (rc) return ts_failure(out, rc, reasons[3], reasons[4]);
  macset m;
  const void *parts[] = {"v0:", ts, ":", req->body ? req->body : ""};
  size_t lens[] = {3, tslen, 1, req->body_len};
  macs_compute(HOOKD_MD_SHA256, s, parts, lens, 4, &m);
  int match = macs_match(&m, sig, sizeof sig);
  macs_clear(&m);
  if (match) out->secret = s->v[match - 1]; /* Zoom's handshake answers with it */
  return match ? hookd_in_result(out, HOOKD_VERIFY_OK, reasons[5])
               : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, reasons[6]);
}

int hookd_in_verify_slack(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                          hookd_verify_result *out) {
  static const char *const reasons[7] = {
      "slack: missing X-Slack-Signature or X-Slack-Request-Timestamp",
      "slack: malformed X-Slack-Request-Timestamp",
      "slack: malformed X-Slack-Signature",
      "slack: timestamp too old",
      "slack: timestamp in the future",
      "slack: signature valid",
      "slack: signature does not match",
  };
  return v0_scheme(req, s, tol, "X-Slack-Signature", "X-Slack-Request-Timestamp", 0, reasons, out);
}

int hookd_in_verify_zoom(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                         hookd_verify_result *out) {
  static const char *const reasons[7] = {
      "zoom: missing x-zm-signature or x-zm-request-timestamp",
      "zoom: malformed x-zm-request-timestamp",
      "zoom: malformed x-zm-signature",
      "zoom: timestamp too old",
      "zoom: timestamp in the future",
      "zoom: signature valid",
      "zoom: signature does not match",
  };
  return v0_scheme(req, s, tol, "x-zm-signature", "x-zm-request-timestamp", 1, reasons, out);
}

/* ---- GitLab: the secret token itself, compared through SHA-256 so that its length is not
 * exposed by the comparison either; or, for a hook with a signing token (a whsec_ secret),
 * a Standard Webhooks signature, which covers the body the token does not ------------------ */

static bool is_signing_token(const char *secret) { return strncmp(secret, "whsec_", 6) == 0; }

/* A presented credential against each secret: compared as SHA-256 digests in constant time
 * (neither the secrets' lengths nor which one matched show in the time taken). */
static bool credential_matches(const void *got, size_t len, const hookd_in_secrets *s) {
  unsigned char g[32], want[32];
  if (hookd_sha256(got, len, g) != 0) return false;
  int match = 0;
  for (size_t i = 0; i < s->n && i < HOOKD_IN_MAX_SECRETS; i++) {
    if (!*s->v[i] || hookd_sha256(s->v[i], strlen(s->v[i]), want) != 0) continue;
    match |= CRYPTO_memcmp(g, want, 32) == 0;
  }
  OPENSSL_cleanse(want, sizeof want);
  OPENSSL_cleanse(g, sizeof g);
  return match;
}

int hookd_in_verify_gitlab(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                           hookd_verify_result *out) {
  /* A source holding a signing token takes signed requests only, judged by their signature
   * alone: a valid token beside a signature that does not match is a tampered body, and a
   * token without a signature is a captured request whose body may have been changed (GitLab
   * sends the token with every request of the hook). */
  /* the signing tokens alone sign: a plain token that reads as base64 (most do) was taken for
   * an HMAC key too, and GitLab sends it in clear with every request — anyone who saw one
   * signed any body with it (a review) */
  const char *signing[HOOKD_IN_MAX_SECRETS];
  hookd_in_secrets only = {signing, 0};
  for (size_t i = 0; i < s->n && i < HOOKD_IN_MAX_SECRETS; i++)
    if (is_signing_token(s->v[i])) signing[only.n++] = s->v[i];
  if (only.n) {
    int rc = hookd_in_verify_standard(req, &only, tol, out);
    switch (rc) {
    case HOOKD_VERIFY_OK: return hookd_in_result(out, rc, "gitlab: signature valid");
    case HOOKD_VERIFY_STALE: return hookd_in_result(out, rc, "gitlab: timestamp too old");
    case HOOKD_VERIFY_FUTURE: return hookd_in_result(out, rc, "gitlab: timestamp in the future");
    case HOOKD_VERIFY_MALFORMED:
      return hookd_in_result(out, rc, "gitlab: malformed webhook-id, -timestamp or -signature");
    default: return hookd_in_result(out, rc, "gitlab: signature does not match");
    }
  }
  /* (no secret is a signing token here: none is taken as a token) */
  const char *tok = hookd_in_header_get(req, "X-Gitlab-Token");
  if (!tok || !*tok)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "gitlab: missing X-Gitlab-Token");
  return credential_matches(tok, strlen(tok), s)
             ? hookd_in_result(out, HOOKD_VERIFY_OK, "gitlab: token valid")
             : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "gitlab: token does not match");
}

/* ---- Paddle Billing: "ts=<t>;h1=<hex>[;h1=<hex>…]" over "<t>:<body>" -------------------- */

int hookd_in_verify_paddle(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                           hookd_verify_result *out) {
  const char *h = hookd_in_header_get(req, "Paddle-Signature");
  if (!h) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "paddle: missing Paddle-Signature");
  const char *t = NULL;
  size_t tlen = 0;
  const char *h1[HOOKD_IN_MAX_SIGS];
  size_t h1len[HOOKD_IN_MAX_SIGS], nh1 = 0;
  const char *p = h;
  while (*p) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *item = hookd_in_trim(p, &len);
    if (len > 3 && memcmp(item, "ts=", 3) == 0 && !t) {
      t = item + 3;
      tlen = len - 3;
    } else if (len > 3 && memcmp(item, "h1=", 3) == 0 && nh1 < HOOKD_IN_MAX_SIGS) {
      h1[nh1] = item + 3;
      h1len[nh1++] = len - 3;
    }
    if (!end) break;
    p = end + 1;
  }
  int64_t ts;
  if (!t || hookd_in_parse_ts(t, tlen, &ts) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "paddle: missing or malformed ts=");
  if (!nh1) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "paddle: no h1 signature");
  out->timestamp_s = ts;
  int rc = hookd_in_check_ts(ts, req->now_s, tol);
  if (rc)
    return ts_failure(out, rc, "paddle: timestamp too old", "paddle: timestamp in the future");
  macset m;
  const void *parts[] = {t, ":", req->body ? req->body : ""};
  size_t lens[] = {tlen, 1, req->body_len};
  macs_compute(HOOKD_MD_SHA256, s, parts, lens, 3, &m);
  int match = 0;
  for (size_t i = 0; i < nh1; i++) {
    unsigned char sig[32];
    if (hookd_hex_decode(h1[i], h1len[i], sig, sizeof sig) == 0)
      match |= macs_match(&m, sig, 32);
  }
  macs_clear(&m);
  return match ? hookd_in_result(out, HOOKD_VERIFY_OK, "paddle: signature valid")
               : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "paddle: no h1 signature matches");
}

/* ---- Generic HMAC -------------------------------------------------------------------------- */

#define TEMPLATE_MAX 512
#define TEMPLATE_PARTS 64

/* The placeholder at t ({body}, {id} or {timestamp}): its length, 0 for none. */
static size_t placeholder_at(const char *t) {
  return !strncmp(t, "{body}", 6) ? 6 : !strncmp(t, "{id}", 4) ? 4
                                        : !strncmp(t, "{timestamp}", 11) ? 11 : 0;
}

const char *hookd_in_generic_template_problem(const char *tpl) {
  if (!tpl || !*tpl) return NULL; /* ("{body}") */
  if (!strstr(tpl, "{body}")) return "does not sign {body}";
  bool after_tag = false, body_seen = false;
  for (size_t i = 0; tpl[i];) {
    size_t k = placeholder_at(tpl + i);
    if (!k) {
      after_tag = false;
      i++;
      continue;
    }
    /* what signs "{id}{body}" signs id "evt_1" and body "2{…}" as well as "evt_12" and "{…}":
     * a captured request replayed as a new event, its bytes split anew (a review). But for a
     * {timestamp} after it (HubSpot's v3 signs method, URL, body, timestamp): digits without a
     * leading zero, checked against the tolerance, and nothing appended to it (a placeholder
     * after one is refused here) — a digit moved across its start changes it tenfold */
    bool ts = k == 11;
    if (after_tag && !ts)
      return "must put literal text between its placeholders ({id}.{body}; a {timestamp} may "
             "follow one directly)";
    /* a body holds any separator: a placeholder after it could take a piece of it */
    if (body_seen && !ts)
      return "must have {body} as its last placeholder but for a {timestamp} "
             "({timestamp}.{body}, {body}{timestamp})";
    body_seen = k == 6;
    after_tag = true;
    i += k;
  }
  return NULL;
}

/* generic, token and basic modes: the request carries a credential, not a signature — nothing
 * binds it to the body or to a time (docs/inbound.md "Generic sources"). */
static int verify_credential(const hookd_in_request *req, const hookd_in_secrets *s,
                             const hookd_generic_hmac *g, hookd_verify_result *out) {
  bool basic = g->mode == HOOKD_GENERIC_BASIC;
  const char *h = hookd_in_header_get(req, basic ? "Authorization" : g->header);
  if (!h || !*h)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           basic ? "generic: missing Authorization"
                                 : "generic: missing token header");
  const char *prefix = basic ? "Basic " : g->prefix;
  if (prefix && *prefix && !(h = after_prefix(h, prefix)))
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           basic ? "generic: Authorization is not Basic"
                                 : "generic: token prefix absent");
  size_t n = strlen(h);
  h = hookd_in_trim(h, &n);
  if (!n) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: empty credential");
  bool match;
  if (basic) {
    unsigned char *plain = NULL;
    if (n % 4 == 0 && !(plain = malloc(3 * (n / 4) + 1)))
      return hookd_in_result(out, HOOKD_VERIFY_INTERNAL, "generic: out of memory");
    long m = plain ? hookd_b64_decode(h, n, plain) : -1;
    if (m <= 0 || !memchr(plain, ':', (size_t)m)) {
      free(plain);
      return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: malformed Basic credentials");
    }
    match = credential_matches(plain, (size_t)m, s);
    OPENSSL_cleanse(plain, (size_t)m);
    free(plain);
  } else {
    match = credential_matches(h, n, s);
  }
  return match ? hookd_in_result(out, HOOKD_VERIFY_OK, "generic: credential valid")
               : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "generic: credential does not match");
}

int hookd_in_verify_generic(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                            const hookd_generic_hmac *g, hookd_verify_result *out) {
  if (g->mode != HOOKD_GENERIC_HMAC) return verify_credential(req, s, g, out);
  if (g->algorithm != HOOKD_MD_SHA1 && g->algorithm != HOOKD_MD_SHA256 &&
      g->algorithm != HOOKD_MD_SHA512)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: unknown algorithm");
  if (g->encoding != HOOKD_ENC_HEX && g->encoding != HOOKD_ENC_BASE64)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: unknown encoding");
  const char *h = hookd_in_header_get(req, g->header);
  if (!h) {
    char why[128];
    snprintf(why, sizeof why, "generic: missing %s", g->header);
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, why);
  }
  if (g->prefix && *g->prefix) {
    h = after_prefix(h, g->prefix);
    if (!h) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: signature prefix absent");
  }
  size_t hlen = strlen(h);
  h = hookd_in_trim(h, &hlen);
  size_t maclen = g->algorithm == HOOKD_MD_SHA1 ? 20 : g->algorithm == HOOKD_MD_SHA256 ? 32 : 64;
  unsigned char sig[96];
  int ok;
  if (g->encoding == HOOKD_ENC_HEX) {
    ok = hookd_hex_decode(h, hlen, sig, maclen) == 0;
  } else {
    ok = hlen == HOOKD_B64_ENCLEN(maclen) - 1 && hookd_b64_decode(h, hlen, sig) == (long)maclen;
  }
  if (!ok) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: malformed signature");

  /* A configured timestamp or id the template leaves out would be trusted unsigned (a
   * captured request replayed later under a fresh timestamp and id), as would the body. */
  const char *tpl = g->template && *g->template ? g->template : "{body}";
  const char *bad_tpl = hookd_in_generic_template_problem(tpl);
  if (bad_tpl) { /* (a source stored before the check: refused, never verified) */
    char why[128];
    snprintf(why, sizeof why, "generic: the template %s", bad_tpl);
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, why);
  }
  if (g->timestamp_header && *g->timestamp_header && !strstr(tpl, "{timestamp}"))
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           "generic: timestamp_header set but the template does not sign it");
  if (g->id_header && *g->id_header && !strstr(tpl, "{id}"))
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                           "generic: id_header set but the template does not sign it");

  const char *id = g->id_header && *g->id_header ? hookd_in_header_get(req, g->id_header) : NULL;
  const char *ts = NULL;
  if (g->timestamp_header && *g->timestamp_header) {
    ts = hookd_in_header_get(req, g->timestamp_header);
    int64_t t;
    /* (a leading zero: none is sent, and a template whose {timestamp} touches another
     * placeholder relies on there being none) */
    if (!ts || ts[0] == '0' || hookd_in_parse_ts(ts, strlen(ts), &t) != 0)
      return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                             "generic: missing or malformed timestamp");
    if (t >= 100000000000LL) t /= 1000; /* milliseconds */
    out->timestamp_s = t;
    int rc = hookd_in_check_ts(t, req->now_s, tol);
    if (rc)
      return ts_failure(out, rc, "generic: timestamp too old", "generic: timestamp in the future");
  }

  /* Split the template into literal runs and placeholders. */
  size_t tpl_len = strlen(tpl);
  if (tpl_len > TEMPLATE_MAX)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: template too long");
  const void *parts[TEMPLATE_PARTS];
  size_t lens[TEMPLATE_PARTS], nparts = 0;
  size_t i = 0, lit = 0;
  int overflow = 0;
  while (i <= tpl_len) {
    const char *val = NULL;
    size_t vlen = 0, taglen = 0;
    int tag = 0;
    if (i < tpl_len && tpl[i] == '{') {
      if (strncmp(tpl + i, "{body}", 6) == 0) {
        tag = 1, taglen = 6, val = req->body ? req->body : "", vlen = req->body_len;
      } else if (strncmp(tpl + i, "{id}", 4) == 0) {
        if (!id) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: missing id header");
        tag = 1, taglen = 4, val = id, vlen = strlen(id);
      } else if (strncmp(tpl + i, "{timestamp}", 11) == 0) {
        if (!ts)
          return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                                 "generic: template needs a timestamp header");
        tag = 1, taglen = 11, val = ts, vlen = strlen(ts);
      }
    }
    if (tag || i == tpl_len) {
      if (i > lit) {
        if (nparts == TEMPLATE_PARTS) {
          overflow = 1;
          break;
        }
        parts[nparts] = tpl + lit;
        lens[nparts++] = i - lit;
      }
      if (!tag) break;
      if (nparts == TEMPLATE_PARTS) {
        overflow = 1;
        break;
      }
      /* an id or a timestamp holding the separator after it could be split anew with what
       * follows it: refused (a value without it ends where the separator begins) */
      if (taglen != 6 && tpl[i + taglen] && memchr(val, tpl[i + taglen], vlen))
        return hookd_in_result(out, HOOKD_VERIFY_MALFORMED,
                               taglen == 4 ? "generic: the id holds the template's separator"
                                           : "generic: the timestamp holds the template's "
                                             "separator");
      parts[nparts] = val;
      lens[nparts++] = vlen;
      i += taglen;
      lit = i;
    } else {
      i++;
    }
  }
  if (overflow)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: template has too many parts");
  macset m;
  macs_compute(g->algorithm, s, parts, lens, nparts, &m);
  int match = macs_match(&m, sig, maclen);
  macs_clear(&m);
  return match ? hookd_in_result(out, HOOKD_VERIFY_OK, "generic: signature valid")
               : hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "generic: signature does not match");
}

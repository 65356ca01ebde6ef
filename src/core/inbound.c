/* inbound.c — the entry points of the inbound verifiers: provider names, case-insensitive header
 * lookup, hookd_in_verify's dispatch to the per-provider files, and the small helpers they share
 * (result reporting, timestamps and tolerance, hex, the SHA-256 keys). */
#include "core/inbound.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/inbound_int.h"
#include "core/num.h"

#define DEFAULT_TOLERANCE_S 300
#define MAX_TOLERANCE_S (366 * 86400) /* larger tolerances are clamped to this */

static const char *const provider_names[HOOKD_PROVIDER__COUNT] = {
    [HOOKD_PROVIDER_STANDARD] = "standard", [HOOKD_PROVIDER_STRIPE] = "stripe",
    [HOOKD_PROVIDER_GITHUB] = "github",     [HOOKD_PROVIDER_SHOPIFY] = "shopify",
    [HOOKD_PROVIDER_SLACK] = "slack",       [HOOKD_PROVIDER_GITLAB] = "gitlab",
    [HOOKD_PROVIDER_TWILIO] = "twilio",     [HOOKD_PROVIDER_PADDLE] = "paddle",
    [HOOKD_PROVIDER_ZOOM] = "zoom",         [HOOKD_PROVIDER_DISCORD] = "discord",
    [HOOKD_PROVIDER_VNPAY] = "vnpay",       [HOOKD_PROVIDER_MOMO] = "momo",
    [HOOKD_PROVIDER_GENERIC] = "generic",
};

const char *hookd_provider_name(hookd_provider p) {
  if ((unsigned)p >= HOOKD_PROVIDER__COUNT) return "unknown";
  return provider_names[p];
}

int hookd_provider_parse(const char *name, hookd_provider *out) {
  if (!name) return -1;
  for (int i = 0; i < HOOKD_PROVIDER__COUNT; i++) {
    if (strcasecmp(name, provider_names[i]) == 0) {
      *out = (hookd_provider)i;
      return 0;
    }
  }
  /* Svix sends the same scheme under its own header names. */
  if (strcasecmp(name, "svix") == 0) {
    *out = HOOKD_PROVIDER_STANDARD;
    return 0;
  }
  return -1;
}

const char *hookd_in_header_get(const hookd_in_request *req, const char *name) {
  if (!req || !name || !req->headers) return NULL;
  const char *found = NULL;
  for (size_t i = 0; i < req->n_headers; i++) {
    const hookd_in_header *h = &req->headers[i];
    if (h->name && h->value && strcasecmp(h->name, name) == 0) {
      if (found) return NULL; /* sent twice: which one a proxy read is anyone's guess */
      found = h->value;
    }
  }
  return found;
}

const char *hookd_in_shopify_header(const hookd_in_request *req, const char *name) {
  char full[64];
  snprintf(full, sizeof full, "X-Shopify-%s", name);
  const char *v = hookd_in_header_get(req, full);
  return v ? v : hookd_in_header_get(req, full + 2);
}

bool hookd_http_token(const char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && !(c && strchr("!#$%&'*+-.^_`|~", c))) return false;
  }
  return true;
}

bool hookd_in_header_name_valid(const char *s) {
  size_t n = s ? strlen(s) : 0;
  return n <= 128 && hookd_http_token(s, n);
}

int hookd_in_ipn_time(int64_t signed_s, int64_t now_s) {
  if (signed_s < now_s - HOOKD_IN_IPN_MAX_AGE_S) return HOOKD_VERIFY_STALE;
  if (signed_s > now_s + HOOKD_IN_IPN_MAX_AHEAD_S) return HOOKD_VERIFY_FUTURE;
  return HOOKD_VERIFY_OK;
}

int hookd_in_result(hookd_verify_result *out, int rc, const char *reason) {
  out->rc = rc;
  size_t n = strlen(reason);
  if (n >= sizeof out->reason) n = sizeof out->reason - 1;
  memcpy(out->reason, reason, n);
  out->reason[n] = '\0';
  return rc;
}

int hookd_in_parse_ts(const char *s, size_t len, int64_t *out) {
  if (!s || len == 0 || len > 18) return -1;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

int hookd_in_check_ts(int64_t ts, int64_t now_s, int64_t tolerance_s) {
  return hookd_ts_check(ts, now_s, tolerance_s);
}

void hookd_in_hex_encode(const unsigned char *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

int hookd_in_sha256_hex(const void *p, size_t n, char out[65]) {
  unsigned char h[32];
  out[0] = '\0';
  if (hookd_sha256(p, n, h) != 0) return -1;
  hookd_in_hex_encode(h, 32, out);
  return 0;
}

const char *hookd_in_trim(const char *s, size_t *len) {
  size_t n = *len;
  while (n && (*s == ' ' || *s == '\t')) {
    s++;
    n--;
  }
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  *len = n;
  return s;
}

const char *hookd_in_query(const hookd_in_request *req, size_t *len) {
  if (req->query) {
    *len = strlen(req->query);
    return req->query;
  }
  if (!req->url) return NULL;
  const char *q = strchr(req->url, '?');
  if (!q) return NULL;
  q++;
  const char *hash = strchr(q, '#');
  *len = hash ? (size_t)(hash - q) : strlen(q);
  return q;
}

int64_t hookd_in_tolerance(int64_t tolerance_s) {
  return tolerance_s <= 0               ? DEFAULT_TOLERANCE_S
         : tolerance_s > MAX_TOLERANCE_S ? MAX_TOLERANCE_S
                                         : tolerance_s;
}

static int verify_as(hookd_provider p, const hookd_in_request *req, const hookd_in_secrets *sp,
                     int64_t tol, const hookd_generic_hmac *generic, hookd_verify_result *out);

/* A refusal that names a header sent twice (hookd_in_header_get takes neither: which one a
 * proxy read is anyone's guess) says so: "stripe: missing Stripe-Signature" sent the operator
 * after a header that was there. Found by the request's own duplicates, named in the reason as
 * the verifier wrote it (one name or several: "missing X-Slack-Signature or …"), not by reading
 * its wording. */
static bool name_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

static void sent_twice(const hookd_in_request *req, hookd_verify_result *out) {
  for (size_t i = 0; i < req->n_headers; i++) {
    const char *name = req->headers[i].name;
    size_t n = name ? strlen(name) : 0;
    for (char *at = out->reason; n && *at; at++) { /* the name as the reason writes it, whole */
      if (strncasecmp(at, name, n) != 0 || (at > out->reason && name_char(at[-1])) ||
          name_char(at[n]))
        continue;
      /* (counted only for a name the reason holds: a refused request's headers are anyone's,
       * and counting each one's copies was a pass over all of them per header) */
      size_t seen = 0;
      for (size_t j = 0; j < req->n_headers; j++)
        seen += req->headers[j].name && !strcasecmp(req->headers[j].name, name);
      if (seen < 2) break;
      char named[64];
      const char *colon = strchr(out->reason, ':');
      int pre = colon && colon < at ? (int)(colon - out->reason) : 0;
      snprintf(named, sizeof named, "%.*s", (int)n, at);
      char why[sizeof out->reason];
      snprintf(why, sizeof why, "%.*s%s%s sent twice (a proxy may have read the other)", pre,
               out->reason, pre ? ": " : "", named);
      snprintf(out->reason, sizeof out->reason, "%s", why);
      return;
    }
  }
}

int hookd_in_verify(hookd_provider p, const hookd_in_request *req, const hookd_in_secrets *secrets,
                    int64_t tolerance_s, const hookd_generic_hmac *generic,
                    hookd_verify_result *out) {
  out->timestamp_s = 0;
  out->secret = NULL;
  out->signed_without_empty = false;
  out->reason[0] = '\0';
  if (!req) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "no request");
  if (!req->body && req->body_len) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "no body");
  if (!secrets || secrets->n == 0 || !secrets->v)
    return hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "no secret configured");
  /* An empty secret keys the MAC with "", which anyone can compute: it is skipped. */
  const char *usable[HOOKD_IN_MAX_SECRETS];
  hookd_in_secrets s = {usable, 0};
  for (size_t i = 0; i < secrets->n; i++) {
    if (!secrets->v[i]) return hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "null secret");
    if (secrets->v[i][0] && s.n < HOOKD_IN_MAX_SECRETS) usable[s.n++] = secrets->v[i];
  }
  if (s.n == 0)
    return hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "only empty secrets configured");
  int64_t tol = hookd_in_tolerance(tolerance_s);

  int rc = verify_as(p, req, &s, tol, generic, out);
  if (rc == HOOKD_VERIFY_MALFORMED) sent_twice(req, out);
  return rc;
}

static int verify_as(hookd_provider p, const hookd_in_request *req, const hookd_in_secrets *sp,
                     int64_t tol, const hookd_generic_hmac *generic, hookd_verify_result *out) {
  hookd_in_secrets s = *sp;
  switch (p) {
  case HOOKD_PROVIDER_STANDARD: return hookd_in_verify_standard(req, &s, tol, out);
  case HOOKD_PROVIDER_STRIPE: return hookd_in_verify_stripe(req, &s, tol, out);
  case HOOKD_PROVIDER_GITHUB: return hookd_in_verify_github(req, &s, out);
  case HOOKD_PROVIDER_SHOPIFY: return hookd_in_verify_shopify(req, &s, out);
  case HOOKD_PROVIDER_SLACK: return hookd_in_verify_slack(req, &s, tol, out);
  case HOOKD_PROVIDER_GITLAB: return hookd_in_verify_gitlab(req, &s, tol, out);
  case HOOKD_PROVIDER_TWILIO: return hookd_in_verify_twilio(req, &s, out);
  case HOOKD_PROVIDER_PADDLE: return hookd_in_verify_paddle(req, &s, tol, out);
  case HOOKD_PROVIDER_ZOOM: return hookd_in_verify_zoom(req, &s, tol, out);
  case HOOKD_PROVIDER_DISCORD: return hookd_in_verify_discord(req, &s, tol, out);
  case HOOKD_PROVIDER_VNPAY: return hookd_in_verify_vnpay(req, &s, out);
  case HOOKD_PROVIDER_MOMO: return hookd_in_verify_momo(req, &s, out);
  case HOOKD_PROVIDER_GENERIC:
    if (!generic || !generic->header || !*generic->header)
      return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "generic: no configuration");
    return hookd_in_verify_generic(req, &s, tol, generic, out);
  case HOOKD_PROVIDER__COUNT: break;
  }
  return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "unknown provider");
}

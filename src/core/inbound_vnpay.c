/* inbound_vnpay.c — VNPay IPN: a GET whose query carries vnp_* parameters and
 * vnp_SecureHash = hex HMAC-SHA512(hash secret, data), where data is every vnp_ parameter except
 * vnp_SecureHash and vnp_SecureHashType, sorted by name, written as urlencode(k)=urlencode(v)
 * joined with '&' — urlencode being PHP's (alphanumerics and "-_." kept, space as '+', all else
 * %XX in upper case), as VNPay's reference code builds it (its Java, .NET and Node.js samples
 * keep a few more characters: see flavours). The query is percent-decoded first;
 * a parameter given twice is refused as ambiguous.
 *
 * Handlers read hookd's forward with lenient parsers: PHP turns "vnp.X", "vnp X", " vnp_X" and
 * "vnp[X" into "vnp_X", ASP.NET matches names in any case. So what is forwarded must be exactly
 * what was verified: a name outside [A-Za-z0-9_], and a name starting with "vnp" in any case
 * that is not a "vnp_" name, make the query malformed; so does a request body (nothing signs
 * it); and the forward (hookd_in_vnpay_forward) is rebuilt from the signed pairs alone.
 *
 * Empty values: VNPay's PHP sample signs them ("vnp_BankTranNo=&…"), its Java and .NET samples
 * leave them out, and VNPay documents neither. A query with an empty vnp_ value is checked
 * against both texts; when only the text without them matches, they were signed by no one and
 * the forward leaves them out too (out->signed_without_empty). */
#include <openssl/crypto.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/inbound_int.h"

/* The URL encoders of VNPay's reference code in each language: PHP's urlencode keeps only
 * alphanumerics and "-_."; Java's URLEncoder keeps '*' too, .NET's WebUtility.UrlEncode "!*()",
 * and the Node.js sample's encodeURIComponent "!~*'()". All write a space as '+' and the rest
 * as %XX in upper case. They differ only on those few characters, which VNPay asks merchants
 * to leave out of vnp_OrderInfo; a value that has one is checked against each text. */
static const char *const flavours[] = {"", "*", "!*()", "!~*'()"};
#define PHP_FLAVOUR flavours[0]

static int php_urlencode(hookd_buf *b, const char *s, size_t n) {
  return hookd_in_urlencode(b, s, n, PHP_FLAVOUR, true);
}

/* 1 when s[0..n) is all ASCII letters and digits, and '_' when underscore is set. */
static int alnum(const char *s, size_t n, int underscore) {
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
          (underscore && c == '_')))
      return 0;
  }
  return 1;
}

static int name_is(const hookd_in_kv *kv, const char *name) {
  return kv->klen == strlen(name) && memcmp(kv->k, name, kv->klen) == 0;
}

/* A query, checked, with the text its vnp_SecureHash signs. */
typedef struct vnp_query {
  hookd_in_form f;
  hookd_buf data;          /* the signed text, encoded as PHP does */
  bool other_flavours;     /* a signed value holds a character the encoders disagree on */
  bool has_empty;          /* a signed pair has an empty value */
  bool nomem;              /* a signed text could not be built: out of memory */
  const hookd_in_kv *hash; /* vnp_SecureHash */
  const hookd_in_kv *type; /* vnp_SecureHashType (not signed), or NULL */
} vnp_query;

static void vnp_free(vnp_query *v) {
  hookd_buf_free(&v->data);
  hookd_in_form_free(&v->f);
}

static bool signed_pair(const hookd_in_kv *kv) {
  return kv->klen >= 4 && memcmp(kv->k, "vnp_", 4) == 0 && !name_is(kv, "vnp_SecureHash") &&
         !name_is(kv, "vnp_SecureHashType");
}

/* The text vnp_SecureHash signs, its values encoded with `extra` kept, and the pairs with an
 * empty value left out when skip_empty is set, into out. */
static int signed_text(const vnp_query *v, const char *extra, bool skip_empty, hookd_buf *out) {
  int rc = 0;
  for (size_t i = 0; i < v->f.n && !rc; i++) {
    const hookd_in_kv *kv = &v->f.kv[i];
    if (!signed_pair(kv) || (skip_empty && !kv->vlen)) continue;
    rc = out->len ? hookd_buf_append(out, "&", 1) : 0;
    if (!rc) rc = php_urlencode(out, kv->k, kv->klen); /* [A-Za-z0-9_]: the same in each */
    if (!rc) rc = hookd_buf_append(out, "=", 1);
    if (!rc) rc = hookd_in_urlencode(out, kv->v, kv->vlen, extra, true);
  }
  return rc;
}

/* Parses and checks req's query into v (free it with vnp_free either way), v->data written
 * without the empty values when skip_empty is set. Returns NULL, or why the query is
 * malformed. */
static const char *vnp_parse(const hookd_in_request *req, bool skip_empty, vnp_query *v) {
  memset(v, 0, sizeof *v);
  hookd_buf_init(&v->data, HOOKD_IN_MAX_FORM * 3);
  size_t qlen = 0;
  const char *q = hookd_in_query(req, &qlen);
  if (!q || !qlen) return "vnpay: no query parameters";
  int frc = hookd_in_form_parse(q, qlen, &v->f);
  v->nomem = frc == HOOKD_IN_FORM_NOMEM;
  if (frc) return v->nomem ? "vnpay: out of memory" : "vnpay: malformed query";
  if (v->f.empty_names) return "vnpay: query parameter with an empty name";
  hookd_in_form_sort(&v->f);
  for (size_t i = 0; i < v->f.n; i++) {
    const hookd_in_kv *kv = &v->f.kv[i];
    if (i > 0 && kv->klen == v->f.kv[i - 1].klen && memcmp(kv->k, v->f.kv[i - 1].k, kv->klen) == 0)
      return "vnpay: duplicate query parameter";
    if (!alnum(kv->k, kv->klen, 1)) return "vnpay: query parameter name outside [A-Za-z0-9_]";
    int vnp = kv->klen >= 4 && memcmp(kv->k, "vnp_", 4) == 0;
    if (!vnp && kv->klen >= 3 && strncasecmp(kv->k, "vnp", 3) == 0)
      return "vnpay: query parameter name like vnp_ but not vnp_";
    if (!vnp) continue; /* neither signed nor forwarded */
    if (name_is(kv, "vnp_SecureHash")) {
      v->hash = kv;
      continue;
    }
    if (name_is(kv, "vnp_SecureHashType")) {
      /* not signed: an algorithm's name, not text for the handler */
      if (kv->vlen < 1 || kv->vlen > 16 || !alnum(kv->v, kv->vlen, 0))
        return "vnpay: malformed vnp_SecureHashType";
      v->type = kv;
      continue;
    }
    v->has_empty |= !kv->vlen;
    for (size_t j = 0; j < kv->vlen && !v->other_flavours; j++)
      v->other_flavours = kv->v[j] && strchr(flavours[3], kv->v[j]);
  }
  if (!v->hash) return "vnpay: missing vnp_SecureHash";
  int rc = signed_text(v, PHP_FLAVOUR, skip_empty, &v->data);
  v->nomem = rc == HOOKD_BUF_NOMEM;
  return rc == HOOKD_BUF_NOMEM ? "vnpay: out of memory" : rc ? "vnpay: query too large" : NULL;
}

/* vnp_PayDate (yyyyMMddHHmmss, Vietnam's time: GMT+7, no daylight saving) as Unix seconds;
 * false when absent or not that shape (then judged by the signature alone). */
static bool pay_date(const hookd_in_kv *kv, int64_t *out) {
  if (!kv || kv->vlen != 14 || strspn(kv->v, "0123456789") < 14) return false;
  int d[14];
  for (int i = 0; i < 14; i++) d[i] = kv->v[i] - '0';
  struct tm tm = {.tm_year = d[0] * 1000 + d[1] * 100 + d[2] * 10 + d[3] - 1900,
                  .tm_mon = d[4] * 10 + d[5] - 1, .tm_mday = d[6] * 10 + d[7],
                  .tm_hour = d[8] * 10 + d[9], .tm_min = d[10] * 10 + d[11],
                  .tm_sec = d[12] * 10 + d[13]};
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return false;
  *out = (int64_t)timegm(&tm) - 7 * 3600;
  return true;
}

int hookd_in_verify_vnpay(const hookd_in_request *req, const hookd_in_secrets *s,
                          hookd_verify_result *out) {
  if (req->body_len)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "vnpay: a request body is not signed");
  vnp_query v;
  int rc = HOOKD_VERIFY_MALFORMED;
  const char *reason = vnp_parse(req, false, &v);
  unsigned char sig[64];
  if (reason) {
    if (v.nomem) rc = HOOKD_VERIFY_INTERNAL; /* hookd's failure: "99", VNPay retries */
    goto done;
  }
  if (hookd_hex_decode(v.hash->v, v.hash->vlen, sig, sizeof sig) != 0) {
    reason = "vnpay: malformed vnp_SecureHash";
    goto done;
  }
  int match = 0, match_with_empty = 0;
  unsigned char mac[64];
  size_t n_flavours = v.other_flavours ? sizeof flavours / sizeof *flavours : 1;
  /* each flavour's text with the empty values, then (when there are some) without them */
  for (size_t t = 0; t < n_flavours * (v.has_empty ? 2 : 1); t++) {
    bool skip_empty = t >= n_flavours;
    hookd_buf other;
    hookd_buf_init(&other, HOOKD_IN_MAX_FORM * 3);
    int trc = t ? signed_text(&v, flavours[t % n_flavours], skip_empty, &other) : 0;
    if (trc) {
      v.nomem |= trc == HOOKD_BUF_NOMEM;
      hookd_buf_free(&other);
      continue;
    }
    const hookd_buf *text = t ? &other : &v.data;
    const void *parts[] = {text->data ? text->data : ""};
    size_t lens[] = {text->len};
    for (size_t k = 0; k < s->n && k < HOOKD_IN_MAX_SECRETS; k++) {
      if (hookd_hmac(HOOKD_MD_SHA512, s->v[k], strlen(s->v[k]), parts, lens, 1, mac) == 64)
        match |= hookd_ct_equal(sig, 64, mac, 64);
    }
    if (!skip_empty) match_with_empty = match;
    hookd_buf_free(&other);
  }
  out->signed_without_empty = match && !match_with_empty;
  OPENSSL_cleanse(mac, sizeof mac);
  rc = match ? HOOKD_VERIFY_OK : v.nomem ? HOOKD_VERIFY_INTERNAL : HOOKD_VERIFY_MISMATCH;
  reason = match     ? "vnpay: signature valid"
           : v.nomem ? "vnpay: out of memory"
                     : "vnpay: vnp_SecureHash does not match";
  int64_t paid_s;
  if (rc == HOOKD_VERIFY_OK && pay_date(hookd_in_form_get(&v.f, "vnp_PayDate"), &paid_s)) {
    out->timestamp_s = paid_s;
    rc = hookd_in_ipn_time(paid_s, req->now_s);
    if (rc == HOOKD_VERIFY_STALE) reason = "vnpay: vnp_PayDate is more than 3 days old";
    if (rc == HOOKD_VERIFY_FUTURE) reason = "vnpay: vnp_PayDate is more than a day ahead";
  }
done:
  vnp_free(&v);
  return hookd_in_result(out, rc, reason);
}

int hookd_in_vnpay_forward(const hookd_in_request *req, bool without_empty, hookd_buf *out,
                           size_t *signed_len) {
  vnp_query v;
  int rc = vnp_parse(req, without_empty, &v) ? -1 : 0;
  if (signed_len) *signed_len = rc ? 0 : v.data.len;
  const char *sep = v.data.len ? "&" : "";
  if (!rc && v.data.len) rc = hookd_buf_append(out, v.data.data, v.data.len);
  if (!rc && v.type) {
    rc = hookd_buf_printf(out, "%svnp_SecureHashType=", sep);
    if (!rc) rc = php_urlencode(out, v.type->v, v.type->vlen);
    sep = "&";
  }
  if (!rc) rc = hookd_buf_printf(out, "%svnp_SecureHash=", sep);
  if (!rc) rc = php_urlencode(out, v.hash->v, v.hash->vlen);
  vnp_free(&v);
  return rc ? -1 : 0;
}

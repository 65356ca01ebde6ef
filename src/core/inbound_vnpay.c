/* inbound_vnpay.c — VNPay IPN: a GET whose query carries vnp_* parameters and
 * vnp_SecureHash = hex HMAC-SHA512(hash secret, data), where data is every vnp_ parameter except
 * vnp_SecureHash and vnp_SecureHashType, sorted by name, written as urlencode(k)=urlencode(v)
 * joined with '&' — urlencode being PHP's (alphanumerics and "-_." kept, space as '+', all else
 * %XX in upper case), as VNPay's reference code builds it. The query is percent-decoded first;
 * a parameter given twice is refused as ambiguous. */
#include <openssl/crypto.h>
#include <string.h>

#include "core/inbound_int.h"

/* PHP urlencode of s[0..n) appended to b. */
static int php_urlencode(hookd_buf *b, const char *s, size_t n) {
  static const char digits[] = "0123456789ABCDEF";
  int rc = 0;
  size_t run = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    unsigned char c = (unsigned char)s[i];
    int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
    if (keep) {
      run++;
      continue;
    }
    rc = hookd_buf_append(b, s + i - run, run);
    run = 0;
    if (rc) break;
    if (c == ' ') {
      rc = hookd_buf_append(b, "+", 1);
    } else {
      char esc[3] = {'%', digits[c >> 4], digits[c & 15]};
      rc = hookd_buf_append(b, esc, 3);
    }
  }
  if (!rc) rc = hookd_buf_append(b, s + n - run, run);
  return rc;
}

int hookd_in_verify_vnpay(const hookd_in_request *req, const hookd_in_secrets *s,
                          hookd_verify_result *out) {
  size_t qlen = 0;
  const char *q = hookd_in_query(req, &qlen);
  if (!q || !qlen)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "vnpay: no query parameters");
  hookd_in_form f;
  if (hookd_in_form_parse(q, qlen, &f) != 0)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "vnpay: malformed query");
  hookd_in_form_sort(&f);

  int rc = HOOKD_VERIFY_MALFORMED;
  const char *reason = "vnpay: missing vnp_SecureHash";
  hookd_buf data;
  hookd_buf_init(&data, HOOKD_IN_MAX_FORM * 3);
  const hookd_in_kv *hash = NULL;
  int first = 1;
  for (size_t i = 0; i < f.n; i++) {
    const hookd_in_kv *kv = &f.kv[i];
    if (i > 0 && kv->klen == f.kv[i - 1].klen && memcmp(kv->k, f.kv[i - 1].k, kv->klen) == 0) {
      reason = "vnpay: duplicate query parameter";
      goto done;
    }
    if (kv->klen < 4 || memcmp(kv->k, "vnp_", 4) != 0) continue;
    if (strcmp(kv->k, "vnp_SecureHash") == 0 && kv->klen == 14) {
      hash = kv;
      continue;
    }
    if (strcmp(kv->k, "vnp_SecureHashType") == 0 && kv->klen == 18) continue;
    int brc = first ? 0 : hookd_buf_append(&data, "&", 1);
    first = 0;
    if (!brc) brc = php_urlencode(&data, kv->k, kv->klen);
    if (!brc) brc = hookd_buf_append(&data, "=", 1);
    if (!brc) brc = php_urlencode(&data, kv->v, kv->vlen);
    if (brc) {
      reason = "vnpay: query too large";
      goto done;
    }
  }
  unsigned char sig[64];
  if (!hash) goto done;
  if (hookd_in_hex_decode(hash->v, hash->vlen, sig, sizeof sig) != 0) {
    reason = "vnpay: malformed vnp_SecureHash";
    goto done;
  }
  int match = 0;
  unsigned char mac[64];
  const void *parts[] = {data.data ? data.data : ""};
  size_t lens[] = {data.len};
  for (size_t k = 0; k < s->n && k < HOOKD_IN_MAX_SECRETS; k++) {
    if (hookd_hmac(HOOKD_MD_SHA512, s->v[k], strlen(s->v[k]), parts, lens, 1, mac) == 64)
      match |= hookd_ct_equal(sig, 64, mac, 64);
  }
  OPENSSL_cleanse(mac, sizeof mac);
  rc = match ? HOOKD_VERIFY_OK : HOOKD_VERIFY_MISMATCH;
  reason = match ? "vnpay: signature valid" : "vnpay: vnp_SecureHash does not match";
done:
  hookd_buf_free(&data);
  hookd_in_form_free(&f);
  return hookd_in_result(out, rc, reason);
}

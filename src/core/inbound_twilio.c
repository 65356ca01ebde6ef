/* inbound_twilio.c — Twilio's X-Twilio-Signature: base64 HMAC-SHA1 keyed by the auth token over
 * the full URL Twilio called followed by the POST form parameters sorted by name, each name and
 * value concatenated. For JSON bodies Twilio instead puts bodySHA256=<hex SHA-256 of the body>
 * in the URL's query and signs the URL alone: then both the signature and the body hash must
 * match. Like Twilio's own SDKs, the URL is also tried without its port and with the scheme's
 * default port added, since proxies commonly add or drop one. A form field with an empty name
 * ("=x"), which the signed text leaves out, makes the body malformed. A webhook signed with one of
 * the account's shared keys and HMAC-SHA256 (Twilio's webhook signing settings, announced in
 * X-Twilio-Webhooks-Signature-Settings) signs the same text: its signature is told apart by its
 * length (32 bytes against SHA-1's 20). A field repeated with the same value is signed once by
 * Twilio's SDKs (each name's values as a set), by the plain concatenation by others: either
 * text is accepted. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/b64.h"
#include "core/inbound_int.h"

#define VARIANTS 3

typedef struct url_variants {
  char *buf[VARIANTS];
  size_t len[VARIANTS];
  size_t n;
  char *mem;
} url_variants;

/* Fills v with the URL as given and its port variants. Returns 0 or -1 (malformed/too long). */
static int make_variants(const char *url, size_t url_len, url_variants *v) {
  v->n = 0;
  v->mem = malloc(VARIANTS * (url_len + 8));
  if (!v->mem) return -1;
  for (size_t i = 0; i < VARIANTS; i++) v->buf[i] = v->mem + i * (url_len + 8);
  memcpy(v->buf[0], url, url_len);
  v->len[0] = url_len;
  v->n = 1;

  const char *sep = strstr(url, "://");
  if (!sep || (size_t)(sep - url) >= url_len) return 0;
  size_t scheme_len = (size_t)(sep - url);
  size_t a0 = scheme_len + 3, a1 = a0;
  while (a1 < url_len && url[a1] != '/' && url[a1] != '?' && url[a1] != '#') a1++;
  /* Port: trailing ":digits" of the authority, after any IPv6 literal's ']'. */
  size_t colon = a1;
  for (size_t i = a1; i > a0; i--) {
    char c = url[i - 1];
    if (c == ':') {
      colon = i - 1;
      break;
    }
    if (c < '0' || c > '9') break;
  }
  if (colon < a1) {
    /* Without the port. */
    size_t n = 0;
    memcpy(v->buf[1], url, colon);
    n = colon;
    memcpy(v->buf[1] + n, url + a1, url_len - a1);
    n += url_len - a1;
    v->len[1] = n;
    v->n = 2;
  } else {
    const char *port = NULL;
    if (scheme_len == 5 && strncasecmp(url, "https", 5) == 0)
      port = ":443";
    else if (scheme_len == 4 && strncasecmp(url, "http", 4) == 0)
      port = ":80";
    if (port) {
      size_t plen = strlen(port), n = a1;
      memcpy(v->buf[1], url, a1);
      memcpy(v->buf[1] + n, port, plen);
      n += plen;
      memcpy(v->buf[1] + n, url + a1, url_len - a1);
      n += url_len - a1;
      v->len[1] = n;
      v->n = 2;
    }
  }
  return 0;
}

static int body_hash_ok(const hookd_in_request *req, const hookd_in_kv *kv) {
  unsigned char want[32], got[32];
  if (hookd_hex_decode(kv->v, kv->vlen, want, sizeof want) != 0) return -1;
  if (hookd_sha256(req->body ? req->body : "", req->body_len, got) != 0) return 0;
  return hookd_ct_equal(got, sizeof got, want, sizeof want);
}

int hookd_in_verify_twilio(const hookd_in_request *req, const hookd_in_secrets *s,
                           hookd_verify_result *out) {
  const char *h = hookd_in_header_get(req, "X-Twilio-Signature");
  if (!h) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "twilio: missing X-Twilio-Signature");
  size_t hlen = strlen(h);
  h = hookd_in_trim(h, &hlen);
  unsigned char sig[36];
  size_t sig_len = hlen == 28 ? 20 : hlen == 44 ? 32 : 0;
  if (!sig_len || hookd_b64_decode(h, hlen, sig) != (long)sig_len)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "twilio: malformed X-Twilio-Signature");
  hookd_md md = sig_len == 20 ? HOOKD_MD_SHA1 : HOOKD_MD_SHA256;
  if (!req->url || !*req->url)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "twilio: request URL unknown");

  /* The signed URL includes the query; add req->query when the URL lacks one. */
  size_t url_len = strlen(req->url);
  int add_query = !strchr(req->url, '?') && req->query && *req->query;
  size_t full_len = url_len + (add_query ? 1 + strlen(req->query) : 0);
  if (full_len > HOOKD_IN_MAX_URL)
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "twilio: URL too long");
  char *url = malloc(full_len + 1);
  if (!url) return hookd_in_result(out, HOOKD_VERIFY_MISMATCH, "twilio: out of memory");
  memcpy(url, req->url, url_len);
  if (add_query) {
    url[url_len] = '?';
    memcpy(url + url_len + 1, req->query, full_len - url_len - 1);
  }
  url[full_len] = '\0';

  int rc = HOOKD_VERIFY_MISMATCH;
  const char *reason = "twilio: signature does not match";
  hookd_in_form query = {0}, form = {0};
  url_variants uv = {0};
  const void **parts = NULL;
  size_t *lens = NULL;

  const char *q = strchr(url, '?');
  if (q) {
    size_t qlen = strcspn(q + 1, "#");
    if (hookd_in_form_parse(q + 1, qlen, &query) != 0) {
      rc = HOOKD_VERIFY_MALFORMED;
      reason = "twilio: malformed URL query";
      goto done;
    }
  }
  const hookd_in_kv *bh = hookd_in_form_get(&query, "bodySHA256");
  int body_ok = 1;
  if (bh) {
    /* JSON body: the URL alone is signed, the body through its hash. */
    body_ok = body_hash_ok(req, bh);
    if (body_ok < 0) {
      rc = HOOKD_VERIFY_MALFORMED;
      reason = "twilio: malformed bodySHA256";
      goto done;
    }
  } else if (req->body_len) {
    /* Twilio signs a form's fields, and any other body only through bodySHA256: a JSON body
     * read as fields was verified by a form's signature whose name-value run it spells (a
     * captured message whose Body held the JSON's punctuation — a review) */
    const char *ct = hookd_in_header_get(req, "Content-Type");
    if (!ct || !hookd_in_is_form(ct)) {
      rc = HOOKD_VERIFY_MALFORMED;
      reason = "twilio: a body that is not a form needs bodySHA256 in the URL";
      goto done;
    }
    if (hookd_in_form_parse(req->body, req->body_len, &form) != 0) {
      rc = HOOKD_VERIFY_MALFORMED;
      reason = "twilio: malformed form body";
      goto done;
    }
    if (form.empty_names) { /* left out of the signed text, yet forwarded */
      rc = HOOKD_VERIFY_MALFORMED;
      reason = "twilio: form field with an empty name";
      goto done;
    }
    /* unsigned too: a captured request sent again with '&' added was another body, keyed by
     * another hash, forwarded again (Twilio sends none) */
    if (form.empty_pairs) {
      rc = HOOKD_VERIFY_MALFORMED;
      reason = "twilio: empty form field ('&&' or a trailing '&')";
      goto done;
    }
    hookd_in_form_sort(&form);
  }

  if (make_variants(url, full_len, &uv) != 0) {
    reason = "twilio: out of memory";
    goto done;
  }
  /* a field sent twice with the same value: Twilio's SDKs sign each distinct (name, value)
   * once (a set of each name's values), so the text is tried that way too */
  bool repeated = false;
  for (size_t i = 1; i < form.n; i++)
    repeated |= form.kv[i].klen == form.kv[i - 1].klen &&
                form.kv[i].vlen == form.kv[i - 1].vlen &&
                memcmp(form.kv[i].k, form.kv[i - 1].k, form.kv[i].klen) == 0 &&
                memcmp(form.kv[i].v, form.kv[i - 1].v, form.kv[i].vlen) == 0;
  int match = 0;
  unsigned char mac[64];
  parts = malloc((1 + 2 * form.n) * sizeof *parts);
  lens = malloc((1 + 2 * form.n) * sizeof *lens);
  if (!parts || !lens) {
    reason = "twilio: out of memory";
    goto done;
  }
  for (int distinct = 0; distinct <= (int)repeated; distinct++) {
    size_t nparts = 1;
    for (size_t i = 0; i < form.n; i++) {
      if (distinct && i && lens[nparts - 2] == form.kv[i].klen &&
          lens[nparts - 1] == form.kv[i].vlen &&
          memcmp(parts[nparts - 2], form.kv[i].k, form.kv[i].klen) == 0 &&
          memcmp(parts[nparts - 1], form.kv[i].v, form.kv[i].vlen) == 0)
        continue; /* the same pair as the one before (sorted: every repeat is adjacent) */
      parts[nparts] = form.kv[i].k;
      lens[nparts++] = form.kv[i].klen;
      parts[nparts] = form.kv[i].v;
      lens[nparts++] = form.kv[i].vlen;
    }
    for (size_t k = 0; k < s->n && k < HOOKD_IN_MAX_SECRETS; k++) {
      for (size_t u = 0; u < uv.n; u++) {
        parts[0] = uv.buf[u];
        lens[0] = uv.len[u];
        int n = hookd_hmac(md, s->v[k], strlen(s->v[k]), parts, lens, nparts, mac);
        if (n == (int)sig_len) match |= hookd_ct_equal(sig, sig_len, mac, sig_len);
      }
    }
  }
  OPENSSL_cleanse(mac, sizeof mac);
  if (match && body_ok) {
    rc = HOOKD_VERIFY_OK;
    reason = "twilio: signature valid";
  } else if (match) {
    reason = "twilio: bodySHA256 does not match the body";
  }
done:
  free(parts);
  free(lens);
  free(uv.mem);
  hookd_in_form_free(&query);
  hookd_in_form_free(&form);
  free(url);
  return hookd_in_result(out, rc, reason);
}

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
#include "core/buf.h"
#include "core/inbound_int.h"
#include "core/utf8.h"

/* The URL as received and its port variant, then the same with its query as a WHATWG URL
 * serialises it and as Node's legacy querystring re-encodes that (twilio-node's fall-backs, for
 * back ends that signed an escaped form), each with its port variant: at most 6, none twice. */
#define VARIANTS 6

typedef struct url_variants {
  char *buf[VARIANTS];
  size_t len[VARIANTS];
  size_t n;
  size_t first; /* those of the URL as received */
} url_variants;

#define TWILIO_HASH_BUDGET (4u << 20)

static void variants_free(url_variants *v) {
  for (size_t i = 0; i < v->n; i++) free(v->buf[i]);
  v->n = 0;
}

/* Adds s[0..len) unless it is there already. -1: out of memory. */
static int variant_add(url_variants *v, const char *s, size_t len) {
  for (size_t i = 0; i < v->n; i++)
    if (v->len[i] == len && memcmp(v->buf[i], s, len) == 0) return 0;
  if (v->n == VARIANTS) return 0;
  char *c = malloc(len + 1);
  if (!c) return -1;
  memcpy(c, s, len);
  c[len] = '\0';
  v->buf[v->n] = c;
  v->len[v->n++] = len;
  return 0;
}

/* The end of url's scheme ("://" at *a0 - 3) and of its authority (*a1). false: no scheme. */
static bool authority(const char *url, size_t url_len, size_t *a0, size_t *a1) {
  const char *sep = strstr(url, "://");
  if (!sep || (size_t)(sep - url) >= url_len) return false;
  *a0 = *a1 = (size_t)(sep - url) + 3;
  while (*a1 < url_len && url[*a1] != '/' && url[*a1] != '?' && url[*a1] != '#') (*a1)++;
  return true;
}

/* Adds url and url with its port dropped (when it has one) or the scheme's default added. */
static int add_with_port(url_variants *v, const char *url, size_t url_len) {
  if (variant_add(v, url, url_len) != 0) return -1;
  size_t a0, a1;
  if (!authority(url, url_len, &a0, &a1)) return 0;
  size_t scheme_len = a0 - 3;
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
  hookd_buf b;
  hookd_buf_init(&b, url_len + 8);
  int rc = 0;
  if (colon < a1) { /* without the port */
    rc = hookd_buf_append(&b, url, colon) || hookd_buf_append(&b, url + a1, url_len - a1);
  } else {
    const char *port = NULL;
    if (scheme_len == 5 && strncasecmp(url, "https", 5) == 0) port = ":443";
    else if (scheme_len == 4 && strncasecmp(url, "http", 4) == 0) port = ":80";
    if (port)
      rc = hookd_buf_append(&b, url, a1) || hookd_buf_puts(&b, port) ||
           hookd_buf_append(&b, url + a1, url_len - a1);
  }
  if (!rc && b.len) rc = variant_add(v, b.data, b.len);
  hookd_buf_free(&b);
  return rc ? -1 : 0;
}

static const char HEX[] = "0123456789ABCDEF";

static int put_escaped(hookd_buf *b, unsigned char c) {
  char e[3] = {'%', HEX[c >> 4], HEX[c & 15]};
  return hookd_buf_append(b, e, 3);
}

/* url as `new URL(url).toString()` spells it, as far as a Twilio URL goes: scheme and host in
 * lower case, a scheme's default port dropped, the query's bytes of the special-query
 * percent-encode set escaped (controls, space, '"', '<', '>', '\'', DEL and non-ASCII; escapes
 * already there kept), and past a '#' the fragment's (the same but '`' for '\''). A raw
 * non-ASCII byte is escaped as it is (Node, reading the request as latin1, would escape its
 * UTF-8): the same bytes once decoded. 0, or -1 (out of memory, or no scheme: out->len 0). */
static int whatwg_form(const char *url, size_t url_len, hookd_buf *out) {
  size_t a0, a1;
  if (!authority(url, url_len, &a0, &a1)) return 0;
  size_t scheme_len = a0 - 3, host_end = a1;
  if (scheme_len == 5 && strncasecmp(url, "https", 5) == 0 && a1 - a0 > 4 &&
      memcmp(url + a1 - 4, ":443", 4) == 0)
    host_end = a1 - 4;
  else if (scheme_len == 4 && strncasecmp(url, "http", 4) == 0 && a1 - a0 > 3 &&
           memcmp(url + a1 - 3, ":80", 3) == 0)
    host_end = a1 - 3;
  int rc = 0;
  for (size_t i = 0; i < host_end && !rc; i++) {
    char c = url[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    rc = hookd_buf_append(out, &c, 1);
  }
  const char *q = memchr(url + a1, '?', url_len - a1);
  size_t qat = q ? (size_t)(q - url) : url_len;
  if (!rc) rc = hookd_buf_append(out, url + a1, qat - a1);
  bool fragment = false; /* past a '#': the fragment's set (not '\'', but '`') */
  for (size_t i = qat; i < url_len && !rc; i++) {
    unsigned char c = (unsigned char)url[i];
    bool esc = i > qat && !(c == '#' && !fragment) &&
               (c <= 0x20 || c >= 0x7F || c == '"' || c == '<' || c == '>' ||
                c == (fragment ? '`' : '\''));
    fragment |= c == '#';
    rc = esc ? put_escaped(out, c) : hookd_buf_append(out, &url[i], 1);
  }
  return rc ? -1 : 0;
}

/* Node's querystring.escape: all but A-Z a-z 0-9 - _ . ! ~ * ' ( ) percent-encoded. */
static int qs_escape(hookd_buf *b, const char *s, size_t n) {
  return hookd_in_urlencode(b, s, n, "!~*'()", false);
}

/* Whether s[0..n) is well-formed UTF-8 without a NUL. */
static bool utf8_text(const char *s, size_t n) {
  for (size_t i = 0, l; i < n; i += l)
    if (!s[i] || !(l = hookd_utf8_len(s + i, n - i))) return false;
  return true;
}

/* url with its query as querystring.stringify(querystring.parse(query)) re-encodes it: decoded,
 * the values of a name grouped where the name first appears, each escaped. 0 with out->len 0
 * when there is nothing to re-encode or the query is one Node would read otherwise (a bad
 * escape, an empty name: left to the other variants); -1 out of memory. */
static int legacy_form(const char *url, size_t url_len, hookd_buf *out) {
  const char *q = memchr(url, '?', url_len);
  if (!q || (size_t)(q - url) + 1 == url_len) return 0;
  size_t qat = (size_t)(q - url) + 1;
  hookd_in_form f;
  int frc = hookd_in_form_parse(url + qat, url_len - qat, &f);
  if (frc) return frc == HOOKD_IN_FORM_NOMEM ? -1 : 0;
  bool valid = !f.empty_names; /* and text Node decodes as UTF-8 */
  for (size_t i = 0; i < f.n && valid; i++)
    valid = utf8_text(f.kv[i].k, f.kv[i].klen) && utf8_text(f.kv[i].v, f.kv[i].vlen);
  if (!valid) {
    hookd_in_form_free(&f);
    return 0;
  }
  int rc = hookd_buf_append(out, url, qat);
  bool first = true;
  for (size_t i = 0; i < f.n && !rc; i++) {
    bool seen = false; /* this name written already, with all its values */
    for (size_t j = 0; j < i && !seen; j++)
      seen = f.kv[j].klen == f.kv[i].klen && memcmp(f.kv[j].k, f.kv[i].k, f.kv[i].klen) == 0;
    for (size_t j = i; j < f.n && !seen && !rc; j++) {
      if (f.kv[j].klen != f.kv[i].klen || memcmp(f.kv[j].k, f.kv[i].k, f.kv[i].klen) != 0)
        continue;
      rc = (!first && hookd_buf_append(out, "&", 1)) || qs_escape(out, f.kv[j].k, f.kv[j].klen) ||
           hookd_buf_append(out, "=", 1) || qs_escape(out, f.kv[j].v, f.kv[j].vlen);
      first = false;
    }
  }
  hookd_in_form_free(&f);
  if (rc) return -1;
  if (first) hookd_buf_reset(out); /* (no pair: nothing to re-encode) */
  return 0;
}

/* Fills v with the URL's variants (above). Returns 0 or -1 (out of memory). */
static int make_variants(const char *url, size_t url_len, url_variants *v) {
  v->n = 0;
  if (add_with_port(v, url, url_len) != 0) return -1;
  v->first = v->n;
  hookd_buf w, l;
  hookd_buf_init(&w, 3 * url_len + 1);
  hookd_buf_init(&l, 3 * url_len + 1);
  int rc = whatwg_form(url, url_len, &w);
  if (!rc && w.len) rc = add_with_port(v, w.data, w.len);
  if (!rc && w.len) rc = legacy_form(w.data, w.len, &l);
  if (!rc && l.len) rc = add_with_port(v, l.data, l.len);
  hookd_buf_free(&w);
  hookd_buf_free(&l);
  return rc ? -1 : 0;
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
  if (!url) return hookd_in_result(out, HOOKD_VERIFY_INTERNAL, "twilio: out of memory");
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
    int frc = hookd_in_form_parse(q + 1, qlen, &query);
    if (frc) {
      rc = frc == HOOKD_IN_FORM_NOMEM ? HOOKD_VERIFY_INTERNAL : HOOKD_VERIFY_MALFORMED;
      reason = frc == HOOKD_IN_FORM_NOMEM ? "twilio: out of memory" : "twilio: malformed URL query";
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
    int frc = hookd_in_form_parse(req->body, req->body_len, &form);
    if (frc) {
      rc = frc == HOOKD_IN_FORM_NOMEM ? HOOKD_VERIFY_INTERNAL : HOOKD_VERIFY_MALFORMED;
      reason = frc == HOOKD_IN_FORM_NOMEM ? "twilio: out of memory" : "twilio: malformed form body";
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
    rc = HOOKD_VERIFY_INTERNAL;
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
    rc = HOOKD_VERIFY_INTERNAL;
    reason = "twilio: out of memory";
    goto done;
  }
  /* the fields in JavaScript's order too where it differs from bytes' (twilio-node sorts by
   * UTF-16 code units) */
  unsigned ranges = 0;
  size_t pass = 0; /* bytes one HMAC reads, but the URL */
  bool text = true; /* (a JavaScript signer reads fields as UTF-8 text: its order is of that) */
  for (size_t i = 0; i < form.n; i++) {
    ranges |= hookd_utf16_ranges(form.kv[i].k, form.kv[i].klen) |
              hookd_utf16_ranges(form.kv[i].v, form.kv[i].vlen);
    pass += form.kv[i].klen + form.kv[i].vlen;
    text = text && utf8_text(form.kv[i].k, form.kv[i].klen) &&
           utf8_text(form.kv[i].v, form.kv[i].vlen);
  }
  int orders = text && ranges == (HOOKD_UTF16_HIGH_BMP | HOOKD_UTF16_ASTRAL) ? 2 : 1;
  /* The likeliest text first, and past the first order's plain text of the URL as received, at
   * most TWILIO_HASH_BUDGET bytes hashed: a forged request of the largest form, an escaped
   * query, repeats and both orders cost one thread that serves every provider 24 passes a
   * secret otherwise. */
  size_t hashed = 0, nsec = s->n < HOOKD_IN_MAX_SECRETS ? s->n : HOOKD_IN_MAX_SECRETS;
  for (int order = 0; order < orders && !match; order++) {
    if (order) hookd_in_form_sort_utf16(&form);
    for (int distinct = 0; distinct <= (int)repeated && !match; distinct++) {
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
      for (size_t u = 0; u < uv.n && !match; u++) {
        bool first = !order && !distinct && u < uv.first; /* (not counted) */
        parts[0] = uv.buf[u];
        lens[0] = uv.len[u];
        for (size_t k = 0; k < nsec && !match; k++) {
          if (!first && (hashed += uv.len[u] + pass) > TWILIO_HASH_BUDGET) break;
          int n = hookd_hmac(md, s->v[k], strlen(s->v[k]), parts, lens, nparts, mac);
          if (n == (int)sig_len) match |= hookd_ct_equal(sig, sig_len, mac, sig_len);
        }
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
  variants_free(&uv);
  hookd_in_form_free(&query);
  hookd_in_form_free(&form);
  free(url);
  return hookd_in_result(out, rc, reason);
}

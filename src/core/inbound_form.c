/* inbound_form.c — a bounded parser for application/x-www-form-urlencoded text (POST bodies and
 * query strings), as Twilio signs form fields and VNPay signs its query parameters: pairs split
 * on '&', name and value split on the first '=', '+' decoded as a space, %XX percent-decoding
 * (a malformed escape makes the whole string malformed). */
#include <stdlib.h>
#include <string.h>

#include "core/inbound_int.h"
#include "core/num.h"
#include "core/utf8.h"

/* Decodes s[0..len) into dst (room for len + 1), NUL-terminates; returns decoded length or -1. */
static long decode(const char *s, size_t len, char *dst) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (c == '+') {
      dst[o++] = ' ';
    } else if (c == '%') {
      if (len - i < 3) return -1;
      int hi = hookd_hex_digit(s[i + 1]), lo = hookd_hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return -1;
      dst[o++] = (char)(hi << 4 | lo);
      i += 2;
    } else {
      dst[o++] = c;
    }
  }
  dst[o] = '\0';
  return (long)o;
}

void hookd_in_form_free(hookd_in_form *f) {
  free(f->kv);
  free(f->mem);
  f->kv = NULL;
  f->mem = NULL;
  f->n = 0;
  f->empty_names = 0;
  f->empty_pairs = 0;
}

/* The pairs of form text s[0..len), or 0 when it is past the bounds (hookd_in_form_too_big). */
static size_t pairs_within(const char *s, size_t len) {
  if (len > HOOKD_IN_MAX_FORM) return 0;
  size_t pairs = 1;
  for (size_t i = 0; i < len && pairs <= HOOKD_IN_MAX_PAIRS; i++) pairs += s[i] == '&';
  return pairs > HOOKD_IN_MAX_PAIRS ? 0 : pairs;
}

bool hookd_in_form_too_big(const char *s, size_t len) { return pairs_within(s, len) == 0; }

int hookd_in_form_parse(const char *s, size_t len, hookd_in_form *out) {
  out->kv = NULL;
  out->mem = NULL;
  out->n = 0;
  out->empty_names = 0;
  out->empty_pairs = 0;
  if (!s || len == 0) return 0;
  size_t pairs = pairs_within(s, len);
  if (!pairs) return -1;
  /* Each pair decodes to at most its own length, plus two NULs. */
  out->mem = malloc(len + 2 * pairs + 1);
  out->kv = calloc(pairs, sizeof *out->kv);
  if (!out->mem || !out->kv) {
    hookd_in_form_free(out);
    return HOOKD_IN_FORM_NOMEM;
  }
  char *w = out->mem;
  size_t start = 0;
  while (start <= len) {
    size_t end = start;
    while (end < len && s[end] != '&') end++;
    const char *p = s + start;
    size_t plen = end - start;
    if (plen) {
      const char *eq = memchr(p, '=', plen);
      size_t klen = eq ? (size_t)(eq - p) : plen;
      const char *v = eq ? eq + 1 : p + plen;
      size_t vlen = eq ? plen - klen - 1 : 0;
      long kd = decode(p, klen, w);
      if (kd < 0) goto bad;
      hookd_in_kv *kv = &out->kv[out->n];
      kv->k = w;
      kv->klen = (size_t)kd;
      w += kd + 1;
      long vd = decode(v, vlen, w);
      if (vd < 0) goto bad;
      kv->v = w;
      kv->vlen = (size_t)vd;
      w += vd + 1;
      if (kd > 0) out->n++;
      else out->empty_names++;
    } else {
      out->empty_pairs++;
    }
    start = end + 1;
  }
  return 0;
bad:
  hookd_in_form_free(out);
  return -1;
}

const hookd_in_kv *hookd_in_form_get(const hookd_in_form *f, const char *name) {
  size_t nlen = strlen(name);
  for (size_t i = 0; i < f->n; i++)
    if (f->kv[i].klen == nlen && memcmp(f->kv[i].k, name, nlen) == 0) return &f->kv[i];
  return NULL;
}

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  size_t n = alen < blen ? alen : blen;
  int c = n ? memcmp(a, b, n) : 0;
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

static int kv_cmp(const void *pa, const void *pb) {
  const hookd_in_kv *a = pa, *b = pb;
  int c = bytes_cmp(a->k, a->klen, b->k, b->klen);
  return c ? c : bytes_cmp(a->v, a->vlen, b->v, b->vlen);
}

void hookd_in_form_sort(hookd_in_form *f) {
  if (f->n > 1) qsort(f->kv, f->n, sizeof *f->kv, kv_cmp);
}

static int kv_cmp_utf16(const void *pa, const void *pb) {
  const hookd_in_kv *a = pa, *b = pb;
  int c = hookd_utf16_cmp(a->k, a->klen, b->k, b->klen);
  return c ? c : hookd_utf16_cmp(a->v, a->vlen, b->v, b->vlen);
}

void hookd_in_form_sort_utf16(hookd_in_form *f) {
  if (f->n > 1) qsort(f->kv, f->n, sizeof *f->kv, kv_cmp_utf16);
}

int hookd_in_urlencode(hookd_buf *b, const char *s, size_t n, const char *extra, bool space_plus) {
  static const char digits[] = "0123456789ABCDEF";
  int rc = 0;
  size_t run = 0; /* bytes kept, appended at once */
  for (size_t i = 0; i < n && !rc; i++) {
    unsigned char c = (unsigned char)s[i];
    int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || (c && strchr(extra, c));
    if (keep) {
      run++;
      continue;
    }
    rc = hookd_buf_append(b, s + i - run, run);
    run = 0;
    if (rc) break;
    if (c == ' ' && space_plus) {
      rc = hookd_buf_append(b, "+", 1);
    } else {
      char esc[3] = {'%', digits[c >> 4], digits[c & 15]};
      rc = hookd_buf_append(b, esc, 3);
    }
  }
  if (!rc) rc = hookd_buf_append(b, s + n - run, run);
  return rc;
}

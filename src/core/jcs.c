/* jcs.c — RFC 8785 JSON Canonicalization Scheme over jansson values: object members sorted by
 * the UTF-16 code units of their names, numbers written as ECMAScript's Number.prototype.toString
 * writes them (shortest round-trip digits, then ECMAScript's layout), strings with the minimal
 * escaping RFC 8785 prescribes, no whitespace. Used for content hashes and composite keys.
 *
 * One deliberate deviation: an integer jansson holds exactly (json_int_t, 64 bits) whose
 * magnitude is above 2^53 is written with its own decimal digits. RFC 8785 reads every number as
 * an IEEE double, which rounds such an integer (9007199254740993 becomes 9007199254740992): two
 * events differing only in it (an id, an amount in minor units) would share a canonical form
 * and a hash, and hookd's identity and conflict checks would merge them. RFC 8785 expects I-JSON
 * input, and I-JSON (RFC 7493) calls such integers non-interoperable; for them hookd prefers
 * telling events apart to matching another canonicaliser's hash. Within ±2^53 both write the
 * same (every such integer is a double). Reals (a fraction or an exponent, or every number
 * parsed with JSON_DECODE_INT_AS_REAL) stay RFC 8785's, so 2^60 as an integer and as a real
 * differ. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/inbound.h"
#include "core/jsonio.h"
#include "core/utf8.h"

#define JCS_MAX_DEPTH 4096 /* guards against cyclic or absurdly deep values */
#define JCS_EXACT_INT ((json_int_t)1 << 53) /* integers up to this magnitude are doubles */

/* ---- numbers ------------------------------------------------------------------------------ */

void hookd_jcs_number(double d, char out[32]) {
  if (!isfinite(d)) {
    memcpy(out, "null", 5); /* not JSON: hookd_jcs refuses these before getting here */
    return;
  }
  if (d == 0) { /* both 0 and -0 */
    memcpy(out, "0", 2);
    return;
  }
  char *o = out;
  if (d < 0) {
    *o++ = '-';
    d = -d;
  }
  /* Integers below 2^53 (most numbers in webhooks: amounts, timestamps, counts): every integer
   * of that range is a distinct double, so the shortest digits that read back are the integer's
   * own, and ECMAScript writes them in full (n <= 16 < 21). Same text as below, without the
   * printf/strtod rounds. */
  if (d < 9007199254740992.0 && d == floor(d)) {
    uint64_t u = (uint64_t)d;
    char rev[20];
    int k = 0;
    do {
      rev[k++] = (char)('0' + u % 10);
      u /= 10;
    } while (u);
    while (k) *o++ = rev[--k];
    *o = '\0';
    return;
  }
  /* Shortest digits that read back as d, the closest of that length (jsonio.c). */
  char digits[17];
  int exp10, k = hookd_json_shortest(d, digits, &exp10);
  int n = exp10 + 1; /* value = 0.d1d2…dk × 10^n */

  if (k <= n && n <= 21) {
    memcpy(o, digits, (size_t)k);
    o += k;
    for (int i = 0; i < n - k; i++) *o++ = '0';
  } else if (0 < n && n <= 21) {
    memcpy(o, digits, (size_t)n);
    o += n;
    *o++ = '.';
    memcpy(o, digits + n, (size_t)(k - n));
    o += k - n;
  } else if (-6 < n && n <= 0) {
    *o++ = '0';
    *o++ = '.';
    for (int i = 0; i < -n; i++) *o++ = '0';
    memcpy(o, digits, (size_t)k);
    o += k;
  } else {
    int e = n - 1;
    *o++ = digits[0];
    if (k > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)(k - 1));
      o += k - 1;
    }
    *o++ = 'e';
    *o++ = e < 0 ? '-' : '+';
    if (e < 0) e = -e;
    char ebuf[8];
    int elen = snprintf(ebuf, sizeof ebuf, "%d", e);
    memcpy(o, ebuf, (size_t)elen);
    o += elen;
  }
  *o = '\0';
}

/* ---- strings ------------------------------------------------------------------------------ */

/* Decodes one UTF-8 code point at s[*i]; returns it, or -1 (consuming one byte) when the
 * sequence is malformed, overlong, a surrogate or beyond U+10FFFF. */
static long utf8_next(const unsigned char *s, size_t n, size_t *i) {
  unsigned c = s[*i];
  if (c < 0x80) {
    (*i)++;
    return c;
  }
  size_t len;
  unsigned long cp, min;
  if ((c & 0xE0) == 0xC0)
    len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    len = 4, cp = c & 0x07, min = 0x10000;
  else {
    (*i)++;
    return -1;
  }
  if (n - *i < len) {
    (*i)++;
    return -1;
  }
  for (size_t j = 1; j < len; j++) {
    unsigned cc = s[*i + j];
    if ((cc & 0xC0) != 0x80) {
      (*i)++;
      return -1;
    }
    cp = cp << 6 | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    (*i)++;
    return -1;
  }
  *i += len;
  return (long)cp;
}

static int utf8_valid(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    if (u[i] < 0x80) { /* ASCII, most of a webhook: no decoding needed */
      i++;
      continue;
    }
    if (utf8_next(u, n, &i) < 0) return 0;
  }
  return 1;
}

/* Strings: valid UTF-8 only, then the minimal escaping JCS requires (jsonio's quoting). */
static int jcs_string(hookd_buf *out, const char *s, size_t n) {
  if (!utf8_valid(s, n)) return -1;
  return hookd_json_quote(out, s, n);
}

/* ---- member order: UTF-16 code units ------------------------------------------------------ */

typedef struct member {
  const char *key;
  size_t len;
  json_t *value;
} member;

static int member_cmp(const void *pa, const void *pb) {
  const member *a = pa, *b = pb;
  return hookd_utf16_cmp(a->key, a->len, b->key, b->len);
}

/* ---- values ------------------------------------------------------------------------------- */

static int jcs_value(const json_t *v, hookd_buf *out, int depth) {
  char num[32];
  if (!v || depth > JCS_MAX_DEPTH) return -1;
  switch (json_typeof(v)) {
  case JSON_NULL: return hookd_buf_puts(out, "null");
  case JSON_TRUE: return hookd_buf_puts(out, "true");
  case JSON_FALSE: return hookd_buf_puts(out, "false");
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    if (i > JCS_EXACT_INT || i < -JCS_EXACT_INT) /* exact, not rounded: see the top of the file */
      return hookd_buf_printf(out, "%" JSON_INTEGER_FORMAT, i);
    hookd_jcs_number((double)i, num);
    return hookd_buf_puts(out, num);
  }
  case JSON_REAL: {
    double d = json_real_value(v);
    if (!isfinite(d)) return -1;
    hookd_jcs_number(d, num);
    return hookd_buf_puts(out, num);
  }
  case JSON_STRING: return jcs_string(out, json_string_value(v), json_string_length(v));
  case JSON_ARRAY: {
    int rc = hookd_buf_append(out, "[", 1);
    for (size_t i = 0; i < json_array_size(v) && !rc; i++) {
      if (i) rc = hookd_buf_append(out, ",", 1);
      if (!rc) rc = jcs_value(json_array_get(v, i), out, depth + 1);
    }
    return rc ? rc : hookd_buf_append(out, "]", 1);
  }
  case JSON_OBJECT: {
    size_t n = json_object_size(v);
    member small[16]; /* most objects: no allocation */
    member *m = n <= 16 ? small : malloc(n * sizeof *m);
    if (!m) return HOOKD_BUF_NOMEM;
    size_t i = 0;
    const char *key;
    size_t klen;
    json_t *child;
    json_object_keylen_foreach((json_t *)v, key, klen, child) {
      if (i == n) break;
      m[i].key = key;
      m[i].len = klen;
      m[i].value = child;
      i++;
    }
    if (i > 1) qsort(m, i, sizeof *m, member_cmp);
    int rc = hookd_buf_append(out, "{", 1);
    for (size_t j = 0; j < i && !rc; j++) {
      if (j) rc = hookd_buf_append(out, ",", 1);
      if (!rc) rc = jcs_string(out, m[j].key, m[j].len);
      if (!rc) rc = hookd_buf_append(out, ":", 1);
      if (!rc) rc = jcs_value(m[j].value, out, depth + 1);
    }
    if (m != small) free(m);
    return rc ? rc : hookd_buf_append(out, "}", 1);
  }
  }
  return -1;
}

int hookd_jcs(const json_t *v, hookd_buf *out) { return jcs_value(v, out, 0); }

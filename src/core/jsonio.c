/* jsonio.c — bounded JSON parse, a deterministic compact serialiser, and the shortest round-trip
 * digits of a double that it and jcs.c write (see jsonio.h). The depth pre-scan only counts
 * brackets outside strings; jansson does the parsing, its allocations watched (a parse that
 * ran out of memory is said so, never taken for a text that is not JSON). */
#include "core/jsonio.h"
#include "core/inbound.h" /* hookd_jcs_number */
#include "core/num.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jansson's allocations, watched: a parse during which one failed is out of memory, whatever
 * jansson made of it (it reports most such failures with no message at all, some as "invalid
 * token", and goes on past a character of a string it could not keep). */
static _Thread_local bool alloc_failed;
static _Thread_local unsigned alloc_fail_in; /* (hookd_json_fail_alloc_in: the unit tests) */

static void *watched_malloc(size_t n) {
  void *p = alloc_fail_in && --alloc_fail_in == 0 ? NULL : malloc(n);
  if (!p) alloc_failed = true;
  return p;
}

/* before main, on one thread: every jansson value is allocated through it (its free is libc's,
 * so a value allocated before would be freed alike) */
__attribute__((constructor)) static void watch_jansson_allocs(void) {
  json_set_alloc_funcs(watched_malloc, free);
}

void hookd_json_fail_alloc_in(unsigned n) { alloc_fail_in = n; }

bool hookd_json_out_of_memory(const char *err) { return !strcmp(err, HOOKD_JSON_ERR_NOMEM); }

static int depth_exceeds(const char *p, size_t n, size_t max, size_t *at) {
  size_t depth = 0;
  int in_str = 0;
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (in_str) {
      if (c == '\\') i++;
      else if (c == '"') in_str = 0;
    } else if (c == '"') {
      in_str = 1;
    } else if (c == '[' || c == '{') {
      if (++depth > max) {
        *at = i;
        return 1;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return 0;
}

json_t *hookd_json_parse(const char *buf, size_t len, const hookd_json_limits *lim,
                         char err[HOOKD_JSON_ERR_MAX]) {
  return hookd_json_parse_ex(buf, len, lim, 0, err);
}

/* Why a parse failed, for a provider's body: a number beyond 64 bits (read again as doubles), a
 * valid JSON text that is not I-JSON (RFC 7493: a duplicate key, a \u0000 or a lone surrogate
 * escape — read again with those replaced), or anything else (refused). */
enum fail_kind { FAIL_OTHER, FAIL_OVERFLOW, FAIL_NOT_IJSON, FAIL_DEPTH, FAIL_NOMEM };

static json_t *parse_as(const char *buf, size_t len, const hookd_json_limits *lim, int flags,
                        bool dups, char err[HOOKD_JSON_ERR_MAX], enum fail_kind *kind) {
  size_t at;
  *kind = FAIL_OTHER;
  if (memchr(buf, '\0', len)) {
    snprintf(err, HOOKD_JSON_ERR_MAX, "body contains a NUL byte");
    return NULL;
  }
  if (lim && lim->max_depth && depth_exceeds(buf, len, lim->max_depth, &at)) {
    snprintf(err, HOOKD_JSON_ERR_MAX, "JSON nested deeper than %zu levels (at byte %zu)",
             lim->max_depth, at);
    *kind = FAIL_DEPTH;
    return NULL;
  }
  json_error_t je;
  alloc_failed = false;
  json_t *v = json_loadb(buf, len, (dups ? 0 : JSON_REJECT_DUPLICATES) | (size_t)flags, &je);
  if (alloc_failed) { /* (a value too: a string may have lost a character) */
    json_decref(v);
    snprintf(err, HOOKD_JSON_ERR_MAX, HOOKD_JSON_ERR_NOMEM);
    *kind = FAIL_NOMEM;
    return NULL;
  }
  if (!v) {
    /* jansson's messages name the problem: "invalid UTF-8", "duplicate object key",
     * "too big integer", "\u0000 is not allowed without JSON_ALLOW_NUL", … */
    const char *msg = je.text;
    const char *what = "invalid JSON";
    if (strstr(msg, "JSON_ALLOW_NUL")) msg = "\\u0000 is not allowed in strings";
    if (strstr(msg, "unable to decode byte")) what = "invalid UTF-8 in JSON";
    snprintf(err, HOOKD_JSON_ERR_MAX, "%s at byte %d: %s", what, je.position, msg);
    if (json_error_code(&je) == json_error_numeric_overflow) *kind = FAIL_OVERFLOW;
    else if (json_error_code(&je) == json_error_duplicate_key ||
             strstr(je.text, "JSON_ALLOW_NUL") || strstr(je.text, "invalid Unicode") ||
             strstr(je.text, "NUL byte in object key")) /* {"a\u0000b": 1} */
      *kind = FAIL_NOT_IJSON;
  }
  return v;
}

static json_t *parse(const char *buf, size_t len, const hookd_json_limits *lim, int flags,
                     char err[HOOKD_JSON_ERR_MAX], bool *overflow) {
  enum fail_kind kind;
  json_t *v = parse_as(buf, len, lim, flags, false, err, &kind);
  *overflow = kind == FAIL_OVERFLOW;
  return v;
}

json_t *hookd_json_parse_ex(const char *buf, size_t len, const hookd_json_limits *lim, int flags,
                            char err[HOOKD_JSON_ERR_MAX]) {
  bool overflow;
  return parse(buf, len, lim, flags, err, &overflow);
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hookd_hex_digit(p[i]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Writes "\uFFFD" over every \u0000 and lone surrogate escape of buf's strings, in place (six
 * bytes for six: byte offsets stay those of the body). A pair (high then low) stays. With
 * !nul_too, stops at a \u0000 and returns false. */
static bool replace_non_ijson_escapes(char *buf, size_t len, bool nul_too) {
  bool in_str = false;
  for (size_t i = 0; i < len; i++) {
    if (!in_str) {
      in_str = buf[i] == '"';
      continue;
    }
    if (buf[i] == '"') {
      in_str = false;
      continue;
    }
    if (buf[i] != '\\' || i + 1 >= len) continue;
    if (buf[i + 1] != 'u' || i + 6 > len) {
      i++; /* a two-byte escape */
      continue;
    }
    int v = hex4(buf + i + 2);
    bool pair = v >= 0xD800 && v <= 0xDBFF && i + 12 <= len && buf[i + 6] == '\\' &&
                buf[i + 7] == 'u' && hex4(buf + i + 8) >= 0xDC00 && hex4(buf + i + 8) <= 0xDFFF;
    if (pair) {
      i += 11;
    } else if (v == 0 && !nul_too) {
      return false;
    } else if (v == 0 || (v >= 0xD800 && v <= 0xDFFF)) {
      memcpy(buf + i, "\\uFFFD", 6);
      i += 5;
    } else {
      i += 5;
    }
  }
  return true;
}

/* A UTF-8 byte order mark before a provider's text is passed over (RFC 8259 8.1 allows
 * ignoring it); the raw bytes kept and forwarded keep it. */
static void skip_bom(const char **buf, size_t *len) {
  if (*len >= 3 && !memcmp(*buf, "\xef\xbb\xbf", 3)) {
    *buf += 3;
    *len -= 3;
  }
}

json_t *hookd_json_parse_fields(const char *buf, size_t len, const hookd_json_limits *lim,
                                char err[HOOKD_JSON_ERR_MAX]) {
  enum fail_kind kind;
  skip_bom(&buf, &len);
  json_t *v = parse_as(buf, len, lim, 0, false, err, &kind);
  if (v || kind != FAIL_NOT_IJSON) return v;
  char *copy = malloc(len ? len : 1);
  if (!copy) {
    snprintf(err, HOOKD_JSON_ERR_MAX, HOOKD_JSON_ERR_NOMEM);
    return NULL;
  }
  memcpy(copy, buf, len);
  if (replace_non_ijson_escapes(copy, len, false))
    v = parse_as(copy, len, lim, 0, false, err, &kind); /* a duplicate key is refused again */
  else
    snprintf(err, HOOKD_JSON_ERR_MAX, "a \\u0000 escape in a string");
  free(copy);
  return v;
}

/* A number read as a double that may not be what the body says (|v| >= 2^53: 9007199254740993
 * reads as ...992). */
static bool inexact(const json_t *v) {
  return json_is_real(v) && fabs(json_real_value(v)) >= 9007199254740992.0;
}

/* Every inexact number in v becomes null: nothing can key on it. Depth is bounded by the
 * parse's. */
static void inexact_to_null(json_t *v) {
  if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); i++) {
      json_t *e = json_array_get(v, i);
      if (inexact(e)) json_array_set_new(v, i, json_null());
      else inexact_to_null(e);
    }
  } else if (json_is_object(v)) {
    for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
      json_t *e = json_object_iter_value(it);
      if (inexact(e)) json_object_iter_set_new(v, it, json_null());
      else inexact_to_null(e);
    }
  }
}

json_t *hookd_json_parse_body(const char *buf, size_t len, const hookd_json_limits *lim,
                              bool *lossy, bool *too_deep, char err[HOOKD_JSON_ERR_MAX]) {
  enum fail_kind kind;
  int flags = JSON_DECODE_ANY; /* a top-level scalar ("ping", 42) is JSON too (RFC 8259) */
  bool dups = false;
  char *copy = NULL;
  *lossy = false;
  skip_bom(&buf, &len);
  const char *text = buf;
  json_t *v;
  /* jansson stops at its first error: each kind is handled once, then the body is read again
   * (at most three reads) */
  while (!(v = parse_as(text, len, lim, flags, dups, err, &kind))) {
    if (kind == FAIL_OVERFLOW && !(flags & JSON_DECODE_INT_AS_REAL)) {
      flags |= JSON_DECODE_INT_AS_REAL;
    } else if (kind == FAIL_NOT_IJSON && !copy) {
      if (!(copy = malloc(len ? len : 1))) {
        snprintf(err, HOOKD_JSON_ERR_MAX, HOOKD_JSON_ERR_NOMEM);
        break;
      }
      memcpy(copy, buf, len);
      replace_non_ijson_escapes(copy, len, true);
      text = copy;
      dups = true;
    } else {
      break; /* anything else, or the same kind again: refused, as the read before said */
    }
  }
  free(copy);
  if (too_deep) *too_deep = !v && kind == FAIL_DEPTH;
  if (v && ((flags & JSON_DECODE_INT_AS_REAL) || dups)) {
    *lossy = true;
    inexact_to_null(v);
  }
  return v;
}

/* d1.d2…dp × 10^e as "%.*e" writes it, read back. */
static double read_back(const char *digits, int p, int e) {
  char s[32];
  int o = 0;
  s[o++] = digits[0];
  if (p > 1) {
    s[o++] = '.';
    memcpy(s + o, digits + 1, (size_t)(p - 1));
    o += p - 1;
  }
  snprintf(s + o, sizeof s - (size_t)o, "e%d", e);
  return strtod(s, NULL);
}

/* The next p-digit decimal above d1.d2…dp × 10^*e, in place: the last digit + 1, with carry
 * (above 9.99…9 × 10^e comes 1.00…0 × 10^(e+1)). */
static void next_up(char *digits, int p, int *e) {
  int i = p - 1;
  while (i >= 0 && digits[i] == '9') digits[i--] = '0';
  if (i >= 0) {
    digits[i]++;
  } else {
    digits[0] = '1';
    ++*e;
  }
}

int hookd_json_shortest(double d, char digits[17], int *exp10) {
  char tmp[40];
  int p = 1, e = 0, m;
  d = fabs(d);
  /* d reads back from the decimals within half a gap of it on either side. The two gaps are
   * equal except at a power of two above the smallest normal, whose gap below is half the gap
   * above. */
  int narrow_below = frexp(d, &m) == 0.5 && d > DBL_MIN;
  /* One round for most numbers instead of one per digit (a body of 17-digit reals took 17 of
   * them per number): for a normal d, half a gap is at most 2^-53 of d, less than half the
   * spacing of 15-digit decimals (at least 10^-15 of d). So if some decimal of p <= 15 digits
   * reads back — the one the loop below would pick — it is, padded with zeros, the 15-digit
   * decimal nearest d: when that one reads back, its digits without the trailing zeros are
   * the answer, and when it does not, the answer has 16 or 17 digits. (Not for subnormals,
   * whose gap is far wider relative to d.) */
  if (d >= DBL_MIN) {
    snprintf(tmp, sizeof tmp, "%.14e", d);
    if (strtod(tmp, NULL) == d) {
      digits[0] = tmp[0];
      memcpy(digits + 1, tmp + 2, 14);
      *exp10 = (int)strtol(strchr(tmp, 'e') + 1, NULL, 10);
      for (p = 15; p > 1 && digits[p - 1] == '0';) p--;
      return p;
    }
    p = 16;
  }
  for (; p <= 17; p++) {
    /* printf rounds correctly (ties to even): the p-digit decimal nearest d, the one
     * ECMAScript picks when it reads back */
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
    digits[0] = tmp[0];
    if (p > 1) memcpy(digits + 1, tmp + 2, (size_t)(p - 1)); /* past the '.' (C locale) */
    e = (int)strtol(strchr(tmp, 'e') + 1, NULL, 10);
    double r = strtod(tmp, NULL);
    if (r == d || p == 17) break; /* at 17 significant digits the nearest always reads back */
    /* The nearest does not read back. Its neighbour on d's other side is at least as far from
     * d, so with equal gaps it does not read back either. With a narrow gap below, a nearest
     * below d may lie beyond that narrow half-gap while its successor (last digit + 1), though
     * farther, lies within the wide half-gap above: then the successor is the only p-digit
     * decimal that reads back, hence the closest one, which is ECMAScript's choice: 2^-24 is
     * 5.960464477539063e-8, not the 17 digits 5.9604644775390625e-8 (46 powers of two are
     * like it). A nearest above d is beyond the wide half-gap; its predecessor, farther. */
    if (!narrow_below || r > d) continue;
    int ne = e;
    next_up(digits, p, &ne);
    if (read_back(digits, p, ne) == d) {
      e = ne;
      break;
    }
  }
  while (p > 1 && digits[p - 1] == '0') p--;
  *exp10 = e;
  return p;
}

void hookd_json_fmt_double(double d, char out[32]) {
  if (!isfinite(d)) {
    snprintf(out, 32, "null");
    return;
  }
  if (d == 0) {
    snprintf(out, 32, signbit(d) ? "-0.0" : "0.0");
    return;
  }
  char digits[17];
  int e, k = hookd_json_shortest(d, digits, &e);
  char *o = out;
  if (d < 0) *o++ = '-';
  /* printf's "%.*g" layout at precision k, as this function always wrote (fixed notation for
   * exponents -4..k-1, else d.ddde±XX), and still a JSON real: "3" becomes "3.0". */
  if (-4 <= e && e < k) {
    if (e >= 0) {
      memcpy(o, digits, (size_t)e + 1);
      o += e + 1;
      *o++ = '.';
      if (k > e + 1) {
        memcpy(o, digits + e + 1, (size_t)(k - e - 1));
        o += k - e - 1;
      } else {
        *o++ = '0';
      }
    } else {
      *o++ = '0';
      *o++ = '.';
      for (int i = 0; i < -e - 1; i++) *o++ = '0';
      memcpy(o, digits, (size_t)k);
      o += k;
    }
    *o = '\0';
  } else {
    *o++ = digits[0];
    if (k > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)(k - 1));
      o += k - 1;
    }
    snprintf(o, (size_t)(out + 32 - o), "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  }
}

/* Bytes a JSON string must escape: '"', '\\' and the controls below 0x20. */
static bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

int hookd_json_quote(hookd_buf *out, const char *s, size_t n) {
  int rc = hookd_buf_append(out, "\"", 1);
  size_t i = 0;
  while (i < n && !rc) {
    size_t run = i;
    while (run < n && !needs_escape((unsigned char)s[run])) run++;
    rc = hookd_buf_append(out, s + i, run - i); /* the unescaped stretch, in one copy */
    if (rc || run == n) break;
    unsigned char c = (unsigned char)s[run];
    char tmp[8];
    const char *esc = tmp;
    switch (c) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    case '\b': esc = "\\b"; break;
    case '\f': esc = "\\f"; break;
    default: snprintf(tmp, sizeof tmp, "\\u%04x", c); /* RFC 8785's minimal escaping */
    }
    rc = hookd_buf_puts(out, esc);
    i = run + 1;
  }
  if (!rc) rc = hookd_buf_append(out, "\"", 1);
  return rc;
}

typedef void (*fmt_real)(double d, char out[32]);

/* A real as shown to people (hookd_json_dump_shown): ECMAScript's shortest text, "0.1" for 0.1
 * where jansson's "%.17g" writes 0.10000000000000001, and ".0" after a whole one ("100.0"). */
static void fmt_shown(double d, char out[32]) {
  if (d == 0 && signbit(d)) { /* (RFC 8785 writes "0" for both zeros; the body sent keeps it) */
    memcpy(out, "-0.0", 5);
    return;
  }
  hookd_jcs_number(d, out);
  if (isfinite(d) && !strpbrk(out, ".e")) strcat(out, ".0"); /* (at most 21 digits and '-') */
}

static int dump(const json_t *v, hookd_buf *out, fmt_real fmt) {
  char num[32];
  int rc = 0;
  switch (json_typeof(v)) {
  case JSON_NULL: return hookd_buf_puts(out, "null");
  case JSON_TRUE: return hookd_buf_puts(out, "true");
  case JSON_FALSE: return hookd_buf_puts(out, "false");
  case JSON_INTEGER:
    return hookd_buf_printf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
  case JSON_REAL:
    fmt(json_real_value(v), num);
    return hookd_buf_puts(out, num);
  case JSON_STRING:
    return hookd_json_quote(out, json_string_value(v), json_string_length(v));
  case JSON_ARRAY: {
    rc = hookd_buf_append(out, "[", 1);
    for (size_t i = 0; i < json_array_size(v) && !rc; i++) {
      if (i) rc = hookd_buf_append(out, ",", 1);
      if (!rc) rc = dump(json_array_get(v, i), out, fmt);
    }
    return rc ? rc : hookd_buf_append(out, "]", 1);
  }
  case JSON_OBJECT: {
    rc = hookd_buf_append(out, "{", 1);
    const char *k;
    size_t klen;
    json_t *child;
    int first = 1;
    json_object_keylen_foreach((json_t *)v, k, klen, child) {
      if (rc) break;
      if (!first) rc = hookd_buf_append(out, ",", 1);
      first = 0;
      if (!rc) rc = hookd_json_quote(out, k, klen);
      if (!rc) rc = hookd_buf_append(out, ":", 1);
      if (!rc) rc = dump(child, out, fmt);
    }
    return rc ? rc : hookd_buf_append(out, "}", 1);
  }
  }
  return -1;
}

int hookd_json_dump(const json_t *v, hookd_buf *out) { return dump(v, out, hookd_json_fmt_double); }

int hookd_json_dump_shown(const json_t *v, hookd_buf *out) {
  return v ? dump(v, out, fmt_shown) : -1;
}

char *hookd_json_text_shown(const json_t *v) {
  if (!v) return NULL; /* (a builder's json_pack that failed: json_dumps answered NULL too) */
  hookd_buf b;
  hookd_buf_init(&b, SIZE_MAX);
  if (dump(v, &b, fmt_shown) != 0) {
    hookd_buf_free(&b);
    return NULL;
  }
  return hookd_buf_steal(&b);
}

int hookd_json_get_str(const json_t *obj, const char *key, const char **out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return 1;
  if (!json_is_string(v)) return -1;
  *out = json_string_value(v);
  return 0;
}

int hookd_json_get_int(const json_t *obj, const char *key, int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return 1;
  if (!json_is_integer(v)) return -1;
  *out = json_integer_value(v);
  return 0;
}

int hookd_json_get_bool(const json_t *obj, const char *key, bool *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return 1;
  if (!json_is_boolean(v)) return -1;
  *out = json_is_true(v);
  return 0;
}

/* jsonio.c — bounded JSON parse and a deterministic compact serialiser (see jsonio.h).
 * The depth pre-scan only counts brackets outside strings; jansson does the parsing. */
#include "core/jsonio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static json_t *parse(const char *buf, size_t len, const hookd_json_limits *lim, int flags,
                     char err[HOOKD_JSON_ERR_MAX], bool *overflow) {
  size_t at;
  *overflow = false;
  if (memchr(buf, '\0', len)) {
    snprintf(err, HOOKD_JSON_ERR_MAX, "body contains a NUL byte");
    return NULL;
  }
  if (lim && lim->max_depth && depth_exceeds(buf, len, lim->max_depth, &at)) {
    snprintf(err, HOOKD_JSON_ERR_MAX, "JSON nested deeper than %zu levels (at byte %zu)",
             lim->max_depth, at);
    return NULL;
  }
  json_error_t je;
  json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | (size_t)flags, &je);
  if (!v) {
    /* jansson's messages name the problem: "invalid UTF-8", "duplicate object key",
     * "too big integer", "\u0000 is not allowed without JSON_ALLOW_NUL", … */
    const char *msg = je.text;
    const char *what = "invalid JSON";
    if (strstr(msg, "JSON_ALLOW_NUL")) msg = "\\u0000 is not allowed in strings";
    if (strstr(msg, "unable to decode byte")) what = "invalid UTF-8 in JSON";
    snprintf(err, HOOKD_JSON_ERR_MAX, "%s at byte %d: %s", what, je.position, msg);
    *overflow = json_error_code(&je) == json_error_numeric_overflow;
  }
  return v;
}

json_t *hookd_json_parse_ex(const char *buf, size_t len, const hookd_json_limits *lim, int flags,
                            char err[HOOKD_JSON_ERR_MAX]) {
  bool overflow;
  return parse(buf, len, lim, flags, err, &overflow);
}

json_t *hookd_json_parse_body(const char *buf, size_t len, const hookd_json_limits *lim,
                              bool *lossy, char err[HOOKD_JSON_ERR_MAX]) {
  bool overflow;
  *lossy = false;
  json_t *v = parse(buf, len, lim, 0, err, &overflow);
  if (v || !overflow) return v;
  *lossy = true;
  return parse(buf, len, lim, JSON_DECODE_INT_AS_REAL, err, &overflow);
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
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(out, 32, "%.*g", prec, d);
    if (strtod(out, NULL) == d) break;
  }
  /* Keep the value a JSON real: "1e+20" and "1.5" are fine; "3" becomes "3.0". */
  if (!strpbrk(out, ".eEn")) strcat(out, ".0");
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

int hookd_json_dump(const json_t *v, hookd_buf *out) {
  char num[32];
  int rc = 0;
  switch (json_typeof(v)) {
  case JSON_NULL: return hookd_buf_puts(out, "null");
  case JSON_TRUE: return hookd_buf_puts(out, "true");
  case JSON_FALSE: return hookd_buf_puts(out, "false");
  case JSON_INTEGER:
    return hookd_buf_printf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
  case JSON_REAL:
    hookd_json_fmt_double(json_real_value(v), num);
    return hookd_buf_puts(out, num);
  case JSON_STRING:
    return hookd_json_quote(out, json_string_value(v), json_string_length(v));
  case JSON_ARRAY: {
    rc = hookd_buf_append(out, "[", 1);
    for (size_t i = 0; i < json_array_size(v) && !rc; i++) {
      if (i) rc = hookd_buf_append(out, ",", 1);
      if (!rc) rc = hookd_json_dump(json_array_get(v, i), out);
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
      if (!rc) rc = hookd_json_dump(child, out);
    }
    return rc ? rc : hookd_buf_append(out, "}", 1);
  }
  }
  return -1;
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

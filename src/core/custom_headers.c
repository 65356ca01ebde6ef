/* custom_headers.c — the names and values an endpoint's custom headers may have, and their
 * header lines (custom_headers.h). A value may be a credential: no message here quotes one. */
#include "core/custom_headers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* RFC 9110 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_"
 * / "`" / "|" / "~" / DIGIT / ALPHA */
static bool tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool token(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HOOKD_CUSTOM_HEADER_NAME_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!tchar((unsigned char)s[i])) return false;
  return true;
}

/* Names hookd sets itself (the body's framing and type, the signature, its ids), names HTTP
 * gives to the connection or a proxy rather than the receiver, and names that change how the
 * request is read: a receiver would get another request than the one hookd signed. */
bool hookd_custom_header_reserved(const char *name) {
  static const char *const exact[] = {
      "transfer-encoding", "host",       "connection", "keep-alive",      "te",
      "trailer",           "upgrade",    "expect",     "user-agent",      "idempotency-key",
      "accept-encoding",   "range",      "if-range",   "x-http-method-override",
      "x-http-method",     "x-method-override", "x-original-url", "x-rewrite-url", NULL};
  /* content-*: the body's type, length, encoding, range, language are what hookd sends */
  static const char *const prefix[] = {"content-", "proxy-", "webhook-", "svix-", "hookd-", NULL};
  for (int i = 0; exact[i]; i++)
    if (!strcasecmp(name, exact[i])) return true;
  for (int i = 0; prefix[i]; i++)
    if (!strncasecmp(name, prefix[i], strlen(prefix[i]))) return true;
  return false;
}

static bool value_ok(const char *s, size_t n) {
  /* not empty: libcurl reads "Name:" with nothing after it as "remove this header" */
  if (n == 0 || n > HOOKD_CUSTOM_HEADER_VALUE_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 0x20 && s[i] <= 0x7e) || s[i] == '\t')) return false;
  /* a field value has no blank at either end (RFC 9110 5.5): one would be cut off on the way */
  return n == 0 || (s[0] != ' ' && s[0] != '\t' && s[n - 1] != ' ' && s[n - 1] != '\t');
}

bool hookd_custom_headers_check(const json_t *v, const char *field, char *err, size_t len) {
  if (!json_is_object(v) || json_object_size(v) > HOOKD_CUSTOM_HEADERS_MAX) {
    snprintf(err, len, "%s must be null or an object of at most %d header names to string values",
             field, HOOKD_CUSTOM_HEADERS_MAX);
    return false;
  }
  const char *k;
  json_t *val;
  void *it = json_object_iter((json_t *)v);
  for (size_t i = 0; it; i++, it = json_object_iter_next((json_t *)v, it)) {
    k = json_object_iter_key(it);
    val = json_object_iter_value(it);
    if (!token(k)) {
      /* not a token: it cannot name the parameter either, so the message names the field */
      snprintf(err, len,
               "%s: \"%.64s\" is not a header name (1 to %d characters of letters, digits and "
               "!#$%%&'*+-.^_`|~)",
               field, k, HOOKD_CUSTOM_HEADER_NAME_MAX);
      return false;
    }
    if (hookd_custom_header_reserved(k)) {
      snprintf(err, len,
               "%s.%s is a header hookd or HTTP sets itself, or one that changes what the request "
               "means (content-*, transfer-encoding, host, connection, keep-alive, te, trailer, "
               "upgrade, expect, proxy-*, user-agent, idempotency-key, accept-encoding, range, "
               "if-range, x-http-method-override, x-http-method, x-method-override, "
               "x-original-url, x-rewrite-url, webhook-*, svix-*, hookd-*)",
               field, k);
      return false;
    }
    /* one header per name: a receiver reads Authorization and authorization as one */
    void *prev = json_object_iter((json_t *)v);
    for (size_t j = 0; j < i; j++, prev = json_object_iter_next((json_t *)v, prev))
      if (!strcasecmp(json_object_iter_key(prev), k)) {
        snprintf(err, len, "%s.%s is given twice (header names are case-insensitive)", field, k);
        return false;
      }
    if (!json_is_string(val) || !value_ok(json_string_value(val), json_string_length(val))) {
      snprintf(err, len,
               "%s.%s must be a string of 1 to %d bytes of printable ASCII and tabs, without "
               "a blank at either end",
               field, k, HOOKD_CUSTOM_HEADER_VALUE_MAX);
      return false;
    }
  }
  return true;
}

char *hookd_custom_headers_lines(const json_t *v) {
  /* sized first and written once: a buffer grown by realloc would leave copies of the values
   * (credentials) in freed memory */
  size_t total = 1;
  const char *k;
  json_t *val;
  json_object_foreach((json_t *)v, k, val) total += strlen(k) + 3 + json_string_length(val);
  char *out = malloc(total), *p = out;
  if (!out) return NULL;
  json_object_foreach((json_t *)v, k, val) {
    const char *s = json_string_value(val);
    p += snprintf(p, total - (size_t)(p - out), "%s: %s\n", k, s ? s : "");
  }
  *p = '\0';
  return out;
}

bool hookd_header_line_named(const char *line, size_t ll, const char *lines) {
  const char *colon = memchr(line, ':', ll);
  size_t nl = colon ? (size_t)(colon - line) : ll;
  for (const char *l = lines; l && *l;) {
    const char *c = strchr(l, ':'), *end = strchr(l, '\n');
    if (c && (size_t)(c - l) == nl && !strncasecmp(l, line, nl)) return true;
    if (!end) break;
    l = end + 1;
  }
  return false;
}

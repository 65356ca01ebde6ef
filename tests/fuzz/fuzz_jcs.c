/* fuzz_jcs.c — libFuzzer target for RFC 8785 canonicalisation: bytes parsed by jansson (integers
 * as reals, as JCS sees them) are canonicalised; the canonical text must parse again, canonicalise
 * to itself, and list every object's members in strictly increasing UTF-16 code-unit order (checked
 * here with a plain UTF-8 -> UTF-16 conversion, apart from jcs.c's comparison and its byte-order
 * shortcut). The first 8 bytes, read as a double, must format to text that reads back as the same
 * double. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/inbound.h"

/* s (valid UTF-8, as jansson guarantees) as UTF-16 code units; returns how many. */
static size_t to_utf16(const char *s, size_t n, uint16_t *out) {
  const unsigned char *u = (const unsigned char *)s;
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    if (u[i] < 0x80) cp = u[i], i += 1;
    else if (u[i] < 0xE0) cp = (u[i] & 0x1Fu) << 6 | (u[i + 1] & 0x3Fu), i += 2;
    else if (u[i] < 0xF0)
      cp = (u[i] & 0x0Fu) << 12 | (u[i + 1] & 0x3Fu) << 6 | (u[i + 2] & 0x3Fu), i += 3;
    else
      cp = (u[i] & 0x07u) << 18 | (u[i + 1] & 0x3Fu) << 12 | (u[i + 2] & 0x3Fu) << 6 |
           (u[i + 3] & 0x3Fu),
      i += 4;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out[k++] = (uint16_t)(0xD800 | cp >> 10);
      out[k++] = (uint16_t)(0xDC00 | (cp & 0x3FF));
    } else {
      out[k++] = (uint16_t)cp;
    }
  }
  return k;
}

static int utf16_cmp(const char *a, size_t an, const char *b, size_t bn) {
  uint16_t *ua = malloc((an + 1) * sizeof *ua), *ub = malloc((bn + 1) * sizeof *ub);
  if (!ua || !ub) abort();
  size_t na = to_utf16(a, an, ua), nb = to_utf16(b, bn, ub);
  int r = 0;
  for (size_t i = 0; !r && i < na && i < nb; i++)
    if (ua[i] != ub[i]) r = ua[i] < ub[i] ? -1 : 1;
  if (!r) r = na < nb ? -1 : na > nb;
  free(ua);
  free(ub);
  return r;
}

/* every object's members, in the order the canonical text lists them, strictly increasing */
static void check_order(json_t *v) {
  if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); i++) check_order(json_array_get(v, i));
    return;
  }
  if (!json_is_object(v)) return;
  const char *key, *prev = NULL;
  size_t klen, plen = 0;
  json_t *child;
  json_object_keylen_foreach(v, key, klen, child) {
    if (prev && utf16_cmp(prev, plen, key, klen) >= 0) abort();
    prev = key;
    plen = klen;
    check_order(child);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= 8) {
    double d;
    memcpy(&d, data, sizeof d);
    char num[32];
    hookd_jcs_number(d, num);
    if (!memchr(num, '\0', sizeof num)) abort();
    if (isfinite(d) && strtod(num, NULL) != d && !(d == 0 && strcmp(num, "0") == 0)) abort();
  }
  json_error_t e;
  json_t *v = json_loadb((const char *)data, size, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &e);
  if (!v) return 0;
  hookd_buf a, b;
  hookd_buf_init(&a, 1 << 22);
  hookd_buf_init(&b, 1 << 22);
  int rc = hookd_jcs(v, &a);
  if (rc == 0) {
    json_t *w = json_loadb(a.data, a.len, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &e);
    if (!w) abort(); /* canonical output must be JSON */
    if (hookd_jcs(w, &b) != 0) abort();
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort(); /* idempotent */
    check_order(w); /* jansson keeps members in the order they were read */
    json_decref(w);
  }
  hookd_buf_free(&a);
  hookd_buf_free(&b);
  json_decref(v);
  return 0;
}

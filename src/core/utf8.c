/* utf8.c — well-formed UTF-8 sequences and UTF-16 code-unit order (see utf8.h). */
#include "core/utf8.h"

#include <string.h>

size_t hookd_utf8_len(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  unsigned c = p[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) len = 2, min = 0x80;
  else if ((c & 0xf0) == 0xe0) len = 3, min = 0x800;
  else if ((c & 0xf8) == 0xf0) len = 4, min = 0x10000;
  else return 0;
  if (n < len) return 0;
  unsigned cp = c & (0x7f >> len);
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

size_t hookd_utf8_scrub(char *s) {
  size_t fixed = 0, n = strlen(s);
  for (size_t i = 0; i < n;) {
    size_t l = hookd_utf8_len(s + i, n - i);
    if (l) {
      i += l;
    } else {
      s[i++] = '?';
      fixed++;
    }
  }
  return fixed;
}

typedef struct u16iter {
  const unsigned char *s;
  size_t n, i;
  unsigned pending; /* low surrogate still to return, or 0 */
} u16iter;

/* Next UTF-16 code unit, or -1 at the end. A malformed byte stands for itself. */
static long u16_next(u16iter *it) {
  if (it->pending) {
    unsigned u = it->pending;
    it->pending = 0;
    return u;
  }
  if (it->i >= it->n) return -1;
  const unsigned char *p = it->s + it->i;
  size_t len = hookd_utf8_len((const char *)p, it->n - it->i);
  if (!len) {
    it->i++;
    return p[0];
  }
  it->i += len;
  if (len == 1) return p[0];
  unsigned long cp = p[0] & (0x7fu >> len);
  for (size_t k = 1; k < len; k++) cp = (cp << 6) | (p[k] & 0x3f);
  if (cp < 0x10000) return (long)cp;
  cp -= 0x10000;
  it->pending = 0xDC00 | (unsigned)(cp & 0x3FF);
  return (long)(0xD800 | (cp >> 10));
}

int hookd_utf16_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  size_t n = alen < blen ? alen : blen, i = 0;
  const unsigned char *ka = (const unsigned char *)a, *kb = (const unsigned char *)b;
  while (i < n && ka[i] == kb[i]) i++;
  if (i == n) return alen < blen ? -1 : alen > blen;
  /* where they first differ in ASCII bytes, bytes decide (the usual case): the common prefix
   * decodes alike in both, a sequence cut at i malformed alike. Otherwise the units from the
   * start — not bytes below EE, which a malformed byte's unit disagrees with (a review found
   * the order then not transitive, which qsort may not be given) */
  if (ka[i] < 0x80 && kb[i] < 0x80) return ka[i] < kb[i] ? -1 : 1;
  u16iter ia = {ka, alen, 0, 0}, ib = {kb, blen, 0, 0};
  for (;;) {
    long ua = u16_next(&ia), ub = u16_next(&ib);
    if (ua != ub) return ua < ub ? -1 : 1; /* the end (-1) sorts first */
    if (ua < 0) return 0;
  }
}

unsigned hookd_utf16_ranges(const char *s, size_t n) {
  unsigned r = 0; /* (lead bytes only: continuation bytes are 80..BF) */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == 0xEE || c == 0xEF) r |= HOOKD_UTF16_HIGH_BMP;
    else if (c >= 0xF0 && c <= 0xF4) r |= HOOKD_UTF16_ASTRAL;
  }
  return r;
}

/* utf8.c — well-formed UTF-8 sequences (see utf8.h). */
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

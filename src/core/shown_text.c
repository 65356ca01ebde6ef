/* shown_text.c — text shown to operators: which characters it may hold (see shown_text.h). */
#include "core/shown_text.h"

#include <stdint.h>
#include <string.h>

#include "core/utf8.h"

/* The code point of the well-formed UTF-8 sequence at p (len bytes, hookd_utf8_len). */
static uint32_t code_point(const unsigned char *p, size_t len) {
  if (len == 1) return p[0];
  uint32_t c = p[0] & (0xff >> (len + 1));
  for (size_t i = 1; i < len; i++) c = c << 6 | (p[i] & 0x3f);
  return c;
}

bool hookd_shown_text_ok(const char *s, bool lines, bool *visible) {
  bool seen = false;
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    size_t len = hookd_utf8_len(s + i, n - i);
    if (!len) return false; /* a malformed sequence */
    uint32_t c = code_point((const unsigned char *)s + i, len);
    i += len;
    if (lines && (c == '\n' || c == '\t')) continue;
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x61c || c == 0x200e || c == 0x200f ||
        (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069))
      return false;
    bool blank = c == ' ' || c == 0xa0 || c == 0xad || c == 0x115f || c == 0x1160 ||
                 c == 0x1680 || c == 0x180e || (c >= 0x2000 && c <= 0x200d) || c == 0x202f ||
                 c == 0x205f || (c >= 0x2060 && c <= 0x2064) || c == 0x3000 || c == 0x3164 ||
                 c == 0xfeff || c == 0xffa0;
    if (!blank) seen = true;
  }
  if (visible) *visible = seen;
  return true;
}

void hookd_shown_print(FILE *to, const char *s, size_t n) {
  while (n > 0) {
    size_t k = hookd_utf8_len(s, n);
    unsigned char c = (unsigned char)*s;
    if (c == '\n' || c == '\r' || c == '\t') {
      fputc(' ', to);
    } else if (!k || c < 0x20 || c == 0x7f) {
      fprintf(to, "\\x%02X", c);
      k = 1;
    } else if (k == 2 && c == 0xc2 && (unsigned char)s[1] < 0xa0) { /* U+0080-U+009F */
      fprintf(to, "\\xC2\\x%02X", (unsigned char)s[1]);
    } else {
      fwrite(s, 1, k, to);
    }
    s += k;
    n -= k;
  }
}

bool hookd_shown_name_ok(const char *s) {
  return strlen(s) <= HOOKD_SHOWN_NAME_MAX && hookd_shown_text_ok(s, false, NULL);
}

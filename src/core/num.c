/* num.c — strict whole-number parsing. See num.h. */
#include "core/num.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int hookd_parse_ll(const char *s, long long min, long long max, long long *out) {
  char *end;
  /* digits, perhaps after a minus: strtoll would also take leading blanks and a plus sign */
  if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
    return -1;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int hookd_hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int hookd_hex_decode(const char *s, size_t len, unsigned char *out, size_t outlen) {
  if (len != outlen * 2) return -1;
  for (size_t i = 0; i < outlen; i++) {
    int hi = hookd_hex_digit(s[2 * i]), lo = hookd_hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

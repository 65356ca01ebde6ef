/* num.c — strict whole-number parsing. See num.h. */
#include "core/num.h"

#include <errno.h>
#include <stdlib.h>

int hookd_parse_ll(const char *s, long long min, long long max, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

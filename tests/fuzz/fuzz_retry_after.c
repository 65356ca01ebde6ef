/* fuzz_retry_after.c — libFuzzer target: Retry-After values (delta-seconds and the three
 * HTTP-date forms) and RFC 3339 timestamps from arbitrary bytes. Invariant: an accepted
 * Retry-After is a delay in [0, ten years]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/retry_after.h"
#include "core/timefmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  int64_t d = -1;
  if (hookd_retry_after_parse(s, 1700000000000LL, &d) == 0) {
    if (d < 0 || d > 10LL * 366 * 24 * 3600 * 1000) abort();
  }
  int64_t ms;
  if (hookd_parse_rfc3339(s, &ms) == 0) {
    char buf[HOOKD_RFC3339_MAX];
    hookd_fmt_rfc3339_ms(ms, buf);
  }
  int64_t secs;
  hookd_parse_http_date(s, &secs);
  free(s);
  return 0;
}

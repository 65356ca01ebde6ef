/* retry_after.c — Retry-After: delta-seconds or HTTP-date. */
#include "core/retry_after.h"

#include <string.h>

#include "core/timefmt.h"

#define MAX_DELAY_MS (10LL * 366 * 24 * 3600 * 1000)

int hookd_retry_after_parse(const char *value, int64_t now_ms, int64_t *delay_ms) {
  if (!value) return -1;
  while (*value == ' ' || *value == '\t') value++;
  size_t n = strlen(value);
  while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
  if (n == 0 || n > 64) return -1;
  char v[65];
  memcpy(v, value, n);
  v[n] = '\0';

  if (v[0] >= '0' && v[0] <= '9') {
    int64_t secs = 0;
    for (size_t i = 0; i < n; i++) {
      if (v[i] < '0' || v[i] > '9') return -1;
      if (secs < MAX_DELAY_MS / 1000) secs = secs * 10 + (v[i] - '0');
    }
    int64_t ms = secs * 1000;
    *delay_ms = ms > MAX_DELAY_MS ? MAX_DELAY_MS : ms;
    return 0;
  }
  int64_t at_s;
  if (hookd_parse_http_date(v, &at_s) != 0) return -1;
  int64_t d = at_s * 1000 - now_ms;
  if (d < 0) d = 0;
  *delay_ms = d > MAX_DELAY_MS ? MAX_DELAY_MS : d;
  return 0;
}

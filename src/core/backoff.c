/* backoff.c — full-jitter exponential backoff and retry-policy defaults. */
#include "core/backoff.h"

#include <stdio.h>

void hookd_retry_policy_defaults(hookd_retry_policy *p) {
  p->id = 0;
  /* enough draws to reach max_age: the ceiling doubles from 30 s to 12 h by the 12th wait,
   * and a full-jitter wait averages half its ceiling — 12 attempts ended after ~8.5 h on
   * average (17 h at most), never near the 3 days; 24 end at max_age nearly always (a receiver
   * down overnight, or for a day, still gets its deliveries) */
  p->max_attempts = 24;
  p->base_ms = 30 * 1000;
  p->cap_ms = 12LL * 3600 * 1000;
  p->max_age_ms = 3LL * 24 * 3600 * 1000;
  p->retry_after_cap_ms = 12LL * 3600 * 1000;
  p->retry_4xx[0] = p->retry_4xx[1] = 0;
}

bool hookd_retry_status_listable(int status) {
  return status >= 400 && status <= 499 && status != 408 && status != 429;
}

bool hookd_retry_policy_retries(const hookd_retry_policy *p, int status) {
  if (status < 400 || status > 499) return false;
  int b = status - 400;
  return (p->retry_4xx[b / 64] >> (b % 64)) & 1;
}

int hookd_retry_statuses_parse(const char *s, uint64_t out[2]) {
  out[0] = out[1] = 0;
  if (!s) return 0;
  while (*s) {
    if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9')
      return -1;
    int st = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    if (!hookd_retry_status_listable(st)) return -1;
    out[(st - 400) / 64] |= 1ULL << ((st - 400) % 64);
    s += 3;
    if (*s == ',') {
      if (!*++s) return -1;
    } else if (*s) {
      return -1;
    }
  }
  return 0;
}

void hookd_retry_statuses_format(const uint64_t in[2], char *out, size_t n) {
  size_t o = 0;
  if (n) out[0] = '\0';
  for (int b = 0; b < 100; b++) {
    if (!((in[b / 64] >> (b % 64)) & 1) || o + 5 > n) continue;
    o += (size_t)snprintf(out + o, n - o, "%s%d", o ? "," : "", 400 + b);
  }
}

const char *hookd_retry_policy_check(const hookd_retry_policy *p) {
  const int64_t year_ms = 366LL * 24 * 3600 * 1000;
  if (p->max_attempts < 1 || p->max_attempts > 1000) return "max_attempts";
  if (p->base_ms < 1 || p->base_ms > year_ms) return "backoff_base_ms";
  if (p->cap_ms < p->base_ms || p->cap_ms > year_ms) return "backoff_cap_ms";
  if (p->max_age_ms < 1 || p->max_age_ms > year_ms) return "max_age_s";
  if (p->retry_after_cap_ms < 0 || p->retry_after_cap_ms > year_ms) return "retry_after_cap_s";
  return 0;
}

int64_t hookd_backoff_ceiling_ms(int64_t base_ms, int64_t cap_ms, int attempt) {
  if (attempt < 1) attempt = 1;
  int64_t v = base_ms;
  for (int i = 1; i < attempt; i++) {
    if (v > cap_ms / 2) return cap_ms; /* (then 2v ≤ cap: no overflow) */
    v *= 2;
  }
  return v < cap_ms ? v : cap_ms;
}

int64_t hookd_backoff_delay_ms(int64_t base_ms, int64_t cap_ms, int attempt, uint64_t rnd) {
  int64_t ceil = hookd_backoff_ceiling_ms(base_ms, cap_ms, attempt);
  if (ceil <= 0) return 0;
  return (int64_t)(rnd % ((uint64_t)ceil + 1));
}

/* backoff.c — full-jitter exponential backoff and retry-policy defaults. */
#include "core/backoff.h"

void hookd_retry_policy_defaults(hookd_retry_policy *p) {
  p->id = 0;
  p->max_attempts = 12;
  p->base_ms = 30 * 1000;
  p->cap_ms = 12LL * 3600 * 1000;
  p->max_age_ms = 3LL * 24 * 3600 * 1000;
  p->retry_after_cap_ms = 12LL * 3600 * 1000;
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
    if (v >= cap_ms / 2) return cap_ms;
    v *= 2;
  }
  return v < cap_ms ? v : cap_ms;
}

int64_t hookd_backoff_delay_ms(int64_t base_ms, int64_t cap_ms, int attempt, uint64_t rnd) {
  int64_t ceil = hookd_backoff_ceiling_ms(base_ms, cap_ms, attempt);
  if (ceil <= 0) return 0;
  return (int64_t)(rnd % ((uint64_t)ceil + 1));
}

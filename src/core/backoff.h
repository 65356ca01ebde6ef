/* backoff.h — retry policies and full-jitter exponential backoff (O7):
 *   delay = random(0, min(cap, base * 2^(attempt - 1)))
 * Pure: the caller passes the random value, so tests can pin it. */
#ifndef HOOKD_CORE_BACKOFF_H
#define HOOKD_CORE_BACKOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One immutable version of a retry policy. Deliveries keep the version they were created with. */
typedef struct hookd_retry_policy {
  int64_t id;                 /* version id in the store (0 = not stored yet) */
  int max_attempts;           /* attempts per cycle, >= 1 */
  int64_t base_ms;            /* first backoff ceiling */
  int64_t cap_ms;             /* largest backoff ceiling */
  int64_t max_age_ms;         /* a cycle older than this goes DEAD */
  int64_t retry_after_cap_ms; /* a Retry-After longer than this is cut to it */
  uint64_t retry_4xx[2];      /* 4xx statuses retried instead of permanent (bit: status - 400)
                                 — O6's "configurable per policy"; none by default */
} hookd_retry_policy;

/* Whether the policy retries this 4xx status. */
bool hookd_retry_policy_retries(const hookd_retry_policy *p, int status);
/* A 4xx status the policy may list: 400-499 but 408 and 429 (retried anyway). 410 listed is
 * retried as a failure instead of disabling the endpoint (Svix's way: a receiver that answers
 * 410 for "this object is gone", not "remove me"). */
bool hookd_retry_status_listable(int status);
/* "409,423" <-> bits; parse returns -1 on anything but such a list (NULL or "" = none). */
int hookd_retry_statuses_parse(const char *s, uint64_t out[2]);
void hookd_retry_statuses_format(const uint64_t in[2], char *out, size_t n);

/* Defaults: 24 attempts, 30 s base, 12 h cap, 3 days max age, Retry-After capped at 12 h. */
void hookd_retry_policy_defaults(hookd_retry_policy *p);

/* Returns NULL when valid, else the name of the first field out of range. */
const char *hookd_retry_policy_check(const hookd_retry_policy *p);

/* min(cap, base * 2^(attempt-1)) without overflow; attempt >= 1. */
int64_t hookd_backoff_ceiling_ms(int64_t base_ms, int64_t cap_ms, int attempt);

/* Full jitter: a value in [0, ceiling] chosen by rnd (uniform 64-bit). */
int64_t hookd_backoff_delay_ms(int64_t base_ms, int64_t cap_ms, int attempt, uint64_t rnd);

#endif

/* bucket.c — token bucket (see bucket.h). */
#include "core/bucket.h"

#include <math.h>

/* Only forward: a time read earlier than the last one (a pass's "now" read before a later
 * check of the same bucket) credits nothing and moves nothing back — else the time between the
 * two was credited twice, and an endpoint behind a late pass sent at its concurrency, not its
 * rate (a review). A step of the wall clock moves last_ms by hookd_bucket_shift. */
static void refill(hookd_bucket *b, int64_t now_ms) {
  if (now_ms <= b->last_ms) return;
  b->tokens += (double)(now_ms - b->last_ms) * b->rate / 1000.0;
  if (b->tokens > b->burst) b->tokens = b->burst;
  b->last_ms = now_ms;
}

void hookd_bucket_shift(hookd_bucket *b, int64_t delta_ms) { b->last_ms += delta_ms; }

double hookd_bucket_spacing_burst(double rate) {
  double extra = (rate > 0 ? rate : 0) * 0.01;
  return 1.0 + (extra < 0.5 ? extra : 0.5);
}

void hookd_bucket_init(hookd_bucket *b, double rate, double burst, int64_t now_ms) {
  b->rate = rate > 0 ? rate : 0;
  b->burst = burst >= 1 ? burst : 1;
  b->tokens = b->burst;
  b->last_ms = now_ms;
}

void hookd_bucket_set(hookd_bucket *b, double rate, double burst, int64_t now_ms) {
  refill(b, now_ms);
  b->rate = rate > 0 ? rate : 0;
  b->burst = burst >= 1 ? burst : 1;
  if (b->tokens > b->burst) b->tokens = b->burst;
}

bool hookd_bucket_take(hookd_bucket *b, int64_t now_ms) {
  if (b->rate <= 0) return true;
  refill(b, now_ms);
  if (b->tokens < 1.0) return false;
  b->tokens -= 1.0;
  return true;
}

void hookd_bucket_refund(hookd_bucket *b) {
  if (b->rate <= 0) return;
  b->tokens = b->tokens + 1.0 > b->burst ? b->burst : b->tokens + 1.0;
}

int64_t hookd_bucket_wait_ms(hookd_bucket *b, int64_t now_ms) {
  if (b->rate <= 0) return 0;
  refill(b, now_ms);
  if (b->tokens >= 1.0) return 0;
  /* clamped: a rate near zero (a store written before the API's floor) must not overflow the
   * caller's now + wait, nor the conversion to int64_t */
  double ms = ceil((1.0 - b->tokens) * 1000.0 / b->rate);
  return ms < (double)HOOKD_BUCKET_MAX_WAIT_MS ? (int64_t)ms : HOOKD_BUCKET_MAX_WAIT_MS;
}

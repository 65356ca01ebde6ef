/* bucket.h — token bucket rate limiting (O8): `rate` tokens per second, up to `burst` saved.
 * A rate of 0 means unlimited. Pure: the caller passes the time. */
#ifndef HOOKD_CORE_BUCKET_H
#define HOOKD_CORE_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

/* The lowest rate the API accepts is one per hour (HOOKD_BUCKET_MIN_RATE per second), and
 * hookd_bucket_wait_ms never answers more than that rate's wait. */
#define HOOKD_BUCKET_MIN_RATE (1.0 / 3600.0)
#define HOOKD_BUCKET_MAX_WAIT_MS ((int64_t)3600 * 1000)

typedef struct hookd_bucket {
  double rate;    /* tokens per second, 0 = unlimited */
  double burst;   /* most tokens held */
  double tokens;
  int64_t last_ms;
} hookd_bucket;

/* Starts full. */
void hookd_bucket_init(hookd_bucket *b, double rate, double burst, int64_t now_ms);
/* Changes the rate and burst, keeping the tokens (clamped to the new burst). */
void hookd_bucket_set(hookd_bucket *b, double rate, double burst, int64_t now_ms);
/* Takes one token if there is one. */
bool hookd_bucket_take(hookd_bucket *b, int64_t now_ms);
/* Moves the bucket's clock by a step of the wall clock: a step forward fills it no more than
 * the time that really passed. */
void hookd_bucket_shift(hookd_bucket *b, int64_t delta_ms);
/* Gives back a token taken for a request that was not sent after all (at most up to burst). */
void hookd_bucket_refund(hookd_bucket *b);
/* The burst of a rate limit that spaces requests: 1, and 10 ms of the rate more (half a token at
 * most), so that a take a moment after its token keeps the fraction it was late by — with 1
 * exactly, 200/s taken a millisecond late each time gave ~167/s — while two requests are never
 * closer than the spacing less 10 ms, nor than half of it (from 50/s). */
double hookd_bucket_spacing_burst(double rate);
/* Milliseconds until a token is available (0 = now), at most HOOKD_BUCKET_MAX_WAIT_MS. */
int64_t hookd_bucket_wait_ms(hookd_bucket *b, int64_t now_ms);

#endif

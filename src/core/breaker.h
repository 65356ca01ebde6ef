/* breaker.h — a circuit breaker per endpoint (O9):
 *   closed ──(failure ratio ≥ threshold over the window, with ≥ min_requests)──► open
 *   open ──(cool-down elapsed)──► half_open: up to `probes` requests let through
 *   half_open ──(a probe succeeds)──► closed; ──(a probe fails)──► open again
 * While open nothing is sent; deliveries wait (they are never dropped and never charged an
 * attempt). Outcomes are counted in a fixed window that restarts every window_ms. Pure. */
#ifndef HOOKD_CORE_BREAKER_H
#define HOOKD_CORE_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

typedef enum hookd_breaker_state {
  HOOKD_BREAKER_CLOSED = 0,
  HOOKD_BREAKER_OPEN,
  HOOKD_BREAKER_HALF_OPEN,
} hookd_breaker_state;

typedef struct hookd_breaker_cfg {
  int64_t window_ms;     /* outcome counting window, default 60 s */
  int min_requests;      /* no decision below this many outcomes, default 10 */
  int failure_percent;   /* open at or above this share of failures, default 50 */
  int64_t cooldown_ms;   /* open this long before probing, default 30 s */
  int probes;            /* requests let through while half-open, default 1 */
} hookd_breaker_cfg;

typedef struct hookd_breaker {
  hookd_breaker_state state;
  int64_t window_start_ms;
  int successes, failures;   /* in the current window */
  int64_t opened_ms;         /* when it last opened */
  int probes_in_flight;
  uint64_t opens;            /* transitions to open, ever */
} hookd_breaker;

void hookd_breaker_cfg_defaults(hookd_breaker_cfg *c);
/* Moves the breaker's times by a step of the wall clock (docs/architecture.md "Clocks"): its
 * cool-down and window keep their length. */
void hookd_breaker_shift(hookd_breaker *b, int64_t delta_ms);
void hookd_breaker_init(hookd_breaker *b, int64_t now_ms);
/* May a request start now? In half-open, a true answer reserves a probe slot (give it back
 * with hookd_breaker_record). */
bool hookd_breaker_allow(hookd_breaker *b, const hookd_breaker_cfg *c, int64_t now_ms);
/* When the breaker would let a request through again (0 = now). */
int64_t hookd_breaker_retry_at(const hookd_breaker *b, const hookd_breaker_cfg *c);
/* Records an outcome: success, failure, or neutral (success == failure == false: e.g. a 4xx
 * that says nothing about the endpoint's health, or a request that was never sent). Returns
 * true when the state changed. */
bool hookd_breaker_record(hookd_breaker *b, const hookd_breaker_cfg *c, bool success, bool failure,
                          bool was_probe, int64_t now_ms);
/* Gives back a probe hookd_breaker_allow reserved for a request that was not sent after all (its
 * event expired, its lease ran short, the send failed to start): no outcome will come for it,
 * and a half-open breaker waiting for one would never let another request through. */
void hookd_breaker_cancel_probe(hookd_breaker *b);
const char *hookd_breaker_name(hookd_breaker_state s);

#endif

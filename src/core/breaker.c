/* breaker.c — circuit breaker state machine (see breaker.h). */
#include "core/breaker.h"

void hookd_breaker_cfg_defaults(hookd_breaker_cfg *c) {
  c->window_ms = 60000;
  c->min_requests = 10;
  c->failure_percent = 50;
  c->cooldown_ms = 30000;
  c->probes = 1;
}

void hookd_breaker_shift(hookd_breaker *b, int64_t delta_ms) {
  b->window_start_ms += delta_ms;
  if (b->opened_ms) b->opened_ms += delta_ms;
}

void hookd_breaker_init(hookd_breaker *b, int64_t now_ms) {
  *b = (hookd_breaker){.state = HOOKD_BREAKER_CLOSED, .window_start_ms = now_ms};
}

static void open_now(hookd_breaker *b, int64_t now_ms) {
  b->state = HOOKD_BREAKER_OPEN;
  b->opened_ms = now_ms;
  b->successes = b->failures = 0;
  b->probes_in_flight = 0;
  b->opens++;
}

bool hookd_breaker_allow(hookd_breaker *b, const hookd_breaker_cfg *c, int64_t now_ms) {
  switch (b->state) {
  case HOOKD_BREAKER_CLOSED: return true;
  case HOOKD_BREAKER_OPEN:
    if (now_ms - b->opened_ms < c->cooldown_ms) return false;
    b->state = HOOKD_BREAKER_HALF_OPEN;
    b->probes_in_flight = 0;
    __attribute__((fallthrough)); /* the first probe */
  case HOOKD_BREAKER_HALF_OPEN:
    if (b->probes_in_flight >= c->probes) return false;
    b->probes_in_flight++;
    return true;
  }
  return false;
}

int64_t hookd_breaker_retry_at(const hookd_breaker *b, const hookd_breaker_cfg *c) {
  return b->state == HOOKD_BREAKER_OPEN ? b->opened_ms + c->cooldown_ms : 0;
}

bool hookd_breaker_record(hookd_breaker *b, const hookd_breaker_cfg *c, bool success, bool failure,
                          bool was_probe, int64_t now_ms) {
  hookd_breaker_state before = b->state;
  if (b->state == HOOKD_BREAKER_HALF_OPEN) {
    /* only the probes decide: a late outcome of a request sent before the breaker opened
     * (timeouts may outlast the cool-down) must neither close it nor reopen it under the
     * probe still in flight */
    if (!was_probe) return false;
    if (b->probes_in_flight > 0) b->probes_in_flight--;
    if (success) {
      b->state = HOOKD_BREAKER_CLOSED;
      b->window_start_ms = now_ms;
      b->successes = b->failures = 0;
    } else if (failure) {
      open_now(b, now_ms);
    }
    return b->state != before;
  }
  if (b->state == HOOKD_BREAKER_OPEN) return false; /* late outcomes of requests sent before */
  if (now_ms - b->window_start_ms >= c->window_ms) {
    b->window_start_ms = now_ms;
    b->successes = b->failures = 0;
  }
  if (success) b->successes++;
  if (failure) b->failures++;
  int total = b->successes + b->failures;
  /* decided on a failure: a success that completes the minimum count says the endpoint
   * answers (the first attempts failing and their retries passing opened it on a 2xx, and held
   * a receiver that had recovered for the whole cool-down) */
  /* (in integers: 0.55 * 100 is above 55 in binary floating point) */
  if (failure && total >= c->min_requests &&
      (int64_t)b->failures * 100 >= (int64_t)c->failure_percent * total)
    open_now(b, now_ms);
  return b->state != before;
}

void hookd_breaker_cancel_probe(hookd_breaker *b) {
  if (b->state == HOOKD_BREAKER_HALF_OPEN && b->probes_in_flight > 0) b->probes_in_flight--;
}

const char *hookd_breaker_name(hookd_breaker_state s) {
  return s == HOOKD_BREAKER_OPEN ? "open" : s == HOOKD_BREAKER_HALF_OPEN ? "half_open" : "closed";
}

/* delivery_state.c — transition table and the post-attempt decision. */
#include "core/delivery_state.h"

#include <string.h>

static const char *const names[HOOKD_DS__COUNT] = {
    [HOOKD_DS_PENDING] = "pending",     [HOOKD_DS_RETRYING] = "retrying",
    [HOOKD_DS_DELIVERED] = "delivered", [HOOKD_DS_DEAD] = "dead",
    [HOOKD_DS_CANCELLED] = "cancelled", [HOOKD_DS_UNKNOWN] = "unknown",
};

#define X -1
/* table[from][trigger] = to, or X when illegal. */
static const int table[HOOKD_DS__COUNT][HOOKD_DT__COUNT] = {
    /*                    SUCCESS             RETRY              DEAD           REPLAY
                          CANCEL              HOLD               RESOLVE */
    [HOOKD_DS_PENDING] = {HOOKD_DS_DELIVERED, HOOKD_DS_RETRYING, HOOKD_DS_DEAD, X,
                          HOOKD_DS_CANCELLED, HOOKD_DS_UNKNOWN, X},
    [HOOKD_DS_RETRYING] = {HOOKD_DS_DELIVERED, HOOKD_DS_RETRYING, HOOKD_DS_DEAD, X,
                           HOOKD_DS_CANCELLED, HOOKD_DS_UNKNOWN, X},
    [HOOKD_DS_DELIVERED] = {X, X, X, HOOKD_DS_PENDING, X, X, X},
    [HOOKD_DS_DEAD] = {X, X, X, HOOKD_DS_PENDING, X, X, X},
    [HOOKD_DS_CANCELLED] = {X, X, X, X, X, X, X},
    [HOOKD_DS_UNKNOWN] = {X, X, HOOKD_DS_DEAD, HOOKD_DS_PENDING, HOOKD_DS_CANCELLED, X,
                          HOOKD_DS_DELIVERED},
};
#undef X

const char *hookd_dstate_name(hookd_dstate s) {
  return (unsigned)s < HOOKD_DS__COUNT ? names[s] : "invalid";
}

int hookd_dstate_parse(const char *name, hookd_dstate *out) {
  for (int i = 0; i < HOOKD_DS__COUNT; i++) {
    if (strcmp(name, names[i]) == 0) {
      *out = (hookd_dstate)i;
      return 0;
    }
  }
  return -1;
}

bool hookd_dstate_active(hookd_dstate s) {
  return s == HOOKD_DS_PENDING || s == HOOKD_DS_RETRYING;
}

int hookd_dstate_next(hookd_dstate from, hookd_dtrigger trig, hookd_dstate *to) {
  if ((unsigned)from >= HOOKD_DS__COUNT || (unsigned)trig >= HOOKD_DT__COUNT) return -1;
  int t = table[from][trig];
  if (t < 0) return -1;
  *to = (hookd_dstate)t;
  return 0;
}

static int finish(const hookd_delivery_view *d, hookd_dtrigger trig, hookd_decision *out) {
  out->trigger = trig;
  return hookd_dstate_next(d->state, trig, &out->next);
}

int hookd_decide(const hookd_retry_policy *p, const hookd_delivery_view *d,
                 hookd_classification c, int64_t retry_after_ms, int64_t now_ms, uint64_t rnd,
                 bool hold_if_ambiguous, hookd_decision *out) {
  memset(out, 0, sizeof *out);
  if (hold_if_ambiguous && c.cls == HOOKD_CLASS_RETRY) return finish(d, HOOKD_DT_HOLD, out);
  switch (c.cls) {
  case HOOKD_CLASS_SUCCESS:
    return finish(d, HOOKD_DT_SUCCESS, out);
  case HOOKD_CLASS_GONE:
    out->dead_reason = "gone";
    out->disable_endpoint = true;
    return finish(d, HOOKD_DT_DEAD, out);
  case HOOKD_CLASS_PERMANENT:
    out->dead_reason = strcmp(c.outcome, "blocked") == 0 ? "blocked" : "permanent";
    return finish(d, HOOKD_DT_DEAD, out);
  case HOOKD_CLASS_RETRY:
    break;
  }
  int made = d->cycle_attempts + 1; /* including the one that just failed */
  if (made >= p->max_attempts) {
    out->dead_reason = "max_attempts";
    return finish(d, HOOKD_DT_DEAD, out);
  }
  /* The backoff's draw, unless the receiver asked for longer: Retry-After (capped by the
   * policy; a cap of 0 ignores it) is a lower bound, never a shortcut. Taken as the delay, a
   * receiver answering "Retry-After: 1" through a one-minute overload spent in seconds the
   * attempts meant to span the policy's max age. */
  int64_t delay = hookd_backoff_delay_ms(p->base_ms, p->cap_ms, made, rnd);
  int64_t ra = -1; /* the receiver's Retry-After, capped (-1: none, or ignored) */
  if (retry_after_ms >= 0 && p->retry_after_cap_ms > 0) {
    ra = retry_after_ms < p->retry_after_cap_ms ? retry_after_ms : p->retry_after_cap_ms;
    if (ra > delay) delay = ra;
  }
  int64_t next = now_ms + delay;
  int64_t deadline = d->cycle_started_ms + p->max_age_ms;
  if (next > deadline) {
    /* A draw past the max age leaves one last attempt at it rather than DEAD with attempts
     * left and time to spare; a receiver's Retry-After past it is respected — whether or not
     * it outran the draw (a longer draw, moved to the deadline, called it earlier than asked) */
    if ((ra >= 0 && now_ms + ra > deadline) || deadline <= now_ms) {
      out->dead_reason = "max_age";
      return finish(d, HOOKD_DT_DEAD, out);
    }
    next = deadline;
  }
  if (d->expires_ms > 0 && next >= d->expires_ms) {
    out->dead_reason = "expired";
    return finish(d, HOOKD_DT_DEAD, out);
  }
  out->next_attempt_ms = next;
  return finish(d, HOOKD_DT_RETRY, out);
}

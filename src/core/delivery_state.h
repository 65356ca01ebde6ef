/* delivery_state.h — the delivery state machine and the decision taken after each attempt.
 *
 * States (docs/architecture.md): pending → delivered | retrying | dead | cancelled | unknown;
 * retrying → the same; delivered | dead | unknown → pending (replay); unknown → delivered
 * (resolved by an operator) | dead.
 * Every state change in the store goes through hookd_dstate_next, which refuses illegal ones. */
#ifndef HOOKD_CORE_DELIVERY_STATE_H
#define HOOKD_CORE_DELIVERY_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/backoff.h"
#include "core/classify.h"

typedef enum hookd_dstate {
  HOOKD_DS_PENDING = 0, /* waiting for its first attempt of the cycle */
  HOOKD_DS_RETRYING,    /* an attempt failed; the next is scheduled */
  HOOKD_DS_DELIVERED,   /* a 2xx was recorded */
  HOOKD_DS_DEAD,        /* no more automatic attempts */
  HOOKD_DS_CANCELLED,   /* the endpoint was deleted */
  HOOKD_DS_UNKNOWN,     /* ambiguous outcome at a non-idempotent destination: held for an
                           operator, never resent automatically */
  HOOKD_DS__COUNT
} hookd_dstate;

typedef enum hookd_dtrigger {
  HOOKD_DT_SUCCESS = 0, /* attempt returned 2xx */
  HOOKD_DT_RETRY,       /* attempt failed, retry scheduled */
  HOOKD_DT_DEAD,        /* permanent failure, budget exhausted or expired */
  HOOKD_DT_REPLAY,      /* operator asked for a new attempt */
  HOOKD_DT_CANCEL,      /* endpoint deleted */
  HOOKD_DT_HOLD,        /* ambiguous outcome, not safe to resend */
  HOOKD_DT_RESOLVE,     /* an operator confirms the effect happened */
  HOOKD_DT__COUNT
} hookd_dtrigger;

const char *hookd_dstate_name(hookd_dstate s);
int hookd_dstate_parse(const char *name, hookd_dstate *out); /* 0 or -1 */
bool hookd_dstate_active(hookd_dstate s); /* pending or retrying: may still be sent */

/* Returns 0 and the target state, or -1 when the trigger is illegal in `from`. */
int hookd_dstate_next(hookd_dstate from, hookd_dtrigger trig, hookd_dstate *to);

/* What the dispatcher knows about a delivery when an attempt finishes. */
typedef struct hookd_delivery_view {
  hookd_dstate state;       /* state before the attempt */
  int cycle_attempts;       /* attempts already made in this cycle (before this one) */
  int64_t cycle_started_ms; /* creation, or the last replay */
  int64_t expires_ms;       /* event expiry, 0 = never */
} hookd_delivery_view;

typedef struct hookd_decision {
  hookd_dstate next;
  hookd_dtrigger trigger;
  int64_t next_attempt_ms; /* when next == RETRYING */
  const char *dead_reason; /* when next == DEAD: permanent, gone, blocked, max_attempts,
                              max_age, expired */
  bool disable_endpoint;   /* 410 Gone */
} hookd_decision;

/* Decide the delivery's next state after an attempt classified as `c`. retry_after_ms is the
 * parsed Retry-After delay, or -1 when absent: the next attempt is no sooner than it (capped by
 * the policy's retry_after_cap_ms; 0 ignores it) nor than the backoff's draw, which rnd feeds.
 * A draw past the max age is moved to it (one last attempt). hold_if_ambiguous: the
 * destination is not idempotent and the request may have reached it without an answer (a
 * timeout or a dropped connection after sending): such an outcome goes to UNKNOWN instead of
 * being retried. Returns 0, or -1 if the resulting transition would be illegal (e.g. the view
 * is already terminal). */
int hookd_decide(const hookd_retry_policy *policy, const hookd_delivery_view *d,
                 hookd_classification c, int64_t retry_after_ms, int64_t now_ms, uint64_t rnd,
                 bool hold_if_ambiguous, hookd_decision *out);

#endif

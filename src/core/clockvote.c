/* clockvote.c — the clock guard's vote on a shared store (clockvote.h). */
#include "core/clockvote.h"

/* a century in ms: skews and errors are clamped to it, so that differences cannot overflow */
#define CLOCK_LIMIT_MS (100LL * 366 * 24 * 3600 * 1000)

static int64_t clamp(int64_t v, int64_t lo) {
  return v < lo ? lo : v > CLOCK_LIMIT_MS ? CLOCK_LIMIT_MS : v;
}

bool hookd_clock_agree(hookd_clock_voter a, hookd_clock_voter b, int64_t bound_ms) {
  int64_t d = clamp(a.skew_ms, -CLOCK_LIMIT_MS) - clamp(b.skew_ms, -CLOCK_LIMIT_MS);
  if (d < 0) d = -d;
  return d + clamp(a.err_ms, 0) + clamp(b.err_ms, 0) <= clamp(bound_ms, 0);
}

bool hookd_clock_vote(hookd_clock_voter self, const hookd_clock_voter *others, size_t n,
                      int64_t bound_ms, int *agreeing, int *voters) {
  const hookd_clock_voter db = {0, 0};
  int agree = 1 + hookd_clock_agree(self, db, bound_ms); /* itself, and the database */
  for (size_t i = 0; i < n; i++) agree += hookd_clock_agree(self, others[i], bound_ms);
  *agreeing = agree;
  *voters = (int)n + 2;
  /* a tie goes to the side that has the database: two nodes agreeing with each other and not with
   * the database, a third agreeing with it, would otherwise all hold, and nothing be claimed. Two
   * winners still share a voter: a strict majority meets any half, and two halves that have the
   * database share it */
  return 2 * agree > *voters || (2 * agree == *voters && hookd_clock_agree(self, db, bound_ms));
}

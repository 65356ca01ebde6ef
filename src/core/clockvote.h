/* clockvote.h — the clock guard's vote on a shared store (docs/postgres.md "The clock guard"):
 * whether a node's clock agrees with a strict majority of the voters (or a half that holds the
 * database's) — the database's clock, the node's own, and the other live nodes' — each known by
 * its skew to the database's clock, give or take an error. Pure logic. */
#ifndef HOOKD_CORE_CLOCKVOTE_H
#define HOOKD_CORE_CLOCKVOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A clock: the database's time minus its own (ms), give or take err_ms (≥ 0). The database's
 * clock is {0, 0}. */
typedef struct hookd_clock_voter {
  int64_t skew_ms, err_ms;
} hookd_clock_voter;

/* Whether two clocks agree: their skews differ by surely no more than bound_ms (the difference
 * plus both errors: the errors count against agreement). Values beyond a century are taken as
 * a century: no overflow. */
bool hookd_clock_agree(hookd_clock_voter a, hookd_clock_voter b, int64_t bound_ms);

/* The vote of `self` among the voters: the database, self, and `others` (the other live
 * nodes). *agreeing: the voters self agrees with, itself and the database included when it
 * does; *voters: n + 2. True when *agreeing is a strict majority of *voters, or half of them
 * with the database among them (a tie goes to the database's side). Two nodes that
 * both win a vote over the same voters agree with a common voter, so their clocks are surely
 * within twice bound_ms of each other. */
bool hookd_clock_vote(hookd_clock_voter self, const hookd_clock_voter *others, size_t n,
                      int64_t bound_ms, int *agreeing, int *voters);

#endif

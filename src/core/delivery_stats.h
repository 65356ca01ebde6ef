/* delivery_stats.h — an endpoint's delivery counts as GET …/endpoints/{id}/stats shows them
 * (docs/api.md "Endpoints"): counts read up to one past a bound, clamped to it and marked, and
 * the success rate from them. Pure logic: the store counts, this says what they mean. */
#ifndef HOOKD_CORE_DELIVERY_STATS_H
#define HOOKD_CORE_DELIVERY_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/delivery_state.h"

typedef struct hookd_delivery_counts {
  int64_t by_state[HOOKD_DS__COUNT];
  int64_t dead_unsent; /* the DEAD ones never attempted: superseded, expired, … */
} hookd_delivery_counts;

/* Clamps each count read up to cap + 1 to cap, setting bit s of *capped for a state past it
 * (bit HOOKD_DS__COUNT for dead_unsent). */
void hookd_delivery_counts_clamp(hookd_delivery_counts *c, int64_t cap, unsigned *capped);

/* delivered / (delivered + dead − dead_unsent), rounded to 4 places, into *rate: true; false
 * (no rate) when that is 0 / 0 or a count it reads was past the bound (capped, as above: a
 * ratio of two bounds is no ratio). */
bool hookd_delivery_success_rate(const hookd_delivery_counts *c, unsigned capped, double *rate);

#endif

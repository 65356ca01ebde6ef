/* delivery_stats.c — an endpoint's delivery counts and success rate (see delivery_stats.h). */
#include "core/delivery_stats.h"

#include <math.h>

void hookd_delivery_counts_clamp(hookd_delivery_counts *c, int64_t cap, unsigned *capped) {
  *capped = 0;
  for (int s = 0; s <= HOOKD_DS__COUNT; s++) {
    int64_t *n = s == HOOKD_DS__COUNT ? &c->dead_unsent : &c->by_state[s];
    if (*n > cap) {
      *n = cap;
      *capped |= 1u << s;
    }
  }
}

bool hookd_delivery_success_rate(const hookd_delivery_counts *c, unsigned capped, double *rate) {
  unsigned read = 1u << HOOKD_DS_DELIVERED | 1u << HOOKD_DS_DEAD | 1u << HOOKD_DS__COUNT;
  int64_t ok = c->by_state[HOOKD_DS_DELIVERED];
  int64_t failed = c->by_state[HOOKD_DS_DEAD] - c->dead_unsent;
  if ((capped & read) || failed < 0 || ok + failed <= 0) return false;
  *rate = round((double)ok / (double)(ok + failed) * 1e4) / 1e4;
  return true;
}

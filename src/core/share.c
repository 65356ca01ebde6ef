/* share.c — a weighted fair share of a bounded budget (see share.h). */
#include "core/share.h"

#include <stdint.h>

bool hookd_share_allows(int budget, int used, int held, int weight, int holders_weight) {
  if (used < budget) return true;
  if (held <= 0) return true; /* its first unit, whatever the others hold */
  int64_t fair = holders_weight > 0 ? (int64_t)budget * weight / holders_weight : budget;
  return held < fair;
}

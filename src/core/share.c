/* share.c — a weighted fair share of a bounded budget (see share.h). */
#include "core/share.h"

#include <stdint.h>

bool hookd_share_allows(int budget, int used, int held, int weight, int holders_weight) {
  if (used < budget) return true;
  /* its first unit, up to twice the budget: many holders of one each must not make the budget
   * bound nothing */
  if (held <= 0) return used < 2 * budget;
  int64_t fair = holders_weight > 0 ? (int64_t)budget * weight / holders_weight : budget;
  return held < fair;
}

/* share.h — a weighted fair share of a bounded budget: who may take one more unit of it once
 * it is used up (docs/isolation.md: the retry and replay budgets). Pure logic. */
#ifndef HOOKD_CORE_SHARE_H
#define HOOKD_CORE_SHARE_H

#include <stdbool.h>

/* Whether a holder of `held` units, of weight `weight`, may take one more unit of a budget of
 * `budget` units of which `used` are taken by all holders: yes while the budget has room; once
 * it is used up, only below its weighted share among the holders — budget × weight /
 * (holders_weight: the weights of those holding some, its own counted whether or not it holds
 * any yet) — and its first unit while fewer than twice the budget are used. So one holder that
 * took the whole budget while others held none (and keeps it: requests hanging until their
 * timeout) cannot stop them, and the budget is passed by at most as much again. */
bool hookd_share_allows(int budget, int used, int held, int weight, int holders_weight);

#endif

/* test_clockvote.c — the clock guard's vote (docs/postgres.md "The clock guard"): agreement
 * within the bound give or take the errors, the database alone deciding for a lone node, the
 * database outvoted by nodes that agree, ties held unless the database is on the node's side,
 * and no overflow on absurd skews. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/clockvote.h"

#define V(s, e) ((hookd_clock_voter){(s), (e)})

static void agreement(void **s) {
  (void)s;
  assert_true(hookd_clock_agree(V(0, 0), V(1000, 0), 1000));
  assert_false(hookd_clock_agree(V(0, 0), V(1001, 0), 1000));
  assert_false(hookd_clock_agree(V(-1001, 0), V(0, 0), 1000)); /* either sign */
  /* the errors count against agreement: within the bound only when surely within */
  assert_true(hookd_clock_agree(V(0, 5), V(990, 5), 1000));
  assert_false(hookd_clock_agree(V(0, 5), V(991, 5), 1000));
  assert_false(hookd_clock_agree(V(0, 600), V(0, 600), 1000)); /* reads too far apart */
  /* no overflow: absurd values are clamped, and still disagree */
  assert_false(hookd_clock_agree(V(INT64_MIN, 0), V(INT64_MAX, 0), 1000));
  assert_false(hookd_clock_agree(V(INT64_MAX, 0), V(0, INT64_MIN), 1000));
  assert_true(hookd_clock_agree(V(INT64_MAX, 0), V(INT64_MAX, 0), 1000));
}

static void lone_node(void **s) {
  (void)s;
  int agreeing, voters;
  /* alone, the voters are the database and the node: it must agree with the database */
  assert_true(hookd_clock_vote(V(-300, 10), NULL, 0, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 2);
  assert_int_equal(voters, 2);
  assert_false(hookd_clock_vote(V(-60000, 10), NULL, 0, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 1);
}

static void database_outvoted(void **s) {
  (void)s;
  int agreeing, voters;
  /* the database's clock a minute off, both nodes' in step with each other: both claim */
  hookd_clock_voter a = V(-60000, 5), b = V(-60200, 5);
  assert_true(hookd_clock_vote(a, &b, 1, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 2);
  assert_int_equal(voters, 3);
  assert_true(hookd_clock_vote(b, &a, 1, 1000, &agreeing, &voters));
}

static void outlier_held(void **s) {
  (void)s;
  int agreeing, voters;
  /* one node of two off: it holds, the other (with the database) claims */
  hookd_clock_voter ok = V(20, 5), ahead = V(-60000, 5);
  assert_false(hookd_clock_vote(ahead, &ok, 1, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 1);
  assert_true(hookd_clock_vote(ok, &ahead, 1, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 2);
  /* three nodes and the database: 3 of 4 voters needed */
  hookd_clock_voter others[] = {V(-60000, 5), V(10, 5)};
  assert_true(hookd_clock_vote(V(0, 5), others, 2, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 3);
  assert_int_equal(voters, 4);
  hookd_clock_voter rest[] = {V(0, 5), V(10, 5)};
  assert_false(hookd_clock_vote(V(-60000, 5), rest, 2, 1000, &agreeing, &voters));
}

static void tie_held(void **s) {
  (void)s;
  int agreeing, voters;
  /* five voters: this node and another a minute off the database, two nodes in step with it:
   * 2 of 5 agree with this node, and a majority needs 3 */
  hookd_clock_voter others[] = {V(0, 5), V(60000, 5), V(0, 5)};
  assert_false(hookd_clock_vote(V(60000, 5), others, 3, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 2);
  assert_int_equal(voters, 5);
  /* two nodes off each other by a minute, the database in between (30 s each way): neither
   * agrees with the database nor with the other, and neither claims */
  hookd_clock_voter x = V(30000, 5), y = V(-30000, 5);
  assert_false(hookd_clock_vote(x, &y, 1, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 1);
  assert_false(hookd_clock_vote(y, &x, 1, 1000, &agreeing, &voters));
}

static void tie_to_database(void **s) {
  (void)s;
  int agreeing, voters;
  /* four voters: two nodes in step with each other 20 s off the database, a third in step with
   * the database — two against two: the database's side claims (else no node would) */
  hookd_clock_voter a = V(20000, 5), b = V(20100, 5), c = V(10, 5);
  hookd_clock_voter for_a[] = {b, c}, for_b[] = {a, c}, for_c[] = {a, b};
  assert_false(hookd_clock_vote(a, for_a, 2, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 2);
  assert_int_equal(voters, 4);
  assert_false(hookd_clock_vote(b, for_b, 2, 1000, &agreeing, &voters));
  assert_true(hookd_clock_vote(c, for_c, 2, 1000, &agreeing, &voters));
  assert_int_equal(agreeing, 2);
}

/* Two nodes that both win a vote over the same voters are surely within twice the bound of each
 * other: checked over a grid of measured skews and errors for three nodes, against every true
 * skew each measurement allows (its skew give or take its error). */
static void winners_agree_pairwise(void **s) {
  (void)s;
  const int64_t bound = 1000;
  const int64_t grid[] = {-3000, -2100, -1500, -1000, -600, 0, 400, 1000, 1600, 2200, 3000};
  const int64_t errs[] = {0, 7, 300};
  const size_t g = sizeof grid / sizeof grid[0];
  for (size_t i = 0; i < g; i++)
    for (size_t j = 0; j < g; j++)
      for (size_t k = 0; k < g * 3; k++) {
        hookd_clock_voter n[3] = {V(grid[i], errs[(i + j) % 3]), V(grid[j], errs[j % 3]),
                                  V(grid[k % g], errs[k / g])};
        bool win[3];
        for (int a = 0; a < 3; a++) {
          hookd_clock_voter o[2];
          for (int b = 0, m = 0; b < 3; b++)
            if (b != a) o[m++] = n[b];
          int agreeing, voters;
          win[a] = hookd_clock_vote(n[a], o, 2, bound, &agreeing, &voters);
        }
        for (int a = 0; a < 3; a++)
          for (int b = 0; b < 3; b++) {
            if (!win[a] || !win[b]) continue;
            /* the true skews furthest apart that the measurements allow */
            int64_t dist = n[a].skew_ms - n[b].skew_ms;
            if (dist < 0) dist = -dist;
            assert_true(dist + n[a].err_ms + n[b].err_ms <= 2 * bound);
          }
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(agreement),         cmocka_unit_test(lone_node),
      cmocka_unit_test(database_outvoted), cmocka_unit_test(outlier_held),
      cmocka_unit_test(tie_held),          cmocka_unit_test(tie_to_database),
      cmocka_unit_test(winners_agree_pairwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

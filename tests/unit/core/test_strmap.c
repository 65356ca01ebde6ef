/* test_strmap.c — the string map: put, get, replace, delete, iteration, growth; and its hash,
 * seeded per process: keys crafted to share the low bits of the plain FNV-1a hash (as a client
 * could, naming payload filters or ids) do not pile up in one cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/strmap.h"

static void put_get_delete_iterate(void **st) {
  (void)st;
  hookd_strmap m;
  hookd_strmap_init(&m);
  int vals[100];
  char key[16];
  for (int i = 0; i < 100; i++) {
    snprintf(key, sizeof key, "k%d", i);
    assert_int_equal(hookd_strmap_put(&m, key, &vals[i]), 0);
  }
  assert_int_equal(m.len, 100);
  for (int i = 0; i < 100; i++) {
    snprintf(key, sizeof key, "k%d", i);
    assert_ptr_equal(hookd_strmap_get(&m, key), &vals[i]);
  }
  assert_int_equal(hookd_strmap_put(&m, "k7", &vals[0]), 0); /* replaced */
  assert_ptr_equal(hookd_strmap_get(&m, "k7"), &vals[0]);
  assert_int_equal(m.len, 100);
  for (int i = 0; i < 100; i += 2) {
    snprintf(key, sizeof key, "k%d", i);
    assert_non_null(hookd_strmap_del(&m, key));
  }
  assert_null(hookd_strmap_get(&m, "k2"));
  assert_null(hookd_strmap_del(&m, "k2"));
  assert_ptr_equal(hookd_strmap_get(&m, "k3"), &vals[3]);
  size_t seen = 0;
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&m, i, &k, &v)) != 0;) seen++;
  assert_int_equal(seen, 50);
  hookd_strmap_free(&m);
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* 64 keys whose plain FNV-1a hashes agree in their low 12 bits: in a table of 128 slots they
 * all wanted one slot and filled one run of 64 (every lookup of them a walk along it). Seeded,
 * they spread as any keys do: the longest run of occupied slots is far shorter. */
static void crafted_keys_do_not_share_a_cluster(void **st) {
  (void)st;
  hookd_strmap m;
  hookd_strmap_init(&m);
  char key[64];
  int placed = 0;
  uint64_t want = fnv1a("filter-0") & 0xfff;
  for (unsigned long n = 0; placed < 64; n++) {
    snprintf(key, sizeof key, "filter-%lu", n);
    if ((fnv1a(key) & 0xfff) != want) continue;
    assert_int_equal(hookd_strmap_put(&m, key, &m), 0);
    placed++;
  }
  assert_int_equal(m.cap, 128);
  unsigned char used[128] = {0};
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&m, i, &k, &v)) != 0;) used[i - 1] = 1;
  int longest = 0;
  for (int start = 0; start < 128; start++) { /* runs wrap round the table's end */
    int run = 0;
    while (run < 128 && used[(start + run) % 128]) run++;
    if (run > longest) longest = run;
  }
  if (longest >= 40) fail_msg("the crafted keys fill a run of %d slots", longest);
  hookd_strmap_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(put_get_delete_iterate),
      cmocka_unit_test(crafted_keys_do_not_share_a_cluster),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

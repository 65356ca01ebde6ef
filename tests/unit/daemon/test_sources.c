/* test_sources.c — the inbound source cache (sources.c): a periodic refresh from a list read
 * before this node's own create, PATCH or DELETE never undoes it; what the list shows of older
 * changes (another node's) is applied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/sources.h"

static hookd_keyring kr;

/* A Stripe source as the store lists it: its secrets sealed under kr. */
static hookd_source make(const char *id, int64_t updated_ms, const char *secret) {
  char json[128];
  snprintf(json, sizeof json, "[\"%s\"]", secret);
  hookd_source s = {0};
  s.id = (char *)id;
  s.tenant_id = (char *)"t1";
  s.provider = (char *)"stripe";
  s.secrets = hookd_keyring_seal(&kr, json, id);
  s.updated_ms = updated_ms;
  assert_non_null(s.secrets);
  return s;
}

/* The secret the cache holds for id, or NULL when it holds no such source. */
static const char *secret_of(hookd_source_cache *c, const char *id, char *out, size_t cap) {
  hookd_source_rt *rt = hookd_source_cache_get(c, id);
  if (!rt) return NULL;
  snprintf(out, cap, "%s", rt->n_secrets ? rt->secrets[0] : "");
  hookd_source_rt_release(rt);
  return out;
}

static void refresh_never_undoes_a_newer_local_change(void **st) {
  (void)st;
  memset(kr.key.key, 7, sizeof kr.key.key);
  snprintf(kr.key.id, sizeof kr.key.id, "0123456789abcdef");
  hookd_source_cache *c = hookd_source_cache_new(&kr);
  assert_non_null(c);
  char buf[64];
  hookd_source b_old = make("src_b", 1, "whsec_old"), d = make("src_d", 1, "whsec_d");
  hookd_source start[] = {b_old, d};
  hookd_source_cache_sync(c, start, 2, hookd_source_cache_generation(c));
  assert_string_equal(secret_of(c, "src_b", buf, sizeof buf), "whsec_old");

  /* a refresh reads its list (before the changes below commit) … */
  uint64_t since = hookd_source_cache_generation(c);
  /* … while this node creates src_a, rotates src_b's secret and deletes src_d */
  hookd_source a = make("src_a", 5, "whsec_a"), b_new = make("src_b", 5, "whsec_new");
  assert_int_equal(hookd_source_cache_put(c, &a), 0);
  assert_int_equal(hookd_source_cache_put(c, &b_new), 0);
  hookd_source_cache_remove(c, "src_d");
  /* the list the refresh read shows none of it: applied, it must undo nothing */
  hookd_source_cache_sync(c, start, 2, since);
  assert_non_null(secret_of(c, "src_a", buf, sizeof buf));
  assert_string_equal(secret_of(c, "src_b", buf, sizeof buf), "whsec_new");
  assert_null(secret_of(c, "src_d", buf, sizeof buf));

  /* the next refresh's list shows them all (and another node's change to src_b, newer) */
  since = hookd_source_cache_generation(c);
  hookd_source b_other = make("src_b", 9, "whsec_other");
  hookd_source now[] = {a, b_other};
  hookd_source_cache_sync(c, now, 2, since);
  assert_string_equal(secret_of(c, "src_b", buf, sizeof buf), "whsec_other");
  assert_non_null(secret_of(c, "src_a", buf, sizeof buf));
  assert_null(secret_of(c, "src_d", buf, sizeof buf));
  /* and a source deleted elsewhere goes at the refresh after */
  since = hookd_source_cache_generation(c);
  hookd_source_cache_sync(c, now, 1, since);
  assert_null(secret_of(c, "src_b", buf, sizeof buf));

  hookd_source *all[] = {&a, &b_old, &b_new, &b_other, &d};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->secrets);
  hookd_source_cache_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(refresh_never_undoes_a_newer_local_change),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_auth.c — API-key tenant scopes: what hookd_scope_check refuses, and a key cache
 * that leaves out a key whose scope it would have to cut or read as "every tenant". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "daemon/auth.h"
#include "daemon/log.h"

/* A list of exactly len bytes ending in ",last": 8-byte filler ids, the first one padded. */
static void scope_of_length(char *out, size_t len, const char *last) {
  size_t n = (len - strlen(last)) / 9, pad = len - strlen(last) - n * 9, o = 0;
  for (size_t i = 0; i < n; i++) {
    o += (size_t)sprintf(out + o, "f%07zu", i);
    if (i == 0) {
      memset(out + o, 'x', pad);
      o += pad;
    }
    out[o++] = ',';
  }
  strcpy(out + o, last);
  assert_int_equal(strlen(out), len);
}

static void scope_check_refuses_empty_blank_bad_and_long(void **s) {
  char err[160], list[1024];
  assert_int_equal(hookd_scope_check(NULL, err, sizeof err), 0);
  assert_int_equal(hookd_scope_check("acme", err, sizeof err), 0);
  assert_int_equal(hookd_scope_check("acme,ten_01:x.y-z", err, sizeof err), 0);

  assert_int_equal(hookd_scope_check("", err, sizeof err), -1);
  assert_string_equal(err, "the tenant list is empty");
  assert_int_equal(hookd_scope_check("a,,b", err, sizeof err), -1);
  assert_string_equal(err, "item 2 of the tenant list is empty");
  assert_int_equal(hookd_scope_check(" ", err, sizeof err), -1);
  assert_string_equal(err, "item 1 of the tenant list is empty");
  assert_int_equal(hookd_scope_check(",a", err, sizeof err), -1);
  assert_string_equal(err, "item 1 of the tenant list is empty");
  assert_int_equal(hookd_scope_check("a,", err, sizeof err), -1);
  assert_string_equal(err, "item 2 of the tenant list is empty");
  assert_int_equal(hookd_scope_check("a, b", err, sizeof err), -1);
  assert_non_null(strstr(err, "item 2 of the tenant list, \" b\", is not a tenant id"));
  memset(list, 'a', 65);
  list[65] = '\0';
  assert_int_equal(hookd_scope_check(list, err, sizeof err), -1); /* an id over 64 bytes */

  scope_of_length(list, HOOKD_SCOPE_MAX, "acme-prod");
  assert_int_equal(hookd_scope_check(list, err, sizeof err), 0);
  scope_of_length(list, HOOKD_SCOPE_MAX + 1, "acme-prod");
  assert_int_equal(hookd_scope_check(list, err, sizeof err), -1);
  assert_string_equal(err, "the tenant list is 512 bytes, more than the 511 a key can hold");
}

static hookd_api_key key(const char *id, const char *token, const char *tenants) {
  hookd_api_key k = {.id = (char *)id, .role = (char *)"viewer", .tenants = (char *)tenants};
  assert_int_equal(hookd_auth_hash(token, k.hash), 0);
  return k;
}

static void cache_leaves_out_keys_it_would_cut_or_widen(void **s) {
  char fits[1024], cut[1024];
  scope_of_length(fits, HOOKD_SCOPE_MAX, "acme-prod");
  /* cut at 511 bytes this one would end in ",acme" */
  scope_of_length(cut, HOOKD_SCOPE_MAX + 5, "acme-prod");
  assert_memory_equal(cut + HOOKD_SCOPE_MAX - 5, ",acme", 5);
  hookd_api_key keys[] = {
      key("key_all", "tok-all", NULL),
      key("key_fits", "tok-fits", fits),
      key("key_cut", "tok-cut", cut),
      key("key_empty", "tok-empty", ""),
      key("key_blank", "tok-blank", "acme,,other"),
  };
  hookd_auth *a = hookd_auth_new(NULL);
  hookd_log_level = HOOKD_LOG_ERROR + 1; /* the refusals are logged; keep the test quiet */
  for (int round = 0; round < 2; round++) {
    hookd_auth_set_keys(a, keys, sizeof keys / sizeof keys[0], hookd_auth_begin_load(a));
    assert_int_equal(hookd_auth_count(a), 2);
    hookd_principal p;
    assert_true(hookd_auth_check(a, "tok-all", &p));
    assert_string_equal(p.tenants, "");
    assert_true(hookd_principal_has_tenant(&p, "acme"));
    assert_true(hookd_auth_check(a, "tok-fits", &p));
    assert_string_equal(p.tenants, fits);
    assert_true(hookd_principal_has_tenant(&p, "acme-prod"));
    assert_false(hookd_principal_has_tenant(&p, "acme"));
    assert_false(hookd_auth_check(a, "tok-cut", &p));
    assert_false(hookd_auth_check(a, "tok-empty", &p));
    assert_false(hookd_auth_check(a, "tok-blank", &p));
  }
  hookd_auth_free(a);
}

static void key_detail_names_role_and_scope(void **s) {
  char d[HOOKD_KEY_DETAIL_MAX];
  hookd_auth_key_detail("viewer", "acme,other", 0, d, sizeof d);
  assert_string_equal(d, "role=viewer tenants=acme,other");
  hookd_auth_key_detail("admin", NULL, 0, d, sizeof d);
  assert_string_equal(d, "role=admin tenants=*");
  hookd_auth_key_detail("viewer", "acme", 1796587085541, d, sizeof d); /* a key that expires */
  assert_string_equal(d, "role=viewer tenants=acme expires=2026-12-06T19:58:05.541Z");
}

/* A key's listed state: revoked before invalid before expired (at now) before active. */
static void key_state_orders_revoked_invalid_expired_active(void **s) {
  (void)s;
  hookd_api_key k = {.id = "key_a", .role = "viewer", .expires_ms = 1000};
  assert_string_equal(hookd_auth_key_state(&k, 999), "active");
  assert_string_equal(hookd_auth_key_state(&k, 1000), "expired");
  k.role = "root";
  assert_string_equal(hookd_auth_key_state(&k, 1000), "invalid");
  k.revoked_ms = 5;
  assert_string_equal(hookd_auth_key_state(&k, 1000), "revoked");
  k = (hookd_api_key){.id = "key_b", .role = "admin"};
  assert_string_equal(hookd_auth_key_state(&k, INT64_MAX), "active"); /* (never expires) */
}

/* Two loads crossing (the periodic reload and an API change's own): the later read wins,
 * whichever is applied last — a key revoked by the API is not brought back by an older read. */
static void a_later_load_is_never_replaced_by_an_older_one(void **state) {
  (void)state;
  hookd_api_key k = {.id = "key_a", .role = "admin"};
  assert_int_equal(hookd_auth_hash("tok-a", k.hash), 0);
  hookd_auth *a = hookd_auth_new(NULL);
  uint64_t older = hookd_auth_begin_load(a); /* read while the key was active */
  uint64_t newer = hookd_auth_begin_load(a); /* read after it was revoked: no key */
  hookd_auth_set_keys(a, NULL, 0, newer);
  hookd_auth_set_keys(a, &k, 1, older); /* applied last, read first: dropped */
  hookd_principal p;
  assert_false(hookd_auth_check(a, "tok-a", &p));
  assert_int_equal(hookd_auth_count(a), 0);
  hookd_auth_set_keys(a, &k, 1, hookd_auth_begin_load(a));
  assert_true(hookd_auth_check(a, "tok-a", &p));
  hookd_auth_free(a);
}

/* Among many keys (looked up by hash: a binary search over them sorted), each token finds its own
 * key — its id, role, scope and expiry — and another finds none; the configured key too. */
static void each_of_many_keys_is_found_by_its_token(void **state) {
  (void)state;
  enum { N = 2000 };
  static hookd_api_key keys[N];
  static char ids[N][24], toks[N][24];
  for (int i = 0; i < N; i++) {
    snprintf(ids[i], sizeof ids[i], "key_%d", i);
    snprintf(toks[i], sizeof toks[i], "tok-%d", i);
    keys[i] = (hookd_api_key){.id = ids[i], .role = i % 2 ? "viewer" : "operator",
                              .tenants = i % 3 ? "acme" : NULL, .expires_ms = i};
    assert_int_equal(hookd_auth_hash(toks[i], keys[i].hash), 0);
  }
  keys[7].revoked_ms = 1; /* (revoked: not cached) */
  hookd_auth *a = hookd_auth_new("configured-key-of-some-length");
  hookd_auth_set_keys(a, keys, N, hookd_auth_begin_load(a));
  assert_int_equal(hookd_auth_count(a), N - 1 + 1);
  hookd_principal p;
  for (int i = 0; i < N; i++) {
    memset(&p, 0, sizeof p);
    if (i == 7) {
      assert_false(hookd_auth_check(a, toks[i], &p));
      continue;
    }
    assert_true(hookd_auth_check(a, toks[i], &p));
    assert_string_equal(p.key_id, ids[i]);
    assert_int_equal(p.role, i % 2 ? HOOKD_ROLE_VIEWER : HOOKD_ROLE_OPERATOR);
    assert_string_equal(p.tenants, i % 3 ? "acme" : "");
    assert_int_equal(p.expires_ms, i);
  }
  assert_false(hookd_auth_check(a, "tok-none", &p));
  assert_true(hookd_auth_check(a, "configured-key-of-some-length", &p));
  assert_string_equal(p.key_id, HOOKD_AUTH_CONFIG_ID);
  hookd_auth_free(a);
  hookd_auth *empty = hookd_auth_new(NULL);
  assert_false(hookd_auth_check(empty, "tok-1", &p));
  hookd_auth_free(empty);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scope_check_refuses_empty_blank_bad_and_long),
      cmocka_unit_test(cache_leaves_out_keys_it_would_cut_or_widen),
      cmocka_unit_test(key_detail_names_role_and_scope),
      cmocka_unit_test(key_state_orders_revoked_invalid_expired_active),
      cmocka_unit_test(a_later_load_is_never_replaced_by_an_older_one),
      cmocka_unit_test(each_of_many_keys_is_found_by_its_token),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

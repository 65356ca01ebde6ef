/* test_rejections.c — a source's refusals: the ring keeps the last HOOKD_REJECTIONS_RECENT
 * newest first after it wraps, counts keep all, a message is shown printable and cut, sources
 * are kept apart, a forgotten one starts over, a prune keeps only the live sources', and the log
 * takes a bounded number of a source's refusals a second. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/rejections.h"

static const char *recent_message(json_t *v, size_t i) {
  return json_string_value(json_object_get(json_array_get(json_object_get(v, "recent"), i),
                                           "message"));
}

static void ring_wraps_newest_first(void **st) {
  (void)st;
  hookd_rejections *j = hookd_rejections_new(1000);
  assert_non_null(j);
  char msg[32];
  for (int i = 0; i < 13; i++) {
    snprintf(msg, sizeof msg, "refusal %d", i);
    hookd_rejections_add(j, "src_a", 2000 + i, 401,
                         i % 2 ? HOOKD_REJECT_SIGNATURE_MISMATCH : HOOKD_REJECT_TIMESTAMP_STALE,
                         msg);
  }
  json_t *v = hookd_rejections_json(j, "src_a");
  assert_non_null(v);
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 13);
  json_t *by = json_object_get(v, "by_kind");
  assert_int_equal(json_integer_value(json_object_get(by, "signature_mismatch")), 6);
  assert_int_equal(json_integer_value(json_object_get(by, "timestamp_stale")), 7);
  assert_int_equal(json_array_size(json_object_get(v, "recent")), HOOKD_REJECTIONS_RECENT);
  assert_string_equal(recent_message(v, 0), "refusal 12");
  assert_string_equal(recent_message(v, HOOKD_REJECTIONS_RECENT - 1), "refusal 3");
  json_decref(v);
  /* another source: nothing of src_a */
  v = hookd_rejections_json(j, "src_b");
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 0);
  assert_int_equal(json_array_size(json_object_get(v, "recent")), 0);
  json_decref(v);
  hookd_rejections_forget(j, "src_a");
  v = hookd_rejections_json(j, "src_a");
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 0);
  json_decref(v);
  hookd_rejections_free(j);
}

static void message_printable_and_cut(void **st) {
  (void)st;
  hookd_rejections *j = hookd_rejections_new(1000);
  char long_msg[400];
  memset(long_msg, 'x', sizeof long_msg - 1);
  long_msg[sizeof long_msg - 1] = '\0';
  hookd_rejections_add(j, "s", 1, 413, HOOKD_REJECT_BODY_TOO_LARGE, long_msg);
  hookd_rejections_add(j, "s", 2, 400, HOOKD_REJECT_INVALID_REQUEST, "a\nb\xc3\xa9");
  hookd_rejections_add(j, "s", 3, 400, HOOKD_REJECT__COUNT, "no such kind: not kept");
  json_t *v = hookd_rejections_json(j, "s");
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 2);
  assert_string_equal(recent_message(v, 0), "a?b??");
  assert_int_equal(strlen(recent_message(v, 1)), 200);
  json_decref(v);
  hookd_rejections_free(j);
}

static bool alive_b(const char *id, void *arg) {
  (void)arg;
  return !strcmp(id, "src_b");
}

static void prune_keeps_the_live_sources(void **st) {
  (void)st;
  hookd_rejections *j = hookd_rejections_new(1000);
  for (int i = 0; i < 40; i++) { /* enough sources for the map to grow and probe */
    char id[32];
    snprintf(id, sizeof id, "src_%c%d", i == 7 ? 'b' : 'x', i);
    hookd_rejections_add(j, i == 7 ? "src_b" : id, 1, 401, HOOKD_REJECT_SIGNATURE_MISMATCH, "m");
  }
  hookd_rejections_prune(j, alive_b, NULL);
  json_t *v = hookd_rejections_json(j, "src_b");
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 1);
  json_decref(v);
  v = hookd_rejections_json(j, "src_x3");
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 0);
  json_decref(v);
  hookd_rejections_free(j);
}

/* The log takes HOOKD_REJECTIONS_LOG_PER_S of a source's refusals a second; the first of the
 * next second counts those it left out; another source has its own lines. */
static void log_lines_per_second_per_source(void **st) {
  (void)st;
  hookd_rejections *j = hookd_rejections_new(1000);
  int logged = 0;
  for (int i = 0; i < 100; i++) {
    int64_t r = hookd_rejections_add(j, "src_a", 5000 + i, 401, HOOKD_REJECT_SIGNATURE_MISMATCH,
                                     "m");
    if (r >= 0) {
      assert_int_equal(r, 0);
      logged++;
    }
  }
  assert_int_equal(logged, HOOKD_REJECTIONS_LOG_PER_S);
  assert_int_equal(hookd_rejections_add(j, "src_b", 5100, 401, HOOKD_REJECT_SIGNATURE_MISMATCH,
                                        "m"),
                   0);
  assert_int_equal(hookd_rejections_add(j, "src_a", 6000, 401, HOOKD_REJECT_SIGNATURE_MISMATCH,
                                        "m"),
                   100 - HOOKD_REJECTIONS_LOG_PER_S);
  assert_int_equal(hookd_rejections_add(j, "src_a", 6001, 401, HOOKD_REJECT_SIGNATURE_MISMATCH,
                                        "m"),
                   0);
  json_t *v = hookd_rejections_json(j, "src_a"); /* all counted all the same */
  assert_int_equal(json_integer_value(json_object_get(v, "total")), 102);
  json_decref(v);
  hookd_rejections_free(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(ring_wraps_newest_first),
                                     cmocka_unit_test(message_printable_and_cut),
                                     cmocka_unit_test(prune_keeps_the_live_sources),
                                     cmocka_unit_test(log_lines_per_second_per_source)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

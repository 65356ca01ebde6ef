/* test_payload_filter.c — payload filters (docs/api.md "Payload filters"): each operator on a
 * match and a miss, missing fields, arrays, nesting, $or/$and/$not, and the check's refusals,
 * each naming its path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/payload_filter.h"

static const char payload[] =
    "{\"amount\": 1500, \"currency\": \"usd\", \"paid\": true, \"note\": null,"
    " \"customer\": {\"id\": \"cus_42\", \"country\": \"VN\", \"tier\": 3},"
    " \"tags\": [\"vip\", \"b2b\"], \"at\": \"2026-12-03T07:00:00Z\", \"ratio\": 1.0}";

/* Whether filter (checked first) matches the payload text on. */
static bool m_on(const char *on, const char *filter) {
  json_t *f = json_loads(filter, 0, NULL), *p = json_loads(on, 0, NULL);
  assert_non_null(f);
  assert_non_null(p);
  char path[256], why[256];
  if (hookd_pfilter_check(f, path, sizeof path, why, sizeof why) != 0)
    fail_msg("%s: %s: %s", filter, path, why);
  bool ok = hookd_pfilter_match(f, p, NULL) == HOOKD_PFILTER_YES;
  json_decref(f);
  json_decref(p);
  return ok;
}

static bool m(const char *filter) { return m_on(payload, filter); }

static void literals_and_nesting(void **s) {
  (void)s;
  assert_true(m("{}"));
  assert_true(m("{\"currency\": \"usd\"}"));
  assert_false(m("{\"currency\": \"eur\"}"));
  assert_true(m("{\"currency\": \"usd\", \"paid\": true}"));
  assert_false(m("{\"currency\": \"usd\", \"paid\": false}")); /* every key must match */
  assert_true(m("{\"customer\": {\"country\": \"VN\"}}"));
  assert_false(m("{\"customer\": {\"country\": \"US\"}}"));
  assert_false(m("{\"currency\": {\"code\": \"usd\"}}")); /* a string has no fields */
  /* nor does a missing field: a filter of fields needs an object, whatever its operators */
  assert_false(m("{\"missing\": {\"country\": {\"$neq\": \"VN\"}}}"));
  assert_false(m("{\"missing\": {\"tier\": {\"$nin\": [1]}}}"));
  assert_false(m("{\"currency\": {\"email\": {\"$exist\": false}}}"));
  assert_true(m("{\"customer\": {\"email\": {\"$exist\": false}}}")); /* an object: yes */
  assert_true(m("{\"missing\": {\"$not\": {\"country\": \"VN\"}}}")); /* $not: as documented */
  assert_true(m("{\"amount\": 1500.0}")); /* numbers by value */
  assert_true(m("{\"ratio\": 1}"));
  assert_true(m("{\"note\": null}"));
  assert_false(m("{\"missing\": null}")); /* a missing field is not null */
  assert_true(m("{\"tags\": \"vip\"}")); /* an array field: one element equal */
  assert_false(m("{\"tags\": \"free\"}"));
}

/* A filter of fields against an array: one element matches them all (Hookdeck's
 * {"order": {"items": {"id": 456}}}); the fields of one element, not of several. */
static bool m_items(const char *filter) {
  return m_on("{\"items\": [{\"id\": 455, \"sku\": \"a\"}, {\"id\": 456, \"sku\": \"b\"}, 7,"
              " [\"x\"]], \"tags\": [\"vip\"]}",
              filter);
}

static void arrays_of_objects(void **s) {
  (void)s;
  assert_true(m_items("{\"items\": {\"id\": 456}}"));
  assert_false(m_items("{\"items\": {\"id\": 457}}"));
  assert_true(m_items("{\"items\": {\"id\": 456, \"sku\": \"b\"}}"));
  assert_false(m_items("{\"items\": {\"id\": 456, \"sku\": \"a\"}}")); /* two elements */
  assert_true(m_items("{\"items\": {\"id\": {\"$gt\": 455}}}"));
  assert_true(m_items("{\"items\": {\"sku\": {\"$exist\": true}}}"));
  assert_false(m_items("{\"$not\": {\"items\": {\"id\": 456}}}"));
  assert_true(m_items("{\"$not\": {\"items\": {\"id\": 1}}}"));
  assert_false(m_items("{\"tags\": {\"id\": 1}}")); /* strings have no fields */
  assert_true(m_items("{\"items\": 7}")); /* a literal: one element equal, as before */
  /* under $not, $or and $and too: a filter and its negation never both match (a review) */
  assert_false(m_items("{\"items\": {\"$not\": {\"id\": 456}}}"));
  assert_true(m_items("{\"items\": {\"$not\": {\"id\": 1}}}"));
  assert_true(m_items("{\"items\": {\"$or\": [{\"id\": 456}, {\"id\": 1}]}}"));
  assert_true(m_items("{\"items\": {\"$and\": [{\"id\": 456}, {\"sku\": \"b\"}]}}"));
  /* each filter of an $and on its own: one element has id 456, another sku "a" */
  assert_true(m_items("{\"items\": {\"$and\": [{\"id\": 456}, {\"sku\": \"a\"}]}}"));
  assert_false(m_items("{\"items\": {\"$and\": [{\"id\": 456}, {\"sku\": \"c\"}]}}"));
  /* a payload that is an array is read as a field's array is */
  const char *arr = "[{\"id\": 455}, {\"id\": 456}]";
  assert_true(m_on(arr, "{\"id\": 456}"));
  assert_false(m_on(arr, "{\"$not\": {\"id\": 456}}"));
}

static void comparisons(void **s) {
  (void)s;
  assert_true(m("{\"amount\": {\"$gt\": 1000}}"));
  assert_false(m("{\"amount\": {\"$gt\": 1500}}"));
  assert_true(m("{\"amount\": {\"$gte\": 1500, \"$lte\": 1500}}"));
  assert_true(m("{\"amount\": {\"$lt\": 1500.5}}"));
  assert_false(m("{\"amount\": {\"$lt\": \"2000\"}}")); /* a number and a string do not compare */
  /* strings: byte order */
  assert_true(m("{\"at\": {\"$gte\": \"2026-12-01\", \"$lt\": \"2027\"}}"));
  assert_false(m("{\"missing\": {\"$gt\": 0}}"));
  assert_true(m("{\"currency\": {\"$eq\": \"usd\"}}"));
  assert_true(m("{\"currency\": {\"$neq\": \"eur\"}}"));
  assert_false(m("{\"currency\": {\"$neq\": \"usd\"}}"));
  assert_true(m("{\"missing\": {\"$neq\": \"usd\"}}")); /* missing is not equal */
  assert_false(m("{\"tags\": {\"$neq\": \"vip\"}}"));
}

static void lists_and_strings(void **s) {
  (void)s;
  assert_true(m("{\"currency\": {\"$in\": [\"eur\", \"usd\"]}}"));
  assert_false(m("{\"currency\": {\"$in\": [\"eur\", \"gbp\"]}}"));
  assert_true(m("{\"customer\": {\"tier\": {\"$in\": [3, 4]}}}"));
  assert_true(m("{\"tags\": {\"$in\": [\"b2b\"]}}"));
  assert_false(m("{\"missing\": {\"$in\": [1]}}"));
  assert_true(m("{\"currency\": {\"$nin\": [\"eur\"]}}"));
  assert_false(m("{\"currency\": {\"$nin\": [\"usd\"]}}"));
  assert_true(m("{\"missing\": {\"$nin\": [1]}}"));
  assert_true(m("{\"customer\": {\"id\": {\"$startsWith\": \"cus_\"}}}"));
  assert_false(m("{\"customer\": {\"id\": {\"$startsWith\": \"acct_\"}}}"));
  assert_true(m("{\"at\": {\"$endsWith\": \"Z\"}}"));
  assert_false(m("{\"amount\": {\"$endsWith\": \"0\"}}")); /* not a string */
  assert_true(m("{\"customer\": {\"id\": {\"$contains\": \"_4\"}}}"));
  assert_true(m("{\"tags\": {\"$contains\": \"vip\"}}"));
  /* an array: an element, not a part of one */
  assert_false(m("{\"tags\": {\"$contains\": \"vi\"}}"));
}

static void exist_and_logic(void **s) {
  (void)s;
  assert_true(m("{\"note\": {\"$exist\": true}}")); /* null is there */
  assert_true(m("{\"missing\": {\"$exist\": false}}"));
  assert_false(m("{\"missing\": {\"$exist\": true}}"));
  assert_false(m("{\"customer\": {\"id\": {\"$exist\": false}}}"));
  assert_true(m("{\"$or\": [{\"currency\": \"eur\"}, {\"amount\": {\"$gt\": 1000}}]}"));
  assert_false(m("{\"$or\": [{\"currency\": \"eur\"}, {\"amount\": {\"$gt\": 9000}}]}"));
  assert_true(m("{\"$and\": [{\"currency\": \"usd\"}, {\"customer\": {\"tier\": 3}}]}"));
  assert_false(m("{\"$and\": [{\"currency\": \"usd\"}, {\"customer\": {\"tier\": 4}}]}"));
  assert_true(m("{\"$not\": {\"currency\": \"eur\"}}"));
  assert_false(m("{\"customer\": {\"$not\": {\"country\": \"VN\"}}}"));
  assert_true(m("{\"customer\": {\"$or\": [{\"country\": \"US\"}, {\"tier\": {\"$gte\": 3}}]}}"));
}

static void payloads_that_are_not_objects(void **s) {
  (void)s;
  json_t *f = json_loads("{\"a\": 1}", 0, NULL), *empty = json_loads("{}", 0, NULL);
  json_t *str = json_string("x");
  assert_int_equal(hookd_pfilter_match(f, str, NULL), HOOKD_PFILTER_NO);
  assert_int_equal(hookd_pfilter_match(f, NULL, NULL), HOOKD_PFILTER_NO);
  assert_int_equal(hookd_pfilter_match(empty, str, NULL), HOOKD_PFILTER_YES); /* takes everything */
  json_t *absent = json_loads("{\"a\": {\"$exist\": false}}", 0, NULL);
  assert_int_equal(hookd_pfilter_match(absent, str, NULL), HOOKD_PFILTER_NO); /* no fields */
  json_decref(absent);
  json_decref(f);
  json_decref(empty);
  json_decref(str);
  /* over the stored envelope, parsed once for several filters: the payload is its data; the
   * filters parsed once, by their text */
  const char env[] = "{\"id\": \"evt_1\", \"type\": \"t\", \"data\": {\"a\": 1}}";
  const size_t n = sizeof env - 1;
  hookd_pfilter_cache cache;
  hookd_pfilter_cache_init(&cache);
  json_t *parsed = NULL;
  for (int round = 0; round < 2; round++) {
    assert_int_equal(hookd_pfilter_match_envelope(&cache, "{\"a\": 1}", env, n, &parsed, NULL),
                     HOOKD_PFILTER_YES);
    assert_non_null(parsed);
    assert_int_equal(hookd_pfilter_match_envelope(&cache, "{\"a\": 2}", env, n, &parsed, NULL),
                     HOOKD_PFILTER_NO);
    const char *on_type = "{\"type\": \"t\"}"; /* the envelope's, not the payload's */
    assert_int_equal(hookd_pfilter_match_envelope(&cache, on_type, env, n, &parsed, NULL),
                     HOOKD_PFILTER_NO);
    assert_int_equal(hookd_pfilter_match_envelope(&cache, NULL, env, n, &parsed, NULL),
                     HOOKD_PFILTER_YES); /* no filter */
    assert_int_equal(hookd_pfilter_match_envelope(&cache, "{not json", env, n, &parsed, NULL),
                     HOOKD_PFILTER_NO);
    assert_int_equal(cache.m.len, 3); /* (the one that does not parse is not kept) */
  }
  /* a payload parsed already (a publish's, by the API's thread) matches as its envelope's data
   * would, through the same kept filters */
  json_t *given = json_object_get(parsed, "data");
  assert_int_equal(hookd_pfilter_match_payload(&cache, "{\"a\": 1}", given, NULL),
                   HOOKD_PFILTER_YES);
  assert_int_equal(hookd_pfilter_match_payload(&cache, "{\"a\": 2}", given, NULL),
                   HOOKD_PFILTER_NO);
  assert_int_equal(hookd_pfilter_match_payload(&cache, NULL, NULL, NULL), HOOKD_PFILTER_YES);
  assert_int_equal(hookd_pfilter_match_payload(&cache, "{\"a\": 1}", NULL, NULL),
                   HOOKD_PFILTER_NO); /* no payload: no field */
  assert_int_equal(cache.m.len, 3);
  /* past 4,096 filters one entry makes way for each new one: the others stay parsed */
  char text[64];
  for (int i = 0; i < 4096 + 100; i++) {
    snprintf(text, sizeof text, "{\"a\": %d}", 1000 + i);
    assert_int_equal(hookd_pfilter_match_envelope(&cache, text, env, n, &parsed, NULL),
                     HOOKD_PFILTER_NO);
    assert_true(cache.m.len <= 4096);
  }
  assert_int_equal(cache.m.len, 4096); /* (emptied whole when full, it had 100 left) */
  snprintf(text, sizeof text, "{\"a\": %d}", 1000 + 4096 + 99);
  assert_non_null(hookd_strmap_get(&cache.m, text)); /* the newest is there */
  json_decref(parsed);
  hookd_pfilter_cache_free(&cache);
}

/* A match takes at most HOOKD_PFILTER_BUDGET steps: a long array against many values gives up
 * (a review: one such filter and an 800 KB payload held the writer for 14 s). */
static void a_costly_match_gives_up(void **s) {
  (void)s;
  json_t *arr = json_array(), *list = json_array();
  for (int i = 0; i < 5000; i++) json_array_append_new(arr, json_integer(0));
  for (int i = 0; i < 256; i++) json_array_append_new(list, json_integer(i + 1));
  json_t *big = json_pack("{s:o}", "a", arr);
  json_t *f = json_pack("{s:{s:O}}", "a", "$nin", list);
  json_t *small = json_pack("{s:{s:O}}", "b", "$nin", list);
  char path[64], why[128];
  assert_int_equal(hookd_pfilter_check(f, path, sizeof path, why, sizeof why), 0);
  assert_int_equal(hookd_pfilter_match(f, big, NULL), HOOKD_PFILTER_OVER);
  assert_int_equal(hookd_pfilter_match(small, big, NULL), HOOKD_PFILTER_YES); /* b is missing */
  json_decref(f);
  json_decref(small);
  json_decref(list);
  json_decref(big);
}

/* String operators pay for the bytes they read, and one event's matches share a budget: a long
 * string against $contains, or many endpoints' filters, cannot hold the writer (a review: 200
 * endpoints with 92 $contains each on a 1 MB string took 0.7 s a publish). */
static void strings_and_fan_outs_pay_their_way(void **s) {
  (void)s;
  char *text = malloc(1000001);
  memset(text, 'x', 1000000);
  text[1000000] = '\0';
  json_t *doc = json_pack("{s:s}", "s", text);
  json_t *f = json_pack("{s:{s:s}}", "s", "$contains", "needle");
  json_t *cheap = json_pack("{s:{s:s}}", "s", "$startsWith", "xx");
  assert_int_equal(hookd_pfilter_match(f, doc, NULL), HOOKD_PFILTER_OVER);
  assert_int_equal(hookd_pfilter_match(cheap, doc, NULL), HOOKD_PFILTER_YES);
  long left = 25;
  assert_int_equal(hookd_pfilter_match(cheap, doc, &left), HOOKD_PFILTER_YES);
  assert_true(left < 25 && left >= 0);
  /* equality reads a long field only when the lengths agree: a $neq or a $nin of short values
   * on a 1 MB field is cheap (a review: it gave up, its endpoint losing the event) */
  json_t *neq = json_pack("{s:{s:s}}", "s", "$neq", "x");
  json_t *nin = json_pack("{s:{s:[sss]}}", "s", "$nin", "a", "b", "c");
  assert_int_equal(hookd_pfilter_match(neq, doc, NULL), HOOKD_PFILTER_YES);
  assert_int_equal(hookd_pfilter_match(nin, doc, NULL), HOOKD_PFILTER_YES);
  json_decref(neq);
  json_decref(nin);
  /* the event's budget spent by the filters before: a cheap filter still takes it (a review: it
   * lost the event to the costly filters before it), a costly one gives up within the floor */
  left = 0;
  assert_int_equal(hookd_pfilter_match(cheap, doc, &left), HOOKD_PFILTER_YES);
  assert_true(left < 0 && left > -HOOKD_PFILTER_FLOOR);
  left = 0;
  assert_int_equal(hookd_pfilter_match(f, doc, &left), HOOKD_PFILTER_OVER);
  assert_int_equal(left, -HOOKD_PFILTER_FLOOR);
  json_decref(f);
  json_decref(cheap);
  json_decref(doc);
  free(text);
}

/* Integers compare exactly (a 19-digit id is not another one a double rounds it to), against
 * integers and against reals (2^53 + 1 is not 2^53 written as a real). */
static void integers_compare_exactly(void **s) {
  (void)s;
  json_t *p = json_loads("{\"id\": 1234567890123456700, \"n\": 9007199254740993, \"neg\": -3}",
                         0, NULL);
  const char *no[] = {"{\"id\": 1234567890123456789}", "{\"n\": 9007199254740992}",
                      "{\"n\": {\"$in\": [9007199254740992]}}",
                      "{\"n\": {\"$lte\": 9007199254740992}}", "{\"n\": 9007199254740992.0}",
                      "{\"n\": {\"$in\": [9007199254740992.0]}}",
                      "{\"n\": {\"$lte\": 9007199254740992.0}}", "{\"id\": {\"$gt\": 1e19}}",
                      "{\"neg\": {\"$lt\": -3.5}}", "{\"neg\": -3.0000001}"};
  const char *yes[] = {"{\"id\": 1234567890123456700}", "{\"n\": {\"$gt\": 9007199254740992}}",
                       "{\"n\": {\"$gte\": 9007199254740993.0}}",
                       "{\"n\": {\"$gt\": 9007199254740992.0}}",
                       "{\"n\": {\"$neq\": 9007199254740992.0}}", "{\"id\": {\"$lt\": 1e19}}",
                       "{\"id\": {\"$gt\": -1e19}}", "{\"neg\": {\"$gt\": -3.5}}",
                       "{\"neg\": -3.0}"};
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
    json_t *f = json_loads(no[i], 0, NULL);
    if (hookd_pfilter_match(f, p, NULL) != HOOKD_PFILTER_NO) fail_msg("%s matched", no[i]);
    json_decref(f);
  }
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    json_t *f = json_loads(yes[i], 0, NULL);
    if (hookd_pfilter_match(f, p, NULL) != HOOKD_PFILTER_YES) fail_msg("%s did not match", yes[i]);
    json_decref(f);
  }
  json_decref(p);
}

/* want: "path: why" (the path under payload_filter, "" for the filter itself) */
static void refused(const char *filter, const char *want) {
  json_t *f = json_loads(filter, JSON_DECODE_ANY, NULL);
  assert_non_null(f);
  char path[256] = "", why[256] = "", got[600];
  assert_int_equal(hookd_pfilter_check(f, path, sizeof path, why, sizeof why), -1);
  snprintf(got, sizeof got, "%s: %s", path, why);
  if (!strstr(got, want)) fail_msg("%s: got \"%s\", want \"%s\"", filter, got, want);
  json_decref(f);
}

static void the_check_names_the_problem(void **s) {
  (void)s;
  refused("[1]", ": must be an object");
  refused("{\"a\": {\"$gtt\": 1}}", "a.$gtt: not an operator");
  refused("{\"a:b\": {\"$gtt\": 1}}", "a:b.$gtt: not an operator"); /* (a ':' in a name) */
  refused("{\"$a\": 1}", "$a: not an operator");
  refused("{\"a\": [1, 2]}", "a: an array is not a filter");
  refused("{\"a\": {\"$in\": []}}", "a.$in: must be an array of 1 to 256");
  refused("{\"a\": {\"$in\": [{\"b\": 1}]}}", "a.$in: must be an array");
  refused("{\"a\": {\"$gt\": true}}", "a.$gt: must be a number or a string");
  refused("{\"a\": {\"$startsWith\": 1}}", "a.$startsWith: must be a string");
  refused("{\"a\": {\"$exist\": 1}}", "a.$exist: must be true or false");
  refused("{\"a\": {\"$eq\": {\"b\": 1}}}", "a.$eq: must be a scalar");
  refused("{\"$or\": {\"a\": 1}}", "$or: must be an array of 1 to 256 filters");
  refused("{\"$or\": [{\"a\": {\"$bad\": 1}}]}", "$or.a.$bad: not an operator");
  refused("{\"$not\": 1}", "$not: must be a filter");
  refused("{\"\": 1}", "a field name is empty");
  refused("{\"a\": {}}", "a: an empty object matches anything");
  refused("{\"$or\": [{}]}", "$or: an empty object matches anything");
  refused("{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{\"h\":{\"i\":1}}}}}}}}}", "too deep");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(literals_and_nesting),
      cmocka_unit_test(arrays_of_objects),
      cmocka_unit_test(comparisons),
      cmocka_unit_test(lists_and_strings),
      cmocka_unit_test(exist_and_logic),
      cmocka_unit_test(payloads_that_are_not_objects),
      cmocka_unit_test(a_costly_match_gives_up),
      cmocka_unit_test(integers_compare_exactly),
      cmocka_unit_test(strings_and_fan_outs_pay_their_way),
      cmocka_unit_test(the_check_names_the_problem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

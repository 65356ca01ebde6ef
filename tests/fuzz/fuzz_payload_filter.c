/* fuzz_payload_filter.c — libFuzzer target for endpoint payload filters (a customer's JSON, run
 * against every event of its tenant): the input is a filter and a payload, split at a 0x01 byte.
 * A filter the check accepts is matched against the payload three ways — parsed, through the
 * cache by its text over the payload, and through the cache over a stored envelope — and the
 * three must agree on YES, NO or OVER; a match never takes more steps than it is given (or
 * than HOOKD_PFILTER_FLOOR, when it is given fewer). A filter
 * the check refuses names a place and a reason. Nothing may crash, overrun or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/jsonio.h"
#include "core/payload_filter.h"

static hookd_pfilter_cache cache;
static int cache_ready;

static int valid(int r) {
  return r == HOOKD_PFILTER_YES || r == HOOKD_PFILTER_NO || r == HOOKD_PFILTER_OVER;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!cache_ready) {
    hookd_pfilter_cache_init(&cache);
    cache_ready = 1;
  }
  const uint8_t *p = data;
  size_t left = size;
  char *ftext = segment(&p, &left);
  char *ptext = dup_range(p, left);
  char err[HOOKD_JSON_ERR_MAX];
  hookd_json_limits lim = {.max_depth = 64};
  json_t *filter = hookd_json_parse(ftext, strlen(ftext), &lim, err);
  json_t *payload = left ? hookd_json_parse(ptext, left, &lim, err) : NULL;
  if (filter) {
    char path[64], why[128];
    path[0] = why[0] = '\0';
    if (hookd_pfilter_check(filter, path, sizeof path, why, sizeof why) != 0) {
      check(why[0] != '\0' && memchr(path, '\0', sizeof path) && memchr(why, '\0', sizeof why));
    } else {
      int direct = hookd_pfilter_match(filter, payload, NULL);
      check(valid(direct));
      long budget = HOOKD_PFILTER_EVENT_BUDGET;
      int within = hookd_pfilter_match(filter, payload, &budget);
      check(within == direct && budget >= 0 && budget <= HOOKD_PFILTER_EVENT_BUDGET);
      /* given fewer steps than the floor, a match takes the floor at most */
      long small = 3;
      int tight = hookd_pfilter_match(filter, payload, &small);
      check(valid(tight) && small >= 3 - HOOKD_PFILTER_FLOOR &&
            (tight == HOOKD_PFILTER_OVER || tight == direct));
      char *compact = json_dumps(filter, JSON_COMPACT | JSON_ENCODE_ANY);
      check(compact != NULL);
      check(hookd_pfilter_match_payload(&cache, compact, payload, NULL) == direct);
      json_t *env = json_pack("{s:s, s:s, s:s}", "id", "evt_1", "type", "t.x", "timestamp",
                              "2026-01-01T00:00:00Z");
      check(env != NULL);
      if (payload) json_object_set(env, "data", payload);
      char *etext = json_dumps(env, JSON_COMPACT);
      check(etext != NULL);
      json_t *parsed = NULL;
      int viaenv = hookd_pfilter_match_envelope(&cache, compact, etext, strlen(etext), &parsed,
                                                NULL);
      /* the envelope's text is jansson's (its numbers printed again): a payload's reals may
       * read back otherwise only past 17 digits, which jansson prints exactly */
      check(viaenv == direct);
      json_decref(parsed);
      free(etext);
      json_decref(env);
      free(compact);
    }
  }
  json_decref(filter);
  json_decref(payload);
  free(ftext);
  free(ptext);
  return 0;
}

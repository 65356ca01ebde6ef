/* fuzz_envelope.c — libFuzzer target for the envelope's data slice (core/envelope.c), which
 * picks the bytes an endpoint with body_format "payload" is sent. Any bytes: no read outside
 * them (ASan), and a slice found lies inside, ending just before the closing brace. An envelope
 * built as hookd builds one — from the input's id, type and JSON value, the id and type any
 * text (escaped quotes and the member names' own text inside them too) — gives back exactly the
 * value's bytes. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/envelope.h"

#define MAX_LEN 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_LEN) return 0;
  const char *d = NULL;
  size_t n = 0;
  if (hookd_envelope_data((const char *)data, size, &d, &n))
    check(d > (const char *)data && d + n == (const char *)data + size - 1 && n > 0);

  const uint8_t *p = data;
  size_t left = size;
  char *id = segment(&p, &left);
  char *type = segment(&p, &left);
  json_t *ids = json_string(id), *types = json_string(type); /* NULL: not UTF-8 */
  json_t *value = json_loadb((const char *)p, left, JSON_DECODE_ANY, NULL);
  char *qid = ids ? json_dumps(ids, JSON_ENCODE_ANY) : NULL;
  char *qtype = types ? json_dumps(types, JSON_ENCODE_ANY) : NULL;
  char *text = value ? json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  if (qid && qtype && text) {
    size_t cap = strlen(qid) + strlen(qtype) + strlen(text) + 128;
    char *env = malloc(cap);
    if (!env) abort();
    int len = snprintf(env, cap, "{\"id\":%s,\"type\":%s,\"timestamp\":\"2026-12-07T23:00:00.000Z\","
                       "\"data\":%s}", qid, qtype, text);
    check(len > 0 && (size_t)len < cap);
    /* (an id that is not a string of hookd's: the slice needs "{\"id\":\"" first) */
    check(hookd_envelope_data(env, (size_t)len, &d, &n));
    check(n == strlen(text) && !memcmp(d, text, n));
    free(env);
  }
  free(qid);
  free(qtype);
  free(text);
  json_decref(ids);
  json_decref(types);
  json_decref(value);
  free(id);
  free(type);
  return 0;
}

/* fuzz_json_input.c — libFuzzer target: the bounded JSON parser used on every request body
 * (depth pre-scan, NUL, UTF-8, duplicate keys), its provider-body variant (which reads what is
 * not I-JSON), and the compact serialiser that writes stored payloads. Invariant: what we
 * serialise parses back and serialises to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hookd_json_limits lim = {.max_depth = 32};
  char err[HOOKD_JSON_ERR_MAX];
  /* a provider's body: whatever it reads (lossy or not) is a tree; what strict parsing takes,
   * it takes without loss */
  bool lossy;
  json_t *pb = hookd_json_parse_body((const char *)data, size, &lim, &lossy, NULL, err);
  json_t *v = hookd_json_parse((const char *)data, size, &lim, err);
  if (v && (!pb || lossy)) abort();
  json_decref(pb);
  if (!v) return 0;
  hookd_buf a, b;
  hookd_buf_init(&a, 1 << 24);
  hookd_buf_init(&b, 1 << 24);
  if (hookd_json_dump(v, &a) == 0) {
    json_t *w = hookd_json_parse(a.data, a.len, &lim, err);
    if (!w) abort(); /* our own output must parse */
    if (hookd_json_dump(w, &b) != 0 || a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
      abort(); /* and be stable */
    json_decref(w);
  }
  hookd_buf_free(&a);
  hookd_buf_free(&b);
  json_decref(v);
  return 0;
}

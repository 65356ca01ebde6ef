/* fuzz_jcs.c — libFuzzer target for RFC 8785 canonicalisation: bytes parsed by jansson (integers
 * as reals, as JCS sees them) are canonicalised; the canonical text must parse again and
 * canonicalise to itself. The first 8 bytes, read as a double, must format to text that reads
 * back as the same double. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/inbound.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= 8) {
    double d;
    memcpy(&d, data, sizeof d);
    char num[32];
    hookd_jcs_number(d, num);
    if (!memchr(num, '\0', sizeof num)) abort();
    if (isfinite(d) && strtod(num, NULL) != d && !(d == 0 && strcmp(num, "0") == 0)) abort();
  }
  json_error_t e;
  json_t *v = json_loadb((const char *)data, size, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &e);
  if (!v) return 0;
  hookd_buf a, b;
  hookd_buf_init(&a, 1 << 22);
  hookd_buf_init(&b, 1 << 22);
  int rc = hookd_jcs(v, &a);
  if (rc == 0) {
    json_t *w = json_loadb(a.data, a.len, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &e);
    if (!w) abort(); /* canonical output must be JSON */
    if (hookd_jcs(w, &b) != 0) abort();
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort(); /* idempotent */
    json_decref(w);
  }
  hookd_buf_free(&a);
  hookd_buf_free(&b);
  json_decref(v);
  return 0;
}

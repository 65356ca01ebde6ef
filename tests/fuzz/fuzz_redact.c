/* fuzz_redact.c — libFuzzer target: response excerpts masked (core/redact.c) from arbitrary
 * bytes, by the generic masks, by an endpoint's own header values, and by both at once.
 * Invariants: it never fails with room for the worst case (a mask for every byte), and a second
 * pass over its own output never fails either. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hookd_buf out;
  hookd_buf_init(&out, size * 11 + 16); /* "[redacted]" is 10 bytes: room for any input */
  if (hookd_redact((const char *)data, size, &out) != HOOKD_BUF_OK) abort();
  if (out.len > size * 11 + 16) abort();
  /* a second pass over its own output may mask more (a mask can join two spans), never fail */
  hookd_buf again;
  hookd_buf_init(&again, out.len * 11 + 16);
  if (hookd_redact(hookd_buf_str(&out), out.len, &again) != HOOKD_BUF_OK) abort();
  hookd_buf_free(&again);
  hookd_buf_free(&out);
  /* an endpoint's own header values: the first byte splits the input into header lines (as
   * text) and a response, and says whether the response was cut */
  if (size > 1) {
    size_t split = 1 + data[0] % (size - 1);
    char *lines = malloc(split);
    if (!lines) return 0;
    memcpy(lines, data + 1, split - 1);
    lines[split - 1] = '\0';
    const char *in = (const char *)data + split;
    size_t n = size - split;
    hookd_buf vals;
    hookd_buf_init(&vals, n * 11 + 16);
    if (hookd_redact_values(in, n, lines, data[0] & 1, &vals) != HOOKD_BUF_OK) abort();
    hookd_buf_free(&vals);
    /* both, as an excerpt is stored: never longer than a mask per byte */
    hookd_buf ex;
    hookd_buf_init(&ex, n * 11 + 16);
    if (hookd_redact_excerpt(in, n, lines, data[0] & 1, &ex) != HOOKD_BUF_OK) abort();
    if (ex.len > n * 11 + 16) abort();
    hookd_buf_free(&ex);
    free(lines);
  }
  return 0;
}

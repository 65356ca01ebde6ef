/* fuzz_redact.c — libFuzzer target: response excerpts masked (core/redact.c) from arbitrary
 * bytes, by the generic masks, by an endpoint's own header values, and by both at once, then
 * cut to the stored bound; and the scrub of text quoted into JSON (core/utf8.c). Invariants: it
 * never fails with room for the worst case (a mask for every byte), a second pass over its own
 * output never fails either, a cut is never past its bound nor inside a UTF-8 sequence, and a
 * scrubbed text is well-formed UTF-8 throughout. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/redact.h"
#include "core/utf8.h"

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
    /* cut to a bound the first byte picks: never past it, never inside a character */
    size_t max = (size_t)data[0] * 4;
    size_t cut = hookd_redact_cut(ex.data ? ex.data : "", ex.len, max, data[0] & 2);
    if (cut > ex.len || (cut > max && max < ex.len)) abort();
    size_t at = 0; /* the sequences before it, whole (a stray byte counts as one) */
    while (at < cut) {
      size_t l = hookd_utf8_len(ex.data + at, ex.len - at);
      at += l ? l : 1;
    }
    if (at != cut) abort();
    hookd_buf_free(&ex);
    free(lines);
  }
  /* the scrub: what is left is well-formed UTF-8, each sequence whole */
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  hookd_utf8_scrub(text);
  size_t tn = strlen(text);
  for (size_t i = 0; i < tn;) {
    size_t l = hookd_utf8_len(text + i, tn - i);
    if (!l) abort();
    i += l;
  }
  free(text);
  return 0;
}

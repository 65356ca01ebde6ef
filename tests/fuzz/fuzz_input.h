/* fuzz_input.h — what the fuzz targets share: a property check that stops the run, and the
 * splitting of one input into NUL-terminated strings at 0x01 bytes. Header-only (each target is
 * its own program). */
#ifndef HOOKD_FUZZ_INPUT_H
#define HOOKD_FUZZ_INPUT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A property that does not hold is a finding: stop here, with the input saved by libFuzzer. */
static inline void check(int ok) {
  if (!ok) abort();
}

/* p[0..n) as a NUL-terminated string (malloc'd). */
static inline char *dup_range(const uint8_t *p, size_t n) {
  char *s = malloc(n + 1);
  if (!s) abort();
  if (n) memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* The next segment of the input, up to a 0x01 byte (or the end), past which *p moves. */
static inline char *segment(const uint8_t **p, size_t *left) {
  const uint8_t *sep = memchr(*p, 0x01, *left);
  size_t n = sep ? (size_t)(sep - *p) : *left;
  char *s = dup_range(*p, n);
  *p += n + (sep ? 1 : 0);
  *left -= n + (sep ? 1 : 0);
  return s;
}

#endif

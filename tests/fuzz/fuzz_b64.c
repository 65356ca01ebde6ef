/* fuzz_b64.c — libFuzzer target for base64 (core/b64.c), which reads signatures and secrets from
 * requests and configuration: the input is decoded as text into a buffer of exactly the documented
 * 3 * (len / 4) bytes (ASan traps any byte past it) and must be accepted exactly when a plain
 * RFC 4648 reference decoder (padding required, no whitespace, canonical: the bits the padding
 * leaves unused are zero) accepts it, with the same bytes; re-encoding accepted text gives the
 * text back exactly. The input, as bytes, must also encode
 * to HOOKD_B64_ENCLEN - 1 characters that decode back to it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/b64.h"

static int val(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Reference: groups of four, '=' only as the last one or two characters of the text. */
static long ref_decode(const char *in, size_t len, unsigned char *out) {
  if (len % 4) return -1;
  size_t o = 0;
  for (size_t i = 0; i < len; i += 4) {
    int last = i + 4 == len, v[4], pad = 0;
    for (int k = 0; k < 4; k++) {
      v[k] = val((unsigned char)in[i + k]);
      if (v[k] < 0) {
        if (!last || in[i + k] != '=' || k < 2) return -1;
        v[k] = 0;
        pad++;
      } else if (pad) {
        return -1; /* data after '=' */
      }
    }
    if ((pad == 1 && (v[2] & 0x03)) || (pad == 2 && (v[1] & 0x0F))) return -1; /* not canonical */
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    out[o++] = (unsigned char)(w >> 16);
    if (pad < 2) out[o++] = (unsigned char)(w >> 8);
    if (pad < 1) out[o++] = (unsigned char)w;
  }
  return (long)o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  size_t cap = 3 * (size / 4);
  unsigned char *out = malloc(cap ? cap : 1), *ref = malloc(cap + 3);
  if (!out || !ref) abort();
  long n = hookd_b64_decode(text, size, out);
  long r = ref_decode(text, size, ref);
  check(n == r);
  check(n == -1 || (n >= 0 && (size_t)n <= cap));
  if (n > 0) {
    check(memcmp(out, ref, (size_t)n) == 0);
    char *enc = malloc(HOOKD_B64_ENCLEN((size_t)n));
    if (!enc) abort();
    size_t el = hookd_b64_encode(out, (size_t)n, enc);
    check(el == size && enc[el] == '\0');
    check(memcmp(enc, text, size) == 0); /* canonical: one encoding per value */
    free(enc);
  }

  /* bytes -> text -> bytes */
  char *enc = malloc(HOOKD_B64_ENCLEN(size));
  unsigned char *back = malloc(3 * (HOOKD_B64_ENCLEN(size) / 4) + 1);
  if (!enc || !back) abort();
  size_t el = hookd_b64_encode(data, size, enc);
  check(el == HOOKD_B64_ENCLEN(size) - 1 && enc[el] == '\0');
  check(hookd_b64_decode(enc, el, back) == (long)size);
  check(size == 0 || memcmp(back, data, size) == 0);
  free(enc);
  free(back);
  free(out);
  free(ref);
  return 0;
}

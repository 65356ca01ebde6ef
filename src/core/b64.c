/* b64.c — base64 on OpenSSL's EVP block codec, with the strictness it lacks (length, padding). */
#include "core/b64.h"

#include <openssl/evp.h>
#include <string.h>

size_t hookd_b64_encode(const unsigned char *in, size_t n, char *out) {
  int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
  return (size_t)len;
}

long hookd_b64_decode(const char *in, size_t len, unsigned char *out) {
  if (len % 4 != 0) return -1;
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = in[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '+' || c == '/' || (c == '=' && i >= len - 2);
    if (!ok) return -1;
  }
  size_t pad = 0;
  if (in[len - 1] == '=') pad++;
  if (in[len - 2] == '=') {
    if (pad == 0) return -1; /* "x=" followed by a non-pad character */
    pad++;
  }
  /* canonical only: the bits the padding leaves unused in the last data character are zero
   * (RFC 4648 §3.5), so one value has one encoding (a signature cannot be re-spelled) */
  if (pad) {
    char c = in[len - 1 - pad];
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
                                   : 63;
    if (v & (pad == 2 ? 0x0F : 0x03)) return -1;
  }
  int n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
  if (n < 0) return -1;
  return (long)n - (long)pad;
}

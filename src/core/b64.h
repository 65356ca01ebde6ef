/* b64.h — standard base64 (RFC 4648 §4) encode and strict decode, on OpenSSL's EVP codec. */
#ifndef HOOKD_CORE_B64_H
#define HOOKD_CORE_B64_H

#include <stddef.h>

/* Encoded length including the NUL terminator. */
#define HOOKD_B64_ENCLEN(n) ((((n) + 2) / 3) * 4 + 1)

/* Writes NUL-terminated base64 of in[0..n) to out (HOOKD_B64_ENCLEN(n) bytes). Returns the
 * encoded length. */
size_t hookd_b64_encode(const unsigned char *in, size_t n, char *out);

/* Decodes base64 text (padding required, no whitespace, canonical: the bits the padding leaves
 * unused are zero) into out, which holds at least 3 * (len / 4) bytes. Returns the decoded
 * length or -1 for malformed input. */
long hookd_b64_decode(const char *in, size_t len, unsigned char *out);

#endif

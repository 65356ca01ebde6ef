/* cursor.c — opaque list cursors (see cursor.h). */
#include "core/cursor.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

/* the check: 7 bytes naming the scope and the list's letter, so a cursor of one list is refused
 * by another. No scope: 7 fixed bytes (the cursors before scopes); a scope: the first 7 bytes of
 * a SHA-256 over a label and it (a tenant's events cursor was taken by another tenant's list: a
 * review). -1 when the hash failed. */
static int check_of(char list, const char *scope, unsigned char out[8]) {
  out[7] = (unsigned char)list;
  if (!scope || !*scope) {
    memcpy(out, "hookdcu", 7);
    return 0;
  }
  static const char label[] = "hookd list cursor scope v1";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
           EVP_DigestUpdate(ctx, label, sizeof label) == 1 && /* (its NUL: a separator) */
           EVP_DigestUpdate(ctx, scope, strlen(scope)) == 1 &&
           EVP_DigestFinal_ex(ctx, md, &n) == 1 && n >= 7;
  EVP_MD_CTX_free(ctx);
  if (ok) memcpy(out, md, 7);
  return ok ? 0 : -1;
}

int hookd_cursor_key_derive(const unsigned char *master, size_t len, hookd_cursor_key *out) {
  static const char label[] = "hookd list cursor v1";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
           EVP_DigestUpdate(ctx, label, sizeof label - 1) == 1 &&
           EVP_DigestUpdate(ctx, master, len) == 1 && EVP_DigestFinal_ex(ctx, md, &n) == 1 &&
           n >= sizeof out->k;
  EVP_MD_CTX_free(ctx);
  if (ok) memcpy(out->k, md, sizeof out->k);
  OPENSSL_cleanse(md, sizeof md);
  return ok ? 0 : -1;
}

/* One block through AES-128 (ECB: a single block, so nothing repeats within it). */
static int block(const hookd_cursor_key *k, int enc, const unsigned char in[16],
                 unsigned char out[16]) {
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  int ok = ctx && EVP_CipherInit_ex(ctx, EVP_aes_128_ecb(), NULL, k->k, NULL, enc) == 1 &&
           EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 && EVP_CipherUpdate(ctx, out, &n, in, 16) == 1 &&
           n == 16;
  EVP_CIPHER_CTX_free(ctx);
  return ok ? 0 : -1;
}

int hookd_cursor_seal(const hookd_cursor_key *k, char list, const char *scope, int64_t seq,
                      char out[HOOKD_CURSOR_LEN + 1]) {
  unsigned char in[16], ct[16];
  for (int i = 0; i < 8; i++) in[i] = (unsigned char)((uint64_t)seq >> (56 - 8 * i));
  if (seq <= 0 || check_of(list, scope, in + 8) != 0 || block(k, 1, in, ct) != 0) return -1;
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[ct[i] >> 4];
    out[2 * i + 1] = hex[ct[i] & 15];
  }
  out[HOOKD_CURSOR_LEN] = '\0';
  return 0;
}

static int nibble(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int hookd_cursor_open(const hookd_cursor_key *k, char list, const char *scope, const char *s,
                      int64_t *seq) {
  unsigned char ct[16], in[16], check[8];
  if (!s || strlen(s) != HOOKD_CURSOR_LEN || check_of(list, scope, check) != 0) return -1;
  for (int i = 0; i < 16; i++) {
    int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    ct[i] = (unsigned char)(hi << 4 | lo);
  }
  if (block(k, 0, ct, in) != 0 || memcmp(in + 8, check, sizeof check) != 0) return -1;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | in[i];
  if (v == 0 || v > INT64_MAX) return -1;
  *seq = (int64_t)v;
  return 0;
}

/* secretbox.h — sealing secrets at rest with AES-256-GCM (OpenSSL).
 *
 * A sealed value is text: "sealed:v1:<key id>:<base64(nonce[12] ‖ ciphertext ‖ tag[16])>".
 * The key id is the first 8 bytes (hex) of SHA-256 over the master key, so a reader can tell
 * which master key sealed a value (master-key rotation re-seals every value). The associated
 * data binds a sealed value to where it belongs (e.g. the endpoint id): moved elsewhere, it
 * does not open. */
#ifndef HOOKD_CORE_SECRETBOX_H
#define HOOKD_CORE_SECRETBOX_H

#include <stdbool.h>
#include <stddef.h>

#define HOOKD_MASTER_KEY_LEN 32
#define HOOKD_KEY_ID_LEN 17 /* 16 hex characters + NUL */

typedef struct hookd_master_key {
  unsigned char key[HOOKD_MASTER_KEY_LEN];
  char id[HOOKD_KEY_ID_LEN];
} hookd_master_key;

/* Parses base64 (or 64 hex characters) of exactly 32 bytes, surrounding whitespace ignored.
 * Returns 0 or -1. */
int hookd_master_key_parse(const char *text, hookd_master_key *out);
/* A new random key and its base64 text (45 bytes incl. NUL). */
int hookd_master_key_generate(hookd_master_key *out, char text[64]);

bool hookd_is_sealed(const char *value);
/* The key id of a sealed value (into id), or -1 if value is not sealed. */
int hookd_sealed_key_id(const char *value, char id[HOOKD_KEY_ID_LEN]);

/* Returns a malloc'd sealed string, or NULL. */
char *hookd_seal(const hookd_master_key *k, const char *plaintext, const char *aad);
/* Returns the malloc'd plaintext, or NULL when the key, the associated data or the bytes do
 * not match (tampering). */
char *hookd_unseal(const hookd_master_key *k, const char *sealed, const char *aad);
/* Overwrites a secret string's bytes with zeros (OPENSSL_cleanse, which the compiler cannot drop
 * as a dead store, unlike a memset right before free). NULL is fine. */
void hookd_secret_wipe(char *s);
/* hookd_secret_wipe, then free: for malloc'd secrets (sealed or plain). NULL is fine. */
void hookd_secret_free(char *s);

#endif

/* sign.h — Standard Webhooks signatures (O13):
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>
 * where key is the base64 part of a "whsec_…" secret. Several signatures may be sent
 * space-separated (secret rotation); a verifier accepts if any matches, in constant time.
 * Also the HMAC helpers the inbound verifiers share. Pure apart from the CSPRNG for new secrets. */
#ifndef HOOKD_CORE_SIGN_H
#define HOOKD_CORE_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOOKD_KEY_MAX 128     /* bytes of HMAC key material we accept */
#define HOOKD_SECRET_MAX 200  /* "whsec_" + base64 of the key, with NUL */
#define HOOKD_SIG_MAX 64      /* "v1," + base64(32) + NUL = 48 */

typedef struct hookd_hmac_key {
  unsigned char bytes[HOOKD_KEY_MAX];
  size_t len;
} hookd_hmac_key;

typedef enum hookd_md { HOOKD_MD_SHA1, HOOKD_MD_SHA256, HOOKD_MD_SHA512 } hookd_md;

/* Parses "whsec_<base64>" (or bare base64). Returns 0 or -1. */
int hookd_secret_parse(const char *secret, hookd_hmac_key *out);

/* New "whsec_" secret with 32 random bytes. Returns 0 or -1. */
int hookd_secret_generate(char out[HOOKD_SECRET_MAX]);

/* SHA-256 of n bytes. Returns 0 or -1. */
int hookd_sha256(const void *p, size_t n, unsigned char out[32]);

/* HMAC over the concatenation of n parts. out must hold 64 bytes; returns the MAC length or
 * -1. */
int hookd_hmac(hookd_md md, const void *key, size_t keylen, const void *const *parts,
               const size_t *lens, size_t n, unsigned char *out);

/* Writes "v1,<base64 sig>" for (msg_id, timestamp, body). Returns 0 or -1. */
int hookd_sign_v1(const hookd_hmac_key *key, const char *msg_id, int64_t timestamp,
                  const void *body, size_t body_len, char out[HOOKD_SIG_MAX]);

enum {
  HOOKD_VERIFY_OK = 0,
  HOOKD_VERIFY_MALFORMED = -1, /* missing header, bad timestamp, no v1 signature */
  HOOKD_VERIFY_STALE = -2,     /* timestamp older than tolerance */
  HOOKD_VERIFY_FUTURE = -3,    /* timestamp further ahead than tolerance */
  HOOKD_VERIFY_MISMATCH = -4,  /* no signature matches any key */
  HOOKD_VERIFY_INTERNAL = -5,  /* hookd could not check (out of memory): not the request's fault */
};

/* Verifies a Standard Webhooks request. sig_header is the full webhook-signature value;
 * timestamp is the webhook-timestamp text. Any of nkeys keys may match. tolerance_s is the
 * replay window in seconds (300 is usual); <= 0 accepts only a timestamp equal to now_s — a
 * typo never turns the window off. Returns a HOOKD_VERIFY_* code. */
int hookd_verify_v1(const hookd_hmac_key *keys, size_t nkeys, const char *msg_id,
                    const char *timestamp, const char *sig_header, const void *body,
                    size_t body_len, int64_t now_s, int64_t tolerance_s);

const char *hookd_verify_strerror(int rc);

/* HOOKD_VERIFY_OK when ts is within tolerance_s of now_s, else _STALE or _FUTURE; exact for any
 * int64_t values (no overflow). tolerance_s <= 0 accepts only ts == now_s. */
int hookd_ts_check(int64_t ts, int64_t now_s, int64_t tolerance_s);

/* ---- Ed25519 (Standard Webhooks "v1a") ----
 * Signing keys are "whsk_" + base64 of the 32-byte private key (seed); public keys "whpk_" +
 * base64 of the 32-byte public key. Signature header entry: "v1a,<base64 64-byte signature>" over
 * "<id>.<timestamp>.<body>". */
#define HOOKD_ED_SECRET_MAX 64 /* "whsk_" + 44 + NUL */

/* A new signing key (out_secret) and its public key (out_public). Returns 0 or -1. */
int hookd_ed25519_generate(char out_secret[HOOKD_ED_SECRET_MAX], char out_public[HOOKD_ED_SECRET_MAX]);
/* The public key of a whsk_ secret. Returns 0 or -1. */
int hookd_ed25519_public(const char *whsk, char out_public[HOOKD_ED_SECRET_MAX]);
/* Writes "v1a,<base64 signature>" (out holds 100 bytes). Returns 0 or -1. */
int hookd_sign_v1a(const char *whsk, const char *msg_id, int64_t timestamp, const void *body,
                   size_t body_len, char out[100]);
/* Whether text is a whpk_ public key (the base64 of 32 bytes that make an Ed25519 key). */
bool hookd_ed25519_public_ok(const char *whpk);
/* Verifies any v1a entry of sig_header with the whpk_ public key. HOOKD_VERIFY_* codes. */
int hookd_verify_v1a(const char *whpk, const char *msg_id, const char *timestamp,
                     const char *sig_header, const void *body, size_t body_len, int64_t now_s,
                     int64_t tolerance_s);
/* Each v1a check hashes the whole body: of a header's entries only the first
 * HOOKD_V1A_MAX_SIGS distinct signatures are checked (a header of a hundred copies would cost
 * a hundred hashes of the body, per key, to anyone who can reach the URL). */
#define HOOKD_V1A_MAX_SIGS 4
/* As hookd_verify_v1a with any of n public keys (the signed text built once); _MALFORMED when
 * none of them is a whpk_ key. */
int hookd_verify_v1a_any(const char *const *whpks, size_t n, const char *msg_id,
                         const char *timestamp, const char *sig_header, const void *body,
                         size_t body_len, int64_t now_s, int64_t tolerance_s);

/* Constant-time equality of two byte strings (length is not secret). */
int hookd_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

#endif

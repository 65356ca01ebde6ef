/* inbound_int.h — helpers shared by the inbound_*.c files (not part of the public contract):
 * result reporting, timestamp parsing and tolerance, hex, a bounded form/query parser, and the
 * per-provider verifier entry points that hookd_in_verify dispatches to. */
#ifndef HOOKD_CORE_INBOUND_INT_H
#define HOOKD_CORE_INBOUND_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/inbound.h"
#include "core/num.h" /* hookd_hex_decode */

#define HOOKD_IN_MAX_SECRETS 16 /* non-empty secrets beyond this many are ignored */
#define HOOKD_IN_MAX_SIGS 16    /* signatures in one header beyond this many are ignored */
#define HOOKD_IN_MAX_PAIRS HOOKD_IN_FORM_MAX_PAIRS /* more pairs: malformed */
#define HOOKD_IN_MAX_FORM HOOKD_IN_FORM_MAX_BYTES  /* form/query text longer: malformed */
#define HOOKD_IN_MAX_URL 65536  /* Twilio URL: the request head bounds it (--max-header-bytes) */

/* Fills out and returns rc. reason is a fixed string (never request data). */
int hookd_in_result(hookd_verify_result *out, int rc, const char *reason);


/* Parses a decimal Unix timestamp (digits only, at most 18). Returns 0 or -1. */
int hookd_in_parse_ts(const char *s, size_t len, int64_t *out);

/* HOOKD_VERIFY_OK, _STALE or _FUTURE for ts against now with tolerance (> 0). */
int hookd_in_check_ts(int64_t ts, int64_t now_s, int64_t tolerance_s);


/* Lowercase hex of in[0..n) into out (2n + 1 bytes). */
void hookd_in_hex_encode(const unsigned char *in, size_t n, char *out);

/* Trims ASCII spaces and tabs from both ends of s[0..*len); returns the new start. */
const char *hookd_in_trim(const char *s, size_t *len);

/* One decoded name/value pair of an application/x-www-form-urlencoded string. */
typedef struct hookd_in_kv {
  const char *k; /* NUL-terminated, decoded */
  size_t klen;
  const char *v;
  size_t vlen;
} hookd_in_kv;

typedef struct hookd_in_form {
  hookd_in_kv *kv;
  size_t n;
  size_t empty_names; /* pairs left out for their empty name ("=x", "="): a signer that skips
                         them leaves them unsigned, so callers refuse them */
  size_t empty_pairs; /* empty pairs ("a=1&&b=2", a trailing '&'): signed by no one either */
  char *mem;          /* decoded text */
} hookd_in_form;

/* Parses "a=1&b=2" with percent-decoding and '+' as space. Pairs with an empty name are
 * left out of kv and counted in empty_names; empty pairs ("a=1&&b=2") are left out and counted
 * in empty_pairs. Returns 0, -1 when s is longer than HOOKD_IN_MAX_FORM, has more than
 * HOOKD_IN_MAX_PAIRS pairs or a bad percent escape, or HOOKD_IN_FORM_NOMEM when memory runs out
 * (hookd's failure, not the request's). */
#define HOOKD_IN_FORM_NOMEM (-2)
int hookd_in_form_parse(const char *s, size_t len, hookd_in_form *out);
void hookd_in_form_free(hookd_in_form *f);
/* First pair with this exact name, or NULL. */
const hookd_in_kv *hookd_in_form_get(const hookd_in_form *f, const char *name);
/* Sorts by name, then value (bytewise). */
void hookd_in_form_sort(hookd_in_form *f);
/* The same by UTF-16 code units (JavaScript's sort), names then values. */
void hookd_in_form_sort_utf16(hookd_in_form *f);
/* s[0..n) percent-encoded into b: ASCII letters, digits, "-_." and the characters of extra kept,
 * a space as '+' when space_plus (PHP's urlencode, VNPay's signers) else %20, the rest %XX in
 * upper case. extra "!~*'()" is encodeURIComponent's set, Node's querystring.escape's. 0, or
 * the hookd_buf error. */
int hookd_in_urlencode(hookd_buf *b, const char *s, size_t n, const char *extra, bool space_plus);

/* The query string of the request: req->query, or the part of req->url after '?' (without a
 * '#' fragment). *len gets its length; NULL when there is none. */
const char *hookd_in_query(const hookd_in_request *req, size_t *len);

/* The Standard Webhooks headers a request is verified by: its webhook-* ones, or, when it has
 * none of them, its svix-* ones (each NULL when absent). The identity takes its id from the same
 * set: an id the signature did not cover never keys a request. */
void hookd_in_standard_headers(const hookd_in_request *req, const char **id, const char **ts,
                               const char **sig);

/* Provider verifiers. Each fills out and returns out->rc. secrets->n >= 1. */
int hookd_in_verify_standard(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                             hookd_verify_result *out);
int hookd_in_verify_stripe(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                           hookd_verify_result *out);
int hookd_in_verify_github(const hookd_in_request *req, const hookd_in_secrets *s,
                           hookd_verify_result *out);
int hookd_in_verify_shopify(const hookd_in_request *req, const hookd_in_secrets *s,
                            hookd_verify_result *out);
int hookd_in_verify_slack(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                          hookd_verify_result *out);
int hookd_in_verify_gitlab(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                           hookd_verify_result *out);
int hookd_in_verify_paddle(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                           hookd_verify_result *out);
int hookd_in_verify_zoom(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                         hookd_verify_result *out);
int hookd_in_verify_generic(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                            const hookd_generic_hmac *g, hookd_verify_result *out);
int hookd_in_verify_twilio(const hookd_in_request *req, const hookd_in_secrets *s,
                           hookd_verify_result *out);
int hookd_in_verify_discord(const hookd_in_request *req, const hookd_in_secrets *s, int64_t tol,
                            hookd_verify_result *out);
int hookd_in_verify_vnpay(const hookd_in_request *req, const hookd_in_secrets *s,
                          hookd_verify_result *out);
int hookd_in_verify_momo(const hookd_in_request *req, const hookd_in_secrets *s,
                         hookd_verify_result *out);

#endif

/* inbound.h — the pure side of inbound webhooks (I1–I3): provider signature verifiers,
 * provider handshakes, event identity and type extraction, and RFC 8785 canonical JSON.
 *
 * Everything here is a pure function over the raw request (method, URL, headers, body bytes)
 * and the current time: no I/O, no global state. Comparisons of secrets and MACs are
 * constant-time (CRYPTO_memcmp). Nothing here logs; reasons written to callers never contain
 * a secret or a signature value.
 *
 * Secret formats per provider (what an operator stores as a source secret):
 *   standard (Standard Webhooks / Svix): "whsec_<base64>"
 *   stripe:  "whsec_…" used as-is (the whole string is the HMAC key, as Stripe does)
 *   github, shopify, slack, gitlab, paddle, zoom, twilio (auth token), vnpay (hash secret),
 *   generic: the secret string, used as raw bytes
 *   discord: the application's Ed25519 public key, 64 hex characters
 *   momo:    "<accessKey>:<secretKey>" (the IPN signature covers the access key)
 * Several secrets may be configured (rotation): a request is valid if any one matches. An empty
 * secret is skipped (a MAC keyed with "" is one anyone can compute). */
#ifndef HOOKD_CORE_INBOUND_H
#define HOOKD_CORE_INBOUND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/sign.h"

typedef enum hookd_provider {
  HOOKD_PROVIDER_STANDARD = 0, /* Standard Webhooks and Svix (webhook-* or svix-* headers) */
  HOOKD_PROVIDER_STRIPE,
  HOOKD_PROVIDER_GITHUB,
  HOOKD_PROVIDER_SHOPIFY,
  HOOKD_PROVIDER_SLACK,
  HOOKD_PROVIDER_GITLAB,
  HOOKD_PROVIDER_TWILIO,
  HOOKD_PROVIDER_PADDLE,
  HOOKD_PROVIDER_ZOOM,
  HOOKD_PROVIDER_DISCORD,
  HOOKD_PROVIDER_VNPAY,
  HOOKD_PROVIDER_MOMO,
  HOOKD_PROVIDER_GENERIC,
  HOOKD_PROVIDER__COUNT
} hookd_provider;

const char *hookd_provider_name(hookd_provider p);              /* "stripe", … */
int hookd_provider_parse(const char *name, hookd_provider *out); /* 0 or -1 */

typedef struct hookd_in_header {
  const char *name;  /* as received; lookups are case-insensitive */
  const char *value;
} hookd_in_header;

/* One provider-facing request, untrusted. */
typedef struct hookd_in_request {
  const char *method;            /* "POST", "GET" */
  const char *url;               /* the full URL the provider called, as it sees it
                                    (scheme://host[:port]/path[?query]) — Twilio signs it; NULL
                                    for the others (nothing else reads it) */
  const char *query;             /* raw query string without '?', NULL if none */
  const hookd_in_header *headers;
  size_t n_headers;
  const char *body;              /* raw bytes, exactly as received */
  size_t body_len;
  int64_t now_s;                 /* current Unix time */
} hookd_in_request;

/* Returns the header with this name (case-insensitive); NULL when it is absent or was sent more
 * than once (ambiguous: a signature header sent twice verifies as missing). */
const char *hookd_in_header_get(const hookd_in_request *req, const char *name);
/* Shopify's header X-Shopify-<name>, else Shopify-<name>: its Events deliveries name them
 * without the X- (sent beside the X- names for now; Shopify's own library reads shopify-*
 * first). */
const char *hookd_in_shopify_header(const hookd_in_request *req, const char *name);

/* True when s[0..n) is an RFC 9110 token (1 or more of letters, digits, !#$%&'*+-.^_`|~): what
 * a header name is made of. */
bool hookd_http_token(const char *s, size_t n);

/* True when s is a header name a request can carry (a token, 1-128 bytes): a source naming
 * another header ("X-Sig\r\nA: b") would never verify. */
bool hookd_in_header_name_valid(const char *s);

/* Configuration of the generic HMAC verifier. */
typedef enum hookd_encoding { HOOKD_ENC_HEX = 0, HOOKD_ENC_BASE64 } hookd_encoding;
/* How a generic source's requests prove themselves. */
typedef enum {
  HOOKD_GENERIC_HMAC = 0, /* an HMAC of a template over the body (the default) */
  HOOKD_GENERIC_TOKEN,    /* a static token in `header` (after `prefix`): one of the secrets */
  HOOKD_GENERIC_BASIC     /* HTTP Basic: Authorization "Basic base64(user:password)", one of
                             the secrets "user:password" */
} hookd_generic_mode;

typedef struct hookd_generic_hmac {
  hookd_generic_mode mode;
  const char *header;            /* header carrying the signature (required) */
  const char *prefix;            /* stripped from the header value before decoding, e.g.
                                    "sha256=" (optional) */
  hookd_md algorithm;            /* SHA-1, SHA-256, SHA-512 */
  hookd_encoding encoding;       /* hex (either case) or base64 */
  const char *template;          /* signed string with {id}, {timestamp}, {body}; NULL =
                                    "{body}" */
  const char *id_header;         /* value of {id} (optional) */
  const char *timestamp_header;  /* value of {timestamp}; when set, tolerance applies */
} hookd_generic_hmac;

/* What is wrong with a generic HMAC template (NULL: nothing; NULL and "" are "{body}"), as the
 * end of a sentence about it: it signs no {body}, two placeholders touch ("{id}{body}": its
 * bytes could be split anew into another id and body under the same signature) but for a
 * {timestamp} second, or a placeholder but a {timestamp} follows {body}. Checked at a source's
 * create and change, and at each request (a source stored before is refused, never verified).
 * At each request, too, an id or a timestamp holding the first character of the text after it
 * in the template is refused, and a timestamp with a leading zero. */
const char *hookd_in_generic_template_problem(const char *tpl);

typedef struct hookd_in_secrets {
  const char *const *v;
  size_t n;
} hookd_in_secrets;

typedef struct hookd_verify_result {
  int rc;               /* HOOKD_VERIFY_OK, _MALFORMED, _STALE, _FUTURE, _MISMATCH (sign.h) */
  char reason[128];     /* for logs and the 401 body: which check failed; no secrets */
  int64_t timestamp_s;  /* the provider's signed timestamp when the scheme has one, else 0 */
  const char *secret;   /* the secret that verified it (one of the caller's), when the scheme
                           tells (Slack, Zoom); else NULL */
  bool signed_without_empty; /* VNPay: the hash matched only the text without the empty vnp_
                                values (as VNPay's Java and .NET samples sign): they are left
                                out of the forward */
} hookd_verify_result;

/* An IPN's signed time (MoMo's responseTime, VNPay's vnp_PayDate), judged: more than
 * HOOKD_IN_IPN_MAX_AGE_S old is HOOKD_VERIFY_STALE, more than HOOKD_IN_IPN_MAX_AHEAD_S ahead
 * HOOKD_VERIFY_FUTURE, else HOOKD_VERIFY_OK. Less than the inbox's shortest retention (4 days):
 * a captured IPN sent again after its record was purged is refused, not a new event
 * (docs/inbound.md). */
#define HOOKD_IN_IPN_MAX_AGE_S (3 * 86400)
#define HOOKD_IN_IPN_MAX_AHEAD_S 86400
int hookd_in_ipn_time(int64_t signed_s, int64_t now_s);

/* A source's tolerance_s as the verifiers apply it: <= 0 is the default (300 s), more than 366
 * days is 366 days. */
int64_t hookd_in_tolerance(int64_t tolerance_s);

/* Verifies req for provider p. tolerance_s applies to schemes with a signed timestamp
 * (standard, stripe, slack, paddle, zoom, discord, generic with timestamp_header); <= 0 uses the
 * provider's default (300 s), more than 366 days is clamped to 366 days. generic is required for
 * HOOKD_PROVIDER_GENERIC, else ignored. Returns out->rc. */
int hookd_in_verify(hookd_provider p, const hookd_in_request *req,
                    const hookd_in_secrets *secrets, int64_t tolerance_s,
                    const hookd_generic_hmac *generic, hookd_verify_result *out);

/* VNPay: the form text to forward for a request hookd_in_verify accepted, appended to out —
 * exactly what vnp_SecureHash signs (the vnp_ parameters but the hash ones, sorted by name, PHP
 * urlencode; without those of an empty value when without_empty is set: the verify result's
 * signed_without_empty), then vnp_SecureHashType (when sent) and vnp_SecureHash. Every other
 * query parameter is left out. signed_len (if not NULL) gets the length of the signed text, the
 * start of what was appended. Returns 0, or -1 when the query does not parse or out's limit is
 * reached (out may then hold part of the text: do not forward it). */
int hookd_in_vnpay_forward(const hookd_in_request *req, bool without_empty, hookd_buf *out,
                           size_t *signed_len);

/* The provider's own event or delivery id (the default identity, I3), written to out:
 *   stripe: body "id"; github: X-GitHub-Delivery; shopify: X-Shopify-Webhook-Id (or
 *   X-Shopify-Event-Id); standard: webhook-id / svix-id; slack: body "event_id"; paddle: body
 *   "event_id" (or "notification_id"); zoom: body "event" + "event_ts" + payload object id (+ a
 *   participant's id), none without an object id; gitlab: Idempotency-Key (or
 *   X-Gitlab-Event-UUID); twilio: I-Twilio-Idempotency-Token, else a message's MessageSid (+
 *   MessageStatus) or a call status callback's CallSid + CallStatus, none for a voice webhook;
 *   discord: body "id"; vnpay: vnp_TxnRef + ":" +
 *   vnp_TransactionNo (query); momo: orderId + ":" + requestId (body); generic: the configured
 *   id_header.
 * body is the parsed JSON body or NULL. Returns 0 when found, 1 when the provider gave none. */
int hookd_in_event_id(hookd_provider p, const hookd_in_request *req, const json_t *body,
                      const hookd_generic_hmac *generic, char *out, size_t outlen);

/* A provider's id as a record shows it and a forward's hookd-provider-event-id carries it:
 * printable ASCII as it is, every other byte as %XX (evt_ñ is evt_%C3%B1, evt_é another; an
 * id that holds "%C3%B1" itself shows alike: for display and search only, never a key), cut
 * before an escape that does not fit cap. The inbox's event_id search writes its value the
 * same way. */
void hookd_in_display_id(const char *in, char *out, size_t cap);

/* The id hookd took for the request before its rule changed, where it did (a Zoom event without
 * an object id: event + event_ts; a Twilio voice webhook without a token: CallSid + CallStatus):
 * looked up as a prior identity, so that a provider's retry across the upgrade is still a
 * duplicate. Returns 0 and fills out, else 1. */
int hookd_in_legacy_event_id(hookd_provider p, const hookd_in_request *req, const json_t *body,
                             char *out, size_t outlen);

/* The event type, when the provider states one (stripe "type", github X-GitHub-Event, shopify
 * X-Shopify-Topic, standard body "type", slack event.type or type, paddle "event_type", zoom
 * "event", gitlab X-Gitlab-Event, discord event.type or "type" as a number, vnpay "payment",
 * momo "payment").
 * Returns 0 when found, 1 otherwise (out = ""), 2 when what holds it could not be read (a
 * Slack form or its payload past hookd's bounds: the type is unread, not absent). */
int hookd_in_event_type(hookd_provider p, const hookd_in_request *req, const json_t *body,
                        char *out, size_t outlen);
/* Whether p's requests name an event type at all (twilio's and generic's never do: an
 * allowlist would filter every one of their events). */
bool hookd_in_provider_has_type(hookd_provider p);

/* Ed25519 (RFC 8032) verification of msg[0..len) under a raw 32-byte public key, on OpenSSL's
 * EVP_PKEY_ED25519 (Discord's scheme uses it). Returns 1 valid, 0 invalid, -1 on error. */
int hookd_ed25519_verify(const unsigned char pub[32], const void *msg, size_t len,
                         const unsigned char sig[64]);

/* Provider handshakes that need a synchronous answer, after verification:
 *   slack url_verification → 200 {"challenge": <challenge>}
 *   zoom endpoint.url_validation → 200 {"plainToken": t, "encryptedToken": hex HMAC-SHA256(
 *     secret, t)} (the first of secrets: pass the one that verified the request)
 *   discord interactions PING (type 1) → 200 {"type": 1}; webhook events PING (type 0) → 204
 * Returns 1 and fills status/body when req is a handshake, 0 otherwise, -1 for a handshake that
 * cannot be answered (Slack's challenge, Zoom's plainToken missing, not a string, or past the
 * answer's 4 KiB): refused, not stored as an event (a review: it was, and forwarded). */
int hookd_in_handshake(hookd_provider p, const hookd_in_request *req, const json_t *body,
                       const hookd_in_secrets *secrets, int *status, hookd_buf *resp_body);

/* The answer a provider expects once its request is stored (a duplicate's too), where hookd's
 * own {"inbox_id", "status", …} would not do:
 *   vnpay   200 {"RspCode":"00","Message":"Confirm Success"}
 *   momo    204
 *   discord a webhook event (type 1 with an "event") 204; an interaction, which must be answered
 *           within 3 s while its handler runs later, a deferred response: {"type":5} for a
 *           command or modal, {"type":6} for a component, no choices for an autocomplete (the
 *           handler follows up through the interaction token); when the record is not
 *           forwarded (filtered, stale, a conflict or a business-key duplicate), a command or
 *           modal gets an ephemeral "not handled" message instead (unforwarded_body), since a
 *           deferred answer nobody follows up shows "thinking…" for 15 minutes
 *   twilio  an empty TwiML <Response> (an incoming message or call takes nothing else)
 *   slack   a form post (slash command, interaction) an empty 200 (a body would be shown);
 *           an options request (block_suggestion, dialog_suggestion) no options, as JSON —
 *           the menu waits for a list, and the application's answer cannot reach Slack
 * Returns 1 and fills *ack (static strings; content_type and body NULL for none), 0 when hookd's
 * own answer is the one to give. The providers' refusals (VNPay 97/99) stay with the caller. */
typedef struct hookd_in_ack {
  int status;
  const char *content_type, *body;
  const char *unforwarded_body; /* the body instead when the record is not forwarded; or NULL */
} hookd_in_ack;
int hookd_in_stored_ack(hookd_provider p, const hookd_in_request *req, const json_t *body,
                        hookd_in_ack *ack);

/* Whether a Content-Type is a form (application/x-www-form-urlencoded, parameters allowed). */
bool hookd_in_is_form(const char *content_type);
/* The bounds of form text (a POST's body, a query) hookd parses: beyond them, too big. */
#define HOOKD_IN_FORM_MAX_PAIRS 256
#define HOOKD_IN_FORM_MAX_BYTES 65536
bool hookd_in_form_too_big(const char *s, size_t len);

/* A JSON string or number as text: strings borrowed, integers with all their digits, reals in
 * ECMAScript form (written into tmp); NULL for anything else (objects, arrays, booleans, null,
 * a non-finite real). */
#define HOOKD_IN_SCALAR_MAX 32
const char *hookd_in_scalar_text(const json_t *v, char tmp[HOOKD_IN_SCALAR_MAX], size_t *len);

/* Looks up a dotted path ("data.object.id", array indices as numbers: "items.0.id"). */
const json_t *hookd_json_path(const json_t *root, const char *path);

/* Builds a composite key from comma-separated paths: "path=value|path=value" with scalar
 * values in canonical form (RFC 8785: strings quoted, numbers in ECMAScript form), appended to
 * out. Returns 0; 1 when a path is missing, null or not a scalar (the name of the first such
 * path in missing); a HOOKD_BUF_* code (< 0) when the key could not be written (out of memory,
 * beyond out's maximum): not a reason to fall back to another identity. */
int hookd_in_composite_key(const json_t *root, const char *paths, hookd_buf *out, char *missing,
                           size_t missing_len);

/* Lowercase hex of the SHA-256 of p[0..n): identity, business and payload keys. Returns 0, or -1
 * (out empty) when the digest failed: a caller must not use a key it could not compute — a
 * constant stand-in would make every event a duplicate of the first. */
int hookd_in_sha256_hex(const void *p, size_t n, char out[65]);
/* A Twilio form's payload hash (hex): its fields but RetryCount, decoded and sorted, as RFC 8785
 * JSON, hashed — the hash its Conversations identity takes (docs/inbound.md), so that a retry,
 * whose RetryCount differs, is a duplicate and not a conflict. 1 when s is no form, names a
 * field twice (hash its bytes then: the fields' object keeps one value) or the hash cannot be
 * written. */
int hookd_in_twilio_form_hash(const char *s, size_t len, char out[65]);
/* The top-level member of provider p's JSON body that a retry of the same event may carry
 * changed, left out of its payload hash (NULL: none). Stripe's pending_webhooks: the event's
 * endpoints not answered yet when it was sent (docs/inbound.md). */
const char *hookd_in_volatile_member(hookd_provider p);

/* RFC 8785 JSON Canonicalization Scheme: object members sorted by their names' UTF-16 code
 * units, numbers in ECMAScript shortest form, strings with minimal escaping, no whitespace. One
 * deliberate deviation (see jcs.c): an integer jansson holds exactly whose magnitude is above
 * 2^53 is written with its exact digits, not rounded through a double as RFC 8785 would, so
 * 9007199254740993 and 9007199254740992 stay distinct. Returns HOOKD_BUF_* codes
 * (-1 also for NaN/Inf, which JSON cannot hold, for invalid UTF-8 and for nesting deeper than
 * 4096). On failure out may hold a partial result. */
int hookd_jcs(const json_t *v, hookd_buf *out);

/* Formats a double as ECMAScript Number.prototype.toString does (RFC 8785 §3.2.2.3); -0 is
 * "0". NaN and infinities, which JSON cannot hold, are written as "null". */
void hookd_jcs_number(double d, char out[32]);

#endif

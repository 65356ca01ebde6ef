/* test_inbound_hmac.c — the HMAC-family inbound verifiers (inbound_hmac.c): Standard Webhooks /
 * Svix, Stripe, GitHub, Shopify, Slack, GitLab, Paddle, Zoom and the generic HMAC. Published
 * vectors where the provider has one (Standard Webhooks, GitHub, Slack); elsewhere the expected
 * value was computed with the openssl command line (the command is in a comment beside it).
 * Every verifier: valid, tampered byte, wrong secret, a second secret matching (rotation),
 * and stale/future timestamps where the scheme has one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/inbound.h"

#define MAXH 8

typedef struct reqb {
  hookd_in_header h[MAXH];
  size_t n;
  hookd_in_request r;
  char body[1024];
} reqb;

static void req_init(reqb *b, const char *body, int64_t now) {
  memset(b, 0, sizeof *b);
  snprintf(b->body, sizeof b->body, "%s", body);
  b->r.method = "POST";
  b->r.url = "https://hooks.example.com/in/src_1";
  b->r.headers = b->h;
  b->r.body = b->body;
  b->r.body_len = strlen(b->body);
  b->r.now_s = now;
}

static void hdr(reqb *b, const char *name, const char *value) {
  assert_true(b->n < MAXH);
  b->h[b->n].name = name;
  b->h[b->n].value = value;
  b->n++;
  b->r.n_headers = b->n;
}

static int run(hookd_provider p, reqb *b, const char *const *secrets, size_t n) {
  hookd_in_secrets s = {secrets, n};
  hookd_verify_result res;
  int rc = hookd_in_verify(p, &b->r, &s, 0, NULL, &res);
  assert_int_equal(rc, res.rc);
  assert_true(strlen(res.reason) > 0);
  return rc;
}

/* Flips one byte of the body. */
static void tamper(reqb *b, size_t at) { b->body[at] ^= 0x01; }

/* ---- Standard Webhooks: the specification's published vector ------------------------------ */

#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_OTHER "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXkh"
#define SW_BODY "{\"test\": 2432232314}"
#define SW_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void standard_headers(reqb *b, const char *prefix) {
  static char names[3][32];
  snprintf(names[0], 32, "%s-id", prefix);
  snprintf(names[1], 32, "%s-timestamp", prefix);
  snprintf(names[2], 32, "%s-signature", prefix);
  hdr(b, names[0], "msg_p5jXN8AQM9LWM0D4loKWxJek");
  hdr(b, names[1], "1614265330");
  hdr(b, names[2], SW_SIG);
}

static void standard(void **st) {
  reqb b;
  const char *one[] = {SW_SECRET}, *wrong[] = {SW_OTHER}, *rot[] = {SW_OTHER, SW_SECRET};
  /* webhook-* and Svix's svix-* header names: the same scheme, the same refusals */
  for (int i = 0; i < 2; i++) {
    req_init(&b, SW_BODY, 1614265330 + 5);
    standard_headers(&b, i ? "svix" : "webhook");
    assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, one, 1), HOOKD_VERIFY_OK);
    assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
    assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, rot, 2), HOOKD_VERIFY_OK);
    b.r.now_s = 1614265330 + 301;
    assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, one, 1), HOOKD_VERIFY_STALE);
    b.r.now_s = 1614265330 - 301;
    assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, one, 1), HOOKD_VERIFY_FUTURE);
    b.r.now_s = 1614265330;
    tamper(&b, 3);
    assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  }

  /* the timestamp is reported */
  req_init(&b, SW_BODY, 1614265330);
  standard_headers(&b, "svix");
  hookd_in_secrets s = {one, 1};
  hookd_verify_result res;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STANDARD, &b.r, &s, 0, NULL, &res), 0);
  assert_int_equal(res.timestamp_s, 1614265330);
  /* more than 8 secrets, the right one last */
  const char *many[10];
  for (int i = 0; i < 9; i++) many[i] = SW_OTHER;
  many[9] = SW_SECRET;
  assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, many, 10), HOOKD_VERIFY_OK);
  /* unusable secrets only */
  const char *bad[] = {"not base64!"};
  assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, bad, 1), HOOKD_VERIFY_MISMATCH);
  /* a key longer than hookd_hmac_key holds (172 base64 characters decode to 129 bytes) */
  char longkey[6 + 172 + 1] = "whsec_";
  memset(longkey + 6, 'A', 172);
  longkey[6 + 172] = '\0';
  const char *toolong[] = {longkey, SW_SECRET};
  assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, toolong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, toolong, 2), HOOKD_VERIFY_OK);
  /* missing headers */
  req_init(&b, SW_BODY, 1614265330);
  hdr(&b, "webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek");
  assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, one, 1), HOOKD_VERIFY_MALFORMED);
}

/* ---- Stripe --------------------------------------------------------------------------------- */

#define ST_SECRET "whsec_stripe_test_secret"
#define ST_BODY "{\"id\":\"evt_1NqV\",\"type\":\"payment_intent.succeeded\"}"
/* printf '%s' '1700000000.{"id":"evt_1NqV","type":"payment_intent.succeeded"}' |
 *   openssl dgst -sha256 -hmac 'whsec_stripe_test_secret' */
#define ST_SIG "150e0802ff1e5c99463e084f1a4979a9d2eaca194a293a2164030f6eccf8fa60"

static void stripe(void **st) {
  reqb b;
  const char *one[] = {ST_SECRET}, *wrong[] = {"whsec_other"}, *rot[] = {"whsec_other", ST_SECRET};
  req_init(&b, ST_BODY, 1700000000);
  hdr(&b, "stripe-signature",
      "t=1700000000,v1=" ST_SIG
      ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39");
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, rot, 2), HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 301;
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_STALE);
  b.r.now_s = 1700000000 - 301;
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_FUTURE);
  b.r.now_s = 1700000000;
  tamper(&b, 10);
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_MISMATCH);

  /* Several v1 during Stripe's own secret rotation: any may match, upper-case hex too. */
  req_init(&b, ST_BODY, 1700000000);
  hdr(&b, "Stripe-Signature",
      "t=1700000000, v1=0000000000000000000000000000000000000000000000000000000000000000, "
      "v1=150E0802FF1E5C99463E084F1A4979A9D2EACA194A293A2164030F6ECCF8FA60");
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_OK);
  /* v0 alone is not accepted */
  req_init(&b, ST_BODY, 1700000000);
  hdr(&b, "Stripe-Signature", "t=1700000000,v0=" ST_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_MALFORMED);
  /* no timestamp / junk timestamp */
  req_init(&b, ST_BODY, 1700000000);
  hdr(&b, "Stripe-Signature", "v1=" ST_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_MALFORMED);
  req_init(&b, ST_BODY, 1700000000);
  hdr(&b, "Stripe-Signature", "t=17000x0000,v1=" ST_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_STRIPE, &b, one, 1), HOOKD_VERIFY_MALFORMED);
  /* a custom tolerance */
  req_init(&b, ST_BODY, 1700000000 + 20);
  hdr(&b, "Stripe-Signature", "t=1700000000,v1=" ST_SIG);
  hookd_in_secrets s = {one, 1};
  hookd_verify_result res;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &s, 10, NULL, &res),
                   HOOKD_VERIFY_STALE);
  assert_null(strstr(res.reason, ST_SIG));
  assert_null(strstr(res.reason, ST_SECRET));
}

/* ---- GitHub: the example in GitHub's "Validating webhook deliveries" docs ------------------- */

#define GH_SECRET "It's a Secret to Everybody"
#define GH_SIG "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

static void github(void **st) {
  reqb b;
  const char *one[] = {GH_SECRET}, *wrong[] = {"It's a Secret to Nobody"},
             *rot[] = {"old secret", GH_SECRET};
  req_init(&b, "Hello, World!", 0);
  hdr(&b, "X-Hub-Signature-256", GH_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, rot, 2), HOOKD_VERIFY_OK);
  tamper(&b, 0);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  req_init(&b, "Hello, World!", 0);
  hdr(&b, "X-Hub-Signature-256",
      "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, one, 1), HOOKD_VERIFY_MALFORMED);
  req_init(&b, "Hello, World!", 0);
  hdr(&b, "X-Hub-Signature-256", "sha256=757107ea0e");
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, one, 1), HOOKD_VERIFY_MALFORMED);
  req_init(&b, "Hello, World!", 0);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, one, 1), HOOKD_VERIFY_MALFORMED);
}

/* ---- Shopify -------------------------------------------------------------------------------- */

#define SH_SECRET "shpss_shopify_test_secret"
#define SH_BODY "{\"id\":820982911946154508,\"email\":\"jon@example.com\"}"
/* printf '%s' '{"id":820982911946154508,"email":"jon@example.com"}' |
 *   openssl dgst -sha256 -hmac 'shpss_shopify_test_secret' -binary | base64 */
#define SH_SIG "S+58/IB8otvy35btFksU2LZeOdUgHfxAm9+dHXijP5c="

static void shopify(void **st) {
  reqb b;
  const char *one[] = {SH_SECRET}, *wrong[] = {"shpss_other"}, *rot[] = {"shpss_other", SH_SECRET};
  req_init(&b, SH_BODY, 0);
  hdr(&b, "X-Shopify-Hmac-Sha256", SH_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, rot, 2), HOOKD_VERIFY_OK);
  tamper(&b, 7);
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  req_init(&b, SH_BODY, 0);
  hdr(&b, "X-Shopify-Hmac-Sha256", "S+58/IB8otvy35btFksU2LZeOdUgHfxAm9+dHXijP5c");
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, one, 1), HOOKD_VERIFY_MALFORMED);
  /* Shopify Events' names, without the X- (shopify-app-js reads them first) */
  req_init(&b, SH_BODY, 0);
  hdr(&b, "shopify-hmac-sha256", SH_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_SHOPIFY, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
}

/* ---- Slack: the worked example in Slack's "Verifying requests from Slack" docs --------------- */

#define SL_SECRET "8f742231b10e8888abcd99yyyzzz85a5"
#define SL_BODY                                                                              \
  "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="     \
  "G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-" \
  "collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%"         \
  "2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121."           \
  "803a0bc887a14d10d2c447fce8b6703c"
#define SL_SIG "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

static void slack(void **st) {
  reqb b;
  const char *one[] = {SL_SECRET}, *wrong[] = {"8f742231b10e8888abcd99yyyzzz85a6"},
             *rot[] = {"previous", SL_SECRET};
  req_init(&b, SL_BODY, 1531420618);
  hdr(&b, "X-Slack-Request-Timestamp", "1531420618");
  hdr(&b, "X-Slack-Signature", SL_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, rot, 2), HOOKD_VERIFY_OK);
  b.r.now_s = 1531420618 + 5 * 60 + 1;
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, one, 1), HOOKD_VERIFY_STALE);
  b.r.now_s = 1531420618 - 5 * 60 - 1;
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, one, 1), HOOKD_VERIFY_FUTURE);
  b.r.now_s = 1531420618 + 5 * 60;
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, one, 1), HOOKD_VERIFY_OK);
  tamper(&b, 100);
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  req_init(&b, SL_BODY, 1531420618);
  hdr(&b, "X-Slack-Request-Timestamp", "1531420618");
  hdr(&b, "X-Slack-Signature",
      "v1=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503");
  assert_int_equal(run(HOOKD_PROVIDER_SLACK, &b, one, 1), HOOKD_VERIFY_MALFORMED);
}

/* ---- GitLab --------------------------------------------------------------------------------- */

static void gitlab(void **st) {
  reqb b;
  const char *one[] = {"glsecret-123"}, *wrong[] = {"glsecret-124"},
             *rot[] = {"glsecret-old", "glsecret-123"}, *prefix[] = {"glsecret-1234"};
  req_init(&b, "{\"object_kind\":\"push\"}", 0);
  hdr(&b, "X-Gitlab-Token", "glsecret-123");
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, rot, 2), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, prefix, 1), HOOKD_VERIFY_MISMATCH);
  /* the token is the whole check: a tampered token fails */
  req_init(&b, "{\"object_kind\":\"push\"}", 0);
  hdr(&b, "X-Gitlab-Token", "glsecret-12");
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  req_init(&b, "{}", 0);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, one, 1), HOOKD_VERIFY_MALFORMED);

  /* A hook with a signing token (GitLab's Standard Webhooks signature: webhook-id = its
   * Idempotency-Key, HMAC-SHA256 over id.timestamp.body): the Standard Webhooks vector, with or
   * without an X-Gitlab-Token beside it. The signature decides: a tampered body is refused even
   * with a valid token; without a whsec_ secret the token is the check, as before. */
  const char *signing[] = {SW_SECRET}, *both[] = {"glsecret-123", SW_SECRET}, *other[] = {SW_OTHER};
  req_init(&b, SW_BODY, 1614265330 + 5);
  standard_headers(&b, "webhook");
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, signing, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, other, 1), HOOKD_VERIFY_MISMATCH);
  hdr(&b, "X-Gitlab-Token", "glsecret-123");
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, both, 2), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, one, 1), HOOKD_VERIFY_OK);
  tamper(&b, 3);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, both, 2), HOOKD_VERIFY_MISMATCH);
  b.r.now_s = 1614265330 + 301;
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, signing, 1), HOOKD_VERIFY_STALE);
  b.r.now_s = 1614265330 - 301;
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, signing, 1), HOOKD_VERIFY_FUTURE);
  /* with a signing token, a request without its signature is refused, however good its token
   * (one captured request's token would carry any body) — and the signing token is no token */
  req_init(&b, "{\"object_kind\":\"push\",\"tampered\":1}", 0);
  hdr(&b, "X-Gitlab-Token", "glsecret-123");
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, both, 2), HOOKD_VERIFY_MALFORMED);
  req_init(&b, "{}", 0);
  hdr(&b, "X-Gitlab-Token", SW_SECRET);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, both, 2), HOOKD_VERIFY_MALFORMED);
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, signing, 1), HOOKD_VERIFY_MALFORMED);
  /* beside a signing token, a plain token is no signing key, even one that reads as base64
   * (GitLab sends it in clear: whoever saw one request could sign any body with it).
   * Standard Webhooks' message signed with the key the token reads as ("glsecret+123/abc" =
   * base64 of 825b1e72b7adfb5db7fda6dc): printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.
   * {"test": 2432232314}' | openssl dgst -sha256 -mac HMAC -macopt hexkey:825b1e72b7adfb5db7fda6dc
   * -binary | base64 */
#define TOKEN_SIG "WmyJRIh6opo50gd3usJ5B3VDxJ5Wr+X2IGoElgss0U8="
  const char *b64tok[] = {"glsecret+123/abc", SW_SECRET};
  req_init(&b, SW_BODY, 1614265330 + 5);
  hdr(&b, "webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek");
  hdr(&b, "webhook-timestamp", "1614265330");
  hdr(&b, "webhook-signature", "v1," TOKEN_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_STANDARD, &b, b64tok, 1), HOOKD_VERIFY_OK); /* (the vector) */
  assert_int_equal(run(HOOKD_PROVIDER_GITLAB, &b, b64tok, 2), HOOKD_VERIFY_MISMATCH);
}

/* ---- Paddle Billing ------------------------------------------------------------------------- */

#define PD_SECRET "pdl_ntfset_01_test_secret"
#define PD_BODY "{\"event_id\":\"evt_01h8\",\"event_type\":\"transaction.completed\"}"
/* printf '%s' '1700000000:{"event_id":"evt_01h8","event_type":"transaction.completed"}' |
 *   openssl dgst -sha256 -hmac 'pdl_ntfset_01_test_secret' */
#define PD_SIG "6f81f9f9150e2c1ef45fd14b76a4c1e51a689157fc83fc188b36d7b62ed2be5e"

static void paddle(void **st) {
  reqb b;
  const char *one[] = {PD_SECRET}, *wrong[] = {"pdl_other"}, *rot[] = {"pdl_other", PD_SECRET};
  req_init(&b, PD_BODY, 1700000000);
  hdr(&b, "Paddle-Signature", "ts=1700000000;h1=" PD_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, rot, 2), HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 301;
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, one, 1), HOOKD_VERIFY_STALE);
  b.r.now_s = 1700000000 - 301;
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, one, 1), HOOKD_VERIFY_FUTURE);
  b.r.now_s = 1700000000;
  tamper(&b, 5);
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  /* several h1 (Paddle's secret rotation) */
  req_init(&b, PD_BODY, 1700000000);
  hdr(&b, "Paddle-Signature",
      "ts=1700000000;h1=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa;h1=" PD_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, one, 1), HOOKD_VERIFY_OK);
  req_init(&b, PD_BODY, 1700000000);
  hdr(&b, "Paddle-Signature", "h1=" PD_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_PADDLE, &b, one, 1), HOOKD_VERIFY_MALFORMED);
}

/* ---- Zoom ----------------------------------------------------------------------------------- */

#define ZM_SECRET "zoom_test_secret_token"
#define ZM_BODY                                                                                \
  "{\"event\":\"meeting.started\",\"event_ts\":1700000000123,\"payload\":{\"object\":{\"id\":" \
  "\"85746065432\"}}}"
/* printf '%s' 'v0:1700000000:<ZM_BODY>' | openssl dgst -sha256 -hmac 'zoom_test_secret_token' */
#define ZM_SIG "v0=bc1711ca7d8c1f16e93314ed1327eb0ac4def9bd2856545a8b2becc761c1dcd0"

static void zoom(void **st) {
  reqb b;
  const char *one[] = {ZM_SECRET}, *wrong[] = {"zoom_other"}, *rot[] = {"zoom_other", ZM_SECRET};
  req_init(&b, ZM_BODY, 1700000000);
  hdr(&b, "x-zm-request-timestamp", "1700000000");
  hdr(&b, "x-zm-signature", ZM_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, rot, 2), HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 301;
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, one, 1), HOOKD_VERIFY_STALE);
  b.r.now_s = 1700000000 - 301;
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, one, 1), HOOKD_VERIFY_FUTURE);
  b.r.now_s = 1700000000;
  tamper(&b, 20);
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, one, 1), HOOKD_VERIFY_MISMATCH);
  /* a timestamp in milliseconds is signed as sent and checked as seconds:
   * printf '%s' 'v0:1700000000123:<ZM_BODY>' | openssl dgst -sha256 -hmac 'zoom_test_secret_token' */
  req_init(&b, ZM_BODY, 1700000000);
  hdr(&b, "x-zm-request-timestamp", "1700000000123");
  hdr(&b, "x-zm-signature", "v0=90c68f28053506b77a57d8ab59a753b3b866d0cbf4fd8d25bd28edc20b35bfb3");
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, one, 1), HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 301;
  assert_int_equal(run(HOOKD_PROVIDER_ZOOM, &b, one, 1), HOOKD_VERIFY_STALE);
}

/* ---- Generic HMAC --------------------------------------------------------------------------- */

#define GN_SECRET "generic-test-secret"
#define GN_BODY "{\"hello\":\"world\"}"
/* printf '%s' 'msg_42.1700000000.{"hello":"world"}' | openssl dgst -sha512 -hmac 'generic-test-secret' */
#define GN_SIG512                                                                                \
  "49fad4a918ab75905aba3e4b84773f0695d889b24c10853c736386788ffb95df16c6ed980bf7e847ba4aedcba78e" \
  "0210365cdc1d53e6139555befb579b9bf539"
/* printf '%s' '{"hello":"world"}' | openssl dgst -sha1 -hmac 'generic-test-secret' -binary | base64 */
#define GN_SIG1 "g2zbfwinoaHx6Y8z2/BFHeDzInc="

static int run_generic(reqb *b, const hookd_generic_hmac *g, const char *const *secrets, size_t n) {
  hookd_in_secrets s = {secrets, n};
  hookd_verify_result res;
  return hookd_in_verify(HOOKD_PROVIDER_GENERIC, &b->r, &s, 0, g, &res);
}

static void generic(void **st) {
  reqb b;
  const char *one[] = {GN_SECRET}, *wrong[] = {"generic-other"},
             *rot[] = {"generic-other", GN_SECRET};
  hookd_generic_hmac g = {.header = "X-Signature",
                          .prefix = "sha512=",
                          .algorithm = HOOKD_MD_SHA512,
                          .encoding = HOOKD_ENC_HEX,
                          .template = "{id}.{timestamp}.{body}",
                          .id_header = "X-Id",
                          .timestamp_header = "X-Timestamp"};
  req_init(&b, GN_BODY, 1700000000);
  hdr(&b, "X-Id", "msg_42");
  hdr(&b, "X-Timestamp", "1700000000");
  hdr(&b, "x-signature", "sha512=" GN_SIG512);
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run_generic(&b, &g, wrong, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run_generic(&b, &g, rot, 2), HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 301;
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_STALE);
  b.r.now_s = 1700000000 - 301;
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_FUTURE);
  b.r.now_s = 1700000000;
  tamper(&b, 3);
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MISMATCH);
  /* the id is signed too */
  req_init(&b, GN_BODY, 1700000000);
  hdr(&b, "X-Id", "msg_43");
  hdr(&b, "X-Timestamp", "1700000000");
  hdr(&b, "x-signature", "sha512=" GN_SIG512);
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MISMATCH);
  /* missing id header the template needs */
  req_init(&b, GN_BODY, 1700000000);
  hdr(&b, "X-Timestamp", "1700000000");
  hdr(&b, "x-signature", "sha512=" GN_SIG512);
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MALFORMED);

  /* SHA-1, base64, body only, no prefix */
  hookd_generic_hmac g1 = {
      .header = "X-Hook-Sig", .algorithm = HOOKD_MD_SHA1, .encoding = HOOKD_ENC_BASE64};
  req_init(&b, GN_BODY, 0);
  hdr(&b, "X-Hook-Sig", GN_SIG1);
  assert_int_equal(run_generic(&b, &g1, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run_generic(&b, &g1, rot, 2), HOOKD_VERIFY_OK);
  assert_int_equal(run_generic(&b, &g1, wrong, 1), HOOKD_VERIFY_MISMATCH);
  tamper(&b, 4);
  assert_int_equal(run_generic(&b, &g1, one, 1), HOOKD_VERIFY_MISMATCH);
  /* hex signature given to a base64 configuration */
  req_init(&b, GN_BODY, 0);
  hdr(&b, "X-Hook-Sig", "836cdb7f08a7a1a1f1e98f33dbf0451de0f32277");
  assert_int_equal(run_generic(&b, &g1, one, 1), HOOKD_VERIFY_MALFORMED);
  /* no configuration */
  hookd_in_secrets s = {one, 1};
  hookd_verify_result res;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_GENERIC, &b.r, &s, 0, NULL, &res),
                   HOOKD_VERIFY_MALFORMED);
}

/* An empty secret keys the MAC with "": a signature anyone can compute is refused, and the
 * source's other secrets still verify.
 *   printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac ''
 *   printf '%s' '{"hello":"world"}' | openssl dgst -sha1 -hmac '' -binary | base64 */
#define EMPTY_KEY_GH "sha256=2bbcfa9524f3218c7a34b30e6936f8b1a4516cb097f1a85a1c7d98b5977ec769"
#define EMPTY_KEY_GN "pMV9PCTrPfm3U+tUlXqk+fGZHHo="

static void empty_secrets(void **st) {
  reqb b;
  const char *empty[] = {""}, *two_empty[] = {"", ""}, *with_real[] = {"", GH_SECRET},
             *gn_with_real[] = {"", GN_SECRET};
  req_init(&b, "Hello, World!", 0);
  hdr(&b, "X-Hub-Signature-256", EMPTY_KEY_GH);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, empty, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, two_empty, 2), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, with_real, 2), HOOKD_VERIFY_MISMATCH);
  req_init(&b, "Hello, World!", 0);
  hdr(&b, "X-Hub-Signature-256", GH_SIG);
  assert_int_equal(run(HOOKD_PROVIDER_GITHUB, &b, with_real, 2), HOOKD_VERIFY_OK);

  hookd_generic_hmac g1 = {
      .header = "X-Hook-Sig", .algorithm = HOOKD_MD_SHA1, .encoding = HOOKD_ENC_BASE64};
  req_init(&b, GN_BODY, 0);
  hdr(&b, "X-Hook-Sig", EMPTY_KEY_GN);
  assert_int_equal(run_generic(&b, &g1, empty, 1), HOOKD_VERIFY_MISMATCH);
  assert_int_equal(run_generic(&b, &g1, gn_with_real, 2), HOOKD_VERIFY_MISMATCH);
  req_init(&b, GN_BODY, 0);
  hdr(&b, "X-Hook-Sig", GN_SIG1);
  assert_int_equal(run_generic(&b, &g1, gn_with_real, 2), HOOKD_VERIFY_OK);
}

/* A tolerance up to INT64_MAX is clamped to 366 days: it neither overflows now ± tolerance
 * (UBSan aborts the test on that) nor fails closed on a valid request. */
static void tolerance_extremes(void **st) {
  reqb b;
  const char *st_one[] = {ST_SECRET}, *sw_one[] = {SW_SECRET};
  hookd_in_secrets sts = {st_one, 1}, sws = {sw_one, 1};
  hookd_verify_result res;
  req_init(&b, ST_BODY, 1700000000 + 20);
  hdr(&b, "Stripe-Signature", "t=1700000000,v1=" ST_SIG);
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, INT64_MAX, NULL, &res),
                   HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 - 20;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, INT64_MAX, NULL, &res),
                   HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 365 * 86400;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, INT64_MAX, NULL, &res),
                   HOOKD_VERIFY_OK);
  b.r.now_s = 1700000000 + 367 * 86400;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, INT64_MAX, NULL, &res),
                   HOOKD_VERIFY_STALE);
  b.r.now_s = 1700000000 - 367 * 86400;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, INT64_MAX, NULL, &res),
                   HOOKD_VERIFY_FUTURE);
  /* a clock at either end of int64_t */
  b.r.now_s = INT64_MIN;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, 300, NULL, &res),
                   HOOKD_VERIFY_FUTURE);
  b.r.now_s = INT64_MAX;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STRIPE, &b.r, &sts, 300, NULL, &res),
                   HOOKD_VERIFY_STALE);
  /* Standard Webhooks checks its timestamp in sign.c (hookd_verify_v1) */
  req_init(&b, SW_BODY, 1614265330 + 5);
  standard_headers(&b, "webhook");
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STANDARD, &b.r, &sws, INT64_MAX, NULL, &res),
                   HOOKD_VERIFY_OK);
  b.r.now_s = INT64_MIN;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_STANDARD, &b.r, &sws, 300, NULL, &res),
                   HOOKD_VERIFY_FUTURE);
}

/* A configured timestamp or id header the template leaves out would be trusted unsigned: a
 * captured body, signed once, replayed a year later under a fresh timestamp and id passed. A
 * template without {body} leaves the body unsigned. Both configurations are refused. */
static void generic_unsigned_parts(void **st) {
  reqb b;
  const char *one[] = {GN_SECRET};
  /* printf '%s' '{"hello":"world"}' | openssl dgst -sha256 -hmac 'generic-test-secret' */
  const char *body_sig = "004ac9753d2830fc7a306585c84e0095f895250fee34d4a8605cc6d72cafb612";
  hookd_generic_hmac g = {.header = "X-Sig",
                          .algorithm = HOOKD_MD_SHA256,
                          .encoding = HOOKD_ENC_HEX,
                          .timestamp_header = "X-Ts",
                          .id_header = "X-Id"};
  req_init(&b, GN_BODY, 1731536000);
  hdr(&b, "X-Sig", body_sig);
  hdr(&b, "X-Ts", "1731536000");
  hdr(&b, "X-Id", "replay-2");
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MALFORMED);
  g.template = "{timestamp}.{body}"; /* the id still unsigned */
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MALFORMED);
  g.template = "{id}.{body}"; /* the timestamp still unsigned */
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MALFORMED);
  g.template = "{id}.{timestamp}"; /* the body unsigned */
  assert_int_equal(run_generic(&b, &g, one, 1), HOOKD_VERIFY_MALFORMED);
  hookd_generic_hmac nobody = {
      .header = "X-Sig", .algorithm = HOOKD_MD_SHA256, .encoding = HOOKD_ENC_HEX, .template = "x"};
  assert_int_equal(run_generic(&b, &nobody, one, 1), HOOKD_VERIFY_MALFORMED);
  /* the body alone, with neither header configured, is what such a sender signs */
  hookd_generic_hmac plain = {
      .header = "X-Sig", .algorithm = HOOKD_MD_SHA256, .encoding = HOOKD_ENC_HEX};
  assert_int_equal(run_generic(&b, &plain, one, 1), HOOKD_VERIFY_OK);
}

static void names_and_headers(void **st) {
  hookd_provider p;
  for (int i = 0; i < HOOKD_PROVIDER__COUNT; i++) {
    assert_int_equal(hookd_provider_parse(hookd_provider_name((hookd_provider)i), &p), 0);
    assert_int_equal(p, i);
  }
  assert_int_equal(hookd_provider_parse("svix", &p), 0);
  assert_int_equal(p, HOOKD_PROVIDER_STANDARD);
  assert_int_equal(hookd_provider_parse("nope", &p), -1);
  assert_string_equal(hookd_provider_name(HOOKD_PROVIDER_STRIPE), "stripe");

  reqb b;
  req_init(&b, "", 0);
  hdr(&b, "Content-Type", "a");
  assert_string_equal(hookd_in_header_get(&b.r, "CONTENT-TYPE"), "a");
  assert_null(hookd_in_header_get(&b.r, "X-None"));
  /* sent twice: ambiguous (a proxy may have read the other one), so as if absent */
  hdr(&b, "content-type", "b");
  assert_null(hookd_in_header_get(&b.r, "Content-Type"));
  /* GitHub's example, its signature header sent once, then a second time */
  reqb g;
  req_init(&g, "Hello, World!", 0);
  hdr(&g, "X-Hub-Signature-256",
      "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
  const char *gh[] = {"It's a Secret to Everybody"};
  hookd_in_secrets one = {gh, 1};
  hookd_verify_result vr;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_GITHUB, &g.r, &one, 0, NULL, &vr),
                   HOOKD_VERIFY_OK);
  hdr(&g, "X-Hub-Signature-256", "sha256=00");
  assert_int_not_equal(hookd_in_verify(HOOKD_PROVIDER_GITHUB, &g.r, &one, 0, NULL, &vr),
                       HOOKD_VERIFY_OK);
  assert_string_equal(vr.reason,
                      "github: X-Hub-Signature-256 sent twice (a proxy may have read the other)");
  /* a reason naming two headers: the one sent twice is the one named, the second too */
  reqb sl;
  req_init(&sl, "{}", 0);
  hdr(&sl, "X-Slack-Signature", "v0=00");
  hdr(&sl, "X-Slack-Request-Timestamp", "1");
  hdr(&sl, "x-slack-request-timestamp", "2");
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_SLACK, &sl.r, &one, 0, NULL, &vr),
                   HOOKD_VERIFY_MALFORMED);
  assert_string_equal(vr.reason, "slack: X-Slack-Request-Timestamp sent twice (a proxy may have "
                                 "read the other)");

  /* no secrets configured */
  hookd_in_secrets none = {NULL, 0};
  hookd_verify_result res;
  assert_int_equal(hookd_in_verify(HOOKD_PROVIDER_GITHUB, &b.r, &none, 0, NULL, &res),
                   HOOKD_VERIFY_MISMATCH);
}

/* Generic credentials (no signature): a static token, HTTP Basic. */
/* A template whose bytes split one way only (hookd_in_generic_template_problem). */
static void generic_template_splits_one_way(void **st) {
  (void)st;
  const char *fine[] = {NULL, "", "{body}", "{id}.{timestamp}.{body}", "v0:{timestamp}\n{body}",
                        "{timestamp}.{body}.end", "POSThttps://h/in/src_x{body}{timestamp}",
                        "{id}{timestamp}.{body}"};
  for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
    assert_null(hookd_in_generic_template_problem(fine[i]));
  assert_string_equal(hookd_in_generic_template_problem("{id}.{timestamp}"),
                      "does not sign {body}");
  const char *touching[] = {"{id}{body}", "{timestamp}{id}.{body}", "x{timestamp}{body}"};
  for (size_t i = 0; i < sizeof touching / sizeof *touching; i++)
    assert_non_null(strstr(hookd_in_generic_template_problem(touching[i]), "literal text"));
  assert_non_null(strstr(hookd_in_generic_template_problem("{timestamp}.{body}.{id}"), "last"));
}

static void generic_credentials(void **st) {
  (void)st;
  reqb b;
  const char *one[] = {"tok-123"}, *rot[] = {"tok-old", "tok-123"}, *longer[] = {"tok-1234"};
  hookd_generic_hmac tok = {.mode = HOOKD_GENERIC_TOKEN, .header = "X-Api-Key"};
  req_init(&b, "{}", 0);
  hdr(&b, "X-Api-Key", "tok-123");
  assert_int_equal(run_generic(&b, &tok, one, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run_generic(&b, &tok, rot, 2), HOOKD_VERIFY_OK);
  assert_int_equal(run_generic(&b, &tok, longer, 1), HOOKD_VERIFY_MISMATCH);
  req_init(&b, "{}", 0);
  assert_int_equal(run_generic(&b, &tok, one, 1), HOOKD_VERIFY_MALFORMED); /* no header */
  /* with a prefix: Authorization: Bearer … */
  hookd_generic_hmac bearer = {.mode = HOOKD_GENERIC_TOKEN, .header = "Authorization",
                               .prefix = "Bearer "};
  req_init(&b, "{}", 0);
  hdr(&b, "Authorization", "Bearer tok-123");
  assert_int_equal(run_generic(&b, &bearer, one, 1), HOOKD_VERIFY_OK);
  req_init(&b, "{}", 0);
  hdr(&b, "Authorization", "tok-123");
  assert_int_equal(run_generic(&b, &bearer, one, 1), HOOKD_VERIFY_MALFORMED);
  /* HTTP Basic: "user:pass" is dXNlcjpwYXNz */
  const char *cred[] = {"user:pass"}, *other[] = {"user:pas"};
  hookd_generic_hmac basic = {.mode = HOOKD_GENERIC_BASIC, .header = "Authorization"};
  req_init(&b, "{}", 0);
  hdr(&b, "Authorization", "Basic dXNlcjpwYXNz");
  assert_int_equal(run_generic(&b, &basic, cred, 1), HOOKD_VERIFY_OK);
  assert_int_equal(run_generic(&b, &basic, other, 1), HOOKD_VERIFY_MISMATCH);
  req_init(&b, "{}", 0);
  hdr(&b, "Authorization", "basic dXNlcjpwYXNz"); /* the scheme is case-insensitive */
  assert_int_equal(run_generic(&b, &basic, cred, 1), HOOKD_VERIFY_OK);
  static const char *const bad[] = {"Basic dXNlcjpwYXN", "Basic !!!!", "Basic dXNlcg==",
                                    "Bearer dXNlcjpwYXNz", "Basic "};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    req_init(&b, "{}", 0);
    hdr(&b, "Authorization", bad[i]);
    assert_int_equal(run_generic(&b, &basic, cred, 1), HOOKD_VERIFY_MALFORMED);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(standard), cmocka_unit_test(stripe),
      cmocka_unit_test(github),   cmocka_unit_test(shopify),
      cmocka_unit_test(slack),    cmocka_unit_test(gitlab),
      cmocka_unit_test(paddle),   cmocka_unit_test(zoom),
      cmocka_unit_test(generic),  cmocka_unit_test(names_and_headers),
      cmocka_unit_test(tolerance_extremes), cmocka_unit_test(empty_secrets),
      cmocka_unit_test(generic_unsigned_parts), cmocka_unit_test(generic_credentials),
      cmocka_unit_test(generic_template_splits_one_way),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

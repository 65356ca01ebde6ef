/* test_redact.c — response excerpts masked before they are stored (O3): each kind of secret
 * and personal datum, the text around them kept, look-alikes left alone, and a hostile input
 * that must stay linear. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "core/redact.h"

#define HOOKD_EXCERPT_TEST_LEN 4352 /* what an attempt reads of a response */

static char got[8192];

static const char *R(const char *in) {
  hookd_buf b;
  hookd_buf_init(&b, sizeof got - 1);
  assert_int_equal(hookd_redact(in, strlen(in), &b), HOOKD_BUF_OK);
  snprintf(got, sizeof got, "%s", hookd_buf_str(&b));
  hookd_buf_free(&b);
  return got;
}

static void named_values(void **s) {
  assert_string_equal(R("{\"error\":\"bad\",\"password\":\"hunter2\",\"n\":1}"),
                      "{\"error\":\"bad\",\"password\":\"[redacted]\",\"n\":1}");
  assert_string_equal(R("{\"Access_Token\" : \"a\\\"b\"}"), "{\"Access_Token\" : \"[redacted]\"}");
  assert_string_equal(R("token=abc123&x=1"), "token=[redacted]&x=1");
  /* the sensitive word anywhere in the field's name, in any spelling */
  assert_string_equal(R("{\"accessToken\":\"abc123\",\"clientSecret\":\"s3\",\"id\":7}"),
                      "{\"accessToken\":\"[redacted]\",\"clientSecret\":\"[redacted]\",\"id\":7}");
  assert_string_equal(R("aws_secret_access_key=wJalrXUtnFEMI x-api-key: k1 PASSWORD_HASH=$2b$"),
                      "aws_secret_access_key=[redacted] x-api-key: [redacted] PASSWORD_HASH=[redacted]");
  /* an authorization header's value, whatever its scheme, to the end of its line */
  assert_string_equal(R("Authorization: Bot MTk4.Nj-9 x\r\nHost: h"),
                      "Authorization: [redacted]\r\nHost: h");
  assert_string_equal(R("api-key: k-9 rest"), "api-key: [redacted] rest");
  /* signatures: a header's value to the end of its line, blanks and commas too; a form field's
   * to its '&'; a JSON string whole */
  assert_string_equal(R("webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= "
                        "v1,bm9wZQ==\r\nwebhook-id: msg_1"),
                      "webhook-signature: [redacted]\r\nwebhook-id: msg_1");
  assert_string_equal(R("Stripe-Signature: t=1492774577,v1=5257a869e7,v0=6ffbb59b2300\nok"),
                      "Stripe-Signature: [redacted]\nok");
  assert_string_equal(R("{\"x-hub-signature-256\":\"sha256=757107ea0eb2509f\",\"n\":1}"),
                      "{\"x-hub-signature-256\":\"[redacted]\",\"n\":1}");
  assert_string_equal(R("Paddle-Signature: ts=1671552777;h1=eb4d0dc8853be92b7f063b9f\nx: 1"),
                      "Paddle-Signature: [redacted]\nx: 1");
  assert_string_equal(R("X-Shopify-Hmac-Sha256: 2cVhHi3vY4jzEoO3ypc5qZ3Vp5E="),
                      "X-Shopify-Hmac-Sha256: [redacted]");
  assert_string_equal(R("vnp_Amount=100&vnp_SecureHash=ab12cd34ef56aa99&vnp_TxnRef=7"),
                      "vnp_Amount=100&vnp_SecureHash=[redacted]&vnp_TxnRef=7");
  /* prose naming one is kept: an error about the signature is the diagnostic people need */
  assert_string_equal(R("{\"error\":\"invalid signature\"}"), "{\"error\":\"invalid signature\"}");
  assert_string_equal(R("status=error signature=ok reason=amount_mismatch order=A-17"),
                      "status=error signature=ok reason=amount_mismatch order=A-17");
  assert_string_equal(R("Error: invalid signature: clock skew 42s"),
                      "Error: invalid signature: clock skew 42s");
  assert_string_equal(R("{\"signature_valid\": false, \"count\": 3} noSignature=true; user=bob"),
                      "{\"signature_valid\": false, \"count\": 3} noSignature=true; user=bob");
  assert_string_equal(R("{\"signature\":\"expired at 12:00\"}"), "{\"signature\":\"expired at 12:00\"}");
  assert_string_equal(R("{\"signature\":\"9f86d081884c7d659a2feaa0c55ad015\"}"),
                      "{\"signature\":\"[redacted]\"}");
  /* escaped as serialisers write them (PHP's \/, .NET's \u002B), percent-encoded, after a tab */
  assert_string_equal(R("{\"X-Shopify-Hmac-Sha256\":\"2cVhHi3vY4\\/tiV9q5E=\"}"),
                      "{\"X-Shopify-Hmac-Sha256\":\"[redacted]\"}");
  assert_string_equal(R("{\"sig_hmac\":\"RSOYDt4T1c\\u002BUTdK1PDd93\"}"), "{\"sig_hmac\":\"[redacted]\"}");
  assert_string_equal(R("x_hub_signature_256=sha256%3D757107ea0eb2509f&a=1"),
                      "x_hub_signature_256=[redacted]&a=1");
  assert_string_equal(R("X-Twilio-Signature=RSOYDt4T1cUTdK1PDd93%2FVVr8B8%3D&b=2"),
                      "X-Twilio-Signature=[redacted]&b=2");
  assert_string_equal(R("Stripe-Signature:\tt=1492774577,v1=5257a869e7\n"), "Stripe-Signature:\t[redacted]\n");
  assert_string_equal(R("X-Signature: sha256 9f86d081884c7d65\n"), "X-Signature: [redacted]\n");
  assert_string_equal(R("signature: abcdefghijklmnopqrstuvwxyzabcdef"), "signature: [redacted]");
  /* written otherwise (a review): .NET's \u0022 quotes, JSON in a string in a string, Ruby's
   * and PHP's =>, a field inside a percent-encoded URL */
  assert_string_equal(
      R("{\"detail\":\"{\\u0022password\\u0022:\\u0022hunter2\\u0022,\\u0022api_key\\u0022:"
        "\\u0022k-123456\\u0022}\"}"),
      "{\"detail\":\"{\\u0022password\\u0022:\\u0022[redacted]\\u0022,\\u0022api_key\\u0022:"
      "\\u0022[redacted]\\u0022}\"}");
  assert_string_equal(R("{\"user\"=>{\"password\"=>\"hunter2\", \"api_token\"=>\"tok_abc123\"}}"),
                      "{\"user\"=>{\"password\"=>\"[redacted]\", \"api_token\"=>\"[redacted]\"}}");
  assert_string_equal(R("password => hunter2"), "password => [redacted]");
  /* PHP's print_r, an XML element, a JSON name with an escaped letter */
  assert_string_equal(R("Array\n(\n    [password] => hunter2\n    [user] => bob\n)"),
                      "Array\n(\n    [password] => [redacted]\n    [user] => bob\n)");
  assert_string_equal(R("<auth><user>bob</user><password>hunter2</password></auth>"),
                      "<auth><user>bob</user><password>[redacted]</password></auth>");
  assert_string_equal(R("{\"pass\\u0077ord\":\"hunter2\"}"), "{\"pass\\u0077ord\":\"[redacted]\"}");
  /* a URL's credentials, whatever its host; keys with a known prefix */
  assert_string_equal(R("dial postgres://app:hunter2xyz@db:5432/app failed"),
                      "dial postgres://[redacted]@db:5432/app failed");
  assert_string_equal(R("{\"url\":\"https://admin:S3cretPass@10.0.0.5/hook\"}"),
                      "{\"url\":\"https://[redacted]@10.0.0.5/hook\"}");
  assert_string_equal(R("see https://example.com/a@b and mailto://x"),
                      "see https://example.com/a@b and mailto://x");
  assert_string_equal(R("key=AIzaSyD-1234567890abcdefghijklmnopqrs used"),
                      "key=[redacted] used");
  assert_string_equal(R("token glpat-abcdefghij1234567890 and sk-proj-abcdefghijklmnopqrstuv"),
                      "token [redacted] and [redacted]");
  assert_string_equal(R("{\"error\":\"upstream: {\\\\\\\"client_secret\\\\\\\":\\\\\\\"abcXYZ123\\\\\\\"}\"}"),
                      "{\"error\":\"upstream: {\\\\\\\"client_secret\\\\\\\":\\\\\\\"[redacted]\\\\\\\"}\"}");
  assert_string_equal(
      R("redirect_uri=https%3A%2F%2Fapp.example%2Fcb%3Faccess_token%3Dya29.A0ARrdaM-secret%26state%3D1"),
      "redirect_uri=https%3A%2F%2Fapp.example%2Fcb%3Faccess_token%3D[redacted]%26state%3D1");
  /* a credential's word in the name wins over a signature's: masked, as far as a signature runs,
   * and never forwarded */
  assert_string_equal(R("X-Signature-Secret: topsecret value"), "X-Signature-Secret: [redacted]");
  assert_string_equal(R("X-Webhook-Signature-Token: v1,YWJj v1,ZGVm\nok: 1"),
                      "X-Webhook-Signature-Token: [redacted]\nok: 1");
  assert_true(hookd_redact_name_sensitive("X-Signature-Secret"));
  assert_true(hookd_redact_name_sensitive("X-Hmac-Token"));
  assert_false(hookd_redact_name_sensitive("X-Hub-Signature-256"));
  assert_false(hookd_redact_name_sensitive("X-Shopify-Hmac-Sha256"));
  assert_string_equal(R("{\"token\": 12345}"), "{\"token\": [redacted]}");
  /* JSON quoted inside a JSON string (an error handler echoing the request): each value up to
   * its escaped closing quote, the rest kept */
  assert_string_equal(R("{\"got\":\"{\\\"webhook-signature\\\":\\\"v1,K5oZfzN95Z9UVu1E=\\\","
                        "\\\"password\\\": \\\"hunter2\\\",\\\"n\\\":\\\"\\\"}\"}"),
                      "{\"got\":\"{\\\"webhook-signature\\\":\\\"[redacted]\\\","
                      "\\\"password\\\": \\\"[redacted]\\\",\\\"n\\\":\\\"\\\"}\"}");
  assert_string_equal(R("{\"e\":\"{\\\"token\\\":\\\"\\\"}\"}"), "{\"e\":\"{\\\"token\\\":\\\"\\\"}\"}");
  /* a quote inside such a value (escaped thrice) is the value's: masked with it */
  assert_string_equal(R("{\"got\":\"{\\\"token\\\":\\\"ab\\\\\\\"cd\\\"}\"}"),
                      "{\"got\":\"{\\\"token\\\":\\\"[redacted]\\\"}\"}");
  /* one ending in a quote, or in a backslash (its closing quote then escaped 4n + 1 times) */
  assert_string_equal(R("{\"e\":\"{\\\"token\\\":\\\"ab\\\\\\\"\\\"}\"}"),
                      "{\"e\":\"{\\\"token\\\":\\\"[redacted]\\\"}\"}");
  assert_string_equal(R("{\"e\":\"{\\\"token\\\":\\\"ab\\\\\\\\\\\"}\",\"n\":1}"),
                      "{\"e\":\"{\\\"token\\\":\\\"[redacted]\\\"}\",\"n\":1}");
  /* a list or an object under a sensitive name (Go's http.Header echoed) is masked whole */
  assert_string_equal(R("{\"Webhook-Signature\":"
                        "[\"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=\"],"
                        "\"X-Api-Key\":[\"k3y-abc\"],\"n\":[1]}"),
                      "{\"Webhook-Signature\":[redacted],\"X-Api-Key\":[redacted],\"n\":[1]}");
  assert_string_equal(R("\"secret\": {\"value\":\"s3cr3t\",\"k\":[\"]}\"]}, \"ok\": 1"),
                      "\"secret\": [redacted], \"ok\": 1");
  assert_string_equal(R("token=[abc"), "token=[redacted]"); /* cut short: the rest is its */
  /* a header name too long to read for its words (a vendor's) is taken as sensitive */
  const char *long_name = "X-Acme-Corporation-Enterprise-Integration-Platform-Webhook-Api-Secret";
  assert_true(hookd_redact_name_sensitive(long_name));
  assert_true(hookd_redact_name_masked(long_name));
  char longer[400];
  memset(longer, 'a', 300);
  memcpy(longer, "X-", 2);
  longer[300] = '\0';
  assert_true(hookd_redact_name_sensitive(longer)); /* past what is read: dropped unread */
  assert_false(hookd_redact_name_sensitive("X-Acme-Corporation-Enterprise-Integration-Platform-Id"));
  /* names inside longer words, or without a value, are left */
  assert_string_equal(R("tokens: 3, secretary: Ann, token"), "tokens: 3, secretary: Ann, token");
  assert_string_equal(R("{\"password\":\"\"}"), "{\"password\":\"\"}");
}

static void credentials(void **s) {
  assert_string_equal(R("sent Bearer eyJabc.def-_.ghi0 was refused"),
                      "sent Bearer [redacted] was refused");
  assert_string_equal(R("got basic dXNlcjpwYXNz"), "got basic [redacted]");
  /* prose after the scheme's name is no credential */
  assert_string_equal(R("Basic validation failed; Bearer token required"),
                      "Basic validation failed; Bearer token required");
  assert_string_equal(R("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ok"),
                      "secret [redacted] ok");
  assert_string_equal(R("(sk_live_51HxYzAbCdEfGh) and AKIAIOSFODNN7EXAMPLE."),
                      "([redacted]) and [redacted].");
  assert_string_equal(R("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln end"), "jwt [redacted] end");
  /* look-alikes */
  assert_string_equal(R("sk_live_ab eyJnotajwt ghp_short"), "sk_live_ab eyJnotajwt ghp_short");
}

static void personal_data(void **s) {
  assert_string_equal(R("no account for jane.doe+x@mail.example.com."),
                      "no account for [redacted].");
  /* digits in the local part, or at its start */
  assert_string_equal(R("user_123@example.com john.doe+1@x.com 42john@corp.io j.s.1990@gmail.com"),
                      "[redacted] [redacted] [redacted] [redacted]");
  assert_string_equal(R("<b>ann@ex.org</b>"), "<b>[redacted]</b>");
  assert_string_equal(R("card 4111 1111 1111 1111 declined"), "card [redacted] declined");
  assert_string_equal(R("card 4111-1111-1111-1111"), "card [redacted]");
  assert_string_equal(R("{\"pan\":\"4012888888881881\"}"), "{\"pan\":\"[redacted]\"}");
  /* not addresses, not cards: a failed Luhn check, too few digits, a longer run, a date */
  assert_string_equal(R("a@b, x@localhost, @home"), "a@b, x@localhost, @home");
  assert_string_equal(R("id 4111111111111112 ts 1700000000123 n 12345678901234567890123"),
                      "id 4111111111111112 ts 1700000000123 n 12345678901234567890123");
  /* an id of a card's length and checksum, but no card network's prefix (a snowflake) */
  assert_string_equal(R("request_id=1143862836139282462"), "request_id=1143862836139282462");
  assert_string_equal(R("2026-11-30 12:00"), "2026-11-30 12:00");
}

static void bytes_and_bounds(void **s) {
  /* binary bytes are copied as they are; the output's bound is the buffer's */
  const char bin[] = {'o', 'k', 0, (char)0xff, 'x'};
  hookd_buf b;
  hookd_buf_init(&b, 64);
  assert_int_equal(hookd_redact(bin, sizeof bin, &b), HOOKD_BUF_OK);
  assert_int_equal(b.len, sizeof bin);
  assert_memory_equal(b.data, bin, sizeof bin);
  hookd_buf_free(&b);
  hookd_buf_init(&b, 8);
  assert_int_equal(hookd_redact("password=abcdef", 15, &b), HOOKD_BUF_TOOBIG);
  hookd_buf_free(&b);
}

/* A receiver's 4 KiB built to make a scanner go back over itself: each shape once. */
static void hostile_input_stays_linear(void **s) {
  static const char *const units[] = {"eyJ", "a@", "1 ", "password", "ghp_", "Bearer ", "x.",
                                      "@a.", "token:\"", "4", "signature=ok ",
                                      "signature:\"ok ", "x_sig_hmac: abcdefgh "};
  /* 256 KiB of each: a pass that went back over its input would do ~3e10 steps (minutes); one
   * that does not takes milliseconds, and well under the bound under any sanitizer */
  size_t n = 1 << 18;
  char *in = malloc(n);
  assert_non_null(in);
  for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
    size_t ul = strlen(units[u]);
    for (size_t k = 0; k < n; k++) in[k] = units[u][k % ul];
    hookd_buf b;
    hookd_buf_init(&b, 4 * n);
    clock_t t0 = clock();
    assert_int_equal(hookd_redact(in, n, &b), HOOKD_BUF_OK);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_true(secs < 10.0);
    hookd_buf_free(&b);
  }
  free(in);
}

/* in masked by f (hookd_redact_values or hookd_redact_excerpt) with an endpoint's lines */
static const char *with(int (*f)(const char *, size_t, const char *, bool, hookd_buf *),
                        const char *in, const char *lines, bool cut) {
  hookd_buf b;
  hookd_buf_init(&b, sizeof got - 1);
  assert_int_equal(f(in, strlen(in), lines, cut, &b), HOOKD_BUF_OK);
  snprintf(got, sizeof got, "%s", hookd_buf_str(&b));
  hookd_buf_free(&b);
  return got;
}

static const char *V(const char *in, const char *lines, bool cut) {
  return with(hookd_redact_values, in, lines, cut);
}

static const char *E(const char *in, const char *lines, bool cut) {
  return with(hookd_redact_excerpt, in, lines, cut);
}

/* The parts of a value a receiver echoes alone: a credential's token after its scheme, a Basic
 * credential's user:password and password, and any of them HTML-escaped (a review: each shown
 * to every reader of the tenant's deliveries). Short words stay: they are common ones. */
static void own_header_value_parts(void **st) {
  (void)st;
  const char *lines = "Authorization: Bearer gw7Kq2ZtR9xLmP4vN8sB\n"
                      "Proxy-Authorization: Basic c3ZjLWhvb2tkOlBhNTV3MHJkUXE=\n"
                      "X-Api-Key: k3y&v4lue<z>Q9\n";
  assert_string_equal(V("rejected credential gw7Kq2ZtR9xLmP4vN8sB", lines, false),
                      "rejected credential [redacted]");
  assert_string_equal(V("{\"error\":\"unknown credential 'gw7Kq2ZtR9xLmP4vN8sB'\"}", lines, false),
                      "{\"error\":\"unknown credential '[redacted]'\"}");
  assert_string_equal(V("login failed for svc-hookd:Pa55w0rdQq", lines, false),
                      "login failed for [redacted]");
  assert_string_equal(V("password Pa55w0rdQq refused", lines, false),
                      "password [redacted] refused");
  assert_string_equal(V("<p>k3y&amp;v4lue&lt;z&gt;Q9</p>", lines, false), "<p>[redacted]</p>");
  assert_string_equal(V("<i>say&quot;it&#39;s&quot;</i>", "X-Q: say\"it's\"\n", false),
                      "<i>[redacted]</i>");
  assert_string_equal(V("Bearer tokens and Basic auth", lines, false),
                      "Bearer tokens and Basic auth");
  /* cut short: a part's beginning at the end is masked too */
  assert_string_equal(V("credential gw7Kq2Zt", lines, true), "credential [redacted]");
}

/* An endpoint's custom header values, wherever and under whatever name a receiver echoes them. */
static void own_header_values(void **st) {
  (void)st;
  const char *lines = "X-Gateway-Credential: GWCRED_ABC123\nX-Env: prod\nX-Ab: ab\n";
  assert_string_equal(V("{\"x-gateway-credential\":\"GWCRED_ABC123\",\"env\":\"prod\"}", lines,
                        false),
                      "{\"x-gateway-credential\":\"[redacted]\",\"env\":\"[redacted]\"}");
  /* every occurrence; adjacent ones are one mask; shorter than 4 bytes, kept */
  assert_string_equal(V("GWCRED_ABC123 and GWCRED_ABC123GWCRED_ABC123, ab", lines, false),
                      "[redacted] and [redacted], ab");
  /* the beginning of a value at the end of a response read in part: masked only when cut */
  assert_string_equal(V("echo: GWCRED_A", lines, true), "echo: [redacted]");
  assert_string_equal(V("echo: GWCRED_A", lines, false), "echo: GWCRED_A");
  assert_string_equal(V("echo: GWC", lines, true), "echo: GWC"); /* under 4 bytes */
  /* a value whose beginning repeats inside it (the automaton's fallback) */
  assert_string_equal(V("x abcabcab", "A: abcabcabd\n", true), "x [redacted]");
  /* overlapping occurrences, all of them */
  assert_string_equal(V("xababab y", "A: abab\n", false), "x[redacted] y");
  /* as a JSON echo shows them: '"', '\\' and tabs escaped, '/' too by PHP */
  const char *odd = "X-Gw: gw\"Cred\\Z9x1\nX-Tab: gwcred\tZZ91\nX-Sl: gw/cred/Z981\n";
  assert_string_equal(V("{\"a\":\"gw\\\"Cred\\\\Z9x1\",\"b\":\"gwcred\\tZZ91\"}", odd, false),
                      "{\"a\":\"[redacted]\",\"b\":\"[redacted]\"}");
  assert_string_equal(V("{\"c\":\"gw\\/cred\\/Z981\",\"d\":\"gw/cred/Z981\"}", odd, false),
                      "{\"c\":\"[redacted]\",\"d\":\"[redacted]\"}");
  assert_string_equal(V("{\"c\":\"gw\\/cr", odd, true), "{\"c\":\"[redacted]");
  assert_string_equal(V("nothing here", lines, true), "nothing here");
  /* as other encoders show them: JSON's \u escapes (System.Text.Json writes '+' as \u002B, Go's
   * encoding/json '<' '>' '&' as \u003c …; any character may be so), and a URL's or a form's
   * percent-encoding (either case of hex, '+' for a blank) */
  const char *b64 = "X-Gw: gw+Cred/Z9==\nX-Sp: two words&more\n";
  assert_string_equal(V("{\"a\":\"gw\\u002BCred\\/Z9\\u003D\\u003d\"}", b64, false),
                      "{\"a\":\"[redacted]\"}");
  assert_string_equal(V("{\"a\":\"\\u0067\\u0077+Cred/Z9==\"}", b64, false),
                      "{\"a\":\"[redacted]\"}");
  assert_string_equal(V("echo?k=gw%2BCred%2fZ9%3D%3D&x=1", b64, false), "echo?k=[redacted]&x=1");
  assert_string_equal(V("q=two+words%26more;", b64, false), "q=[redacted];");
  assert_string_equal(V("q=two%20words%26more", b64, false), "q=[redacted]");
  /* cut inside an escape: what decodes is a beginning, the rest is masked with it */
  assert_string_equal(V("k=gw%2BCr", b64, true), "k=[redacted]");
  assert_string_equal(V("k=\"gw\\u002BCred\\u00", b64, true), "k=\"[redacted]");
  assert_string_equal(V("k=gw+Cred%2", b64, true), "k=[redacted]");
  /* escapes that decode to something else are left; a lone '%' or '\\' is a byte */
  assert_string_equal(V("gw%2CCred/Z9== 100% \\q", b64, false), "gw%2CCred/Z9== 100% \\q");
  /* an excerpt: both masks marked on the response as received, one mask per run (masked one
   * after the other, "x-api-key: [redacted]" was shown "[redacted]]", and a header value
   * inside a credential left the rest of it shown: "password=[redacted]4ever-S3cret!") */
  assert_string_equal(E("x-api-key: GWCRED_ABC123\nx-token: t0k3n-123 rest", lines, false),
                      "x-api-key: [redacted]\nx-token: [redacted] rest");
  const char *mode = "X-Mode: live\nX-Env: prod\n";
  assert_string_equal(E("config: password=live4ever-S3cret! key sk_live_51HxYzAbCdEfGhIjKlMnOpQr",
                        mode, false),
                      "config: password=[redacted] key [redacted]");
  assert_string_equal(E("auth: Bearer prod9f8e7d6c5b4a", mode, false), "auth: Bearer [redacted]");
  assert_string_equal(E("token=abc%2Bgw+Cred123456789&n=1", b64, false), "token=[redacted]&n=1");
  assert_string_equal(E("a live one", mode, true), "a [redacted] one");
  assert_string_equal(E("mail a@b.co now", NULL, false), "mail [redacted] now");
  /* a credential right against a value: its word ends there (as the passes in turn had it) */
  assert_string_equal(E("card 4111111111111111live", mode, false), "card [redacted]");
  assert_string_equal(E("to a@b.comlive", mode, false), "to [redacted]");
  /* a value already masked by whoever wrote the response stays as it is */
  assert_string_equal(R("authorization: [redacted]\npassword=[redacted]&next=1"),
                      "authorization: [redacted]\npassword=[redacted]&next=1");
  /* linear whatever the values repeat: 20 values of 1 KiB of one byte over a response of it
   * (a search restarted after each overlapping match took 165 ms a response at -O2) */
  static char big[HOOKD_EXCERPT_TEST_LEN + 1], many[20 * 1040 + 1];
  memset(big, 'a', HOOKD_EXCERPT_TEST_LEN);
  size_t o = 0;
  for (int i = 0; i < 20; i++) {
    o += (size_t)sprintf(many + o, "X-V%d: ", i);
    memset(many + o, 'a', 1024);
    o += 1024;
    many[o++] = '\n';
  }
  many[o] = '\0';
  hookd_buf b;
  hookd_buf_init(&b, 64);
  clock_t t0 = clock();
  for (int rep = 0; rep < 100; rep++) {
    hookd_buf_reset(&b);
    int rc = hookd_redact_values(big, HOOKD_EXCERPT_TEST_LEN, many, true, &b);
    assert_int_equal(rc, HOOKD_BUF_OK);
  }
  double ms = (double)(clock() - t0) * 1000.0 / CLOCKS_PER_SEC / 100;
  assert_string_equal(hookd_buf_str(&b), "[redacted]");
  assert_true(ms < 20.0); /* a response; ~0.3 ms at -O0 with sanitizers */
  hookd_buf_free(&b);
  assert_string_equal(V("nothing here", NULL, true), "nothing here");
  assert_string_equal(V("", lines, true), "");
}

/* The excerpt's cut: never inside a character, nor inside a word the masks match on (an
 * address — its local part may hold '%' —, a card number with its spaces). */
static void cut_between_words(void **st) {
  (void)st;
  const char *a = "paid by john%doe@example.com";
  assert_int_equal(hookd_redact_cut(a, strlen(a), 12, false), 8); /* "paid by " */
  const char *card = "card 4111 1111 1111 1111";
  assert_int_equal(hookd_redact_cut(card, strlen(card), 16, false), 5); /* "card " */
  const char *u = "ab \xc3\xa9t\xc3\xa9"; /* "ab été": a cut inside é, then inside the word */
  assert_int_equal(hookd_redact_cut(u, strlen(u), 4, false), 3);
  /* what fits is kept whole; a text cut short before (more) is cut back at its own end */
  assert_int_equal(hookd_redact_cut(a, strlen(a), 100, false), strlen(a));
  assert_int_equal(hookd_redact_cut(a, strlen(a), 100, true), 8);
  /* a run longer than 128 bytes is a blob: cut where it is */
  char blob[300];
  memset(blob, 'x', sizeof blob - 1);
  blob[sizeof blob - 1] = '\0';
  assert_int_equal(hookd_redact_cut(blob, strlen(blob), 200, false), 200);
  /* a text whose read ended inside a character, its last run too long to walk back (50 CJK
   * characters): cut before that character, never inside it (the excerpt would not be UTF-8,
   * and would be shown as a binary response) */
  char cjk[200];
  size_t k = 0;
  cjk[k++] = 'x';
  cjk[k++] = ' ';
  for (int i = 0; i < 50; i++) {
    memcpy(cjk + k, "\xe6\x97\xa5", 3);
    k += 3;
  }
  memcpy(cjk + k, "\xe6\x97", 2); /* 日, its last byte not read */
  k += 2;
  assert_int_equal(hookd_redact_cut(cjk, k, 4096, true), k - 2);
  assert_int_equal(hookd_redact_cut(cjk, k - 2, 4096, true), k - 2); /* whole: kept */
  /* a text whose read stopped inside a card number's groups, a separator last: the groups are
   * cut off (14 digits of 16 fitted — masks before them had shortened the text: a review) */
  const char *part = "card 4111 1111 1111 11 ";
  assert_int_equal(hookd_redact_cut(part, strlen(part), 4096, true), 5);
  assert_int_equal(hookd_redact_cut(part, strlen(part), 4096, false), strlen(part));
  /* and an ASCII word running to the read's end, however long (a JWT cut before its
   * signature): never seen whole by the masks */
  char jwt[400] = "x eyJhbGciOiJIUzI1NiJ9.";
  size_t jl = strlen(jwt);
  memset(jwt + jl, 'a', 300);
  jwt[jl + 300] = '\0';
  assert_int_equal(hookd_redact_cut(jwt, strlen(jwt), 4096, true), 2);
  assert_int_equal(hookd_redact_cut(jwt, strlen(jwt), 4096, false), strlen(jwt));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(named_values),     cmocka_unit_test(credentials),
      cmocka_unit_test(personal_data),    cmocka_unit_test(bytes_and_bounds),
      cmocka_unit_test(hostile_input_stays_linear), cmocka_unit_test(cut_between_words),
      cmocka_unit_test(own_header_value_parts), cmocka_unit_test(own_header_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

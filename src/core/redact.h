/* redact.h — masks what looks like a credential or personal data in a receiver's response
 * excerpt before hookd stores it with an attempt (O3: "truncated to a small bound and
 * redacted"). Receivers echo what they were sent or what they hold in their error bodies — a
 * bearer token, an API key, an email address, a card number — and the excerpt is shown to
 * everyone who may read the tenant's deliveries, and kept for the audit window.
 *
 * Masked, each replaced by "[redacted]":
 *   - the value of a field whose name has a sensitive word — password, passwd, secret, token,
 *     apikey, authorization, privatekey, cvv, cvc, ssn, cardnumber — in any case and spelling
 *     ("accessToken", "aws_secret_access_key", "x-api-key"; not "secretary", "tokens"):
 *     "name": "value", name=value, name: value; an unquoted authorization to the end of its
 *     line (a header: "Authorization: Bot …");
 *   - signatures: the value of a field named with signature, hmac or securehash
 *     (webhook-signature, Stripe-Signature, X-Hub-Signature-256, X-Shopify-Hmac-Sha256,
 *     vnp_SecureHash), unquoted to the end of its line or form field, unless it is prose (no
 *     scheme such as "v1," or "sha256=", and a first word shorter than 8 bytes or of letters
 *     followed by more words: "invalid signature: clock skew 42s" stays readable) — a receiver
 *     echoing the request shows hookd's signature and the provider's, and a replay inside the
 *     tolerance could reuse them; a name that also holds a credential's word is always masked;
 *   - the credential after "Bearer " or "Basic " when it looks like one (8 characters or more
 *     with a digit, a base64 sign or both cases: not "Basic validation failed");
 *   - tokens with a known prefix: whsec_, whsk_, sk_live_, sk_test_, rk_live_, rk_test_,
 *     xoxb-, xoxp-, xoxa-, ghp_, gho_, ghs_, github_pat_, AKIA (AWS key ids); JSON Web Tokens
 *     (eyJ….….…);
 *   - email addresses;
 *   - card numbers: a card network's prefix and length (Visa, Mastercard, Amex, Diners, JCB,
 *     Discover, UnionPay), single spaces or dashes between digits allowed, passing the Luhn
 *     check — ids of the same length (snowflakes, timestamps) are kept.
 * Linear in the input: a hostile receiver's 4 KiB cannot make the dispatcher thread scan it
 * more than a few times. Bytes that are not text are copied as they are. */
#ifndef HOOKD_CORE_REDACT_H
#define HOOKD_CORE_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

/* Appends in[0..len) to out with the above masked. Returns HOOKD_BUF_OK or the buffer's error
 * (out then holds what fitted). */
int hookd_redact(const char *in, size_t len, hookd_buf *out);

/* Appends in[0..len) to out with every occurrence of the values of `lines` masked: the header
 * lines an endpoint's custom headers are sent as ("Name: value\n" each; core/custom_headers.h),
 * whose values may be credentials that hookd alone knows — a receiver echoing its request would
 * show them to everyone who reads the tenant's deliveries, whatever the header's name — as sent,
 * as a JSON string shows them (any character escaped: '\"', '\/', '\u002B' as System.Text.Json
 * writes a '+'), and percent-encoded as a URL or a form shows them ('%2B', '%2b', '+' for a
 * blank); an escape is matched as the character it stands for, so any mix of them is found.
 * Every occurrence, overlapping ones too, also of the parts a receiver echoes alone: each word of
 * 8 bytes or more of a value of several (its first 4 such: "Bearer <token>"), a Basic
 * credential's user:password
 * and password; and each HTML-escaped (&amp; &lt; &gt; &quot; &#39;). Values
 * shorter than 4 bytes are left (they would mask every such word). With `cut` (the input is
 * the beginning of a longer response) a value's beginning at the very end of in, 4 bytes or
 * more, is masked too. Linear in len and the values' lengths. Returns HOOKD_BUF_OK or the
 * buffer's error (HOOKD_BUF_NOMEM also when out of memory for its work). */
int hookd_redact_values(const char *in, size_t len, const char *lines, bool cut, hookd_buf *out);

/* Both at once, as a response excerpt is stored: the values of `lines` (may be NULL) and the
 * masks of hookd_redact marked on the response as received, and again on it with the values'
 * bytes made blanks, then one mask per run of marked bytes. One pass's mask never hides from
 * the other what it covers: a header value inside a credential ("password=live4ever", X-Mode:
 * live) or right against one ("4111111111111111live") leaves no part of it shown. */
int hookd_redact_excerpt(const char *in, size_t len, const char *lines, bool cut,
                         hookd_buf *out);

/* Where to cut the masked text s[0..len) to at most max bytes (more: what was masked was itself
 * cut short, so its end may split a word too): at a character's start (a UTF-8 sequence split in
 * two makes the whole text binary), and before a word the cut goes through — a token, an
 * address, a card number with its spaces or dashes — up to 128 bytes of it: no half of an
 * address or of a card number stays; a longer run is a blob, cut as it is. */
size_t hookd_redact_cut(const char *s, size_t len, size_t max, bool more);

/* Whether a field or header name names a credential, by the words the excerpts mask the values
 * of ("X-Gitlab-Token", "x-api-key", "client_secret", "X-Authorization"; not "X-Tokens"), a
 * signature's name left out (a signature is masked in excerpts, but it is no credential: the
 * inbound forward hands the provider's on). */
bool hookd_redact_name_sensitive(const char *name);
/* Whether the excerpts mask the value of a field or header so named: a credential's or a
 * signature's ("Stripe-Signature", "X-Hub-Signature-256", "X-Shopify-Hmac-Sha256"). */
bool hookd_redact_name_masked(const char *name);

#endif

/* redact.h — masks what looks like a credential or personal data in a receiver's response
 * excerpt before hookd stores it with an attempt (O3: "truncated to a small bound and
 * redacted"). Receivers echo what they were sent or what they hold in their error bodies — a
 * bearer token, an API key, an email address, a card number — and the excerpt is shown to
 * everyone who may read the tenant's deliveries, and kept for the audit window.
 *
 * Masked, each replaced by "[redacted]":
 *   - the value after a sensitive name: password, passwd, secret, token, api_key, apikey,
 *     api-key, authorization, access_token, refresh_token, client_secret, private_key, cvv,
 *     cvc, ssn, card_number (any case; "name": "value", name=value, name: value);
 *   - the credential after "Bearer " or "Basic ";
 *   - tokens with a known prefix: whsec_, whsk_, sk_live_, sk_test_, rk_live_, rk_test_,
 *     xoxb-, xoxp-, xoxa-, ghp_, gho_, ghs_, github_pat_, AKIA (AWS key ids); JSON Web Tokens
 *     (eyJ….….…);
 *   - email addresses;
 *   - card numbers: 14 to 19 digits (single spaces or dashes between them allowed) that pass
 *     the Luhn check.
 * Linear in the input: a hostile receiver's 4 KiB cannot make the dispatcher thread scan it
 * more than a few times. Bytes that are not text are copied as they are. */
#ifndef HOOKD_CORE_REDACT_H
#define HOOKD_CORE_REDACT_H

#include <stddef.h>

#include "core/buf.h"

/* Appends in[0..len) to out with the above masked. Returns HOOKD_BUF_OK or the buffer's error
 * (out then holds what fitted). */
int hookd_redact(const char *in, size_t len, hookd_buf *out);

#endif

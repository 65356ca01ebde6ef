/* redact.c — masks credentials and personal data in response excerpts (see redact.h).
 *
 * One pass. At each position the matchers look ahead; a matcher that recognises a span appends
 * its masked form and the pass continues after it; a matcher that rejects a span it had to read
 * whole (a digit run, a token-like run) appends it unchanged and the pass also continues after
 * it, so no byte is looked at by the same matcher twice. Email addresses are found at their
 * '@': the local part just copied is taken back out of the output. */
#include "core/redact.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static const char MASK[] = "[redacted]";
#define MASK_LEN (sizeof MASK - 1)

static bool is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_alnum(unsigned char c) { return is_alpha(c) || is_digit(c); }
/* characters of tokens: base64, base64url, hex, and what bearer tokens use (RFC 6750) */
static bool is_tok(unsigned char c) {
  return is_alnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' ||
         c == '=';
}
static bool is_b64url(unsigned char c) { return is_alnum(c) || c == '-' || c == '_'; }
static bool is_local(unsigned char c) {
  return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-';
}
static bool ends_value(unsigned char c) {
  return c <= ' ' || c == ',' || c == '&' || c == ';' || c == '}' || c == ']' || c == '<' ||
         c == '"' || c == '\'';
}

static size_t run(const char *in, size_t len, size_t i, bool (*ok)(unsigned char)) {
  size_t j = i;
  while (j < len && ok((unsigned char)in[j])) j++;
  return j - i;
}

/* A token's run, a sentence's full stop after it left out */
static size_t tok_run(const char *in, size_t len, size_t i) {
  size_t t = run(in, len, i, is_tok);
  while (t && in[i + t - 1] == '.') t--;
  return t;
}

/* Appends in[i..i+keep) and the mask; returns the span consumed (n), 0 on a buffer error. */
static size_t masked(hookd_buf *out, const char *in, size_t i, size_t keep, size_t n, int *rc) {
  if (!*rc && keep) *rc = hookd_buf_append(out, in + i, keep);
  if (!*rc) *rc = hookd_buf_append(out, MASK, MASK_LEN);
  return n;
}
static size_t verbatim(hookd_buf *out, const char *in, size_t i, size_t n, int *rc) {
  if (!*rc) *rc = hookd_buf_append(out, in + i, n);
  return n;
}

/* Sensitive parts of a field's name, compared without case, '_' or '-', whole words of it (a
 * word starts after '_' or '-' and at a capital after a small letter): "accessToken",
 * "aws_secret_access_key", "client-secret", "apiKey" and "password_hash" hold one;
 * "secretary" and "tokens" do not. */
static const char *const sensitive[] = {"password", "passwd", "secret", "token", "apikey",
                                        "authorization", "privatekey", "cvv", "cvc", "ssn",
                                        "cardnumber"};

static bool key_char(unsigned char c) { return is_alnum(c) || c == '_' || c == '-'; }

/* Whether the key in[i..i+n) holds a sensitive part; *auth when it is an authorization. */
static bool sensitive_key(const char *in, size_t i, size_t n, bool *auth) {
  char k[64];
  bool word[65] = {false}; /* word[j]: a word of the key starts (or ends) at k[j] */
  size_t m = 0;
  for (size_t j = i; j < i + n; j++) {
    unsigned char c = (unsigned char)in[j], p = j > i ? (unsigned char)in[j - 1] : '_';
    if (!is_alnum(c)) continue;
    if (m == sizeof k) return false; /* too long for a field name */
    if (p == '_' || p == '-' || (c >= 'A' && c <= 'Z' && p >= 'a' && p <= 'z')) word[m] = true;
    k[m++] = (char)(c | 0x20);
  }
  word[m] = true;
  for (size_t s = 0; s < sizeof sensitive / sizeof sensitive[0]; s++) {
    size_t sl = strlen(sensitive[s]);
    for (size_t j = 0; j + sl <= m; j++)
      if (word[j] && word[j + sl] && !memcmp(k + j, sensitive[s], sl)) {
        *auth = s == 5;
        return true;
      }
  }
  return false;
}

/* "key": "value", key=value, key: value, where the key holds a sensitive part — the value
 * masked, the rest kept; an authorization's unquoted value (a header line: "Bot …", "Token …")
 * to the end of its line. A key-like word that is none of these is copied whole (*kept). */
static size_t match_named(const char *in, size_t len, size_t i, hookd_buf *out, int *rc,
                          bool *kept) {
  size_t w = run(in, len, i, key_char);
  if (!w) return 0;
  size_t j = i + w;
  bool auth = false;
  bool named = sensitive_key(in, i, w, &auth);
  if (named) {
    while (j < len && (in[j] == '"' || in[j] == '\'')) j++;
    while (j < len && in[j] == ' ') j++;
    named = j < len && (in[j] == ':' || in[j] == '=');
  }
  if (!named) {
    *kept = true;
    return verbatim(out, in, i, w, rc);
  }
  j++;
  while (j < len && in[j] == ' ') j++;
  if (j < len && (in[j] == '"' || in[j] == '\'')) {
    char q = in[j];
    size_t v = ++j;
    while (j < len && in[j] != q) j += in[j] == '\\' && j + 1 < len ? 2 : 1;
    if (j > len) j = len;
    if (j > v) return masked(out, in, i, v - i, j - i, rc); /* the closing quote follows */
    *kept = true;
    return verbatim(out, in, i, v - i, rc);
  }
  size_t v = j;
  while (j < len && (auth ? in[j] != '\r' && in[j] != '\n' : !ends_value((unsigned char)in[j])))
    j++;
  if (j > v) return masked(out, in, i, v - i, j - i, rc);
  *kept = true;
  return verbatim(out, in, i, v - i, rc);
}

/* A credential, not a word of prose ("Basic validation failed"): eight characters or more,
 * with a digit, a base64 sign or both cases of letters. */
static bool credential_shaped(const char *s, size_t n) {
  if (n < 8) return false;
  bool lower = false, upper = false;
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char)s[k];
    if (is_digit(c) || c == '=' || c == '+' || c == '/' || c == '.' || c == '_' || c == '-')
      return true;
    lower |= c >= 'a' && c <= 'z';
    upper |= c >= 'A' && c <= 'Z';
  }
  return lower && upper;
}

/* Bearer <token>, Basic <token>: the credential masked when it looks like one */
static size_t match_scheme(const char *in, size_t len, size_t i, hookd_buf *out, int *rc) {
  size_t n = len - i > 6 && !strncasecmp(in + i, "bearer ", 7)  ? 7
             : len - i > 5 && !strncasecmp(in + i, "basic ", 6) ? 6
                                                                  : 0;
  if (!n) return 0;
  size_t j = i + n;
  while (j < len && in[j] == ' ') j++;
  size_t t = tok_run(in, len, j);
  return credential_shaped(in + j, t) ? masked(out, in, i, j - i, j + t - i, rc) : 0;
}

static const struct {
  const char *prefix;
  size_t min; /* token characters after it */
} prefixes[] = {{"whsec_", 8},  {"whsk_", 8},   {"sk_live_", 8}, {"sk_test_", 8},
                {"rk_live_", 8}, {"rk_test_", 8}, {"xoxb-", 8},   {"xoxp-", 8},
                {"xoxa-", 8},   {"ghp_", 16},    {"gho_", 16},    {"ghs_", 16},
                {"github_pat_", 16}, {"AKIA", 16}};

/* a token with a known prefix, or a JSON Web Token */
static size_t match_token(const char *in, size_t len, size_t i, hookd_buf *out, int *rc,
                          bool *kept) {
  for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
    size_t n = strlen(prefixes[k].prefix);
    if (len - i < n || memcmp(in + i, prefixes[k].prefix, n) != 0) continue;
    size_t t = tok_run(in, len, i + n);
    if (t >= prefixes[k].min) return masked(out, in, i, 0, n + t, rc);
    *kept = true;
    return verbatim(out, in, i, n + t, rc); /* too short to be one: read once, kept */
  }
  if (len - i < 3 || memcmp(in + i, "eyJ", 3) != 0) return 0;
  size_t a = run(in, len, i, is_b64url), j = i + a;
  if (j < len && in[j] == '.') {
    size_t b = run(in, len, j + 1, is_b64url);
    if (b && j + 1 + b < len && in[j + 1 + b] == '.') {
      size_t c = run(in, len, j + 2 + b, is_b64url);
      return masked(out, in, i, 0, a + b + c + 2, rc);
    }
  }
  *kept = true;
  return verbatim(out, in, i, a, rc); /* no later "eyJ" inside this run can be one either */
}

static bool luhn(const char *digits, size_t n) {
  int sum = 0;
  for (size_t k = 0; k < n; k++) {
    int d = digits[n - 1 - k] - '0';
    if (k % 2) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 == 0;
}

/* A card network's number: its first digits (IIN) and length. Ids — snowflakes, timestamps,
 * order numbers starting with 1, 7, 8, 9 or 0 — are left whatever their checksum. */
static bool card_shaped(const char *d, size_t n) {
  int two = (d[0] - '0') * 10 + (d[1] - '0'), four = two * 100 + (d[2] - '0') * 10 + (d[3] - '0');
  switch (d[0]) {
  case '4': return n == 16 || n == 19;                                      /* Visa */
  case '5': return two >= 51 && two <= 55 && n == 16;                       /* Mastercard */
  case '2': return four >= 2221 && four <= 2720 && n == 16;                 /* Mastercard */
  case '3': return ((two == 34 || two == 37) && n == 15) ||                 /* Amex */
                   (two == 36 && n == 14) || (four >= 3528 && four <= 3589); /* Diners, JCB */
  case '6': return four == 6011 || two == 65 || two == 62 || (four >= 6440 && four <= 6499);
  default: return false;
  }
}

/* 14 to 19 digits, single spaces or dashes between them, a card network's prefix and length,
 * passing the Luhn check */
static size_t match_card(const char *in, size_t len, size_t i, hookd_buf *out, int *rc,
                         bool *kept) {
  if (!is_digit((unsigned char)in[i])) return 0;
  char digits[20];
  size_t n = 0, j = i;
  while (j < len) {
    if (is_digit((unsigned char)in[j])) {
      if (n < sizeof digits) digits[n] = in[j];
      n++;
      j++;
    } else if ((in[j] == ' ' || in[j] == '-') && j + 1 < len && is_digit((unsigned char)in[j + 1])) {
      j++;
    } else {
      break;
    }
  }
  bool whole = j >= len || !is_alnum((unsigned char)in[j]);
  if (whole && n >= 14 && n <= 19 && card_shaped(digits, n) && luhn(digits, n))
    return masked(out, in, i, 0, j - i, rc);
  *kept = true;
  return verbatim(out, in, i, j - i, rc);
}

/* At an '@' after a local part just copied to out (from out_local on): a domain with a dot and
 * a top-level label of two letters or more makes it an address, which is masked whole. */
static size_t match_email(const char *in, size_t len, size_t i, hookd_buf *out, size_t out_local,
                          int *rc, bool *kept) {
  size_t j = i + 1, last_dot = 0;
  while (j < len && (is_alnum((unsigned char)in[j]) || in[j] == '-' || in[j] == '.')) {
    if (in[j] == '.' && j + 1 < len && is_alnum((unsigned char)in[j + 1])) last_dot = j;
    j++;
  }
  size_t end = j;
  while (end > i + 1 && (in[end - 1] == '.' || in[end - 1] == '-')) end--; /* "at a@b.com." */
  size_t tld = last_dot && last_dot < end ? end - last_dot - 1 : 0;
  bool ok = last_dot > i + 1 && tld >= 2;
  for (size_t k = last_dot + 1; ok && k < end; k++) ok = is_alpha((unsigned char)in[k]);
  if (!ok) {
    *kept = true;
    return verbatim(out, in, i, j - i, rc);
  }
  out->len = out_local; /* the local part goes too */
  if (out->data) out->data[out->len] = '\0';
  return masked(out, in, i, 0, end - i, rc);
}

int hookd_redact(const char *in, size_t len, hookd_buf *out) {
  int rc = HOOKD_BUF_OK;
  size_t i = 0, out_local = 0;
  bool in_local = false; /* the bytes copied since out_local may be an address's local part */
  while (i < len && !rc) {
    unsigned char c = (unsigned char)in[i];
    size_t n = 0;
    bool kept = false; /* the matcher copied the span it read (not one it recognised) */
    if (i == 0 || !is_alnum((unsigned char)in[i - 1])) {
      if (c == 'b' || c == 'B') n = match_scheme(in, len, i, out, &rc);
      if (!n) n = match_token(in, len, i, out, &rc, &kept);
      if (!n) n = match_card(in, len, i, out, &rc, &kept);
      if (!n) n = match_named(in, len, i, out, &rc, &kept);
    }
    if (!n && c == '@' && in_local) n = match_email(in, len, i, out, out_local, &rc, &kept);
    if (n) {
      if (kept) { /* a copied span continues, starts or ends an address's local part */
        size_t k = n;
        while (k && is_local((unsigned char)in[i + k - 1])) k--;
        if (k && k < n) out_local = out->len - (n - k);
        else if (!k && !in_local) out_local = out->len - n;
        in_local = k < n;
      } else {
        in_local = false;
      }
      i += n;
      continue;
    }
    if (is_local(c) && !in_local) {
      in_local = true;
      out_local = out->len;
    } else if (!is_local(c)) {
      in_local = false;
    }
    rc = hookd_buf_append(out, in + i, 1);
    i++;
  }
  return rc;
}

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

static const char *const names[] = {
    "password", "passwd", "secret", "token", "api_key", "apikey", "api-key", "authorization",
    "access_token", "refresh_token", "client_secret", "private_key", "cvv", "cvc", "ssn",
    "card_number"};

/* "name": "value", name=value, name: value — the value masked, the rest kept */
static size_t match_named(const char *in, size_t len, size_t i, hookd_buf *out, int *rc) {
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    size_t n = strlen(names[k]);
    if (len - i < n || strncasecmp(in + i, names[k], n) != 0) continue;
    size_t j = i + n;
    if (j < len && is_alnum((unsigned char)in[j])) continue; /* "tokens", "secretary" */
    while (j < len && (in[j] == '"' || in[j] == '\'')) j++;
    while (j < len && in[j] == ' ') j++;
    if (j >= len || (in[j] != ':' && in[j] != '=')) continue;
    j++;
    while (j < len && in[j] == ' ') j++;
    if (j < len && (in[j] == '"' || in[j] == '\'')) {
      char q = in[j];
      size_t v = ++j;
      while (j < len && in[j] != q) j += in[j] == '\\' && j + 1 < len ? 2 : 1;
      if (j > len) j = len;
      return j > v ? masked(out, in, i, v - i, j - i, rc) : 0; /* the closing quote follows */
    }
    size_t v = j;
    if (len - v > 6 && (!strncasecmp(in + v, "bearer ", 7) || !strncasecmp(in + v, "basic ", 6)))
      return verbatim(out, in, i, v - i, rc); /* the scheme's matcher takes the credential */
    while (j < len && !ends_value((unsigned char)in[j])) j++;
    return j > v ? masked(out, in, i, v - i, j - i, rc) : 0;
  }
  return 0;
}

/* Bearer <token>, Basic <token> */
static size_t match_scheme(const char *in, size_t len, size_t i, hookd_buf *out, int *rc) {
  size_t n = len - i > 6 && !strncasecmp(in + i, "bearer ", 7)  ? 7
             : len - i > 5 && !strncasecmp(in + i, "basic ", 6) ? 6
                                                                  : 0;
  if (!n) return 0;
  size_t j = i + n;
  while (j < len && in[j] == ' ') j++;
  size_t t = tok_run(in, len, j);
  return t ? masked(out, in, i, j - i, j + t - i, rc) : 0;
}

static const struct {
  const char *prefix;
  size_t min; /* token characters after it */
} prefixes[] = {{"whsec_", 8},  {"whsk_", 8},   {"sk_live_", 8}, {"sk_test_", 8},
                {"rk_live_", 8}, {"rk_test_", 8}, {"xoxb-", 8},   {"xoxp-", 8},
                {"xoxa-", 8},   {"ghp_", 16},    {"gho_", 16},    {"ghs_", 16},
                {"github_pat_", 16}, {"AKIA", 16}};

/* a token with a known prefix, or a JSON Web Token */
static size_t match_token(const char *in, size_t len, size_t i, hookd_buf *out, int *rc) {
  for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
    size_t n = strlen(prefixes[k].prefix);
    if (len - i < n || memcmp(in + i, prefixes[k].prefix, n) != 0) continue;
    size_t t = tok_run(in, len, i + n);
    if (t >= prefixes[k].min) return masked(out, in, i, 0, n + t, rc);
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

/* 14 to 19 digits, single spaces or dashes between them, passing the Luhn check */
static size_t match_card(const char *in, size_t len, size_t i, hookd_buf *out, int *rc) {
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
  if (whole && n >= 14 && n <= 19 && luhn(digits, n)) return masked(out, in, i, 0, j - i, rc);
  return verbatim(out, in, i, j - i, rc);
}

/* At an '@' after a local part just copied to out (from out_local on): a domain with a dot and
 * a top-level label of two letters or more makes it an address, which is masked whole. */
static size_t match_email(const char *in, size_t len, size_t i, hookd_buf *out, size_t out_local,
                          int *rc) {
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
  if (!ok) return verbatim(out, in, i, j - i, rc);
  out->len = out_local; /* the local part goes too */
  if (out->data) out->data[out->len] = '\0';
  return masked(out, in, i, 0, end - i, rc);
}

int hookd_redact(const char *in, size_t len, hookd_buf *out) {
  int rc = HOOKD_BUF_OK;
  size_t i = 0, out_local = 0;
  bool in_local = false; /* the bytes just copied since out_local form an address's local part */
  while (i < len && !rc) {
    unsigned char c = (unsigned char)in[i];
    size_t n = 0;
    if (i == 0 || !is_alnum((unsigned char)in[i - 1])) {
      /* the first letters of the names, schemes and prefixes: most positions try nothing */
      if (c && strchr("pstarcPSTARCbBwxgeA", c)) {
        n = match_named(in, len, i, out, &rc);
        if (!n) n = match_scheme(in, len, i, out, &rc);
        if (!n) n = match_token(in, len, i, out, &rc);
      }
      if (!n) n = match_card(in, len, i, out, &rc);
    }
    if (!n && c == '@' && in_local) n = match_email(in, len, i, out, out_local, &rc);
    if (n) {
      i += n;
      in_local = false;
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

/* redact.c — masks credentials and personal data in response excerpts (see redact.h).
 *
 * One pass. At each position the matchers look ahead and describe the span they read: masked
 * (its first `keep` bytes kept, the rest replaced by the mask) or kept whole (a digit run, a
 * token-like run that is not one, a field name that is not sensitive). The pass continues after
 * the span either way, so no byte is looked at by the same matcher twice, and the bytes kept
 * are copied in runs, not one by one. Email addresses are found at their '@': the local part
 * just before it, still waiting to be copied, goes into the mask. */
#include "core/redact.h"
#include "core/b64.h"
#include "core/num.h"

#include <stdbool.h>
#include <stdlib.h>
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
static bool key_char(unsigned char c) { return is_alnum(c) || c == '_' || c == '-'; }
static bool is_backslash(unsigned char c) { return c == '\\'; }

static inline __attribute__((always_inline)) size_t run(const char *in, size_t len, size_t i,
                                                         bool (*ok)(unsigned char)) {
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

/* What a matcher read at i: n bytes (0: nothing recognised); masked, the first keep kept */
typedef struct span {
  size_t n, keep;
  bool mask;
} span;

static span kept(size_t n) { return (span){n, n, false}; }
static span masked(size_t keep, size_t n) { return (span){n, keep, true}; }

/* Sensitive parts of a field's name, compared without case, '_' or '-', whole words of it (a
 * word starts after '_' or '-' and at a capital after a small letter): "accessToken",
 * "aws_secret_access_key", "client-secret", "apiKey" and "password_hash" hold one;
 * "secretary" and "tokens" do not. The signatures' names come last: a receiver echoing the
 * request shows hookd's webhook-signature and the provider's forwarded one (Stripe-Signature,
 * X-Hub-Signature-256, X-Shopify-Hmac-Sha256, vnp_SecureHash), which a replay within the
 * tolerance could reuse. */
#define W(s) {s, sizeof s - 1}
static const struct {
  const char *s;
  size_t n;
} sensitive[] = {W("password"),   W("passwd"),     W("secret"), W("token"), W("apikey"),
                 W("authorization"), W("privatekey"), W("cvv"),    W("cvc"),   W("ssn"),
                 W("cardnumber"), W("signature"),  W("hmac"),   W("securehash")};
#define AUTHORIZATION 5
#define SIGNATURES 11 /* from here: a signature's name */

/* what a sensitive name's unquoted value runs to, and whether prose in it is kept: a plain
 * credential's to its end (a blank, ',', ';', …), an authorization's to its line end, a
 * signature's to its line end or form field (prose kept), and a credential named like a
 * signature ("X-Signature-Secret") as far, always masked */
typedef enum { VALUE_PLAIN, VALUE_AUTH, VALUE_SIGNATURE, VALUE_SIGNED_SECRET } value_kind;

#define KEY_MAX 256 /* letters and digits of a name read for its words */

/* Whether the key in[i..i+n) holds a sensitive part; *auth: what its unquoted value runs to.
 * A key with more than KEY_MAX letters and digits is not read: false, and *too_long set. */
static bool sensitive_key(const char *in, size_t i, size_t n, value_kind *auth, bool *too_long) {
  char k[KEY_MAX];
  size_t starts[KEY_MAX], ns = 0;
  bool word_end[KEY_MAX + 1] = {false};
  size_t m = 0;
  *too_long = false;
  for (size_t j = i; j < i + n; j++) {
    unsigned char c = (unsigned char)in[j], p = j > i ? (unsigned char)in[j - 1] : '_';
    if (!is_alnum(c)) continue;
    if (m == sizeof k) { /* too long for a field name */
      *too_long = true;
      return false;
    }
    if (p == '_' || p == '-' || (c >= 'A' && c <= 'Z' && p >= 'a' && p <= 'z')) {
      starts[ns++] = m;
      word_end[m] = true;
    }
    k[m++] = (char)(c | 0x20);
  }
  word_end[m] = true;
  /* a credential's word, anywhere in the name, wins over a signature's (masked whatever it
   * holds), which still decides how far the value runs */
  bool signature = false, found = false;
  value_kind cred = VALUE_PLAIN;
  for (size_t w = 0; w < ns; w++) /* only where a word of the key starts */
    for (size_t s = 0; s < sizeof sensitive / sizeof sensitive[0]; s++) {
      size_t j = starts[w], sl = sensitive[s].n;
      if (k[j] == sensitive[s].s[0] && j + sl <= m && word_end[j + sl] &&
          !memcmp(k + j, sensitive[s].s, sl)) {
        if (s >= SIGNATURES) {
          signature = true;
          continue;
        }
        if (!found) cred = s == AUTHORIZATION ? VALUE_AUTH : VALUE_PLAIN; /* the first */
        found = true;
      }
    }
  if (found) *auth = signature && cred == VALUE_PLAIN ? VALUE_SIGNED_SECRET : cred;
  else if (signature) *auth = VALUE_SIGNATURE;
  return found || signature;
}

/* A byte of a word the masks match on: a token's, an address's local part or domain, '@',
 * UTF-8 (what the cut must not split) */
static bool word_byte(unsigned char c) {
  return is_tok(c) || is_local(c) || c == '@' || c >= 0x80;
}

size_t hookd_redact_cut(const char *s, size_t len, size_t max, bool more) {
  size_t n = len < max ? len : max;
  if (!n || (n == len && !more)) return n;
  const unsigned char *u = (const unsigned char *)s;
  while (n > 0 && n < len && (u[n] & 0xc0) == 0x80) n--; /* u[n] continues a character */
  if (n == len) { /* the text itself may end inside a character (its read was cut there) */
    size_t i = n;
    while (i > 0 && n - i < 3 && (u[i - 1] & 0xc0) == 0x80) i--;
    if (i > 0 && u[i - 1] >= 0xc0) { /* u[i - 1] leads the last character: whole? */
      size_t need = u[i - 1] >= 0xf0 ? 4 : u[i - 1] >= 0xe0 ? 3 : 2;
      if (n - (i - 1) < need) n = i - 1;
    }
  }
  /* The text's end is where its read stopped (more): the masks never saw whole the ASCII word
   * running to it — a token, an address, a card number's groups and a separator after them
   * ("4111 1111 1111 11 ") — so none of it is kept, however long (a review: with masks before it
   * shortening the text, 14 of a card's digits fitted, unmasked) */
  if (more) {
    size_t end = len;
    if (end >= 2 && (u[end - 1] == ' ' || u[end - 1] == '-') && is_digit(u[end - 2])) end--;
    size_t start = end;
    while (start > 0) {
      unsigned char c = u[start - 1];
      bool sep = (c == ' ' || c == '-') && start >= 2 && is_digit(u[start - 2]) &&
                 start < end && is_digit(u[start]);
      if (!(c < 0x80 && word_byte(c)) && !sep) break;
      start--;
    }
    if ((start < end || end < len) && n > start) n = start;
  }
  size_t at = n;
  if (n > 0 && word_byte(u[n - 1]) && (n == len || word_byte(u[n]))) {
    while (n > 0 && at - n <= 128) {
      /* a card number's groups: digits on both sides of a space or a dash */
      bool sep = (u[n - 1] == ' ' || u[n - 1] == '-') && n >= 2 && is_digit(u[n - 2]) &&
                 n < len && is_digit(u[n]);
      if (!word_byte(u[n - 1]) && !sep) break;
      n--;
    }
    if (at - n > 128) n = at;
  }
  return n;
}

/* (a header name too long to read is taken as sensitive: a vendor's long name may end in
 * "-Api-Secret", and dropping or masking an unread header costs little) */
bool hookd_redact_name_sensitive(const char *name) {
  value_kind auth;
  bool too_long;
  return (sensitive_key(name, 0, strlen(name), &auth, &too_long) && auth != VALUE_SIGNATURE) ||
         too_long;
}

bool hookd_redact_name_masked(const char *name) {
  value_kind auth;
  bool too_long;
  return sensitive_key(name, 0, strlen(name), &auth, &too_long) || too_long;
}

/* "key": "value", key=value, key: value, where the key holds a sensitive part — the value
 * masked, the rest kept; an authorization's unquoted value (a header line: "Bot …", "Token …")
 * to the end of its line. A signature's value unless it is prose (an error message naming the
 * signature must stay readable: "invalid signature: clock skew 42s", "signature=ok"), to the
 * end of its line or form field ("v1,… v1,…", "t=…,v1=…", "sha256=…"). A key-like word that
 * is none of these is kept whole. */
static bool ends_signature(unsigned char c) {
  return c == '\r' || c == '\n' || c == '&' || c == '"' || c == '\'' || c == '<' || c == '}';
}

/* A signature's schemes, as the headers that carry them write them */
static bool signature_scheme(const char *s, size_t n) {
  static const char *const schemes[] = {"v1,",   "v1a,",   "t=",      "ts=",   "v0=",
                                        "v0:",   "v1=",    "sha1=",   "sha256=", "sha512=",
                                        "sha1 ", "sha256 ", "sha512 "};
  for (size_t k = 0; k < sizeof schemes / sizeof *schemes; k++) {
    size_t l = strlen(schemes[k]);
    if (n > l && !strncasecmp(s, schemes[k], l)) return true;
  }
  return false;
}

static bool letters(const char *s, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (!is_alpha((unsigned char)s[k])) return false;
  return true;
}

/* A signature field's value that is no signature but words about it, judged by its first word
 * of w bytes (more: words follow it), the value having no scheme: fewer than 8 bytes ("ok",
 * "false", "invalid …", "expired at 12:00"), or letters only followed by more words
 * ("mismatched digest"). One blob of 8 bytes or more — base64 with JSON or percent escapes,
 * hex, letters — is a signature. */
static bool prose_start(const char *s, size_t w, bool more) {
  return w < 8 || (more && letters(s, w));
}

/* Where the list or object opening at in[v] ends (after its closing bracket), brackets inside
 * its strings not counted; len when it does not end (cut short: the rest is its). */
static size_t bracket_end(const char *in, size_t len, size_t v) {
  size_t depth = 0;
  for (size_t k = v; k < len; k++) {
    char ch = in[k];
    if (ch == '\\') {
      k++; /* an escape outside a string (JSON quoted in JSON): \" opens nothing */
    } else if (ch == '"') {
      for (k++; k < len && in[k] != '"'; k++)
        if (in[k] == '\\') k++;
    } else if (ch == '[' || ch == '{') {
      depth++;
    } else if ((ch == ']' || ch == '}') && --depth == 0) {
      return k + 1;
    }
  }
  return len;
}

static span match_named(const char *in, size_t len, size_t i) {
  size_t w = run(in, len, i, key_char);
  if (!w) return kept(0);
  size_t j = i + w;
  value_kind auth = VALUE_PLAIN; /* a name (followed by ':' or '='), then a sensitive one */
  bool too_long;
  /* an XML element's text: <password>…</password> */
  if (i > 0 && in[i - 1] == '<' && j < len && in[j] == '>' && w >= 3 &&
      sensitive_key(in, i, w, &auth, &too_long)) {
    size_t v = j + 1, e = v;
    while (e < len && in[e] != '<') e++;
    return e > v ? masked(v - i, e - i) : kept(v - i);
  }
  /* (a quote after the name may be escaped: JSON quoted in a JSON string, {"got":"{\"token\":…;
   * PHP's print_r brackets it: [password] => …) */
  bool bracket = i > 0 && in[i - 1] == '[';
  while (j < len && (in[j] == '"' || in[j] == '\'' || in[j] == '\\' || (bracket && in[j] == ']')))
    j++;
  while (j < len && (in[j] == ' ' || in[j] == '\t')) j++;
  if (j >= len || (in[j] != ':' && in[j] != '=') || w < 3 ||
      !sensitive_key(in, i, w, &auth, &too_long))
    return kept(w);
  j++;
  if (j < len && in[j - 1] == '=' && in[j] == '>') j++; /* Ruby's and PHP's "password" => … */
  while (j < len && (in[j] == ' ' || in[j] == '\t')) j++;
  /* a quote escaped once (JSON in a JSON string: \"), or thrice (in a string in a string: \\\") */
  size_t esc = run(in, len, j, is_backslash);
  if (!(esc % 2) || j + esc >= len || (in[j + esc] != '"' && in[j + esc] != '\'')) esc = 0;
  j += esc;
  if (j < len && (in[j] == '"' || in[j] == '\'')) {
    char q = in[j];
    size_t v = ++j;
    if (esc) { /* an escaped value ends at the next quote escaped as the opening one (\"),
                * before its backslashes; one escaped once more (\\\") is a quote inside the
                * value, and a backslash ending the value is escaped more (\\\\\" ends it too):
                * the run before the closing quote is esc, give or take 2 * (esc + 1) */
      size_t end = len;
      for (size_t k = j; k < len && end == len; k++) {
        if (in[k] != q) continue;
        size_t b = 0;
        while (k - b > v && in[k - 1 - b] == '\\') b++;
        if (b % (2 * (esc + 1)) == esc) end = k - esc;
      }
      j = end;
    } else {
      while (j < len && in[j] != q) j += in[j] == '\\' && j + 1 < len ? 2 : 1;
    }
    if (j > len) j = len;
    /* a signature's text that is prose is read on (an address in it is still masked) */
    if (auth == VALUE_SIGNATURE && !signature_scheme(in + v, j - v)) {
      size_t e = v;
      while (e < j && in[e] != ' ' && in[e] != '\t') e++;
      if (prose_start(in + v, e - v, e < j)) return kept(v - i);
    }
    return j > v ? masked(v - i, j - i) : kept(v - i); /* the closing quote follows */
  }
  size_t v = j;
  /* a value that reads "[redacted]" (a receiver echoing masked logs) is kept as it is: masked
   * again, its closing ']' would end the value and be left after the mask */
  if (len - v >= MASK_LEN && !memcmp(in + v, MASK, MASK_LEN)) return kept(v - i + MASK_LEN);
  /* a list or an object (Go's http.Header, Node's headersDistinct echo a header as a list of
   * its values: {"X-Api-Key":["k3y"]}) is masked whole, to its closing bracket: read as a
   * word, only its '[' was (the value inside kept) */
  if (v < len && (in[v] == '[' || in[v] == '{')) return masked(v - i, bracket_end(in, len, v) - i);
  if (auth == VALUE_SIGNATURE) {
    /* decided by its first word, read once: prose read on from there, a lone blob masked
     * alone, anything else to its end (never a scan to the line's end for words kept: each
     * of many names on one line would read the rest of the line again) */
    size_t e = v;
    while (e < len && in[e] != ' ' && in[e] != '\t' && !ends_signature((unsigned char)in[e])) e++;
    bool more = e < len && (in[e] == ' ' || in[e] == '\t');
    if (!signature_scheme(in + v, len - v)) {
      if (prose_start(in + v, e - v, more)) return kept(e - i);
      if (!more) return masked(v - i, e - i); /* one blob (an empty one is prose) */
    }
  }
  while (j < len && (auth == VALUE_AUTH ? in[j] != '\r' && in[j] != '\n'
                     : auth == VALUE_PLAIN ? !ends_value((unsigned char)in[j])
                                           : !ends_signature((unsigned char)in[j])))
    j++;
  return j > v ? masked(v - i, j - i) : kept(v - i);
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
static span match_scheme(const char *in, size_t len, size_t i) {
  size_t n = len - i > 6 && !strncasecmp(in + i, "bearer ", 7)  ? 7
             : len - i > 5 && !strncasecmp(in + i, "basic ", 6) ? 6
                                                                  : 0;
  if (!n) return kept(0);
  size_t j = i + n;
  while (j < len && in[j] == ' ') j++;
  size_t t = tok_run(in, len, j);
  return credential_shaped(in + j, t) ? masked(j - i, j + t - i) : kept(0);
}

#define P(s, min) {s, sizeof s - 1, min}
static const struct {
  const char *prefix;
  size_t n, min; /* its length; token characters after it */
} prefixes[] = {P("whsec_", 8),  P("whsk_", 8),   P("sk_live_", 8), P("sk_test_", 8),
                P("rk_live_", 8), P("rk_test_", 8), P("xoxb-", 8),   P("xoxp-", 8),
                P("xoxa-", 8),   P("ghp_", 16),    P("gho_", 16),    P("ghs_", 16),
                P("github_pat_", 16), P("AKIA", 16), P("AIza", 30), P("glpat-", 16),
                P("sk-", 20)};

/* A URL's credentials (scheme://user:password@host), i at its "://": masked to the '@',
 * whatever the host (an address's mask needs a domain: postgres://app:pw@db:5432 is none) */
static span match_userinfo(const char *in, size_t len, size_t i) {
  if (len - i < 5 || in[i + 1] != '/' || in[i + 2] != '/') return kept(0);
  for (size_t k = i + 3; k < len && k - i < 512; k++) {
    unsigned char c = (unsigned char)in[k];
    if (c == '@') return k > i + 3 ? masked(3, k - i) : kept(0);
    if (c <= ' ' || strchr("/?#\"'<>\\[]{}", c)) break;
  }
  return kept(0);
}

/* a token with a known prefix, or a JSON Web Token */
static span match_token(const char *in, size_t len, size_t i) {
  for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
    size_t n = prefixes[k].n;
    if (in[i] != prefixes[k].prefix[0] || len - i < n || memcmp(in + i, prefixes[k].prefix, n))
      continue;
    size_t t = tok_run(in, len, i + n);
    return t >= prefixes[k].min ? masked(0, n + t) : kept(n + t); /* too short: read once */
  }
  if (len - i < 3 || memcmp(in + i, "eyJ", 3) != 0) return kept(0);
  size_t a = run(in, len, i, is_b64url), j = i + a;
  if (j < len && in[j] == '.') {
    size_t b = run(in, len, j + 1, is_b64url);
    if (b && j + 1 + b < len && in[j + 1 + b] == '.')
      return masked(0, a + b + 2 + run(in, len, j + 2 + b, is_b64url));
  }
  return kept(a); /* no later "eyJ" inside this run can be one either */
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
 * passing the Luhn check; any other digit run is kept whole */
static span match_card(const char *in, size_t len, size_t i) {
  if (!is_digit((unsigned char)in[i])) return kept(0);
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
    return masked(0, j - i);
  return kept(j - i);
}

/* At an '@': the domain after it, read whole. *address when it has a dot and a top-level label
 * of two letters or more (then the address ends at *end). */
static size_t email_domain(const char *in, size_t len, size_t i, bool *address, size_t *end) {
  size_t j = i + 1, last_dot = 0;
  while (j < len && (is_alnum((unsigned char)in[j]) || in[j] == '-' || in[j] == '.')) {
    if (in[j] == '.' && j + 1 < len && is_alnum((unsigned char)in[j + 1])) last_dot = j;
    j++;
  }
  size_t e = j;
  while (e > i + 1 && (in[e - 1] == '.' || in[e - 1] == '-')) e--; /* "at a@b.com." */
  bool ok = last_dot > i + 1 && last_dot < e && e - last_dot - 1 >= 2;
  for (size_t k = last_dot + 1; ok && k < e; k++) ok = is_alpha((unsigned char)in[k]);
  *address = ok;
  *end = e;
  return j - i;
}

/* Marks in mask (len bytes, zeroed) what the masks above cover. */
static void redact_mark(const char *in, size_t len, unsigned char *mask) {
  size_t i = 0, copy = 0; /* in[..copy) is decided: no later mask starts before it */
  size_t local = 0;       /* with in_local: in[local..i) may be an address's local part */
  bool in_local = false;
  while (i < len) {
    unsigned char c = (unsigned char)in[i];
    span s = kept(0);
    if (i == 0 || !is_alnum((unsigned char)in[i - 1])) {
      if (c == 'b' || c == 'B') s = match_scheme(in, len, i);
      /* the first letters of the prefixes and of "eyJ" */
      if (!s.n && (c == 'w' || c == 's' || c == 'r' || c == 'x' || c == 'g' || c == 'A' || c == 'e'))
        s = match_token(in, len, i);
      if (!s.n && is_digit(c)) s = match_card(in, len, i);
      if (!s.n && key_char(c)) s = match_named(in, len, i);
    }
    if (!s.n && c == ':') s = match_userinfo(in, len, i);
    if (!s.n && c == '@' && in_local) {
      bool address;
      size_t end;
      size_t n = email_domain(in, len, i, &address, &end);
      if (address) { /* the local part goes into the mask too */
        size_t from = local > copy ? local : copy;
        memset(mask + from, 1, end - from);
        i = copy = end;
        in_local = false;
        continue;
      }
      s = kept(n);
    }
    if (s.mask) {
      memset(mask + i + s.keep, 1, s.n - s.keep);
      i = copy = i + s.n;
      in_local = false;
      continue;
    }
    size_t n = s.n ? s.n : 1; /* kept: a span a matcher read, or this one byte */
    /* the kept bytes continue, start or end an address's local part */
    size_t k = n;
    while (k && is_local((unsigned char)in[i + k - 1])) k--;
    if (k) local = i + k;
    else if (!in_local) local = i;
    in_local = k < n;
    i += n;
  }
}

/* in[0..len) appended to out, each run of marked bytes as one mask. */
static int emit_masked(const char *in, size_t len, const unsigned char *mask, hookd_buf *out) {
  int rc = HOOKD_BUF_OK;
  for (size_t i = 0; i < len && !rc;) {
    size_t j = i;
    while (j < len && mask[j] == mask[i]) j++;
    rc = mask[i] ? hookd_buf_append(out, MASK, MASK_LEN) : hookd_buf_append(out, in + i, j - i);
    i = j;
  }
  return rc;
}

static int mark_decoded(const char *in, size_t len, unsigned char *mask);

int hookd_redact(const char *in, size_t len, hookd_buf *out) {
  if (!len) return HOOKD_BUF_OK;
  unsigned char *mask = calloc(len, 1);
  if (!mask) return HOOKD_BUF_NOMEM;
  redact_mark(in, len, mask);
  int rc = mark_decoded(in, len, mask);
  if (!rc) rc = emit_masked(in, len, mask, out);
  free(mask);
  return rc;
}

/* ---------- an endpoint's own header values ---------- */

#define VALUE_MIN 4

/* The response as an encoder would have written a value into it: view byte i decodes
 * in[from[i]..from[i + 1]) (from: NULL for the response itself, byte for byte). */
typedef struct view {
  char *b;
  size_t *from; /* n + 1 entries; from[n]: where the decoded part ends (before an escape cut
                   off with the response, else the response's length) */
  size_t n;
} view;

static size_t at(const view *w, size_t i) { return w->from ? w->from[i] : i; }

/* How many of s[0..n) are hex digits, from the start. */
static size_t hex_run(const char *s, size_t n) {
  size_t k = 0;
  while (k < n && hookd_hex_digit(s[k]) >= 0) k++;
  return k;
}

enum { DECODE_JSON, DECODE_URL, DECODE_FORM, DECODE__COUNT };

/* Decodes in[0..len) into w (its buffers sized len and len + 1) as JSON's escapes (\" \\ \/ \b
 * \f \n \r \t \uXXXX — a character past ASCII decodes to a NUL, which no value holds), as a
 * URL's percent-encoding ('%' and two hex digits; encodeURI leaves a '+' as it is) or as a
 * form's (a '+' is a blank). What is no escape is itself. With cut, an escape the response
 * ends inside of ends the view. false when nothing decoded (the view is the response). */
static bool decode(const char *in, size_t len, int how, bool cut, view *w) {
  bool json = how == DECODE_JSON;
  size_t o = 0, i = 0;
  bool changed = false;
  while (i < len) {
    size_t step = 1;
    char c = in[i];
    if (json && c == '\\') {
      char e = i + 1 < len ? in[i + 1] : 0;
      const char *simple = e ? strchr("\"\\/bfnrt", e) : NULL;
      if (simple) {
        static const char to[] = "\"\\/\b\f\n\r\t";
        c = to[simple - "\"\\/bfnrt"];
        step = 2;
      } else if (e == 'u' && i + 6 <= len && hex_run(in + i + 2, 4) == 4) {
        int code = 0;
        for (int k = 2; k < 6; k++) code = code << 4 | hookd_hex_digit(in[i + k]);
        c = code < 0x80 ? (char)code : '\0';
        step = 6;
      } else if (cut && (i + 1 == len || (e == 'u' && hex_run(in + i + 2, len - i - 2) ==
                                                          len - i - 2))) {
        break; /* "\" or "\u00" at the very end */
      }
    } else if (!json && c == '%') {
      if (i + 3 <= len && hex_run(in + i + 1, 2) == 2) {
        c = (char)((hookd_hex_digit(in[i + 1]) << 4) | hookd_hex_digit(in[i + 2]));
        step = 3;
      } else if (cut && i + 3 > len && hex_run(in + i + 1, len - i - 1) == len - i - 1) {
        break; /* "%" or "%2" at the very end */
      }
    } else if (how == DECODE_FORM && c == '+') {
      c = ' ';
      changed = true;
    }
    changed |= step > 1;
    w->b[o] = c;
    w->from[o++] = i;
    i += step;
  }
  w->from[o] = i;
  w->n = o;
  return changed || i < len;
}

/* Marks in mask (the response's, len bytes) every occurrence of v[0..n) in the view w —
 * overlapping ones too, each byte marked once — and, with cut, a beginning of v (VALUE_MIN
 * bytes or more) that w ends with, to the response's end. One pass of Knuth-Morris-Pratt's
 * automaton (fail: room for n entries): linear in the view + n whatever the value repeats. */
static int mask_value(const view *w, size_t len, const char *v, size_t n, bool cut,
                      unsigned char *mask, size_t **fail) {
  size_t *f = realloc(*fail, n * sizeof *f);
  if (!f) return HOOKD_BUF_NOMEM;
  *fail = f;
  f[0] = 0;
  for (size_t i = 1, k = 0; i < n; i++) {
    while (k && v[i] != v[k]) k = f[k - 1];
    if (v[i] == v[k]) k++;
    f[i] = k;
  }
  size_t k = 0, marked = 0; /* the response's [..marked) is marked as far as this value goes */
  for (size_t i = 0; i < w->n; i++) {
    while (k && w->b[i] != v[k]) k = f[k - 1];
    if (w->b[i] == v[k]) k++;
    if (k == n) { /* an occurrence ends at i */
      size_t from = at(w, i + 1 - n) < marked ? marked : at(w, i + 1 - n), to = at(w, i + 1);
      memset(mask + from, 1, to - from);
      marked = to;
      k = f[n - 1];
    }
  }
  if (cut && k >= VALUE_MIN) { /* k < n: a value's beginning, cut off with the response */
    memset(mask + at(w, w->n - k), 1, len - at(w, w->n - k));
  }
  return HOOKD_BUF_OK;
}

/* The masks above run again over the response as JSON's escapes and as percent-encoding decode
 * it, each byte they mask there masking the bytes it decodes from: a field written inside a
 * string escaped otherwise than \" (.NET's \u0022password\u0022:\u0022…, JSON in a string in
 * a string) or inside an encoded URL (redirect_uri=…%3Faccess_token%3D…) showed its value (a
 * review). */
static int mark_decoded(const char *in, size_t len, unsigned char *mask) {
  int rc = HOOKD_BUF_OK;
  for (int how = DECODE_JSON; how <= DECODE_URL && !rc; how++) {
    if (!memchr(in, how == DECODE_JSON ? '\\' : '%', len)) continue;
    view w = {malloc(len), malloc((len + 1) * sizeof(size_t)), 0};
    unsigned char *vm = calloc(len, 1);
    if (!w.b || !w.from || !vm) {
      rc = HOOKD_BUF_NOMEM;
    } else if (decode(in, len, how, true, &w)) {
      redact_mark(w.b, w.n, vm);
      for (size_t i = 0; i < w.n; i++)
        if (vm[i]) memset(mask + w.from[i], 1, w.from[i + 1] - w.from[i]);
    }
    free(w.b);
    free(w.from);
    free(vm);
  }
  return rc;
}

/* A value's part masked on its own is at least this long: a credential's words ("Bearer
 * <token>"), a Basic credential's password — shorter ones are common words. */
#define PART_MIN 8
#define PARTS_MAX 4 /* words of a value masked on their own */

/* Marks v[0..n) in every view, and its HTML-escaped form when it holds a character HTML escapes
 * (an error page echoing it: &amp;, &lt;, &gt;, &quot;, &#39;). */
static int mask_views(const view *views, size_t n_views, size_t len, const char *v, size_t n,
                      bool cut, unsigned char *mask, size_t **fail) {
  int rc = HOOKD_BUF_OK;
  for (size_t k = 0; k < n_views && !rc; k++)
    rc = mask_value(&views[k], len, v, n, cut, mask, fail);
  size_t extra = 0;
  for (size_t i = 0; i < n; i++)
    extra += v[i] == '"' ? 5 : v[i] == '&' || v[i] == '\'' ? 4 : v[i] == '<' || v[i] == '>' ? 3 : 0;
  if (rc || !extra) return rc;
  char *h = malloc(n + extra), *o = h;
  if (!h) return HOOKD_BUF_NOMEM;
  for (size_t i = 0; i < n; i++) {
    const char *e = v[i] == '&'   ? "&amp;"
                    : v[i] == '<' ? "&lt;"
                    : v[i] == '>' ? "&gt;"
                    : v[i] == '"' ? "&quot;"
                    : v[i] == '\'' ? "&#39;"
                                   : NULL;
    if (e) {
      memcpy(o, e, strlen(e));
      o += strlen(e);
    } else {
      *o++ = v[i];
    }
  }
  for (size_t k = 0; k < n_views && !rc; k++)
    rc = mask_value(&views[k], len, h, (size_t)(o - h), cut, mask, fail);
  free(h);
  return rc;
}

/* Marks the parts of a value v[0..n) a receiver echoes alone: each blank-separated word of
 * PART_MIN bytes or more of a value of several ("Bearer <token>": the token, as a 401's body
 * quotes it), and of a Basic credential the user:password it decodes to and the password (a
 * review: each shown to every reader of the tenant's deliveries while the whole value was
 * masked). */
static int mask_parts(const view *views, size_t n_views, size_t len, const char *v, size_t n,
                      bool cut, unsigned char *mask, size_t **fail) {
  if (!memchr(v, ' ', n)) return HOOKD_BUF_OK;
  int rc = HOOKD_BUF_OK, parts = 0;
  bool basic = n > 6 && !strncasecmp(v, "basic ", 6);
  /* (the first PARTS_MAX words: a credential has one or two, and each is a pass over the
   * response — 20 values of 100 words would be 2,000 on the dispatcher's thread) */
  for (size_t i = 0; i < n && !rc && parts < PARTS_MAX;) {
    while (i < n && v[i] == ' ') i++;
    size_t s = i;
    while (i < n && v[i] != ' ') i++;
    if (i - s >= PART_MIN && ++parts)
      rc = mask_views(views, n_views, len, v + s, i - s, cut, mask, fail);
    if (rc || !basic || s != 6 || i - s > 1024) continue;
    unsigned char dec[768 + 3];
    long dn = hookd_b64_decode(v + s, i - s, dec);
    const unsigned char *colon = dn > 0 ? memchr(dec, ':', (size_t)dn) : NULL;
    if (!colon) continue;
    size_t pw = (size_t)dn - (size_t)(colon + 1 - dec);
    if ((size_t)dn >= VALUE_MIN)
      rc = mask_views(views, n_views, len, (const char *)dec, (size_t)dn, cut, mask, fail);
    if (!rc && pw >= PART_MIN)
      rc = mask_views(views, n_views, len, (const char *)colon + 1, pw, cut, mask, fail);
  }
  return rc;
}

/* Marks in mask (len bytes) every occurrence of the values of lines (hookd_redact_values). */
static int values_mark(const char *in, size_t len, const char *lines, bool cut,
                       unsigned char *mask) {
  size_t *fail = NULL;
  /* the response as it is, and as each encoding decodes it */
  view views[1 + DECODE__COUNT] = {{(char *)in, NULL, len}};
  size_t n_views = 1;
  int rc = HOOKD_BUF_OK;
  for (int how = 0; how < DECODE__COUNT && lines && *lines && len; how++) {
    if (!memchr(in, how == DECODE_JSON ? '\\' : how == DECODE_URL ? '%' : '+', len)) continue;
    view *w = &views[n_views];
    w->b = malloc(len);
    w->from = malloc((len + 1) * sizeof *w->from);
    if (!w->b || !w->from) {
      free(w->b);
      free(w->from);
      rc = HOOKD_BUF_NOMEM;
      break;
    }
    n_views++;
    if (!decode(in, len, how, cut, w)) { /* nothing decoded: the response's own pass */
      free(w->b);
      free(w->from);
      n_views--;
    }
  }
  for (const char *l = lines; l && *l && !rc;) {
    const char *nl = strchr(l, '\n');
    const char *end = nl ? nl : l + strlen(l);
    const char *colon = memchr(l, ':', (size_t)(end - l));
    const char *v = colon ? colon + 1 : end;
    while (v < end && *v == ' ') v++;
    size_t n = (size_t)(end - v);
    l = nl ? nl + 1 : end;
    if (n < VALUE_MIN) continue;
    rc = mask_views(views, n_views, len, v, n, cut, mask, &fail);
    if (!rc) rc = mask_parts(views, n_views, len, v, n, cut, mask, &fail);
  }
  free(fail);
  for (size_t k = 1; k < n_views; k++) {
    free(views[k].b);
    free(views[k].from);
  }
  return rc;
}

int hookd_redact_values(const char *in, size_t len, const char *lines, bool cut, hookd_buf *out) {
  if (!len) return HOOKD_BUF_OK;
  unsigned char *mask = calloc(len, 1);
  if (!mask) return HOOKD_BUF_NOMEM;
  int rc = values_mark(in, len, lines, cut, mask);
  if (!rc) rc = emit_masked(in, len, mask, out);
  free(mask);
  return rc;
}

int hookd_redact_excerpt(const char *in, size_t len, const char *lines, bool cut,
                         hookd_buf *out) {
  if (!len) return HOOKD_BUF_OK;
  unsigned char *mask = calloc(len, 1);
  if (!mask) return HOOKD_BUF_NOMEM;
  int rc = lines ? values_mark(in, len, lines, cut, mask) : HOOKD_BUF_OK;
  /* and once more with the values' bytes made blanks: a credential or card number right
   * against a value ("4111111111111111live") has its word's end there, as the value's mask
   * gave it when the passes ran one after the other */
  char *apart = NULL;
  if (!rc && memchr(mask, 1, len)) {
    if (!(apart = malloc(len))) rc = HOOKD_BUF_NOMEM;
    for (size_t i = 0; apart && i < len; i++) apart[i] = mask[i] ? ' ' : in[i];
  }
  if (!rc) redact_mark(in, len, mask);
  if (apart) redact_mark(apart, len, mask);
  free(apart);
  if (!rc) rc = mark_decoded(in, len, mask);
  if (!rc) rc = emit_masked(in, len, mask, out);
  free(mask);
  return rc;
}

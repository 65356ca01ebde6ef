/* version.c — object versions for late-event detection: normalisation and exact comparison.
 *
 * A stale event is answered 2xx and never forwarded, so a wrong "older" is a silently lost
 * event: numbers compare by exact decimal value (a double would merge 2^53 + 1 with 2^53 and a
 * byte comparison puts "10" before "9"), date-times by their instant. */
#include "core/version.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/timefmt.h"

/* A decimal literal as 0.DIGITS × 10^exp, DIGITS without leading or trailing zeros. */
typedef struct decimal {
  int neg;
  const char *s; /* the literal */
  int64_t exp;
  size_t lead, n_int, n_frac; /* int digits at s[lead..], fraction digits after the '.' */
} decimal;

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool parse_decimal(const char *s, decimal *d) {
  memset(d, 0, sizeof *d);
  d->s = s;
  const char *p = s;
  if (*p == '-') {
    d->neg = 1;
    p++;
  }
  d->lead = (size_t)(p - s);
  while (is_digit(*p)) p++;
  d->n_int = (size_t)(p - s) - d->lead;
  if (!d->n_int) return false;
  if (*p == '.') {
    const char *f = ++p;
    while (is_digit(*p)) p++;
    d->n_frac = (size_t)(p - f);
    if (!d->n_frac) return false;
  }
  int64_t e = 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    int sign = 1;
    if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
    const char *ed = p;
    while (is_digit(*p)) {
      if (p - ed >= 9) return false; /* a 10th digit: refused before it could overflow e */
      e = e * 10 + (*p++ - '0');
    }
    if (p == ed) return false;
    e *= sign;
  }
  if (*p) return false;
  d->exp = (int64_t)d->n_int + e; /* point position before stripping leading zeros */
  return true;
}

/* The i-th digit of int digits followed by fraction digits. */
static char digit_at(const decimal *d, size_t i) {
  const char *ip = d->s + d->lead;
  return i < d->n_int ? ip[i] : ip[d->n_int + 1 + (i - d->n_int)];
}

/* Strips leading and trailing zeros: first/last significant digit indexes; false when zero. */
static bool significant(decimal *d, size_t *first, size_t *end) {
  size_t n = d->n_int + d->n_frac, f = 0, e = n;
  while (f < n && digit_at(d, f) == '0') f++;
  if (f == n) return false;
  while (e > f && digit_at(d, e - 1) == '0') e--;
  d->exp -= (int64_t)f;
  *first = f;
  *end = e;
  return true;
}

bool hookd_version_is_decimal(const char *s) {
  decimal d;
  return s && parse_decimal(s, &d);
}

int hookd_version_cmp_decimal(const char *a, const char *b) {
  decimal x, y;
  if (!a || !b || !parse_decimal(a, &x) || !parse_decimal(b, &y)) return 2;
  size_t xf, xe, yf, ye;
  bool xnz = significant(&x, &xf, &xe), ynz = significant(&y, &yf, &ye);
  int xs = xnz ? (x.neg ? -1 : 1) : 0, ys = ynz ? (y.neg ? -1 : 1) : 0;
  if (xs != ys) return xs < ys ? -1 : 1;
  if (xs == 0) return 0;
  int mag; /* compare magnitudes */
  if (x.exp != y.exp) {
    mag = x.exp < y.exp ? -1 : 1;
  } else {
    mag = 0;
    size_t i = xf, j = yf;
    for (; i < xe && j < ye && !mag; i++, j++) {
      char cx = digit_at(&x, i), cy = digit_at(&y, j);
      if (cx != cy) mag = cx < cy ? -1 : 1;
    }
    if (!mag && (i < xe) != (j < ye)) mag = i < xe ? 1 : -1; /* more digits: larger */
  }
  return xs > 0 ? mag : -mag;
}

int hookd_version_normalize(const char *in, char *out, size_t cap, int *kind) {
  *kind = HOOKD_VERSION_TEXT;
  if (hookd_version_is_decimal(in)) {
    *kind = HOOKD_VERSION_NUMBER;
  } else {
    int64_t secs;
    char frac[HOOKD_RFC3339_FRAC_MAX];
    /* (before 1970 the fraction would count the wrong way from a negative second, and a leap
     * second reads as the second before it, ahead of that second's later fractions: text) */
    size_t len = strlen(in);
    bool leap = len > 18 && in[17] == '6' && in[18] == '0';
    if (!leap && hookd_parse_rfc3339_exact(in, &secs, frac) == 0 && secs >= 0) {
      int n = snprintf(out, cap, "%lld%s%s", (long long)secs, *frac ? "." : "", frac);
      if (n < 0 || (size_t)n >= cap) return -1;
      *kind = HOOKD_VERSION_NUMBER;
      return 0;
    }
  }
  size_t n = strlen(in);
  if (n >= cap) return -1;
  memcpy(out, in, n + 1);
  return 0;
}

bool hookd_version_older(const char *now, int now_kind, const char *seen, int seen_kind) {
  /* Text has no order hookd can trust ("v10" sorts before "v9" as bytes, "1.10.0" before
   * "1.9.0"), and a wrong "older" loses the event: text is never older. */
  if (!now || !seen || now_kind != HOOKD_VERSION_NUMBER || seen_kind != HOOKD_VERSION_NUMBER)
    return false;
  return hookd_version_cmp_decimal(now, seen) == -1;
}

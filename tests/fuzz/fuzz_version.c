/* fuzz_version.c — libFuzzer target for late-event versions (core/version.c): the input is split
 * at 0x01 bytes into three strings a, b, c. The exact decimal comparison must be a total order on
 * decimal literals — reflexive, antisymmetric (cmp(a,b) == -cmp(b,a)), transitive — and 2 exactly
 * when an operand is not a decimal literal; it must agree with strtod wherever the (correctly
 * rounded, hence monotonic) doubles differ, be unchanged by leading zeros, ".0" or "e0", and be
 * reversed by negation. hookd_version_normalize must keep decimals and text unchanged, turn an
 * RFC 3339 instant into a decimal literal ordered as the instants are, and fit its cap;
 * hookd_version_older is true only for two numbers the comparison puts in order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/timefmt.h"
#include "core/version.h"

#define MAX_LEN 512 /* versions are short; longer inputs only slow strtod down */

static int cmp(const char *a, const char *b) {
  int r = hookd_version_cmp_decimal(a, b);
  check(r == -1 || r == 0 || r == 1 || r == 2);
  check((r == 2) == (!hookd_version_is_decimal(a) || !hookd_version_is_decimal(b)));
  return r;
}

/* Same value, other spellings: a leading zero, a ".0" or a "0" on the fraction, an "e0". */
static void same_value(const char *a) {
  if (!hookd_version_is_decimal(a)) return;
  size_t n = strlen(a), sign = a[0] == '-';
  char *v = malloc(n + 4);
  if (!v) abort();
  memcpy(v, a, sign);
  v[sign] = '0';
  memcpy(v + sign + 1, a + sign, n - sign + 1);
  check(cmp(a, v) == 0 && cmp(v, a) == 0);
  if (!strpbrk(a, "eE")) {
    memcpy(v, a, n);
    strcpy(v + n, strchr(a, '.') ? "0" : ".0");
    check(cmp(a, v) == 0);
    strcpy(v + n, "e0");
    check(cmp(a, v) == 0);
  }
  free(v);
}

/* -a vs -b reverses a vs b (a, b non-negative spellings). */
static void negation(const char *a, const char *b, int r) {
  if (r == 2 || a[0] == '-' || b[0] == '-') return;
  size_t an = strlen(a), bn = strlen(b);
  char *na = malloc(an + 2), *nb = malloc(bn + 2);
  if (!na || !nb) abort();
  na[0] = nb[0] = '-';
  memcpy(na + 1, a, an + 1);
  memcpy(nb + 1, b, bn + 1);
  check(cmp(na, nb) == -r);
  free(na);
  free(nb);
}

/* strtod is correctly rounded, so x < y exactly whenever strtod(x) < strtod(y). */
static void against_double(const char *a, const char *b, int r) {
  if (r == 2) return;
  double x = strtod(a, NULL), y = strtod(b, NULL);
  if (x < y) check(r == -1);
  if (x > y) check(r == 1);
}

/* normalize: fits, NUL-terminated; decimals and text unchanged; numbers are decimal literals. */
static int normalize(const char *in, char *out, size_t cap) {
  int kind = -1;
  memset(out, 'x', cap);
  int rc = hookd_version_normalize(in, out, cap, &kind);
  check(rc == 0 || rc == -1);
  check(kind == HOOKD_VERSION_TEXT || kind == HOOKD_VERSION_NUMBER);
  if (rc != 0) return -1;
  check(memchr(out, '\0', cap) != NULL);
  if (kind == HOOKD_VERSION_NUMBER) check(hookd_version_is_decimal(out));
  if (hookd_version_is_decimal(in) || kind == HOOKD_VERSION_TEXT) check(strcmp(in, out) == 0);
  check(hookd_version_is_decimal(in) ? kind == HOOKD_VERSION_NUMBER : 1);
  return kind;
}

/* An RFC 3339 text the normaliser reads as an instant: (secs, fraction digits). */
static int instant(const char *s, int64_t *secs, char frac[HOOKD_RFC3339_FRAC_MAX]) {
  if (hookd_version_is_decimal(s) || hookd_parse_rfc3339_exact(s, secs, frac) != 0) return 0;
  size_t len = strlen(s);
  return !(len > 18 && s[17] == '6' && s[18] == '0') && *secs >= 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_LEN) return 0;
  const uint8_t *p = data;
  size_t left = size;
  char *a = segment(&p, &left);
  char *b = segment(&p, &left);
  char *c = dup_range(p, left);

  /* reflexive, antisymmetric, transitive */
  int ab = cmp(a, b), ba = cmp(b, a), bc = cmp(b, c), ac = cmp(a, c);
  check(cmp(a, a) == (hookd_version_is_decimal(a) ? 0 : 2));
  check(ab == 2 ? ba == 2 : ba == -ab);
  if (ab != 2 && bc != 2) {
    if (ab <= 0 && bc <= 0) check(ac <= 0 && (ac == 0) == (ab == 0 && bc == 0));
    if (ab >= 0 && bc >= 0) check(ac >= 0 && (ac == 0) == (ab == 0 && bc == 0));
  }
  against_double(a, b, ab);
  against_double(b, c, bc);
  same_value(a);
  same_value(b);
  negation(a, b, ab);

  /* normalisation, at a roomy cap and at a tight one */
  char na[MAX_LEN + 32], nb[MAX_LEN + 32], tight[8];
  int ka = normalize(a, na, sizeof na), kb = normalize(b, nb, sizeof nb);
  check(ka >= 0 && kb >= 0); /* a date normalises to at most 20 + 1 + 19 characters */
  (void)normalize(a, tight, sizeof tight);

  /* older: only two numbers, and exactly when the first is smaller */
  bool older = hookd_version_older(na, ka, nb, kb);
  if (ka == HOOKD_VERSION_NUMBER && kb == HOOKD_VERSION_NUMBER)
    check(older == (cmp(na, nb) == -1));
  else
    check(!older);
  check(!hookd_version_older(na, ka, na, ka));

  /* two instants normalise to numbers ordered as the instants are */
  int64_t sa, sb;
  char fa[HOOKD_RFC3339_FRAC_MAX], fb[HOOKD_RFC3339_FRAC_MAX];
  if (instant(a, &sa, fa) && instant(b, &sb, fb)) {
    check(ka == HOOKD_VERSION_NUMBER && kb == HOOKD_VERSION_NUMBER);
    int want = sa != sb ? (sa < sb ? -1 : 1) : strcmp(fa, fb); /* no trailing zeros */
    want = want < 0 ? -1 : want > 0;
    check(cmp(na, nb) == want);
  }

  free(a);
  free(b);
  free(c);
  return 0;
}

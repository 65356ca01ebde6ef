/* fuzz_inbound_form.c — libFuzzer target for the application/x-www-form-urlencoded parser
 * (core/inbound_form.c) that reads Twilio's signed form bodies and VNPay's signed query strings,
 * and its sort and lookup. fuzz_inbound_verify reaches it only behind each provider's other
 * checks and asserts nothing of its output; here the input bytes (NULs included) are parsed and
 * compared with a plain reference parser: the same refusals (bad %XX escape, too many pairs), the
 * same pairs in order, each NUL-terminated at its length, the same count of empty-name pairs.
 * hookd_in_form_get returns the first pair of a name, and hookd_in_form_sort gives the same pairs
 * ordered bytewise by name, then value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/inbound_int.h"

typedef struct ref_kv {
  char *k, *v;
  size_t klen, vlen;
} ref_kv;

static int hexv(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..n) decoded into a new string; -1 when an escape is malformed */
static long ref_decode(const uint8_t *s, size_t n, char **out) {
  char *d = malloc(n + 1);
  if (!d) abort();
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      if (n - i < 3) {
        free(d);
        return -1;
      }
      int hi = hexv(s[i + 1]), lo = hexv(s[i + 2]);
      if (hi < 0 || lo < 0) {
        free(d);
        return -1;
      }
      d[o++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      d[o++] = s[i] == '+' ? ' ' : (char)s[i];
    }
  }
  d[o] = '\0';
  *out = d;
  return (long)o;
}

static void ref_free(ref_kv *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(r[i].k);
    free(r[i].v);
  }
  free(r);
}

/* Returns 0 and the pairs with a name, or -1. */
static int ref_parse(const uint8_t *s, size_t len, ref_kv **out, size_t *n, size_t *empty) {
  *out = NULL;
  *n = *empty = 0;
  if (len == 0) return 0;
  size_t pairs = 1;
  for (size_t i = 0; i < len; i++) pairs += s[i] == '&';
  if (len > HOOKD_IN_MAX_FORM || pairs > HOOKD_IN_MAX_PAIRS) return -1;
  ref_kv *r = calloc(pairs, sizeof *r);
  if (!r) abort();
  size_t start = 0;
  for (;;) {
    const uint8_t *amp = memchr(s + start, '&', len - start);
    size_t end = amp ? (size_t)(amp - s) : len;
    if (end > start) {
      const uint8_t *eq = memchr(s + start, '=', end - start);
      size_t kend = eq ? (size_t)(eq - s) : end;
      char *k, *v;
      long kl = ref_decode(s + start, kend - start, &k);
      if (kl < 0) goto bad;
      long vl = eq ? ref_decode(eq + 1, end - kend - 1, &v) : ref_decode(s, 0, &v);
      if (vl < 0) {
        free(k);
        goto bad;
      }
      if (kl == 0) {
        (*empty)++;
        free(k);
        free(v);
      } else {
        r[*n] = (ref_kv){k, v, (size_t)kl, (size_t)vl};
        (*n)++;
      }
    }
    if (!amp) break;
    start = end + 1;
  }
  *out = r;
  return 0;
bad:
  ref_free(r, *n);
  *n = *empty = 0;
  return -1;
}

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}

static int ref_cmp(const void *pa, const void *pb) {
  const ref_kv *a = pa, *b = pb;
  int c = bytes_cmp(a->k, a->klen, b->k, b->klen);
  return c ? c : bytes_cmp(a->v, a->vlen, b->v, b->vlen);
}

static void same(const hookd_in_kv *kv, const ref_kv *r) {
  check(kv->klen == r->klen && kv->vlen == r->vlen);
  check(memcmp(kv->k, r->k, r->klen) == 0 && kv->k[kv->klen] == '\0');
  check(memcmp(kv->v, r->v, r->vlen) == 0 && kv->v[kv->vlen] == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy, so ASan sees a read past the end */
  char *s = malloc(size ? size : 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  hookd_in_form f;
  int rc = hookd_in_form_parse(s, size, &f);
  ref_kv *r;
  size_t rn, empty;
  int rrc = ref_parse(data, size, &r, &rn, &empty);
  check(rc == rrc);
  if (rc != 0) {
    check(f.kv == NULL && f.mem == NULL && f.n == 0);
    free(s);
    return 0;
  }
  check(f.n == rn && f.empty_names == empty);
  for (size_t i = 0; i < rn; i++) same(&f.kv[i], &r[i]);

  /* get: the first pair of each name (names without NULs: get takes a C string) */
  for (size_t i = 0; i < rn; i++) {
    if (memchr(r[i].k, '\0', r[i].klen)) continue;
    const hookd_in_kv *g = hookd_in_form_get(&f, r[i].k);
    size_t first = 0;
    while (bytes_cmp(r[first].k, r[first].klen, r[i].k, r[i].klen) != 0) first++;
    check(g == &f.kv[first]);
  }
  check(hookd_in_form_get(&f, "") == NULL); /* empty names are never kept */

  /* sort: ordered, and the same multiset as the reference sorted */
  hookd_in_form_sort(&f);
  if (rn > 1) qsort(r, rn, sizeof *r, ref_cmp);
  for (size_t i = 0; i < rn; i++) {
    same(&f.kv[i], &r[i]);
    if (i) check(bytes_cmp(f.kv[i - 1].k, f.kv[i - 1].klen, f.kv[i].k, f.kv[i].klen) <= 0);
  }
  hookd_in_form_free(&f);
  check(f.kv == NULL && f.mem == NULL && f.n == 0);
  ref_free(r, rn);
  free(s);
  return 0;
}

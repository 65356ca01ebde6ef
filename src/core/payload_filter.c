/* payload_filter.c — an endpoint's payload filter (payload_filter.h; docs/api.md "Payload
 * filters"). A filter is an object: each field key names a field of the value it is matched
 * against, each "$" key an operator on that value itself; every key must match. A field's
 * filter is a literal (equal, or, when the field is an array, one element equal), an object of
 * operators, or an object of its own fields (the field must be an object, or an array one of
 * whose elements matches them all; so must the payload itself). */
#include "core/payload_filter.h"

#include <stdio.h>
#include <string.h>

enum op {
  OP_EQ, OP_NEQ, OP_GT, OP_GTE, OP_LT, OP_LTE, OP_IN, OP_NIN, OP_STARTS, OP_ENDS, OP_CONTAINS,
  OP_EXIST, OP_NOT, OP_OR, OP_AND, OP_NONE
};

static const char *const op_names[] = {"$eq",  "$neq",        "$gt",       "$gte",
                                       "$lt",  "$lte",        "$in",       "$nin",
                                       "$startsWith", "$endsWith", "$contains", "$exist",
                                       "$not", "$or",         "$and"};

static enum op op_of(const char *key) {
  for (int i = 0; i < OP_NONE; i++)
    if (!strcmp(key, op_names[i])) return (enum op)i;
  return OP_NONE;
}

static bool scalar(const json_t *v) { return v && !json_is_object(v) && !json_is_array(v); }

/* ---------- check ---------- */

typedef struct check_ctx {
  char *path, *why;
  size_t path_cap, why_cap;
} check_ctx;

static int fail(check_ctx *x, const char *path, const char *what) {
  snprintf(x->path, x->path_cap, "%s", path);
  snprintf(x->why, x->why_cap, "%s", what);
  return -1;
}

static int check_node(check_ctx *x, const json_t *f, const char *path, int depth);

/* path: where f is, as "a.b.$or" ("" for the filter itself) */
static int check_object(check_ctx *x, const json_t *f, const char *path, int depth) {
  if (depth > HOOKD_PFILTER_MAX_DEPTH)
    return fail(x, path, "nested too deep (8 levels of objects and operators at most)");
  if (depth > 1 && json_object_size(f) == 0)
    return fail(x, path, "an empty object matches anything: leave it out");
  const char *k;
  const json_t *v;
  char sub[600];
  const char *field = NULL, *scalar_op = NULL; /* (both: a value that is no value) */
  json_object_foreach((json_t *)f, k, v) {
    snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
    if (k[0] != '$') {
      if (!*k) return fail(x, path, "a field name is empty");
      if (check_node(x, v, sub, depth + 1)) return -1;
      field = k;
      continue;
    }
    enum op op = op_of(k);
    /* these hold only for a scalar (or a string, a list), which has no fields */
    if (op == OP_EQ || op == OP_GT || op == OP_GTE || op == OP_LT || op == OP_LTE ||
        op == OP_STARTS || op == OP_ENDS || op == OP_CONTAINS || op == OP_IN)
      scalar_op = k;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    switch (op) {
    case OP_NONE:
      return fail(x, sub,
                  "not an operator ($eq, $neq, $gt, $gte, $lt, $lte, $in, $nin, $startsWith, "
                  "$endsWith, $contains, $exist, $not, $or, $and; a field's name may not start "
                  "with $)");
    case OP_EQ:
    case OP_NEQ:
      if (json_is_object(v) || json_is_array(v)) return fail(x, sub, "must be a scalar");
      break;
    case OP_GT:
    case OP_GTE:
    case OP_LT:
    case OP_LTE:
      if (!json_is_number(v) && !json_is_string(v))
        return fail(x, sub, "must be a number or a string");
      break;
    case OP_STARTS:
    case OP_ENDS:
      if (!json_is_string(v)) return fail(x, sub, "must be a string");
      break;
    case OP_CONTAINS:
      if (!scalar(v)) return fail(x, sub, "must be a scalar");
      break;
    case OP_EXIST:
      if (!json_is_boolean(v)) return fail(x, sub, "must be true or false");
      break;
    case OP_IN:
    case OP_NIN:
      if (!json_is_array(v) || n == 0 || n > HOOKD_PFILTER_MAX_LIST)
        return fail(x, sub, "must be an array of 1 to 256 scalars");
      for (size_t i = 0; i < n; i++)
        if (!scalar(json_array_get(v, i)))
          return fail(x, sub, "must be an array of 1 to 256 scalars");
      break;
    case OP_NOT:
      if (!json_is_object(v)) return fail(x, sub, "must be a filter (an object)");
      if (check_object(x, v, sub, depth + 1)) return -1;
      break;
    case OP_OR:
    case OP_AND:
      if (!json_is_array(v) || n == 0 || n > HOOKD_PFILTER_MAX_LIST)
        return fail(x, sub, "must be an array of 1 to 256 filters (objects)");
      for (size_t i = 0; i < n; i++) {
        const json_t *one = json_array_get(v, i);
        if (!json_is_object(one))
          return fail(x, sub, "must be an array of 1 to 256 filters (objects)");
        if (check_object(x, one, sub, depth + 1)) return -1;
      }
      break;
    }
  }
  if (field && scalar_op) {
    char why[200];
    snprintf(why, sizeof why, "%.40s needs a value without fields, and \"%.60s\" names one: it "
             "can never match", scalar_op, field);
    return fail(x, path, why);
  }
  return 0;
}

static int check_node(check_ctx *x, const json_t *f, const char *path, int depth) {
  if (json_is_array(f))
    return fail(x, path, "an array is not a filter: use $in, $contains or $and");
  return json_is_object(f) ? check_object(x, f, path, depth) : 0;
}

int hookd_pfilter_check(const json_t *filter, char *path, size_t path_cap, char *why,
                        size_t why_cap) {
  check_ctx x = {path, why, path_cap, why_cap};
  if (!json_is_object(filter)) return fail(&x, "", "must be an object");
  return check_object(&x, filter, "", 1);
}

/* ---------- match ---------- */

/* The steps left (a comparison, an element visited); below zero the match is abandoned. */
typedef struct budget {
  long left;
} budget;

/* a string's bytes cost a step each 64 (compared, searched) */
static bool spend_bytes(budget *b, size_t n) { return (b->left -= 1 + (long)(n / 64)) >= 0; }
static size_t slen(const json_t *v) { return json_is_string(v) ? json_string_length(v) : 0; }

/* An integer against a real, exactly: i as a double rounds above 2^53 (9007199254740993 would
 * equal 9007199254740992.0). -1, 0, 1. */
static int cmp_int_real(json_int_t i, double d) {
  if (d >= 9223372036854775808.0) return -1; /* 2^63: past every json_int_t */
  if (d < -9223372036854775808.0) return 1;
  json_int_t t = (json_int_t)d; /* toward zero; exact in this range */
  if (i != t) return i < t ? -1 : 1;
  double frac = d - (double)t; /* exact: d and t share their high bits */
  return frac > 0 ? -1 : frac < 0;
}

/* Two numbers: integers exactly, reals by value, an integer and a real exactly (1 equals 1.0). */
static int cmp_num(const json_t *a, const json_t *b) {
  if (json_is_integer(a) && json_is_integer(b)) {
    json_int_t x = json_integer_value(a), y = json_integer_value(b);
    return x < y ? -1 : x > y;
  }
  if (json_is_integer(a)) return cmp_int_real(json_integer_value(a), json_real_value(b));
  if (json_is_integer(b)) return -cmp_int_real(json_integer_value(b), json_real_value(a));
  double x = json_real_value(a), y = json_real_value(b);
  return x < y ? -1 : x > y;
}

/* Equal scalars: numbers by value, exactly (1 equals 1.0). */
static bool eq(const json_t *a, const json_t *b) {
  if (!a || !b) return false;
  if (json_is_number(a) && json_is_number(b)) return cmp_num(a, b) == 0;
  return json_equal((json_t *)a, (json_t *)b);
}

/* What comparing two values reads: two strings of one length are compared byte by byte, two of
 * different lengths not at all (json_equal compares the lengths first) — a review: charging a
 * long field's whole length made a $neq on it give up, and its endpoint lose the event. */
static size_t eq_bytes(const json_t *v, const json_t *want) {
  return json_is_string(v) && json_is_string(want) && slen(v) == slen(want) ? slen(v) : 0;
}

/* Equal, or, for an array value, one element equal. */
static bool eq_any(const json_t *v, const json_t *want, budget *b) {
  if (!json_is_array(v)) return spend_bytes(b, eq_bytes(v, want)) && eq(v, want);
  size_t i;
  const json_t *e;
  json_array_foreach((json_t *)v, i, e) {
    if (!spend_bytes(b, eq_bytes(e, want))) return false;
    if (eq(e, want)) return true;
  }
  return false;
}

/* <0, 0, >0, or 2 when the two do not compare (not both numbers, not both strings). */
static int cmp(const json_t *v, const json_t *to) {
  if (json_is_number(v) && json_is_number(to)) return cmp_num(v, to);
  if (json_is_string(v) && json_is_string(to)) {
    int c = strcmp(json_string_value(v), json_string_value(to));
    return c < 0 ? -1 : c > 0;
  }
  return 2;
}

static bool in_list(const json_t *v, const json_t *list, budget *b) {
  size_t i;
  const json_t *e;
  json_array_foreach((json_t *)list, i, e) {
    if (eq_any(v, e, b)) return true;
    if (b->left < 0) return false;
  }
  return false;
}

static bool match_object(const json_t *f, const json_t *v, budget *b);

/* 1 when the filter object f names a field (not operators alone). */
static bool names_fields(const json_t *f) {
  const char *k;
  const json_t *sub;
  json_object_foreach((json_t *)f, k, sub) {
    if (k[0] != '$') return true;
  }
  return false;
}

static bool match_node(const json_t *f, const json_t *v, budget *b) {
  if (!json_is_object(f)) return eq_any(v, f, b);
  /* fields against an array: one of its elements matches them, as a literal against an array
   * (Hookdeck's {"items": {"id": 456}} over a list of items; before, a review, it never
   * matched, and nothing else could say "an element with id 456") */
  if (json_is_array(v) && names_fields(f)) {
    size_t i;
    const json_t *e;
    json_array_foreach((json_t *)v, i, e) {
      if (--b->left < 0) return false;
      if (match_object(f, e, b)) return true;
      if (b->left < 0) return false;
    }
    return false;
  }
  return match_object(f, v, b);
}

static bool match_op(enum op op, const json_t *arg, const json_t *v, budget *b) {
  const char *s = json_is_string(v) ? json_string_value(v) : NULL;
  const char *a = json_is_string(arg) ? json_string_value(arg) : NULL;
  size_t ls = slen(v), la = slen(arg), i;
  const json_t *e;
  int c;
  /* what the string operators read: the value's bytes, the argument's */
  if (!spend_bytes(b, op == OP_CONTAINS || op == OP_GT || op == OP_GTE || op == OP_LT ||
                              op == OP_LTE ? ls + la
                      : op == OP_STARTS || op == OP_ENDS ? la
                                                         : 0))
    return false;
  switch (op) {
  case OP_EQ: return eq_any(v, arg, b);
  case OP_NEQ: return !eq_any(v, arg, b);
  case OP_GT: return (c = cmp(v, arg)) != 2 && c > 0;
  case OP_GTE: return (c = cmp(v, arg)) != 2 && c >= 0;
  case OP_LT: return (c = cmp(v, arg)) != 2 && c < 0;
  case OP_LTE: return (c = cmp(v, arg)) != 2 && c <= 0;
  case OP_IN: return v && in_list(v, arg, b);
  case OP_NIN: return !v || !in_list(v, arg, b);
  case OP_STARTS: return s && a && ls >= la && !memcmp(s, a, la);
  case OP_ENDS: return s && a && ls >= la && !memcmp(s + ls - la, a, la);
  case OP_CONTAINS:
    if (json_is_array(v)) return eq_any(v, arg, b);
    return s && a && memmem(s, ls, a, la) != NULL;
  case OP_EXIST: return (v != NULL) == json_is_true(arg);
  /* (through match_node: a filter of fields under them reads an array as a field's filter does
   * — "$not": {"id": 456} over a list of items is the negation of {"id": 456}; a review) */
  case OP_NOT: return !match_node(arg, v, b) && b->left >= 0;
  case OP_OR:
    json_array_foreach((json_t *)arg, i, e) {
      if (match_node(e, v, b)) return true;
      if (b->left < 0) return false;
    }
    return false;
  case OP_AND:
    json_array_foreach((json_t *)arg, i, e) {
      if (!match_node(e, v, b)) return false;
    }
    return true;
  case OP_NONE: break;
  }
  return false;
}

/* v: the value matched (NULL when the field is missing). */
static bool match_object(const json_t *f, const json_t *v, budget *b) {
  const char *k;
  const json_t *sub;
  json_object_foreach((json_t *)f, k, sub) {
    /* a filter of fields needs an object: a missing or scalar value has none, not every
     * field missing ({"customer": {"country": {"$neq": "VN"}}} took a payload without one) */
    if (k[0] != '$' && !json_is_object(v)) return false;
    bool ok = k[0] == '$' ? match_op(op_of(k), sub, v, b)
                          : match_node(sub, json_object_get(v, k), b);
    if (b->left < 0) return false; /* abandoned: the result means nothing */
    if (!ok) return false;
  }
  return true;
}

int hookd_pfilter_match(const json_t *filter, const json_t *payload, long *left) {
  long mine = left && *left < HOOKD_PFILTER_BUDGET ? *left : HOOKD_PFILTER_BUDGET;
  if (mine < HOOKD_PFILTER_FLOOR) mine = HOOKD_PFILTER_FLOOR;
  budget b = {mine};
  /* (the payload as a field's value: an array of objects is read element by element) */
  bool ok = json_is_object(filter) && match_node(filter, payload, &b);
  if (left) *left -= b.left < 0 ? mine : mine - b.left;
  if (b.left < 0) return HOOKD_PFILTER_OVER;
  return ok ? HOOKD_PFILTER_YES : HOOKD_PFILTER_NO;
}

/* ---------- parsed filters, by their text ---------- */

#define CACHE_MAX 4096

void hookd_pfilter_cache_init(hookd_pfilter_cache *c) {
  hookd_strmap_init(&c->m);
  c->hand = 0;
}

void hookd_pfilter_cache_free(hookd_pfilter_cache *c) {
  const char *k;
  void *v;
  for (size_t i = 0; (i = hookd_strmap_next(&c->m, i, &k, &v)) != 0;) json_decref(v);
  hookd_strmap_free(&c->m);
  hookd_pfilter_cache_init(c);
}

/* Drops the entry at or after the hand (round the table), and moves the hand past it. */
static void evict_one(hookd_pfilter_cache *c) {
  const char *k;
  void *v;
  size_t next = hookd_strmap_next(&c->m, c->hand, &k, &v);
  if (!next) next = hookd_strmap_next(&c->m, 0, &k, &v);
  if (!next) return;
  c->hand = next;
  json_decref(hookd_strmap_del(&c->m, k)); /* (the key is freed once it is found) */
}

static json_t *cached(hookd_pfilter_cache *c, const char *text) {
  json_t *f = c ? hookd_strmap_get(&c->m, text) : NULL;
  if (f) return json_incref(f);
  if (!(f = json_loads(text, 0, NULL))) return NULL;
  if (c) {
    if (c->m.len >= CACHE_MAX) evict_one(c);
    if (hookd_strmap_put(&c->m, text, f) == 0) json_incref(f);
  }
  return f;
}

int hookd_pfilter_match_payload(hookd_pfilter_cache *cache, const char *filter,
                                const json_t *payload, long *left) {
  if (!filter) return HOOKD_PFILTER_YES;
  json_t *f = cached(cache, filter);
  if (!f) return HOOKD_PFILTER_NO;
  int rc = hookd_pfilter_match(f, payload, left);
  json_decref(f);
  return rc;
}

int hookd_pfilter_match_envelope(hookd_pfilter_cache *cache, const char *filter,
                                 const char *envelope, size_t len, json_t **parsed, long *left) {
  if (!filter) return HOOKD_PFILTER_YES;
  if (!*parsed) {
    *parsed = envelope ? json_loadb(envelope, len, 0, NULL) : NULL;
    if (!*parsed) *parsed = json_object(); /* (never: the envelope is hookd's own) */
  }
  if (!*parsed) return HOOKD_PFILTER_NO;
  return hookd_pfilter_match_payload(cache, filter, json_object_get(*parsed, "data"), left);
}

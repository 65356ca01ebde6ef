/* payload_filter.c — an endpoint's payload filter (payload_filter.h; docs/api.md "Payload
 * filters"). A filter is an object: each field key names a field of the value it is matched
 * against, each "$" key an operator on that value itself; every key must match. A field's
 * filter is a literal (equal, or, when the field is an array, one element equal), an object of
 * operators, or an object of its own fields (the field must be an object). */
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

static int fail(char *err, size_t cap, const char *path, const char *what) {
  snprintf(err, cap, "payload_filter%s%s: %s", *path ? "." : "", path, what);
  return -1;
}

static int check_node(const json_t *f, const char *path, int depth, char *err, size_t cap);

static int check_object(const json_t *f, const char *path, int depth, char *err, size_t cap) {
  if (depth > HOOKD_PFILTER_MAX_DEPTH)
    return fail(err, cap, path, "nested too deep (8 levels of objects and operators at most)");
  const char *k;
  const json_t *v;
  char sub[512];
  json_object_foreach((json_t *)f, k, v) {
    snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
    if (k[0] != '$') {
      if (!*k) return fail(err, cap, path, "a field name is empty");
      if (check_node(v, sub, depth + 1, err, cap)) return -1;
      continue;
    }
    enum op op = op_of(k);
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    switch (op) {
    case OP_NONE:
      return fail(err, cap, sub,
                  "not an operator ($eq, $neq, $gt, $gte, $lt, $lte, $in, $nin, $startsWith, "
                  "$endsWith, $contains, $exist, $not, $or, $and)");
    case OP_EQ:
    case OP_NEQ:
      if (json_is_object(v) || json_is_array(v)) return fail(err, cap, sub, "must be a scalar");
      break;
    case OP_GT:
    case OP_GTE:
    case OP_LT:
    case OP_LTE:
      if (!json_is_number(v) && !json_is_string(v))
        return fail(err, cap, sub, "must be a number or a string");
      break;
    case OP_STARTS:
    case OP_ENDS:
      if (!json_is_string(v)) return fail(err, cap, sub, "must be a string");
      break;
    case OP_CONTAINS:
      if (!scalar(v)) return fail(err, cap, sub, "must be a scalar");
      break;
    case OP_EXIST:
      if (!json_is_boolean(v)) return fail(err, cap, sub, "must be true or false");
      break;
    case OP_IN:
    case OP_NIN:
      if (!json_is_array(v) || n == 0 || n > HOOKD_PFILTER_MAX_LIST)
        return fail(err, cap, sub, "must be an array of 1 to 256 scalars");
      for (size_t i = 0; i < n; i++)
        if (!scalar(json_array_get(v, i)))
          return fail(err, cap, sub, "must be an array of 1 to 256 scalars");
      break;
    case OP_NOT:
      if (!json_is_object(v)) return fail(err, cap, sub, "must be a filter (an object)");
      if (check_object(v, sub, depth + 1, err, cap)) return -1;
      break;
    case OP_OR:
    case OP_AND:
      if (!json_is_array(v) || n == 0 || n > HOOKD_PFILTER_MAX_LIST)
        return fail(err, cap, sub, "must be an array of 1 to 256 filters (objects)");
      for (size_t i = 0; i < n; i++) {
        const json_t *one = json_array_get(v, i);
        if (!json_is_object(one))
          return fail(err, cap, sub, "must be an array of 1 to 256 filters (objects)");
        if (check_object(one, sub, depth + 1, err, cap)) return -1;
      }
      break;
    }
  }
  return 0;
}

static int check_node(const json_t *f, const char *path, int depth, char *err, size_t cap) {
  if (json_is_array(f))
    return fail(err, cap, path, "an array is not a filter: use $in, $contains or $and");
  return json_is_object(f) ? check_object(f, path, depth, err, cap) : 0;
}

int hookd_pfilter_check(const json_t *filter, char *err, size_t cap) {
  if (!json_is_object(filter)) return fail(err, cap, "", "must be an object");
  return check_object(filter, "", 1, err, cap);
}

/* ---------- match ---------- */

/* Equal scalars (numbers by value: 1 equals 1.0). */
static bool eq(const json_t *a, const json_t *b) {
  if (!a || !b) return false;
  if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
  return json_equal((json_t *)a, (json_t *)b);
}

/* Equal, or, for an array value, one element equal. */
static bool eq_any(const json_t *v, const json_t *want) {
  if (!json_is_array(v)) return eq(v, want);
  size_t i;
  const json_t *e;
  json_array_foreach((json_t *)v, i, e) {
    if (eq(e, want)) return true;
  }
  return false;
}

/* <0, 0, >0, or 2 when the two do not compare (not both numbers, not both strings). */
static int cmp(const json_t *v, const json_t *to) {
  if (json_is_number(v) && json_is_number(to)) {
    double a = json_number_value(v), b = json_number_value(to);
    return a < b ? -1 : a > b;
  }
  if (json_is_string(v) && json_is_string(to)) {
    int c = strcmp(json_string_value(v), json_string_value(to));
    return c < 0 ? -1 : c > 0;
  }
  return 2;
}

static bool in_list(const json_t *v, const json_t *list) {
  size_t i;
  const json_t *e;
  json_array_foreach((json_t *)list, i, e) {
    if (eq_any(v, e)) return true;
  }
  return false;
}

static bool match_object(const json_t *f, const json_t *v);

static bool match_node(const json_t *f, const json_t *v) {
  if (json_is_object(f)) return match_object(f, v);
  return eq_any(v, f);
}

static bool match_op(enum op op, const json_t *arg, const json_t *v) {
  const char *s = json_is_string(v) ? json_string_value(v) : NULL;
  const char *a = json_is_string(arg) ? json_string_value(arg) : NULL;
  size_t i;
  const json_t *e;
  int c;
  switch (op) {
  case OP_EQ: return eq_any(v, arg);
  case OP_NEQ: return !eq_any(v, arg);
  case OP_GT: return (c = cmp(v, arg)) != 2 && c > 0;
  case OP_GTE: return (c = cmp(v, arg)) != 2 && c >= 0;
  case OP_LT: return (c = cmp(v, arg)) != 2 && c < 0;
  case OP_LTE: return (c = cmp(v, arg)) != 2 && c <= 0;
  case OP_IN: return v && in_list(v, arg);
  case OP_NIN: return !v || !in_list(v, arg);
  case OP_STARTS: return s && a && !strncmp(s, a, strlen(a));
  case OP_ENDS: {
    size_t ls = s ? strlen(s) : 0, la = a ? strlen(a) : 0;
    return s && a && ls >= la && !memcmp(s + ls - la, a, la);
  }
  case OP_CONTAINS:
    if (json_is_array(v)) return eq_any(v, arg);
    return s && a && strstr(s, a) != NULL;
  case OP_EXIST: return (v != NULL) == json_is_true(arg);
  case OP_NOT: return !match_object(arg, v);
  case OP_OR:
    json_array_foreach((json_t *)arg, i, e) {
      if (match_object(e, v)) return true;
    }
    return false;
  case OP_AND:
    json_array_foreach((json_t *)arg, i, e) {
      if (!match_object(e, v)) return false;
    }
    return true;
  case OP_NONE: break;
  }
  return false;
}

/* v: the value matched (NULL when the field is missing). */
static bool match_object(const json_t *f, const json_t *v) {
  const char *k;
  const json_t *sub;
  json_object_foreach((json_t *)f, k, sub) {
    bool ok = k[0] == '$' ? match_op(op_of(k), sub, v)
                          : match_node(sub, json_is_object(v) ? json_object_get(v, k) : NULL);
    if (!ok) return false;
  }
  return true;
}

bool hookd_pfilter_match(const json_t *filter, const json_t *payload) {
  return json_is_object(filter) && match_object(filter, payload);
}

bool hookd_pfilter_match_envelope(const char *filter, const char *envelope, size_t len,
                                  json_t **parsed) {
  if (!filter) return true;
  json_t *f = json_loads(filter, 0, NULL);
  if (!f) return false;
  if (!*parsed) {
    *parsed = envelope ? json_loadb(envelope, len, 0, NULL) : NULL;
    if (!*parsed) *parsed = json_object(); /* (never: the envelope is hookd's own) */
  }
  bool ok = *parsed && hookd_pfilter_match(f, json_object_get(*parsed, "data"));
  json_decref(f);
  return ok;
}

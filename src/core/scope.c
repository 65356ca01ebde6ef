/* scope.c — an API key's tenant scope (see scope.h): walking it, checking it, building a new
 * key's from the ids it is given. */
#include "core/scope.h"

#include <stdio.h>
#include <string.h>

#include "core/ids.h"

bool hookd_scope_next(const char **cursor, const char **item, size_t *len) {
  const char *s = *cursor;
  if (!s) return false;
  const char *e = strchr(s, ',');
  *item = s;
  *len = e ? (size_t)(e - s) : strlen(s);
  *cursor = e ? e + 1 : NULL;
  return true;
}

const char *hookd_scope_single(const char *scope) {
  return scope && *scope && !strchr(scope, ',') ? scope : NULL;
}

int hookd_scope_check(const char *tenants, char *err, size_t errlen) {
  if (!tenants) return 0;
  if (!*tenants) {
    snprintf(err, errlen, "the tenant list is empty");
    return -1;
  }
  size_t total = strlen(tenants);
  if (total > HOOKD_SCOPE_MAX) {
    snprintf(err, errlen, "the tenant list is %zu bytes, more than the %d a key can hold",
             total, HOOKD_SCOPE_MAX);
    return -1;
  }
  int item = 0;
  const char *cur = tenants, *s;
  size_t len;
  while (hookd_scope_next(&cur, &s, &len)) {
    item++;
    size_t blank = 0;
    while (blank < len && (s[blank] == ' ' || s[blank] == '\t')) blank++;
    if (blank == len) {
      snprintf(err, errlen, "item %d of the tenant list is empty", item);
      return -1;
    }
    char id[HOOKD_SCOPE_MAX + 1];
    memcpy(id, s, len);
    id[len] = '\0';
    if (!hookd_id_valid(id, 64)) {
      snprintf(err, errlen,
               "item %d of the tenant list, \"%.64s\", is not a tenant id "
               "(1 to 64 of A-Z a-z 0-9 _ . : -)",
               item, id);
      return -1;
    }
  }
  return 0;
}

int hookd_scope_add(hookd_scope_builder *b, const char *id, size_t len, char *err,
                    size_t errlen) {
  char one[72];
  snprintf(one, sizeof one, "%.*s", (int)(len < 71 ? len : 71), id);
  if (len > 64 || !hookd_id_valid(one, 64)) {
    snprintf(err, errlen, "\"%.64s\" is not a tenant id (1 to 64 of A-Z a-z 0-9 _ . : -)", one);
    return -1;
  }
  if (++b->given > HOOKD_SCOPE_IDS_MAX) {
    snprintf(err, errlen, "more than %d tenant ids, the most a key may be given",
             HOOKD_SCOPE_IDS_MAX);
    return -1;
  }
  const char *cur = b->used ? b->csv : NULL, *t;
  size_t tl;
  while (hookd_scope_next(&cur, &t, &tl))
    if (tl == len && !memcmp(t, one, len)) return 0; /* named already: kept once */
  if (b->used + (b->used ? 1 : 0) + len > HOOKD_SCOPE_MAX) {
    snprintf(err, errlen, "the tenant list is over %d bytes, more than a key can hold",
             HOOKD_SCOPE_MAX);
    return -1;
  }
  b->used += (size_t)snprintf(b->csv + b->used, sizeof b->csv - b->used, "%s%s",
                              b->used ? "," : "", one);
  return 0;
}

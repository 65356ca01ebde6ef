/* scope.h — an API key's tenant scope: a comma-separated list of tenant ids ("a,b"), NULL for
 * every tenant. What a scope may be, and how a new key's is built, is one rule for the daemon's
 * key cache (auth.c), POST /v1/keys (api_keys.c) and `hookd keys create` (cmd_keys.c). */
#ifndef HOOKD_CORE_SCOPE_H
#define HOOKD_CORE_SCOPE_H

#include <stdbool.h>
#include <stddef.h>

/* The longest tenant scope a key may have, in bytes: the daemon's principal holds it whole. */
#define HOOKD_SCOPE_MAX 511
/* The most tenant ids a new key's scope may be given (repeats counted). */
#define HOOKD_SCOPE_IDS_MAX 64

/* Walks a comma-separated scope ("a,b"): the next item (borrowed, empty ones included) and
 * its length, moving *cursor on (NULL after the last); false when there is no more. */
bool hookd_scope_next(const char **cursor, const char **item, size_t *len);
/* A scope of one tenant: that tenant (scope itself); NULL for several tenants or every one. */
const char *hookd_scope_single(const char *scope);

/* Checks a key's tenant scope: NULL is every tenant; anything else is a list of tenant ids
 * separated by commas ([A-Za-z0-9_.:-], 1..64 bytes each) of at most HOOKD_SCOPE_MAX bytes. An
 * empty list or item is refused, not read as "every tenant". Returns 0, or -1 with the problem
 * in err. */
int hookd_scope_check(const char *tenants, char *err, size_t errlen);

/* A new key's scope, built one tenant id at a time. Zero it to start. */
typedef struct hookd_scope_builder {
  char csv[HOOKD_SCOPE_MAX + 1]; /* the ids so far, joined with commas */
  size_t used;                   /* strlen(csv) */
  int given;                     /* ids given, repeats included */
} hookd_scope_builder;

/* Adds the tenant id of len bytes at id, unless the scope holds it already (a scope of one
 * stays one: "a,a" is "a", whose key's audit rows go under a). Returns 0, or -1 with the
 * problem in err: not a tenant id, more than HOOKD_SCOPE_IDS_MAX given, or the list past
 * HOOKD_SCOPE_MAX bytes. An empty result is the caller's to refuse (hookd_scope_check). */
int hookd_scope_add(hookd_scope_builder *b, const char *id, size_t len, char *err,
                    size_t errlen);

#endif

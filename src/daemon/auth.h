/* auth.h — API keys: bearer tokens checked against SHA-256 hashes (the store keeps only the
 * hash). Keys have a role and an optional tenant scope. The daemon keeps an in-memory cache of
 * the key table, refreshed periodically and after changes, so checking a key costs no I/O.
 *
 * Roles and what they may do:
 *   admin     everything
 *   operator  read, replay, enable/disable endpoints, resolve inbox items
 *   viewer    read
 *   publisher publish events */
#ifndef HOOKD_DAEMON_AUTH_H
#define HOOKD_DAEMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "store/store.h"

typedef enum hookd_role {
  HOOKD_ROLE_NONE = 0,
  HOOKD_ROLE_PUBLISHER,
  HOOKD_ROLE_VIEWER,
  HOOKD_ROLE_OPERATOR,
  HOOKD_ROLE_ADMIN,
} hookd_role;

/* What a route needs. */
typedef enum hookd_perm {
  HOOKD_PERM_PUBLIC = 0, /* no key */
  HOOKD_PERM_READ,
  HOOKD_PERM_PUBLISH,
  HOOKD_PERM_OPERATE,
  HOOKD_PERM_ADMIN,
} hookd_perm;

typedef struct hookd_principal {
  char key_id[64];
  hookd_role role;
  char tenants[512]; /* comma-separated scope, "" = every tenant */
} hookd_principal;

typedef struct hookd_auth hookd_auth;

hookd_auth *hookd_auth_new(const char *bootstrap_key);
void hookd_auth_free(hookd_auth *a);
/* Replaces the cached key table (takes a copy). */
void hookd_auth_set_keys(hookd_auth *a, const hookd_api_key *keys, size_t n);
size_t hookd_auth_count(hookd_auth *a);

/* Resolves a bearer token. Returns true and fills p when the token is a valid key. */
bool hookd_auth_check(hookd_auth *a, const char *token, hookd_principal *p);

bool hookd_role_allows(hookd_role role, hookd_perm perm);
bool hookd_principal_has_tenant(const hookd_principal *p, const char *tenant_id);
const char *hookd_role_name(hookd_role r);
int hookd_role_parse(const char *s, hookd_role *out);

/* Generates a new key token "hk_<43 base64url chars>" and its hash. */
int hookd_auth_generate(char token[64], unsigned char hash[32]);
/* SHA-256 of a key token (what the store keeps). Returns 0 or -1. */
int hookd_auth_hash(const char *token, unsigned char hash[32]);

#endif

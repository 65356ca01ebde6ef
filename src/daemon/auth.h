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
#include <stdint.h>

#include "core/scope.h"
#include "store/store.h"

typedef enum hookd_role {
  HOOKD_ROLE_NONE = 0,
  HOOKD_ROLE_PUBLISHER,
  HOOKD_ROLE_VIEWER,
  HOOKD_ROLE_OPERATOR,
  HOOKD_ROLE_MANAGER, /* an operator's, and its tenants' endpoints (docs/security.md) */
  HOOKD_ROLE_ADMIN,
} hookd_role;

/* The roles' names, as messages list them */
#define HOOKD_ROLES_TEXT "admin, manager, operator, viewer or publisher"

/* What a route needs. */
typedef enum hookd_perm {
  HOOKD_PERM_PUBLIC = 0, /* no key */
  HOOKD_PERM_READ,
  HOOKD_PERM_PUBLISH,
  HOOKD_PERM_OPERATE,
  HOOKD_PERM_MANAGE,     /* a tenant's endpoints: create, delete, secrets, headers */
  HOOKD_PERM_ADMIN,
  HOOKD_PERM_SCRAPE,     /* no key; the --metrics-token bearer token when one is set */
} hookd_perm;

typedef struct hookd_principal {
  char key_id[64];
  hookd_role role;
  char tenants[HOOKD_SCOPE_MAX + 1]; /* comma-separated scope, "" = every tenant */
  uint64_t loaded;                   /* the key table's load it was found in */
  int64_t expires_ms;                /* 0: never; from then on the key opens nothing */
} hookd_principal;

/* How long after it expired a key stays in the cache, to be refused as expired (401 "this API
 * key expired at …") rather than as unknown; the loads leave older ones out. */
#define HOOKD_AUTH_EXPIRED_KEPT_MS (3600 * 1000LL)
/* Whether p's key has expired at now_ms. */
bool hookd_principal_expired(const hookd_principal *p, int64_t now_ms);

typedef struct hookd_auth hookd_auth;

hookd_auth *hookd_auth_new(const char *bootstrap_key);
void hookd_auth_free(hookd_auth *a);
/* A load's place in line: taken inside the read of the keys (on the store's reader, which runs
 * its ops one after the other), so that a later number read a later store. */
uint64_t hookd_auth_begin_load(hookd_auth *a);
/* Replaces the cached key table (takes a copy) with a load numbered `gen`, unless a later load
 * was applied already (the periodic reload and an API change's own may cross). A key that
 * fails hookd_auth_key_check (a scope hookd would have to cut short or widen, a role it does
 * not know) is left out and logged (auth.key_refused) the first time it is seen. */
void hookd_auth_set_keys(hookd_auth *a, const hookd_api_key *keys, size_t n, uint64_t gen);
size_t hookd_auth_count(hookd_auth *a);
/* The id of the key given by --api-key (the configuration's, not the store's), or NULL when
 * there is none. */
#define HOOKD_AUTH_CONFIG_ID "key_config"
const char *hookd_auth_configured(const hookd_auth *a);

/* Resolves a bearer token. Returns true and fills p when the token is a valid key. */
bool hookd_auth_check(hookd_auth *a, const char *token, hookd_principal *p);
/* Whether p's key is still in the table (not revoked since hookd_auth_check found it): a request
 * checked at its headers runs once its body is in, which a client may hold back for a minute. */
bool hookd_auth_still_valid(hookd_auth *a, const hookd_principal *p);

bool hookd_role_allows(hookd_role role, hookd_perm perm);
bool hookd_principal_has_tenant(const hookd_principal *p, const char *tenant_id);
const char *hookd_role_name(hookd_role r);
int hookd_role_parse(const char *s, hookd_role *out);

/* Whether the daemon loads a stored key (revoked or not is the caller's to look at): its role
 * one hookd knows (*role, when role is not NULL) and its scope passing hookd_scope_check.
 * Returns 0, or -1 with the reason in why: such a key opens nothing, and `hookd keys list` and
 * GET /v1/keys show it "invalid" (a key written by another version of hookd or by hand). */
int hookd_auth_key_check(const hookd_api_key *k, hookd_role *role, char *why, size_t len);
/* The audit detail of a key's creation: "role=R tenants=a,b" ("tenants=*": every tenant). */
#define HOOKD_KEY_DETAIL_MAX (HOOKD_SCOPE_MAX + 128)
/* (expires_ms non-zero: " expires=<RFC 3339>" after them — a create's; a revoke's passes 0) */
void hookd_auth_key_detail(const char *role, const char *tenants, int64_t expires_ms, char *out,
                           size_t len);
/* A stored key's state as listed (GET /v1/keys, `hookd keys list`): "revoked", "invalid" (it
 * fails hookd_auth_key_check: not loaded), "expired" at now_ms, else "active". */
const char *hookd_auth_key_state(const hookd_api_key *k, int64_t now_ms);

/* Generates a new key token "hk_<43 base64url chars>" and its hash. */
int hookd_auth_generate(char token[64], unsigned char hash[32]);
/* Whether standard output goes nowhere: /dev/null, or closed at start (main gives a closed one
 * /dev/null). A token shown only once, written there, is held by no one. */
bool hookd_auth_stdout_is_null(void);
/* SHA-256 of a key token (what the store keeps). Returns 0 or -1. */
int hookd_auth_hash(const char *token, unsigned char hash[32]);

#endif

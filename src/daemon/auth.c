/* auth.c — API-key cache and role checks (see auth.h). A token is looked up by its SHA-256
 * among the cached keys' hashes, kept sorted (a binary search: the cost of a request does not
 * grow with the keys; its timing tells at most how many leading bytes of the token's hash a
 * stored one shares — nothing to steer a guess by). The configured key is compared in constant
 * time. */
#include "daemon/auth.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/b64.h"
#include "core/ids.h"
#include "core/sign.h"
#include "core/timefmt.h"
#include "daemon/log.h"

typedef struct cached_key {
  unsigned char hash[32];
  hookd_principal p;
} cached_key;

struct hookd_auth {
  pthread_rwlock_t lock;
  cached_key *keys;
  size_t n;
  bool has_bootstrap;
  cached_key bootstrap;
  /* ids of the keys refused at the last hookd_auth_set_keys: each is logged once */
  pthread_mutex_t load_mu;   /* one load at a time (the periodic one, an API change's own):
                                it holds refused and n_refused */
  char (*refused)[64];
  size_t n_refused;
  _Atomic uint64_t next_gen; /* hookd_auth_begin_load */
  uint64_t applied_gen;      /* the load the table holds (under lock) */
};

int hookd_auth_hash(const char *token, unsigned char hash[32]) {
  return hookd_sha256(token, strlen(token), hash);
}

hookd_auth *hookd_auth_new(const char *bootstrap_key) {
  hookd_auth *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  pthread_rwlock_init(&a->lock, NULL);
  pthread_mutex_init(&a->load_mu, NULL);
  if (bootstrap_key && *bootstrap_key) {
    /* a hash that could not be computed must not become a key anything matches */
    a->has_bootstrap = hookd_auth_hash(bootstrap_key, a->bootstrap.hash) == 0;
    snprintf(a->bootstrap.p.key_id, sizeof a->bootstrap.p.key_id, HOOKD_AUTH_CONFIG_ID);
    a->bootstrap.p.role = HOOKD_ROLE_ADMIN;
  }
  return a;
}

const char *hookd_auth_configured(const hookd_auth *a) {
  return a && a->has_bootstrap ? a->bootstrap.p.key_id : NULL;
}

void hookd_auth_free(hookd_auth *a) {
  if (!a) return;
  pthread_rwlock_destroy(&a->lock);
  pthread_mutex_destroy(&a->load_mu);
  OPENSSL_cleanse(a->keys, a->n * sizeof *a->keys);
  free(a->keys);
  free(a->refused);
  free(a);
}

int hookd_auth_key_check(const hookd_api_key *k, hookd_role *role, char *why, size_t len) {
  hookd_role r;
  /* a role of a newer version, or a hand edit's: what it may do is unknown, so nothing */
  if (hookd_role_parse(k->role, &r) != 0) {
    snprintf(why, len, "its role \"%.32s\" is not " HOOKD_ROLES_TEXT, k->role ? k->role : "");
    return -1;
  }
  if (role) *role = r;
  /* cut short, the last id could become a prefix naming another tenant (acme-prod → acme);
   * read as "", the key would reach every tenant: the key is not loaded at all */
  return hookd_scope_check(k->tenants, why, len);
}

void hookd_auth_key_detail(const char *role, const char *tenants, int64_t expires_ms, char *out,
                           size_t len) {
  char at[HOOKD_RFC3339_MAX] = "";
  if (expires_ms) hookd_fmt_rfc3339_ms(expires_ms, at);
  snprintf(out, len, "role=%s tenants=%s%s%s", role ? role : "", tenants ? tenants : "*",
           at[0] ? " expires=" : "", at);
}

const char *hookd_auth_key_state(const hookd_api_key *k, int64_t now_ms) {
  char why[160];
  if (k->revoked_ms) return "revoked";
  if (hookd_auth_key_check(k, NULL, why, sizeof why) != 0) return "invalid"; /* as loaded */
  return k->expires_ms > 0 && now_ms >= k->expires_ms ? "expired" : "active";
}

static bool was_refused(const hookd_auth *a, const char *id) {
  for (size_t i = 0; i < a->n_refused; i++)
    if (strcmp(a->refused[i], id) == 0) return true;
  return false;
}

static int cmp_hash(const void *x, const void *y) {
  return memcmp(((const cached_key *)x)->hash, ((const cached_key *)y)->hash, 32);
}

uint64_t hookd_auth_begin_load(hookd_auth *a) { return atomic_fetch_add(&a->next_gen, 1) + 1; }

void hookd_auth_set_keys(hookd_auth *a, const hookd_api_key *keys, size_t n, uint64_t gen) {
  /* sized by the keys not revoked: every key ever made is a row, and the cache kept ~0.7 KB for
   * each for the daemon's life (a review: 6,400 keys made and revoked, 4.4 MB) */
  size_t live = 0;
  for (size_t i = 0; i < n; i++) live += !keys[i].revoked_ms;
  cached_key *v = calloc(live ? live : 1, sizeof *v);
  char(*refused)[64] = calloc(live ? live : 1, sizeof *refused);
  if (!v || !refused) {
    free(v);
    free(refused);
    return;
  }
  /* two loads may come from two threads: was_refused reads the list the other one replaces */
  pthread_mutex_lock(&a->load_mu);
  size_t m = 0, nr = 0;
  for (size_t i = 0; i < n; i++) {
    if (keys[i].revoked_ms) continue;
    hookd_role role;
    char why[160];
    if (hookd_auth_key_check(&keys[i], &role, why, sizeof why) != 0) {
      const char *id = keys[i].id ? keys[i].id : "";
      if (!was_refused(a, id))
        HLOG(HOOKD_LOG_ERROR, "auth.key_refused", KV_S("key_id", id), KV_S("reason", why));
      snprintf(refused[nr++], sizeof *refused, "%s", id);
      continue;
    }
    memcpy(v[m].hash, keys[i].hash, 32);
    snprintf(v[m].p.key_id, sizeof v[m].p.key_id, "%s", keys[i].id);
    v[m].p.role = role;
    v[m].p.expires_ms = keys[i].expires_ms;
    snprintf(v[m].p.tenants, sizeof v[m].p.tenants, "%s", keys[i].tenants ? keys[i].tenants : "");
    m++;
  }
  qsort(v, m, sizeof *v, cmp_hash); /* (hookd_auth_check's binary search) */
  pthread_rwlock_wrlock(&a->lock);
  cached_key *old = v;
  size_t oldn = m;
  if (gen > a->applied_gen) { /* else a later load is there: this one is dropped */
    a->applied_gen = gen;
    old = a->keys;
    oldn = a->n;
    a->keys = v;
    a->n = m;
    free(a->refused);
    a->refused = refused;
    a->n_refused = nr;
    refused = NULL;
  }
  pthread_rwlock_unlock(&a->lock);
  pthread_mutex_unlock(&a->load_mu);
  free(refused);
  OPENSSL_cleanse(old, oldn * sizeof *old);
  free(old);
}

size_t hookd_auth_count(hookd_auth *a) {
  pthread_rwlock_rdlock(&a->lock);
  size_t n = a->n + (a->has_bootstrap ? 1 : 0);
  pthread_rwlock_unlock(&a->lock);
  return n;
}

bool hookd_auth_check(hookd_auth *a, const char *token, hookd_principal *p) {
  if (!token || !*token || strlen(token) > 256) return false;
  unsigned char h[32];
  if (hookd_auth_hash(token, h) != 0) return false;
  bool found = false;
  pthread_rwlock_rdlock(&a->lock);
  if (a->has_bootstrap && CRYPTO_memcmp(h, a->bootstrap.hash, 32) == 0) {
    *p = a->bootstrap.p;
    found = true;
  }
  if (!found) {
    cached_key probe;
    memcpy(probe.hash, h, 32);
    const cached_key *k = a->n ? bsearch(&probe, a->keys, a->n, sizeof *a->keys, cmp_hash) : NULL;
    if (k) {
      *p = k->p;
      found = true;
    }
    OPENSSL_cleanse(&probe, sizeof probe);
  }
  p->loaded = a->applied_gen;
  pthread_rwlock_unlock(&a->lock);
  return found;
}

bool hookd_auth_still_valid(hookd_auth *a, const hookd_principal *p) {
  pthread_rwlock_rdlock(&a->lock);
  /* the same table (the periodic reload replaces it every 2 s), or the configured key (never
   * revoked), or the key found again by its id */
  bool ok = p->loaded == a->applied_gen ||
            (a->has_bootstrap && !strcmp(p->key_id, a->bootstrap.p.key_id));
  for (size_t i = 0; !ok && i < a->n; i++) ok = !strcmp(a->keys[i].p.key_id, p->key_id);
  pthread_rwlock_unlock(&a->lock);
  return ok;
}

bool hookd_role_allows(hookd_role role, hookd_perm perm) {
  switch (perm) {
  case HOOKD_PERM_PUBLIC: return true;
  case HOOKD_PERM_READ: return role >= HOOKD_ROLE_VIEWER && role <= HOOKD_ROLE_ADMIN;
  case HOOKD_PERM_PUBLISH: return role == HOOKD_ROLE_PUBLISHER || role == HOOKD_ROLE_ADMIN;
  case HOOKD_PERM_OPERATE: return role >= HOOKD_ROLE_OPERATOR && role <= HOOKD_ROLE_ADMIN;
  case HOOKD_PERM_MANAGE: return role == HOOKD_ROLE_MANAGER || role == HOOKD_ROLE_ADMIN;
  case HOOKD_PERM_ADMIN: return role == HOOKD_ROLE_ADMIN;
  case HOOKD_PERM_SCRAPE: return true; /* not a key's: the router checks the metrics token */
  }
  return false;
}

bool hookd_principal_expired(const hookd_principal *p, int64_t now_ms) {
  return p->expires_ms > 0 && now_ms >= p->expires_ms;
}

bool hookd_principal_has_tenant(const hookd_principal *p, const char *tenant_id) {
  if (!p->tenants[0]) return true;
  size_t tl = strlen(tenant_id), len;
  const char *cur = p->tenants, *item;
  while (hookd_scope_next(&cur, &item, &len))
    if (len == tl && memcmp(item, tenant_id, tl) == 0) return true;
  return false;
}

static const char *const role_names[] = {"none",     "publisher", "viewer",
                                         "operator", "manager",   "admin"};

const char *hookd_role_name(hookd_role r) {
  return (unsigned)r <= HOOKD_ROLE_ADMIN ? role_names[r] : "none";
}

int hookd_role_parse(const char *s, hookd_role *out) {
  for (int i = 1; i <= HOOKD_ROLE_ADMIN; i++) {
    if (s && strcmp(s, role_names[i]) == 0) {
      *out = (hookd_role)i;
      return 0;
    }
  }
  return -1;
}

bool hookd_auth_stdout_is_null(void) {
  struct stat out, null;
  return fstat(STDOUT_FILENO, &out) == 0 && stat("/dev/null", &null) == 0 &&
         S_ISCHR(out.st_mode) && out.st_rdev == null.st_rdev;
}

int hookd_auth_generate(char token[64], unsigned char hash[32]) {
  unsigned char raw[32];
  char b64[HOOKD_B64_ENCLEN(32)];
  if (hookd_random_bytes(raw, sizeof raw) != 0) return -1;
  hookd_b64_encode(raw, sizeof raw, b64);
  /* base64url without padding: tokens survive shells and URLs unquoted */
  size_t o = 0;
  memcpy(token, "hk_", 3);
  o = 3;
  for (char *c = b64; *c && *c != '='; c++) token[o++] = *c == '+' ? '-' : *c == '/' ? '_' : *c;
  token[o] = '\0';
  OPENSSL_cleanse(raw, sizeof raw);
  return hookd_auth_hash(token, hash);
}

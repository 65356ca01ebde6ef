/* cmd_keys.c — `hookd keys`: API keys and the master key, against the store directly.
 *
 *   hookd keys create --role admin|manager|operator|viewer|publisher [--tenants a,b] [--name N]
 *                     [--expires-in-s S]
 *   hookd keys list
 *   hookd keys revoke KEY_ID
 *   hookd keys rotate-master --new-master-key-file PATH
 * Every command takes --store URL (default $HOOKD_STORE or sqlite:hookd.db). A running hookd
 * picks up created and revoked keys at its next reload (--reload-interval-ms, 2 s by default),
 * at once on a SIGHUP, and through the change feed of a PostgreSQL store (when_read).
 * rotate-master re-seals every secret with the new key in one transaction and needs hookd
 * stopped (the old key: --master-key-file, $HOOKD_MASTER_KEY or <db>.key, as for serve). Each
 * change is written to the audit log with actor "cli". Tokens are shown once and stored only as
 * SHA-256 hashes. create takes POST /v1/keys's rules, from the same code: --tenants is a
 * non-empty list of at most 64 tenant ids that exist, of at most 511 bytes, one named twice
 * kept once (core/scope.h, hookd_scope_tenants_exist); without it a key reaches every tenant,
 * shown as "*" by list; --name is shown text (core/shown_text.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/num.h"
#include "core/scope.h"
#include "core/secretbox.h"
#include "core/shown_text.h"
#include "core/timefmt.h"
#include "daemon/auth.h"
#include "daemon/keyring.h"
#include "store/storeq.h"

typedef struct keys_args {
  const char *store, *role, *tenants, *name, *id, *master_file, *new_master_file, *expires;
} keys_args;

static void usage(FILE *to) {
  fprintf(to,
          "usage: hookd keys create --role admin|manager|operator|viewer|publisher [--tenants a,b] "
          "[--name NAME] [--expires-in-s S] [--store URL]\n"
          "       hookd keys list [--store URL]\n"
          "       hookd keys revoke KEY_ID [--store URL]\n"
          "       hookd keys rotate-master --new-master-key-file PATH [--master-key-file OLD] "
          "[--store URL]\n");
}

typedef struct ctx {
  hookd_api_key key;
  hookd_api_key *keys;
  size_t n;
  const char *id;
  hookd_audit audit;
  char missing[HOOKD_SCOPE_MAX + 1]; /* create: a tenant of the scope that does not exist */
  const hookd_master_key *old_key, *new_key;
  int resealed;
  char err[256];
  bool sealed_new; /* rotate-master: what the old key did not open, the new one does */
} ctx;

/* The key's audit row under its tenant for a key of one tenant, else under none — as the API
 * writes them (api_keys.c audit_key). */
static int audit_scoped(hookd_store_conn *c, const hookd_store_backend *be, hookd_audit *a,
                        const char *tenants) {
  a->tenant_id = (char *)hookd_scope_single(tenants);
  int rc = be->audit_append(c, a);
  a->tenant_id = NULL;
  return rc;
}

/* Each tenant of the new key's scope exists: checked before the token is printed (a refusal
 * then prints none), and again in the create's transaction (a tenant deleted between). */
static int run_tenants_exist(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  ctx *x = arg;
  return hookd_scope_tenants_exist(c, be, x->key.tenants, x->missing, sizeof x->missing);
}
static int run_create(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  ctx *x = arg;
  int rc = run_tenants_exist(c, be, x);
  if (!rc) rc = be->api_key_create(c, &x->key);
  return rc ? rc : audit_scoped(c, be, &x->audit, x->key.tenants);
}
static int run_list(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  ctx *x = arg;
  return be->api_key_list(c, 0, &x->keys, &x->n);
}
static int run_revoke(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  ctx *x = arg;
  int rc;
  const hookd_api_key *k = hookd_api_key_find_active(c, be, x->id, &x->keys, &x->n, &rc);
  if (rc) return rc;
  if (!k) return HOOKD_STORE_NOTFOUND;
  if ((rc = be->api_key_revoke(c, x->id, hookd_now_ms())) != 0) return rc;
  /* its role and scope in the audit row, as the API's revoke writes them */
  char detail[HOOKD_KEY_DETAIL_MAX];
  hookd_auth_key_detail(k->role, k->tenants, 0, detail, sizeof detail);
  x->audit.detail = detail;
  rc = audit_scoped(c, be, &x->audit, k->tenants);
  x->audit.detail = NULL;
  return rc;
}

/* Whether two paths name one file (both resolved; else compared as written). */
static bool same_file(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  if (realpath(a, ra) && realpath(b, rb)) return !strcmp(ra, rb);
  return !strcmp(a, b);
}

static char *reseal(ctx *x, const char *stored, const char *id) {
  if (!stored) return NULL;
  if (!*stored) return strdup(""); /* a deleted endpoint's or source's: none kept */
  char *plain = hookd_is_sealed(stored) ? hookd_unseal(x->old_key, stored, id) : strdup(stored);
  if (!plain) return NULL;
  char *out = hookd_seal(x->new_key, plain, id);
  hookd_secret_free(plain);
  return out;
}

/* Whether a stored value is sealed and opens with key: a rotation to it that completed before
 * (killed before it printed its advice), run again. */
static bool opens_with(const hookd_master_key *key, const char *stored, const char *id) {
  if (!stored || !*stored || !hookd_is_sealed(stored)) return false;
  char *plain = hookd_unseal(key, stored, id);
  bool opens = plain != NULL;
  hookd_secret_free(plain);
  return opens;
}

/* A source's secrets re-sealed without those whose overlap has ended ({"secret", "expires_at":
 * ms} at or before now), as an endpoint's previous secret is dropped: they verify nothing, and
 * carried over, the new key would open them (a review). NULL when they do not open. */
static char *reseal_source_secrets(ctx *x, const char *stored, const char *id, int64_t now) {
  if (!stored || !*stored || !hookd_is_sealed(stored)) return reseal(x, stored, id);
  char *plain = hookd_unseal(x->old_key, stored, id);
  if (!plain) return NULL;
  json_t *arr = json_loads(plain, 0, NULL);
  hookd_secret_free(plain);
  if (!json_is_array(arr)) { /* not the form this version writes: as it is */
    json_decref(arr);
    return reseal(x, stored, id);
  }
  for (size_t i = json_array_size(arr); i-- > 0;) {
    json_t *at = json_object_get(json_array_get(arr, i), "expires_at");
    if (json_is_integer(at) && json_integer_value(at) <= now) json_array_remove(arr, i);
  }
  char *kept = json_array_size(arr) ? json_dumps(arr, JSON_COMPACT) : NULL;
  json_decref(arr); /* (the secrets' bytes in jansson's freed strings: as the API's own reads) */
  if (!kept) return reseal(x, stored, id); /* none left: as it was (no source without one) */
  char *out = hookd_seal(x->new_key, kept, id);
  hookd_secret_free(kept);
  return out;
}

static int run_rotate_master(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  ctx *x = arg;
  hookd_endpoint *eps = NULL;
  size_t n = 0;
  int rc = be->endpoints_since(c, 0, &eps, &n);
  int64_t now = hookd_now_ms();
  for (size_t i = 0; rc == 0 && i < n; i++) {
    /* a previous secret whose overlap has ended signs nothing: dropped, not carried over */
    if (eps[i].previous_secret && eps[i].previous_expires_ms <= now) {
      free(eps[i].previous_secret);
      eps[i].previous_secret = NULL;
    }
    char *cur = reseal(x, eps[i].secret, eps[i].id);
    char *prev = reseal(x, eps[i].previous_secret, eps[i].id);
    /* its custom headers too: they may be credentials, sealed as the secret is */
    char *hdrs = reseal(x, eps[i].headers, eps[i].id);
    if ((eps[i].secret && !cur) || (eps[i].previous_secret && !prev) ||
        (eps[i].headers && !hdrs)) {
      snprintf(x->err, sizeof x->err,
               "the %s of endpoint %s do%s not open with the current master key",
               eps[i].headers && !hdrs ? "custom headers" : "secret", eps[i].id,
               eps[i].headers && !hdrs ? "" : "es");
      x->sealed_new = opens_with(x->new_key, eps[i].secret, eps[i].id) ||
                      opens_with(x->new_key, eps[i].headers, eps[i].id);
      rc = HOOKD_STORE_ERR;
    } else {
      rc = be->endpoint_reseal(c, eps[i].id, cur, prev, hdrs);
      x->resealed += (cur && *cur) + (prev != NULL) + (hdrs != NULL);
    }
    free(cur);
    free(prev);
    free(hdrs);
  }
  hookd_endpoints_free(eps, n);
  /* inbound sources' secrets too */
  hookd_source *srcs = NULL;
  size_t ns = 0;
  if (rc == 0) rc = be->source_list(c, &srcs, &ns);
  for (size_t i = 0; rc == 0 && i < ns; i++) {
    char *sealed = reseal_source_secrets(x, srcs[i].secrets, srcs[i].id, now);
    if (!sealed) {
      snprintf(x->err, sizeof x->err,
               "the secrets of source %s do not open with the current master key", srcs[i].id);
      x->sealed_new = opens_with(x->new_key, srcs[i].secrets, srcs[i].id);
      rc = HOOKD_STORE_ERR;
      break;
    }
    free(srcs[i].secrets);
    srcs[i].secrets = sealed;
    rc = be->source_update(c, &srcs[i]);
    x->resealed++;
  }
  hookd_sources_free(srcs, ns);
  /* the store's record of its key follows, in the same transaction: the next start compares */
  char held[128];
  if (rc == 0) rc = be->master_key_claim(c, x->new_key->id, true, now, held, sizeof held);
  return rc ? rc : be->audit_append(c, &x->audit);
}

/* A text column of `keys list`, shown as text (hookd_shown_print) and padded to width, then
 * a blank. */
static void column(const char *s, size_t width) {
  hookd_shown_print(stdout, s, strlen(s));
  printf("%*s ", strlen(s) < width ? (int)(width - strlen(s)) : 0, "");
}

/* Each option at most once (a second --role silently won), one positional argument at most. */
static int parse(int argc, char **argv, keys_args *a) {
  for (int i = 0; i < argc; i++) {
    const char *k = argv[i];
    if (strncmp(k, "--", 2) != 0) {
      if (a->id) {
        fprintf(stderr, "hookd keys: one argument at most (a second given, not shown)\n");
        return -1;
      }
      a->id = k;
      continue;
    }
    const char **slot = !strcmp(k, "--store")                 ? &a->store
                        : !strcmp(k, "--role")                ? &a->role
                        : !strcmp(k, "--tenants")             ? &a->tenants
                        : !strcmp(k, "--name")                ? &a->name
                        : !strcmp(k, "--expires-in-s")        ? &a->expires
                        : !strcmp(k, "--master-key-file")     ? &a->master_file
                        : !strcmp(k, "--new-master-key-file") ? &a->new_master_file
                                                              : NULL;
    /* (an unknown one said so, not as wanting a value: `keys list --json`) */
    if (!slot || *slot) {
      fprintf(stderr, "hookd keys: %s option %.40s\n", slot ? "repeated" : "unknown", k);
      return -1;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "hookd keys: %.40s needs a value\n", k);
      return -1;
    }
    *slot = argv[++i];
  }
  if (a->store && !*a->store) { /* (`--store "$URL"` with the variable unset: no default) */
    fprintf(stderr, "hookd keys: --store is empty\n");
    return -1;
  }
  /* an empty HOOKD_STORE is unset, as for `hookd serve` */
  const char *env = getenv("HOOKD_STORE");
  if (!a->store) a->store = env && *env ? env : "sqlite:hookd.db";
  return 0;
}

/* What a failed store op means to someone at a terminal: a storage error here is most often
 * another process holding the write lock past the busy timeout (5 s). */
static const char *store_problem(int rc) {
  return rc == HOOKD_STORE_ERR ? "storage error: the store could not be written within 5 s (locked "
                                 "by another process?) or the disk failed"
                               : hookd_store_strerror(rc);
}

/* alone: the command holds the store's lock (no daemon on it), so a WAL a crashed run left is
 * copied into the database before the command writes behind it (a running daemon did that at
 * its start) */
static hookd_store *open_store_as(const char *url, bool alone) {
  hookd_store_config cfg = {.url = url, .max_batch = 16, .no_migrate = true, .recover_wal = alone};
  hookd_store *s = NULL;
  char err[512];
  if (hookd_store_open(&cfg, &s, err, sizeof err) != 0) {
    fprintf(stderr, "hookd keys: %s\n", err);
    return NULL;
  }
  return s;
}

static hookd_store *open_store(const char *url) { return open_store_as(url, false); }

/* For a write: the store's lock taken if it is free (held in *lock until the caller unlocks),
 * and then the crashed run's WAL recovered first. */
static hookd_store *open_store_writing(const char *url, hookd_store_lockset *lock) {
  hookd_store *s = open_store_as(url, hookd_store_lock_if_free(url, lock));
  if (!s) hookd_store_unlock(lock);
  return s;
}

/* When a running hookd reads a key change made here: create and revoke say it. */
static const char *when_read(const char *store) {
  return hookd_store_is_postgres(store)
             ? "a running hookd reads it at once (the store's change feed)"
             : "a running hookd reads it at its next reload (every 2 s by default) or at once "
               "after a SIGHUP";
}

static int cmd_create(keys_args *a) {
  hookd_role role;
  if (!a->role || hookd_role_parse(a->role, &role) != 0) {
    fprintf(stderr, "hookd keys create: --role must be " HOOKD_ROLES_TEXT "\n");
    return 2;
  }
  /* an empty list must not become a key for every tenant, nor a long one a list the daemon
   * refuses (leave --tenants out for every tenant) */
  char why[160];
  hookd_scope_builder scope = {0}; /* a tenant named twice kept once, as POST /v1/keys does */
  const char *cur = a->tenants, *t;
  size_t len;
  int bad = hookd_scope_check(a->tenants, why, sizeof why);
  while (!bad && hookd_scope_next(&cur, &t, &len))
    bad = hookd_scope_add(&scope, t, len, why, sizeof why);
  if (bad) {
    fprintf(stderr,
            "hookd keys create: --tenants: %s; give a comma-separated list of tenant ids, or "
            "leave --tenants out for a key valid for every tenant\n",
            why);
    return 2;
  }
  /* a name is shown by `keys list`, one key per line, and by GET /v1/keys and the dashboard:
   * what the API takes (UTF-8, no control characters, no bidirectional controls), bounded */
  if (a->name && !hookd_shown_name_ok(a->name)) {
    fprintf(stderr, "hookd keys create: --name must be at most %d bytes of UTF-8 without "
                    "control characters or bidirectional controls\n",
            HOOKD_SHOWN_NAME_MAX);
    return 2;
  }
  /* an expiry as POST /v1/keys takes one: 60 s to a year */
  int64_t expires_in_s = 0;
  if (a->expires) {
    long long v;
    if (hookd_parse_ll(a->expires, 60, 365 * 86400LL, &v) != 0) {
      fprintf(stderr, "hookd keys create: --expires-in-s must be an integer from 60 to 31536000 "
                      "(seconds)\n");
      return 2;
    }
    expires_in_s = v;
  }
  /* a key in a store nobody serves is no key: a mistyped path is not created */
  if (!hookd_cli_store_exists("hookd keys create", a->store)) return 1;
  ctx x = {0};
  char token[64], id[HOOKD_ID_MAX];
  if (hookd_auth_generate(token, x.key.hash) != 0 || hookd_id_new("key", hookd_now_ms(), id) != 0) {
    OPENSSL_cleanse(token, sizeof token);
    fprintf(stderr, "hookd keys create: cannot generate a key (the random generator failed)\n");
    return 1;
  }
  hookd_store_lockset lock;
  hookd_store *s = open_store_writing(a->store, &lock);
  if (!s) {
    OPENSSL_cleanse(token, sizeof token);
    return 1;
  }
  x.key.id = id;
  x.key.role = (char *)a->role;
  x.key.tenants = a->tenants ? scope.csv : NULL;
  x.key.name = (char *)(a->name ? a->name : "");
  x.key.created_ms = hookd_now_ms();
  x.key.expires_ms = expires_in_s ? x.key.created_ms + expires_in_s * 1000 : 0;
  char detail[HOOKD_KEY_DETAIL_MAX];
  hookd_auth_key_detail(a->role, x.key.tenants, x.key.expires_ms, detail, sizeof detail);
  x.audit = (hookd_audit){.at_ms = x.key.created_ms, .actor = "cli", .action = "key.create",
                          .target = id, .detail = detail};
  /* a tenant of the scope that does not exist: refused before a token is printed */
  int rc = hookd_storeq_run_sync(s->reader, run_tenants_exist, &x);
  /* the token is written out before the key is stored: a key whose token nobody received
   * (stdout full, closed — main gives a closed one /dev/null, where a write succeeds: a review)
   * would be a live admin credential held by no one */
  bool written = !rc && !hookd_auth_stdout_is_null() && printf("%s\n", token) > 0 &&
                 fflush(stdout) == 0 && !ferror(stdout);
  OPENSSL_cleanse(token, sizeof token);
  if (!written) {
    hookd_store_close(s);
    hookd_store_unlock(&lock); /* after the store: see hookd_store_lock */
    if (rc == HOOKD_STORE_NOTFOUND)
      fprintf(stderr, "hookd keys create: --tenants: no tenant %.64s (create it first); no key "
                      "created\n", x.missing);
    else if (rc)
      fprintf(stderr, "hookd keys create: %s; no key created\n", store_problem(rc));
    else
      fprintf(stderr, "hookd keys create: the token could not be written to standard output "
                      "(closed, full, or /dev/null): no key created\n");
    return 1;
  }
  rc = hookd_storeq_run_sync(s->writer, run_create, &x);
  hookd_store_close(s);
  hookd_store_unlock(&lock);
  if (rc == HOOKD_STORE_UNKNOWN) {
    fprintf(stderr, "hookd keys create: %s: the key may have been stored; the token above is "
                    "valid if `hookd keys list` shows %s (revoke it if you do not keep the token)\n",
            store_problem(rc), id);
    return 1;
  }
  if (rc == HOOKD_STORE_NOTFOUND) { /* (deleted since the check above) */
    fprintf(stderr, "hookd keys create: --tenants: no tenant %.64s (the token above is not "
                    "valid)\n", x.missing);
    return 1;
  }
  if (rc) {
    fprintf(stderr, "hookd keys create: %s (the token above is not valid)\n", store_problem(rc));
    return 1;
  }
  char until[HOOKD_RFC3339_MAX + 16] = "";
  if (x.key.expires_ms) {
    char at[HOOKD_RFC3339_MAX];
    hookd_fmt_rfc3339_ms(x.key.expires_ms, at);
    snprintf(until, sizeof until, ", expires %s", at);
  }
  fprintf(stderr, "created %s (role %s, tenants %s%s); the token above is shown only once; %s\n",
          id, a->role, x.key.tenants ? x.key.tenants : "* (all)", until, when_read(a->store));
  return 0;
}

static int cmd_list(keys_args *a) {
  if (!hookd_cli_store_exists("hookd keys list", a->store)) return 1;
  hookd_store *s = open_store(a->store);
  if (!s) return 1;
  ctx x = {0};
  int rc = hookd_storeq_run_sync(s->reader, run_list, &x);
  hookd_store_close(s);
  if (rc) {
    fprintf(stderr, "hookd keys list: %s\n", store_problem(rc));
    return 1;
  }
  /* TENANTS: "*" is every tenant. STATE "invalid": a key hookd refuses to load (a scope an older
   * hookd wrote empty or overlong, a role a newer one or a hand edit wrote), so it opens nothing.
   * EXPIRES: "-" for a key that never does */
  printf("%-32s %-10s %-20s %-8s %-24s %s\n", "ID", "ROLE", "TENANTS", "STATE", "EXPIRES",
         "NAME");
  for (size_t i = 0; i < x.n; i++) {
    const hookd_api_key *k = &x.keys[i];
    char why[160];
    bool invalid = hookd_auth_key_check(k, NULL, why, sizeof why) != 0; /* as hookd loads */
    /* (a role written by hand, perhaps with a terminal's escape sequences: as text) */
    const char *role = k->role ? k->role : "";
    /* (an older CLI stored names unchecked, a hand edit anything: every text column shown) */
    const char *tenants = !k->tenants ? "*" : k->tenants[0] ? k->tenants : "\"\"";
    const char *name = k->name ? k->name : "";
    column(k->id, 32);
    column(role, 10);
    column(tenants, 20);
    printf("%-8s ", hookd_auth_key_state(k, hookd_now_ms()));
    char expires[HOOKD_RFC3339_MAX] = "-";
    if (k->expires_ms) hookd_fmt_rfc3339_ms(k->expires_ms, expires);
    printf("%-24s ", expires);
    hookd_shown_print(stdout, name, strlen(name));
    printf("\n");
    if (invalid && !k->revoked_ms) {
      fprintf(stderr, "key %s: ", k->id);
      hookd_shown_print(stderr, why, strlen(why)); /* (it quotes the role) */
      fprintf(stderr, "; hookd refuses it: revoke it and create another\n");
    }
  }
  hookd_api_keys_free(x.keys, x.n);
  /* a list written nowhere (a full disk, a closed pipe) is not a success */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "hookd keys list: cannot write the list: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}

static int cmd_revoke(keys_args *a) {
  if (!a->id) {
    fprintf(stderr, "hookd keys revoke: the key id is missing\n");
    usage(stderr);
    return 2;
  }
  if (!strncmp(a->id, "hk_", 3)) { /* (the credential itself: not repeated) */
    fprintf(stderr, "hookd keys revoke: that is a key's token (not shown), not its id: give the "
                    "id (key_…) `hookd keys list` shows\n");
    return 2;
  }
  if (!hookd_cli_store_exists("hookd keys revoke", a->store)) return 1;
  hookd_store_lockset lock;
  hookd_store *s = open_store_writing(a->store, &lock);
  if (!s) return 1;
  ctx x = {.id = a->id};
  x.audit = (hookd_audit){.at_ms = hookd_now_ms(), .actor = "cli", .action = "key.revoke",
                          .target = (char *)a->id};
  int rc = hookd_storeq_run_sync(s->writer, run_revoke, &x);
  hookd_api_keys_free(x.keys, x.n);
  hookd_store_close(s);
  hookd_store_unlock(&lock);
  if (rc) {
    fprintf(stderr, "hookd keys revoke: %s: %s%s\n", a->id,
            rc == HOOKD_STORE_NOTFOUND ? "no such active key" : store_problem(rc),
            rc == HOOKD_STORE_UNKNOWN ? ": it may have been revoked; see `hookd keys list`" : "");
    return 1;
  }
  fprintf(stderr, "revoked %s; %s\n", a->id, when_read(a->store));
  return 0;
}

static int cmd_rotate_master(keys_args *a) {
  if (!a->new_master_file) {
    fprintf(stderr, "hookd keys rotate-master: --new-master-key-file is required\n");
    usage(stderr);
    return 2;
  }
  if (!hookd_cli_store_exists("hookd keys rotate-master", a->store)) return 1;
  /* hookd must not run: it holds the old key in memory */
  hookd_store_lockset lock = {-1, -1, NULL};
  char lerr[256];
  if (hookd_store_lock_offline(a->store, &lock, lerr, sizeof lerr) != 0) {
    fprintf(stderr, "hookd keys rotate-master: %s; stop it first\n", lerr);
    return 1;
  }
  char err[512];
  hookd_master_key old_key, new_key;
  const char *old_file;
  char default_file[1100];
  if (hookd_cli_master_key_file("hookd keys rotate-master", a->master_file, a->store,
                                default_file, sizeof default_file, &old_file) != 0) {
    hookd_store_unlock(&lock);
    return 2;
  }
  int rc = 1;
  unsigned mode;
  if (hookd_keyring_file_loose(a->new_master_file, &mode)) {
    /* secrets are about to be sealed with it: a key others can read is refused before */
    fprintf(stderr, "hookd keys rotate-master: %s is readable by group or others (mode %04o): "
                    "chmod 600 it first (the master key opens every stored secret)\n",
            a->new_master_file, mode);
    goto out;
  }
  /* the new key on disk before anything is sealed with it: a file written a moment ago
   * (openssl rand > new.key) may come back empty after a power cut, every secret lost */
  if (hookd_keyring_read(old_file, &old_key, err, sizeof err) != 0 ||
      hookd_keyring_read(a->new_master_file, &new_key, err, sizeof err) != 0 ||
      hookd_keyring_file_sync(a->new_master_file, err, sizeof err) != 0) {
    fprintf(stderr, "hookd keys rotate-master: %s\n", err);
    goto out;
  }
  /* the key in use again: nothing would be rotated, yet it would be said done (after a leak) */
  if (!CRYPTO_memcmp(old_key.key, new_key.key, sizeof old_key.key)) {
    fprintf(stderr, "hookd keys rotate-master: %s holds the master key in use (id %s): "
                    "nothing to rotate (make a new key: openssl rand -base64 32)\n",
            a->new_master_file, old_key.id);
    goto out;
  }
  /* (it holds the store's lock: alone on it) */
  hookd_store *s = open_store_as(a->store, !hookd_store_is_postgres(a->store));
  if (!s) goto out;
  ctx x = {.old_key = &old_key, .new_key = &new_key};
  char detail[80];
  snprintf(detail, sizeof detail, "from %s to %s", old_key.id, new_key.id);
  x.audit = (hookd_audit){.at_ms = hookd_now_ms(), .actor = "cli", .action = "master_key.rotate",
                          .detail = detail};
  int src = hookd_storeq_run_sync(s->writer, run_rotate_master, &x);
  hookd_store_close(s);
  if (src == HOOKD_STORE_UNKNOWN) {
    fprintf(stderr, "hookd keys rotate-master: %s: the secrets are sealed with master key %s "
                    "or %s, all with one; keep both key files: hookd's start names the one the "
                    "store needs\n", store_problem(src), old_key.id, new_key.id);
    goto out;
  }
  if (src && x.sealed_new) { /* (a review: said only that the secrets did not open) */
    fprintf(stderr, "hookd keys rotate-master: the stored secrets are sealed with the new key "
                    "already (%s, id %s): a rotation to it completed before; nothing changed. "
                    "Start hookd with that key (in place of %s, id %s)\n",
            a->new_master_file, new_key.id, old_file ? old_file : "HOOKD_MASTER_KEY", old_key.id);
    goto out;
  }
  if (src) {
    fprintf(stderr, "hookd keys rotate-master: %s (nothing changed; the current key tried: %s, "
                    "id %s)\n",
            x.err[0] ? x.err : hookd_store_strerror(src), old_file ? old_file : "HOOKD_MASTER_KEY",
            old_key.id);
    goto out;
  }
  /* where the old key came from is where the new one goes: a start given both the variable
   * and a key file is refused */
  char beside[1100] = "";
  if (!strncmp(a->store, "sqlite:", 7)) { /* the store's own key file, which a start compares */
    snprintf(beside, sizeof beside, "%s.key", a->store + 7);
    if (access(beside, F_OK) != 0) beside[0] = '\0';
  }
  if (!old_file) /* (the old key was HOOKD_MASTER_KEY's: hookd_cli_master_key_file) */
    printf("re-sealed %d secrets with master key %s; set HOOKD_MASTER_KEY to the text of %s "
           "(on every node) in place of the old key%s%s%s\n",
           x.resealed, new_key.id, a->new_master_file,
           beside[0] ? ", and replace " : "", beside,
           beside[0] ? " with it (a start finding the two different refuses)" : "");
  /* the store's own key file, named or not: the new key goes there (left beside the store, the
   * old one would sit in its backups) */
  else if (beside[0] && same_file(old_file, beside))
    printf("re-sealed %d secrets with master key %s; keep a copy of the old key (%s, id %s) "
           "for the backups taken before now, which open with it alone — away from the store's "
           "directory and its backups (beside them, it opens those backups for whoever takes "
           "one) —, then move %s over %s (mv %s %s && chown --reference=%s %s: the daemon's "
           "user must read it): hookd reads its key there\n",
           x.resealed, new_key.id, beside, old_key.id, a->new_master_file, beside,
           a->new_master_file, beside, a->store + 7, beside);
  else
    printf("re-sealed %d secrets with master key %s; start hookd with "
           "--master-key-file %s\n",
           x.resealed, new_key.id, a->new_master_file);
  rc = 0;
out:
  OPENSSL_cleanse(&old_key, sizeof old_key); /* locals going out of scope: memset is a dead store */
  OPENSSL_cleanse(&new_key, sizeof new_key);
  hookd_store_unlock(&lock); /* after the store: see hookd_store_lock */
  return rc;
}

int hookd_cmd_keys(int argc, char **argv) {
  keys_args a = {0};
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout); /* asked for: the answer, on stdout */
      return 0;
    }
  if (argc < 1)
    fprintf(stderr, "hookd keys: which command? (create, list, revoke, rotate-master)\n");
  else if (!strncmp(argv[0], "-", 1)) /* (`keys --store S list`: its options after it) */
    fprintf(stderr, "hookd keys: the command (create, list, revoke, rotate-master) comes first, "
                    "its options after it\n");
  if (argc < 1 || !strncmp(argv[0], "-", 1) || parse(argc - 1, argv + 1, &a) != 0) {
    usage(stderr);
    return 2;
  }
  const char *sub = argv[0];
  /* only revoke takes a positional argument (the key id) */
  if (a.id && strcmp(sub, "revoke") != 0) {
    /* (not repeated: a token pasted there is a secret — a review) */
    fprintf(stderr, "hookd keys %s: unexpected argument (not shown: it may be a secret; only "
                    "revoke takes one, a key's id)\n", sub);
    return 2;
  }
  /* an option the subcommand does not read is a mistake (`keys list --role admin` listed every
   * key as if it filtered), not something to ignore: each subcommand's options, by name */
  static const struct {
    const char *sub, *reads;
  } reads[] = {{"create", ",--role,--tenants,--name,--expires-in-s,"},
               {"list", ","},
               {"revoke", ","},
               {"rotate-master", ",--master-key-file,--new-master-key-file,"}};
  const struct {
    const char *name;
    bool set;
  } given[] = {{"--role", a.role != NULL},
               {"--tenants", a.tenants != NULL},
               {"--name", a.name != NULL},
               {"--expires-in-s", a.expires != NULL},
               {"--master-key-file", a.master_file != NULL},
               {"--new-master-key-file", a.new_master_file != NULL}};
  for (size_t r = 0; r < sizeof reads / sizeof *reads; r++) {
    if (strcmp(sub, reads[r].sub) != 0) continue;
    for (size_t g = 0; g < sizeof given / sizeof *given; g++) {
      char needle[40];
      snprintf(needle, sizeof needle, ",%s,", given[g].name);
      if (given[g].set && !strstr(reads[r].reads, needle)) {
        fprintf(stderr, "hookd keys %s: %s does not apply to this command\n", sub,
                given[g].name);
        return 2;
      }
    }
  }
  if (!strcmp(sub, "create")) return cmd_create(&a);
  if (!strcmp(sub, "list")) return cmd_list(&a);
  if (!strcmp(sub, "revoke")) return cmd_revoke(&a);
  if (!strcmp(sub, "rotate-master")) return cmd_rotate_master(&a);
  fprintf(stderr, "hookd keys: unknown command \"%.40s\"\n", sub);
  usage(stderr);
  return 2;
}

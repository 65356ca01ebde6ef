/* keyring.c — master key loading, first-start creation, and the store check (see keyring.h). */
#include "daemon/keyring.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "daemon/log.h"
#include "store/storeq.h"

/* The variable's text once hookd_master_key_env_take has moved it out of the environment. */
static char env_copy[512];
static bool env_taken;

const char *hookd_master_key_env(void) {
  const char *env = env_taken ? env_copy : getenv("HOOKD_MASTER_KEY");
  return env && *env ? env : NULL;
}

void hookd_master_key_env_take(void) {
  char *env = getenv("HOOKD_MASTER_KEY");
  env_taken = true;
  if (!env) return;
  size_t n = strlen(env);
  /* (one too long for the copy is kept too long: hookd_keyring_read refuses it, as before) */
  memset(env_copy, 'x', sizeof env_copy - 1);
  if (n < sizeof env_copy) memcpy(env_copy, env, n + 1);
  OPENSSL_cleanse(env, n);
  unsetenv("HOOKD_MASTER_KEY");
}

void hookd_master_key_env_forget(void) {
  OPENSSL_cleanse(env_copy, sizeof env_copy);
  env_copy[0] = '\0';
}

int hookd_keyring_read(const char *file, hookd_master_key *out, char *err, size_t errlen) {
  char text[256] = "";
  if (!file) {
    const char *env = hookd_master_key_env();
    if (!env || strlen(env) >= sizeof text) {
      snprintf(err, errlen,
               "HOOKD_MASTER_KEY is not set or too long (or give the key file: --master-key-file)");
      return -1;
    }
    snprintf(text, sizeof text, "%s", env);
  } else {
    FILE *f = fopen(file, "r");
    if (!f) {
      snprintf(err, errlen, "cannot read master key file %s: %s", file, strerror(errno));
      return -1;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  int rc = hookd_master_key_parse(text, out);
  OPENSSL_cleanse(text, sizeof text);
  if (rc != 0) {
    snprintf(err, errlen, "the master key%s%s is not base64 (or hex) of 32 bytes",
             file ? " in " : "", file ? file : " in HOOKD_MASTER_KEY");
    return -1;
  }
  return 0;
}

bool hookd_keyring_file_loose(const char *file, unsigned *mode) {
  struct stat st;
  if (!file || stat(file, &st) != 0) return false;
  *mode = (unsigned)(st.st_mode & 07777);
  return (st.st_mode & 077) != 0;
}

/* Syncs the directory that holds path (its entry for the file). */
static bool sync_dir_of(const char *path) {
  char dir[1100];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = '\0';
  else if (slash) *slash = '\0';
  else snprintf(dir, sizeof dir, ".");
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  bool ok = dfd >= 0 && fsync(dfd) == 0;
  if (dfd >= 0) close(dfd);
  return ok;
}

int hookd_keyring_file_sync(const char *file, char *err, size_t errlen) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && fsync(fd) == 0;
  if (fd >= 0) close(fd);
  if (!ok || !sync_dir_of(file)) {
    snprintf(err, errlen, "cannot sync %s to disk: %s", file, strerror(errno));
    return -1;
  }
  return 0;
}

/* The key is written whole under a temporary name, synced, then linked to its name — which,
 * like O_EXCL, never replaces a key already there —, so that a crash (or a power cut) at any
 * point leaves either no key file or a complete one: written in place, a kill between the
 * create and the write left an empty file that every later start refused (an audit). */
static int create_key_file(const char *path, hookd_master_key *out, char *err, size_t errlen) {
  char text[64], tmp[1100];
  if (hookd_master_key_generate(out, text) != 0) {
    snprintf(err, errlen, "cannot generate a master key");
    return -1;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* made anew, never opened as found: a file left there keeps its mode and owner (0644, or
   * another user's) when truncated, and would be linked into place as the key */
  if (unlink(tmp) != 0 && errno != ENOENT) {
    OPENSSL_cleanse(text, sizeof text);
    snprintf(err, errlen, "cannot remove %s: %s", tmp, strerror(errno));
    return -1;
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    OPENSSL_cleanse(text, sizeof text);
    snprintf(err, errlen, "cannot create master key file %s: %s", tmp, strerror(errno));
    return -1;
  }
  size_t n = strlen(text);
  text[n++] = '\n';
  int ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
  close(fd);
  OPENSSL_cleanse(text, sizeof text);
  if (!ok) {
    snprintf(err, errlen, "cannot write master key file %s", tmp);
    unlink(tmp);
    return -1;
  }
  /* a file system without hard links: renamed instead (the store's lock keeps other hookd
   * starts out, and the name was free a moment ago) */
  int linked = link(tmp, path);
  if (linked != 0 && (errno == EPERM || errno == ENOTSUP || errno == ENOSYS)) {
    if (access(path, F_OK) == 0) errno = EEXIST;
    else linked = rename(tmp, path);
  }
  if (linked != 0) { /* EEXIST: another's key, never replaced */
    snprintf(err, errlen, "cannot create master key file %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  unlink(tmp); /* after a rename: nothing there */
  /* the file's directory entry too: a power cut must not keep sealed secrets and lose the only
   * key that opens them */
  ok = sync_dir_of(path);
  if (!ok) { /* the key this start made, not on disk for sure: gone, as it never was */
    snprintf(err, errlen, "cannot write master key file %s", path);
    unlink(path);
    return -1;
  }
  return 0;
}

/* An empty key file beside a store that holds no secret: what a crash inside the first start's
 * key creation left before hookd wrote the key whole (create_key_file) — nothing is sealed with
 * any key yet, so it is made again instead of refusing every start. */
static bool empty_unused_key_file(const char *path, size_t secrets) {
  struct stat st;
  return secrets == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

/* The stored values meant to be sealed: how many are not (written by hand, or by a tool outside
 * hookd — used as they are, in clear at rest), and the key ids of those that are. */
typedef struct seal_tally {
  size_t plain, sealed;
  size_t by_other;                /* sealed, by another key than the first seen */
  char first[HOOKD_KEY_ID_LEN];   /* that first key id */
} seal_tally;

static void tally(seal_tally *t, const char *value) {
  if (!value || !*value) return;
  char id[HOOKD_KEY_ID_LEN];
  if (hookd_sealed_key_id(value, id) != 0) {
    t->plain++;
    return;
  }
  t->sealed++;
  if (!t->first[0]) snprintf(t->first, sizeof t->first, "%s", id);
  else if (strcmp(t->first, id) != 0) t->by_other++;
}

typedef struct scan {
  hookd_endpoint *eps;
  size_t n;
  hookd_source *srcs;
  size_t n_srcs;
} scan;

static int run_scan(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  scan *s = arg;
  int rc = be->endpoints_since(c, 0, &s->eps, &s->n);
  return rc ? rc : be->source_list(c, &s->srcs, &s->n_srcs);
}

typedef struct claim {
  const char *key_id;
  bool take;
  char held[128];
} claim;

static int run_claim(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  claim *k = arg;
  return be->master_key_claim(c, k->key_id, k->take, hookd_now_ms(), k->held, sizeof k->held);
}

int hookd_keyring_check(const hookd_config *cfg, char *err, size_t errlen) {
  if (hookd_master_key_env() && cfg->master_key_file[0]) {
    snprintf(err, errlen,
             "both HOOKD_MASTER_KEY and a master key file (%s) are configured: keep one",
             cfg->master_key_file);
    return -1;
  }
  if (!hookd_master_key_env() && !cfg->master_key_file[0]) {
    /* the store's key file (or no store hookd opens: said by the open) */
    /* its own key file beside no database: a store's remains (with --master-key-file or
     * HOOKD_MASTER_KEY, a key provisioned there before the first start proves nothing) */
    if (!hookd_store_is_postgres(cfg->store_url))
      return hookd_store_remains(cfg->store_url, ".key", err, errlen);
    /* a shared store has no key file of its own: refused here, before the store is opened and
     * migrated (refused after, the previous hookd no longer opened the store: no way back) */
    snprintf(err, errlen, "no master key configured (--master-key-file or HOOKD_MASTER_KEY)");
    return -1;
  }
  hookd_master_key k;
  int rc = hookd_keyring_read(hookd_master_key_env() ? NULL : cfg->master_key_file, &k, err,
                              errlen);
  /* the default key file next to the database counts too: holding another key, new secrets
   * would be sealed with a key other than the one every later start without the variable
   * reads (the same key in both is fine: a deployment that moved it to the environment).
   * Checked here, before the store is opened and migrated: refused after the migrations, the
   * start left a store the previous hookd no longer opens */
  if (rc == 0 && hookd_master_key_env() && strncmp(cfg->store_url, "sqlite:", 7) == 0) {
    char path[1100];
    snprintf(path, sizeof path, "%s.key", cfg->store_url + 7);
    hookd_master_key file_key;
    if (access(path, F_OK) == 0 && (hookd_keyring_read(path, &file_key, err, errlen) != 0 ||
                                    strcmp(file_key.id, k.id) != 0)) {
      snprintf(err, errlen,
               "HOOKD_MASTER_KEY and the store's key file (%s) hold different keys: keep one",
               path);
      rc = -1;
    }
    OPENSSL_cleanse(&file_key, sizeof file_key);
  }
  OPENSSL_cleanse(&k, sizeof k);
  return rc;
}

/* Where cfg's master key comes from: KEY_ENV (HOOKD_MASTER_KEY), KEY_FILE (--master-key-file),
 * KEY_STORE_FILE (a SQLite store's own, path set: it may not exist yet), or KEY_NONE (a
 * PostgreSQL store given none). The load and the check before the migrations read the same. */
enum key_place { KEY_NONE, KEY_ENV, KEY_FILE, KEY_STORE_FILE };
static enum key_place key_place(const hookd_config *cfg, char *path, size_t cap) {
  if (hookd_master_key_env()) return KEY_ENV;
  if (cfg->master_key_file[0]) return KEY_FILE;
  if (strncmp(cfg->store_url, "sqlite:", 7) != 0) return KEY_NONE;
  snprintf(path, cap, "%s.key", cfg->store_url + 7);
  return KEY_STORE_FILE;
}

int hookd_keyring_expected_id(const hookd_config *cfg, char id[HOOKD_KEY_ID_LEN], char *why,
                              size_t why_len) {
  char path[1100] = "";
  enum key_place at = key_place(cfg, path, sizeof path);
  if (at == KEY_NONE) {
    snprintf(why, why_len, "none is configured: --master-key-file or HOOKD_MASTER_KEY");
    return -1;
  }
  if (at == KEY_STORE_FILE && access(path, F_OK) != 0) {
    snprintf(why, why_len, "%.900s is missing (restore it beside the store, or give "
                           "--master-key-file or HOOKD_MASTER_KEY)", path);
    return -1;
  }
  hookd_master_key k;
  int rc = hookd_keyring_read(at == KEY_ENV ? NULL : at == KEY_FILE ? cfg->master_key_file : path,
                              &k, why, why_len);
  if (rc == 0) snprintf(id, HOOKD_KEY_ID_LEN, "%s", k.id);
  OPENSSL_cleanse(&k, sizeof k);
  return rc;
}

int hookd_keyring_load(const hookd_config *cfg, hookd_store *store, hookd_keyring *out, char *err,
                       size_t errlen) {
  scan s = {0};
  if (hookd_storeq_run_sync(store->reader, run_scan, &s) != 0) {
    snprintf(err, errlen, "cannot read endpoints");
    return -1;
  }
  /* which key sealed the stored secrets? and is any not sealed, or sealed with another? */
  size_t secrets = 0;
  seal_tally t = {0};
  for (size_t i = 0; i < s.n; i++) {
    /* (a deleted endpoint's is blank: none kept) */
    secrets += (s.eps[i].secret && *s.eps[i].secret) + (s.eps[i].previous_secret != NULL);
    tally(&t, s.eps[i].secret);
    tally(&t, s.eps[i].previous_secret);
    tally(&t, s.eps[i].headers);
  }
  for (size_t i = 0; i < s.n_srcs; i++) {
    secrets += s.srcs[i].secrets != NULL;
    tally(&t, s.srcs[i].secrets);
  }
  hookd_endpoints_free(s.eps, s.n);
  hookd_sources_free(s.srcs, s.n_srcs);

  int rc;
  char path[1100] = "";
  if (hookd_keyring_check(cfg, err, errlen) != 0) return -1;
  enum key_place at = key_place(cfg, path, sizeof path);
  if (at == KEY_ENV) {
    /* (the store's key file beside it, if any, holds the same: hookd_keyring_check) */
    rc = hookd_keyring_read(NULL, &out->key, err, errlen);
  } else if (at == KEY_FILE) {
    rc = hookd_keyring_read(cfg->master_key_file, &out->key, err, errlen);
  } else if (at == KEY_STORE_FILE) {
    if (empty_unused_key_file(path, secrets)) unlink(path);
    char tmp[sizeof path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    /* a copy of the key a crash left between the link and the unlink (create_key_file) */
    if (access(path, F_OK) == 0) unlink(tmp);
    if (access(path, F_OK) == 0) {
      rc = hookd_keyring_read(path, &out->key, err, errlen);
    } else if (secrets) {
      snprintf(err, errlen,
               "the store holds %zu signing secrets but no master key is configured "
               "(--master-key-file or HOOKD_MASTER_KEY): refusing to start",
               secrets);
      return -1;
    } else {
      rc = create_key_file(path, &out->key, err, errlen);
    }
  } else {
    snprintf(err, errlen, "no master key configured (--master-key-file or HOOKD_MASTER_KEY)");
    return -1;
  }
  if (rc != 0) return -1;
  const char *read_from = cfg->master_key_file[0] ? cfg->master_key_file : path[0] ? path : NULL;
  unsigned mode;
  if (!hookd_master_key_env() && hookd_keyring_file_loose(read_from, &mode)) {
    /* warned, not refused: a secret mounted by Kubernetes is 0644 by default, root's */
    char octal[8];
    snprintf(octal, sizeof octal, "%04o", mode);
    HLOG(HOOKD_LOG_WARN, "master_key.file_readable", KV_S("file", read_from), KV_S("mode", octal),
         KV_S("why", "the master key opens every stored secret: readable by group or others, "
                     "any of them can; chmod 600 it"));
  }
  if (t.by_other) { /* only one key opens them all: the others would never sign or forward */
    snprintf(err, errlen,
             "the store's secrets are sealed with more than one master key (%zu of %zu not with "
             "%s): refusing to start",
             t.by_other, t.sealed, t.first);
    return -1;
  }
  if (t.plain) /* used as they are: said, with the way to seal them */
    HLOG(HOOKD_LOG_WARN, "secrets.unsealed", KV_I("count", (int64_t)t.plain),
         KV_S("why", "stored secrets or custom headers in clear, written outside hookd: used as "
                     "they are; `hookd keys rotate-master` seals them"));
  if (t.first[0] && strcmp(t.first, out->key.id) != 0) {
    snprintf(err, errlen,
             "the store's secrets were sealed with master key %s but the configured key is %s: "
             "refusing to start",
             t.first, out->key.id);
    return -1;
  }
  /* the store's key, recorded by the first start (or rotate-master): a node given another is
   * refused before it seals anything — two nodes of a shared store started with two keys each
   * sealed its own values, and every start after was refused, with nothing to repair it */
  claim k = {.key_id = out->key.id};
  if (hookd_storeq_run_sync(store->writer, run_claim, &k) != 0) {
    snprintf(err, errlen, "cannot record the store's master key");
    return -1;
  }
  if (strcmp(k.held, out->key.id) != 0) {
    /* one node alone on a store with nothing sealed (its key file lost, say): nothing to open
     * with the old key, the record follows. A shared store's other nodes may seal with the old
     * one at any moment: refused there */
    if (!hookd_store_is_postgres(cfg->store_url) && !t.sealed && !t.plain) {
      char before[sizeof k.held];
      snprintf(before, sizeof before, "%s", k.held);
      k.take = true;
      if (hookd_storeq_run_sync(store->writer, run_claim, &k) != 0) {
        snprintf(err, errlen, "cannot record the store's master key");
        return -1;
      }
      HLOG(HOOKD_LOG_INFO, "master_key.recorded", KV_S("key_id", out->key.id),
           KV_S("replaced", before), KV_S("why", "nothing was sealed with the one before"));
      return 0;
    }
    snprintf(err, errlen,
             "this store's master key is %s (recorded by its first start or by rotate-master) but "
             "this node was given %s: every node needs the store's key — start it with that one "
             "(docs/security.md \"Keys at rest\")",
             k.held, out->key.id);
    return -1;
  }
  return 0;
}

char *hookd_keyring_seal(const hookd_keyring *k, const char *plain, const char *owner_id) {
  return hookd_seal(&k->key, plain, owner_id);
}

char *hookd_keyring_open(const hookd_keyring *k, const char *stored, const char *owner_id) {
  if (!stored) return NULL;
  if (!hookd_is_sealed(stored)) return strdup(stored);
  return hookd_unseal(&k->key, stored, owner_id);
}

json_t *hookd_keyring_open_json(const hookd_keyring *k, const char *stored, const char *owner_id) {
  char *plain = hookd_keyring_open(k, stored, owner_id);
  if (!plain) return NULL;
  json_t *v = json_loads(plain, 0, NULL);
  hookd_secret_free(plain);
  return v;
}

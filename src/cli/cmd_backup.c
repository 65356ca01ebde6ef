/* cmd_backup.c — `hookd backup`: a consistent copy of a live embedded store (docs/architecture.md
 * "Backups and restores").
 *
 *   hookd backup --to FILE [--store sqlite:PATH]
 *
 * SQLite's online backup in one step (one read transaction: the snapshot of one moment, while
 * the daemon writes on) into a file made new with mode 0600 (never over an existing one),
 * checked (PRAGMA quick_check) and synced with its directory before it says so; any failure
 * removes the partial copy. It names the master key id the copy's secrets open with: the copy
 * holds no key. A PostgreSQL store is the server's tools' to back up. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/secretbox.h"
#include "daemon/keyring.h"
#include "store/store.h"

#define WHO "hookd backup"

static void usage(FILE *to) {
  fprintf(to, "usage: hookd backup --to FILE [--store sqlite:PATH]\n"
              "  a consistent copy of a live embedded store, made 0600; FILE must not exist\n");
}

/* One text value of a query on db (NULL: none, or it failed), malloc'd. */
static char *one_text(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  char *out = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_text(st, 0))
    out = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return out;
}

/* The master key id the copy's secrets open with (NULL: none sealed), malloc'd: the one the store
 * records, or on a store older than that record (SQLite migration 41 — the copy an operator
 * takes before upgrading) the id a sealed value names, as the daemon reads it before migrating
 * (a review: such a copy was said to hold no sealed secret, and its key could be left behind). */
static char *copy_key_id(sqlite3 *db) {
  char *id = one_text(db, "SELECT key_id FROM master_key WHERE one = 1");
  for (size_t i = 0; !id && i < HOOKD_SEALED_COLUMNS; i++) {
    char sql[160], kid[HOOKD_KEY_ID_LEN];
    hookd_sealed_column_sql(i, sql, sizeof sql);
    char *v = one_text(db, sql); /* (a column not in that version: none) */
    if (v && hookd_sealed_key_id(v, kid) == 0) id = strdup(kid);
    free(v);
  }
  return id;
}

/* The copy, made and checked; 0, or -1 said on stderr (the caller removes the file). */
static int copy(const char *src_path, const char *to, sqlite3 **dst_out) {
  sqlite3 *src = NULL, *dst = NULL;
  int rc = -1;
  /* the store's own connections write (its WAL index) even to read: opened read-write, and
   * only read; a daemon's write lock held a moment is waited for */
  if (sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    fprintf(stderr, WHO ": cannot open the store %s: %s\n", src_path, sqlite3_errmsg(src));
    goto done;
  }
  sqlite3_busy_timeout(src, 10000);
  /* (the file just made: a link put in its place meanwhile is not followed) */
  if (sqlite3_open_v2(to, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL) !=
      SQLITE_OK) {
    fprintf(stderr, WHO ": cannot open %s: %s\n", to, sqlite3_errmsg(dst));
    goto done;
  }
  sqlite3_busy_timeout(dst, 10000);
  sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
  if (!b) {
    fprintf(stderr, WHO ": cannot start the copy: %s\n", sqlite3_errmsg(dst));
    goto done;
  }
  /* every page in one step: one read transaction on the store, so one moment's snapshot (in
   * steps, each write of the daemon's would start the copy over) */
  int step = sqlite3_backup_step(b, -1);
  int fin = sqlite3_backup_finish(b);
  if (step != SQLITE_DONE || fin != SQLITE_OK) {
    fprintf(stderr, WHO ": the copy failed: %s\n",
            sqlite3_errstr(step != SQLITE_DONE ? step : fin));
    goto done;
  }
  char *check = one_text(dst, "PRAGMA quick_check");
  if (!check || strcmp(check, "ok") != 0) {
    fprintf(stderr, WHO ": the copy does not check: %s\n", check ? check : sqlite3_errmsg(dst));
    free(check);
    goto done;
  }
  free(check);
  rc = 0;
done:
  sqlite3_close(src);
  if (rc == 0) *dst_out = dst;
  else sqlite3_close(dst);
  return rc;
}

int hookd_cmd_backup(int argc, char **argv) {
  const char *to = NULL, *store = NULL, *env_store = getenv("HOOKD_STORE");
  if (env_store && !*env_store) env_store = NULL; /* (an empty one is unset, as for `serve`) */
  for (int i = 0; i < argc; i++) {
    const char **slot = !strcmp(argv[i], "--to")      ? &to
                        : !strcmp(argv[i], "--store") ? &store
                                                      : NULL;
    if (!strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (!slot || i + 1 >= argc) {
      fprintf(stderr, WHO ": %s %.40s\n", slot ? "a value is needed after" : "unknown argument",
              strncmp(argv[i], "--", 2) ? "(not shown)" : argv[i]);
      usage(stderr);
      return 2;
    }
    /* given twice, the copy of the wrong store, or to the wrong file, would be said done */
    if (*slot) {
      fprintf(stderr, WHO ": %s given twice\n", argv[i]);
      return 2;
    }
    *slot = argv[++i];
  }
  if (store && !*store) {
    fprintf(stderr, WHO ": --store is empty\n");
    return 2;
  }
  if (!store) store = env_store ? env_store : "sqlite:hookd.db";
  if (!to || !*to) {
    fprintf(stderr, WHO ": --to FILE is required (a new file: the copy)\n");
    return 2;
  }
  if (strncmp(store, "sqlite:", 7) != 0) {
    fprintf(stderr, WHO ": %s is not an embedded store: back a PostgreSQL store up with its "
                    "server's tools (pg_dump, base backups with WAL archiving)\n",
            strncmp(store, "postgres", 8) ? "--store" : "a postgresql:// store");
    return 2;
  }
  char why[600];
  if (hookd_store_url_check(store, why, sizeof why) != 0) { /* (as `serve` reads the URL) */
    fprintf(stderr, WHO ": %s\n", why);
    return 2;
  }
  if (!hookd_cli_store_exists(WHO, store)) return 1;
  /* made new, never over a file there (another copy, the store itself), and private from the
   * start: the copy holds payloads, sealed secrets and key hashes */
  int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    fprintf(stderr, WHO ": cannot create %s: %s%s\n", to, strerror(errno),
            errno == EEXIST ? " (the copy goes to a new file: remove it or name another)" : "");
    return 1;
  }
  close(fd);
  sqlite3 *dst = NULL;
  int rc = copy(store + 7, to, &dst);
  char *key_id = NULL, *version = NULL;
  if (rc == 0) {
    key_id = copy_key_id(dst);
    version = one_text(dst, "SELECT MAX(version) FROM schema_migrations");
    rc = sqlite3_close(dst) == SQLITE_OK ? 0 : -1;
  }
  /* the copy's data synced (SQLite's commit synced its pages; the file once more, whole), and
   * its name in the directory: said done only once a power cut cannot take it (as the master
   * key file is synced) */
  char err[1200];
  if (rc == 0 && hookd_keyring_file_sync(to, err, sizeof err) != 0) {
    fprintf(stderr, WHO ": %s\n", err);
    rc = -1;
  }
  struct stat st;
  if (rc == 0 && stat(to, &st) == 0) {
    printf("backed up %s to %s (%lld bytes, schema version %s)\n", store + 7, to,
           (long long)st.st_size, version ? version : "?");
    if (key_id)
      printf("its secrets open with master key %s: keep that key (not in the copy) apart from "
             "it, and as safe\n",
             key_id);
    else
      printf("it holds no secret sealed by a master key yet\n");
  } else { /* no partial copy left to be taken for a backup, nor its journal */
    static const char *const sides[] = {"", "-journal", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
      char side[4200];
      snprintf(side, sizeof side, "%s%s", to, sides[i]);
      unlink(side);
    }
    rc = -1;
  }
  free(key_id);
  free(version);
  return rc == 0 ? 0 : 1;
}

/* store_check.c — the CLI's commands that only work on an existing store say so, instead of
 * creating (and migrating) an empty one at a mistyped path. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "store/store.h"

bool hookd_cli_store_exists(const char *who, const char *url) {
  if (strncmp(url, "sqlite:", 7) != 0) return true; /* a server's database: it says itself */
  struct stat st;
  bool exists = stat(url + 7, &st) == 0;
  /* nor a device (SQLite would write its journal beside /dev/null), a directory or a pipe: the
   * lock's own check (store.c), said before the user's access */
  char err[1300];
  if (exists && !S_ISREG(st.st_mode) && hookd_store_file_check(url, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s (--store sqlite:PATH, or HOOKD_STORE)\n", who, err);
    return false;
  }
  /* a store of another user's (the daemon's): its connections write (the WAL's files, the
   * lock), so even a command that reads cannot — said as such, not as "attempt to write a
   * readonly database" or a running daemon (a review) */
  if (exists && st.st_size > 0 && access(url + 7, R_OK | W_OK) != 0) {
    if (errno == EROFS) { /* (not the user's: the mount's — a review) */
      fprintf(stderr, "%s: %s is on a read-only file system: a store's connections write (its "
                      "WAL, its lock) even to read\n", who, url + 7);
      return false;
    }
    fprintf(stderr, "%s: %s cannot be read and written by this user (uid %u; the file's owner is "
                    "uid %u): run the command as the store's owner, e.g. sudo -u its user\n",
            who, url + 7, (unsigned)geteuid(), (unsigned)st.st_uid);
    return false;
  }
  if (exists && st.st_size > 0 && hookd_store_dir_check(url, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", who, err);
    return false;
  }
  /* an empty file is no store either: opening it would make it an SQLite database */
  if (exists && st.st_size > 0) return true;
  fprintf(stderr, "%s: no store at %s (--store sqlite:PATH, or HOOKD_STORE)%s\n", who, url + 7,
          exists ? ": the file is empty" : "");
  return false;
}

/* store_check.c — the CLI's commands that only work on an existing store say so, instead of
 * creating (and migrating) an empty one at a mistyped path. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

bool hookd_cli_store_exists(const char *who, const char *url) {
  if (strncmp(url, "sqlite:", 7) != 0) return true; /* a server's database: it says itself */
  if (access(url + 7, F_OK) == 0) return true;
  fprintf(stderr, "%s: no store at %s (--store sqlite:PATH, or HOOKD_STORE)\n", who, url + 7);
  return false;
}

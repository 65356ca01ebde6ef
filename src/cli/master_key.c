/* master_key.c — which master key a CLI command opens a store's sealed secrets with, by the
 * daemon's rules (docs/security.md): --master-key-file, else HOOKD_MASTER_KEY_FILE, else
 * HOOKD_MASTER_KEY, else an embedded store's key file beside it (<db>.key). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "daemon/keyring.h"

int hookd_cli_master_key_file(const char *who, const char *flag_file, const char *store,
                              char *buf, size_t cap, const char **out) {
  const char *env = getenv("HOOKD_MASTER_KEY_FILE");
  const char *file = flag_file ? flag_file : env && *env ? env : NULL;
  if (file && hookd_master_key_env()) {
    fprintf(stderr, "%s: both HOOKD_MASTER_KEY and a master key file (%s) name the key: keep one\n",
            who, file);
    return -1;
  }
  if (!file && !hookd_master_key_env() && store && strncmp(store, "sqlite:", 7) == 0) {
    snprintf(buf, cap, "%s.key", store + 7);
    file = buf;
  }
  *out = file; /* NULL: HOOKD_MASTER_KEY (hookd_keyring_read reads it) */
  return 0;
}

/* cmd_serve.c — `hookd serve`: load the configuration, run the daemon. */
#include <stdio.h>

#include "cli/cli.h"
#include "daemon/config.h"
#include "daemon/daemon.h"

int hookd_cmd_serve(int argc, char **argv) {
  hookd_config cfg;
  hookd_config_defaults(&cfg);
  char err[512];
  int rc = hookd_config_load(&cfg, argc, argv, err, sizeof err);
  if (rc != 0) {
    if (rc < 0) fprintf(stderr, "hookd serve: %s\n", err);
    hookd_config_free(&cfg);
    return rc < 0 ? 2 : 0;
  }
  rc = hookd_serve(&cfg);
  hookd_config_free(&cfg);
  return rc;
}

/* cmd_serve.c — `hookd serve`: load the configuration, run the daemon. */
#include <signal.h>
#include <stdio.h>

#include "cli/cli.h"
#include "daemon/config.h"
#include "daemon/daemon.h"

int hookd_cmd_serve(int argc, char **argv) {
  /* a stop asked for while the configuration is read (a --config file, a slow disk) waits for
   * the daemon's signal loop, which stops it as it would later: exit 0, not a death by the
   * signal (a chaos review: a supervisor's SIGTERM 30–140 ms after the start) */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP); /* (a reload asked for meanwhile: done at the start, not a death) */
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
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

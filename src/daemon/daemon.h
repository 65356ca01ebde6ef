/* daemon.h — `hookd serve`: start every part in order, run until SIGTERM/SIGINT, stop them in
 * the reverse order without losing acknowledged work. */
#ifndef HOOKD_DAEMON_DAEMON_H
#define HOOKD_DAEMON_DAEMON_H

#include "daemon/config.h"

/* Returns the process exit code (0 after a clean shutdown). */
int hookd_serve(const hookd_config *cfg);

#endif

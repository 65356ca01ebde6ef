/* replayer.h — the thread that runs replay jobs (docs/replay.md): it steps every running job
 * at its rate through the store writer and hints the dispatcher of what it made due. */
#ifndef HOOKD_DAEMON_REPLAYER_H
#define HOOKD_DAEMON_REPLAYER_H

#include <stddef.h>

#include "daemon/dispatcher.h"
#include "store/store.h"

typedef struct hookd_replayer hookd_replayer;

/* Starts the thread; its first step resumes jobs left running by a stop or a crash. With no
 * job running it sleeps until woken, or for idle_ms at most when idle_ms > 0 (a shared store:
 * jobs confirmed through, or left by, other nodes). */
hookd_replayer *hookd_replayer_start(hookd_store *store, hookd_dispatcher *disp, int idle_ms,
                                     char *err, size_t errlen);
/* A job was confirmed or resumed: step now (thread-safe; NULL is ignored). */
void hookd_replayer_wake(hookd_replayer *r);
/* Stops and frees (before the dispatcher and the store). */
void hookd_replayer_stop(hookd_replayer *r);

#endif

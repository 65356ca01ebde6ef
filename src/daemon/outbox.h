/* outbox.h — the transactional outbox's relay (docs/outbox.md, O2): a thread that moves the
 * rows a producer committed to an outbox table of its PostgreSQL database into the engine, at
 * least once, each under its row's event id (the engine's dedup makes a repeat invisible). */
#ifndef HOOKD_DAEMON_OUTBOX_H
#define HOOKD_DAEMON_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/app.h"

typedef struct hookd_outbox hookd_outbox;

/* Starts the relay for app->cfg's --outbox-url (NULL, with nothing in err, when none is set).
 * It connects in its own thread: a database that cannot be reached is retried, never fatal. */
hookd_outbox *hookd_outbox_start(hookd_app *app, char *err, size_t errlen);
/* Stops it (a query running is cancelled; publishes submitted are waited for, the shutdown
 * grace at most, 1 s at least) and frees it: before the dispatcher and the store. NULL is
 * ignored. True when publishes were abandoned unanswered (outbox.settle_abandoned): their
 * outcomes would reach what the stop frees next, so the caller ends the process. */
bool hookd_outbox_stop(hookd_outbox *o);

#endif

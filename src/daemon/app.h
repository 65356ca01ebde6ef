/* app.h — what the API handlers share: configuration, the store, the dispatcher, the key cache.
 * One instance per `hookd serve`. */
#ifndef HOOKD_DAEMON_APP_H
#define HOOKD_DAEMON_APP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/clock.h"
#include "core/jsonio.h"
#include "daemon/auth.h"
#include "daemon/config.h"
#include "daemon/destination.h"
#include "daemon/dispatcher.h"
#include "core/cursor.h"
#include "daemon/keyring.h"
#include "daemon/replayer.h"
#include "daemon/server.h"
#include "daemon/rejections.h"
#include "daemon/sources.h"
#include "store/store.h"

/* A shared store's change feed as last reported: not listened yet, listening, or down
 * (store.watch_down logged, store.watch_up not yet). */
enum { HOOKD_WATCH_NOT_YET = 0, HOOKD_WATCH_LISTENING = 1, HOOKD_WATCH_DOWN = 2 };

/* Where a retention walk in seq order goes on at its next run (daemon.c purge_walk): past the
 * rows it kept (a record whose forward is open, an event a disabled endpoint still owes), which
 * are read again by a walk from the start once an hour, not every minute. */
typedef struct hookd_walk_cursor {
  int64_t resume_seq; /* the end of the last full batch of the walk before (0: the start) */
  int64_t full_at_ms; /* monotonic: the next walk from the start is due then */
} hookd_walk_cursor;

typedef struct hookd_app {
  const hookd_config *cfg;
  hookd_store *store;
  hookd_dispatcher *disp;
  hookd_replayer *replayer;  /* runs replay jobs (docs/replay.md) */
  hookd_server *srv;
  hookd_auth *auth;
  hookd_destinations *dest;
  hookd_keyring keyring;     /* seals and opens secrets at rest */
  hookd_cursor_key cursor_key; /* seals list cursors (derived from the master key) */
  hookd_source_cache *sources; /* inbound sources, for the receive path */
  hookd_rejections *rejections; /* what the receive path refused lately, per source */
  hookd_json_limits json_limits;
  _Atomic bool ready;       /* /readyz: store open, dispatcher running, not shutting down */
  _Atomic bool started;     /* everything above is set up: routes other than /healthz and
                             * /readyz may run (the listener opens before the store, so that a
                             * supervisor's liveness probe is answered during a slow start) */
  int64_t started_ms, started_mono_ms; /* the start, read from both clocks at once */
  hookd_bounded_clock retention_clock; /* retention's "now" (core/clock.h), from the start */
  int64_t retention_behind_logged;     /* its behind_max as last logged */
  bool retention_held;                 /* retention.held logged, not yet retention.resumed */
  int64_t retention_used[3];           /* the windows last walked by (inbox, payload, event) */
  _Atomic int64_t retention_walked_ms; /* wall clock: the last round finished whole (0: none) */
  hookd_walk_cursor inbox_walk, payload_walk, expire_walk; /* the seq-ordered walks' */
  int64_t refreshed_ms;     /* the main loop's last reload of keys and sources (monotonic) */
  int64_t ticked_ms;        /* its last round of duties: checkpoints, deletes (monotonic) */
  bool reload_asked;        /* a SIGHUP came since that reload: another is due (daemon.c) */
  bool reload_failed;       /* that reload failed: tried again at the next round */
  int64_t keys_stamp, sources_stamp; /* the change stamps their last reads went with (-1: none
                                      * known: the next round reads the table) */
  pthread_t main_thread;    /* the one that waits for signals: a SIGHUP to it reloads */
  uint64_t ckpt_failures_logged; /* store checkpoint failures already logged (main thread) */
  int64_t ckpt_logged_ms;        /* when the last store.checkpoint_failed line was (monotonic) */
  bool ckpt_failing;             /* failing as last logged: the next success is logged too */
  _Atomic int watch_state;       /* a shared store's change feed (its thread): HOOKD_WATCH_* */
  _Atomic int64_t stop_began_ms; /* monotonic: the main loop took a stop signal (daemon.c) */
  _Atomic bool stop_watch_done;  /* the stop's watchdog may end (daemon.c) */
  /* the store's count of deliveries waiting to be sent, and when it was read (monotonic; 0:
   * not yet): every HOOKD_BACKLOG_EVERY_MS by the main loop, shown by /metrics */
  _Atomic int64_t backlog, backlog_read_mono_ms;
} hookd_app;

#define HOOKD_BACKLOG_EVERY_MS 30000
#define HOOKD_BACKLOG_CAP 1000000

/* The request handler installed in the server (router.c). */
void hookd_api_handle(hookd_req *r, void *app);
/* The server's gate (server.h): judges a request on its head; false once it has answered. */
bool hookd_api_gate(hookd_req *r, void *app);
/* The server's word of a request it answered 413 (server.h): a provider's, counted. */
void hookd_api_too_large(hookd_req *r, void *app);

#endif

/* pg_store.h — what the rest of hookd sees of the PostgreSQL backend (docs/postgres.md): its ops
 * table and its shared state. */
#ifndef HOOKD_STORE_PG_STORE_H
#define HOOKD_STORE_PG_STORE_H

#include <stddef.h>

#include "store/store.h"

/* Opens the backend's shared state for a postgres:// or postgresql:// URL. node_id (NULL: none):
 * the writer connection holds the node's lock for its life (a second live node of that id is
 * refused). */
int hookd_pg_shared_open(const char *url, const char *node_id, void **shared, char *err,
                         size_t errlen);
void hookd_pg_shared_free(void *shared);
/* Waits, up to wait_s, for the server to accept connections: while it cannot be reached or
 * rejects them (starting up, shutting down), asking every 500 ms; waiting(reason, wait_s) is
 * told once (NULL: nobody). Returns 0 once it accepts them or the wait is over (the open that follows
 * then fails with libpq's words), HOOKD_STORE_STOPPED when stop() (NULL: never) asks to.
 * The writer's first open then waits as long for the node id's lock, should another session
 * hold it (told waiting() too; a stop: the open returns HOOKD_STORE_STOPPED). */
int hookd_pg_wait_ready(void *shared, int wait_s, bool (*stop)(void),
                        void (*waiting)(const char *reason, int wait_s));

/* A session's statement turning JIT off (a plan priced past jit_above_cost is compiled at each
 * run: 0.3 s, docs/postgres.md "Data flow"); servers before PostgreSQL 11 have none. hookd's
 * store sessions and the outbox relay's run it. */
#define HOOKD_PG_NO_JIT                                                                         \
  "DO $$ BEGIN PERFORM set_config('jit', 'off', false);"                                       \
  " EXCEPTION WHEN undefined_object THEN NULL; END $$"

/* For a CLI command that must not run beside hookd (a master-key rotation): refuses when a node
 * runs on the store (each holds its node lock), and holds the store's migration lock (a node
 * starting meanwhile waits) on a connection of its own until hookd_pg_unlock_offline. */
int hookd_pg_lock_offline(const char *url, void **held, char *err, size_t errlen);
void hookd_pg_unlock_offline(void *held);

/* Retention's indexes (pg_indexes.c, docs/postgres.md "Retention's indexes"): one step of the
 * build of those the walks asked for, on a connection of its own outside any transaction
 * (CREATE INDEX CONCURRENTLY), waiting for the server 250 ms at most. The main thread's, at each
 * round of its loop. 1: every index asked for is valid now (the walks may run again at once);
 * 0: nothing new; -1: a build failed (err; tried again a minute later). */
int hookd_pg_indexes_step(void *shared, char *err, size_t errlen);

/* The change feed (pg_watch.c, docs/postgres.md "Several nodes"): a thread of its own listens
 * for the changes of the endpoints and tenants (and the nodes' first clock checks) any node
 * commits, and calls changed(arg, what)
 * (HOOKD_STORE_WATCH_*). Stopped (and joined) by hookd_pg_watch_stop. */
typedef struct hookd_pg_watch hookd_pg_watch;
int hookd_pg_watch_start(void *shared, void (*changed)(void *arg, int what, int64_t seq),
                         void *arg,
                         hookd_pg_watch **out, char *err, size_t errlen);
void hookd_pg_watch_stop(hookd_pg_watch *w);

extern const hookd_store_backend hookd_pg_backend;

#endif

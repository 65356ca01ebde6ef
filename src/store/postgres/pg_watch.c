/* pg_watch.c — the PostgreSQL store's change feed (docs/postgres.md "Several nodes"): a thread
 * with a connection of its own LISTENs on hookd_config, which the triggers of migrations 3 to 5
 * notify when a change to the endpoints or tenants, a node's first clock check, or a change to
 * the API keys or sources commits, and calls back so that the node reads the change at once
 * instead of at its next rescan or reload. It reconnects by itself, and while idle asks its
 * server every WATCH_CHECK_MS whether it still takes writes: after a failover that leaves the
 * old primary up, fenced read-only, the session there stayed connected and never heard a
 * notification again (the writers had moved), so it goes to the server that takes them (a
 * multi-host URL's new primary). Every wait (connect, LISTEN, notifications, a check) also
 * watches a pipe, so a stop never waits on the database (libpq resolves a host name before the
 * first wait, though: a resolver that hangs holds the stop). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "store/postgres/pg_int.h"

#define WATCH_CONNECT_TIMEOUT_MS 10000 /* PG_CONNECT_TIMEOUT_S: libpq ignores it when polled */
#define WATCH_RETRY_MIN_MS 1000
#define WATCH_RETRY_MAX_MS 30000
/* A session that listened this long resets the backoff: one ended sooner (a server that ends
 * idle sessions, a pooler) is connected again later and later, not in a loop. */
#define WATCH_STABLE_MS 30000
/* How often an idle session asks whether its server still takes writes (a fence, a demotion),
 * and the question: the server's own answer, whatever its version reports by itself. */
#define WATCH_CHECK_MS 30000
#define WATCH_CHECK_SQL                                                                         \
  "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'"

struct hookd_pg_watch {
  char *url;
  void (*changed)(void *arg, int what, int64_t seq);
  void *arg;
  int stop_pipe[2];
  pthread_t thread;
};

/* Waits until fd is ready for ev, the time is up, or a stop is asked: 1 ready, 0 time up (or
 * the wait failed), -1 stop. timeout_ms < 0: no time limit. */
static int wait_fd(hookd_pg_watch *w, int fd, short ev, int64_t timeout_ms) {
  struct pollfd p[2] = {{.fd = w->stop_pipe[0], .events = POLLIN}, {.fd = fd, .events = ev}};
  for (;;) {
    int rc = poll(p, 2, timeout_ms < 0 ? -1 : (int)timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return 0;
    if (p[0].revents) return -1;
    return rc > 0 ? 1 : 0;
  }
}

/* A connection that listens, or NULL (*stop: a stop was asked). */
static PGconn *watch_connect(hookd_pg_watch *w, bool *stop) {
  const char *const keys[] = PG_LINK_KEYS;
  const char *const vals[] = PG_LINK_VALS(w->url, "hookd-watch");
  PGconn *pg = PQconnectStartParams(keys, vals, 1);
  if (!pg || PQstatus(pg) == CONNECTION_BAD) goto bad;
  PQsetNoticeProcessor(pg, pg_no_notices, NULL);
  int64_t deadline = hookd_mono_ms() + WATCH_CONNECT_TIMEOUT_MS;
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK;) {
    if (st == PGRES_POLLING_FAILED) goto bad;
    int64_t left = deadline - hookd_mono_ms();
    int r = left > 0 ? wait_fd(w, PQsocket(pg), st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                               left)
                     : 0;
    if (r <= 0) {
      *stop = r < 0;
      goto bad;
    }
    st = PQconnectPoll(pg);
  }
  if (!PQsendQuery(pg, "LISTEN hookd_config")) goto bad;
  bool ok = false;
  for (;;) {
    while (!PQisBusy(pg)) {
      PGresult *r = PQgetResult(pg);
      if (!r) {
        if (ok) return pg;
        goto bad;
      }
      ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
    }
    int r = wait_fd(w, PQsocket(pg), POLLIN, WATCH_CONNECT_TIMEOUT_MS);
    if (r <= 0 || !PQconsumeInput(pg)) {
      *stop = r < 0;
      goto bad;
    }
  }
bad:
  PQfinish(pg);
  return NULL;
}

static void *watch_main(void *arg) {
  hookd_pg_watch *w = arg;
  int64_t retry_ms = WATCH_RETRY_MIN_MS;
  bool down_told = false;
  for (;;) {
    bool stop = false;
    PGconn *pg = watch_connect(w, &stop);
    if (stop) break;
    if (!pg) {
      if (!down_told) w->changed(w->arg, HOOKD_STORE_WATCH_DOWN, 0);
      down_told = true;
      if (wait_fd(w, -1, 0, retry_ms) < 0) break;
      retry_ms = retry_ms * 2 < WATCH_RETRY_MAX_MS ? retry_ms * 2 : WATCH_RETRY_MAX_MS;
      continue;
    }
    int64_t up_at = hookd_mono_ms();
    down_told = false;
    w->changed(w->arg, HOOKD_STORE_WATCH_UP, 0); /* what was sent while it did not listen is lost */
    /* when the next check is due; while one is out (checking), when its answer is late */
    int64_t due = up_at + WATCH_CHECK_MS;
    bool checking = false;
    for (;;) {
      int64_t left = due - hookd_mono_ms();
      int r = wait_fd(w, PQsocket(pg), POLLIN, left > 0 ? left : 0);
      if (r < 0) {
        stop = true;
        break;
      }
      if (r == 0 && hookd_mono_ms() >= due) {
        if (checking || !PQsendQuery(pg, WATCH_CHECK_SQL)) break; /* unanswered: connected again */
        checking = true;
        due = hookd_mono_ms() + WATCH_CONNECT_TIMEOUT_MS;
        continue;
      }
      if (!PQconsumeInput(pg)) break; /* the link failed: connected again */
      if (checking && !PQisBusy(pg)) {
        bool writes = true;
        for (PGresult *res; (res = PQgetResult(pg)) != NULL; PQclear(res))
          if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
              strcmp(PQgetvalue(res, 0, 0), "f") != 0)
            writes = false;
        if (!writes || pg_reports_read_only(pg)) break; /* to a server that takes them */
        checking = false;
        due = hookd_mono_ms() + WATCH_CHECK_MS;
      }
      /* (the payload: the table changed, migrations 3–5; "event_purged:SEQ", an event's
       * payload deleted: pg_event_payload_delete) */
      bool any = false, keys = false;
      for (PGnotify *n; (n = PQnotifies(pg)) != NULL; PQfreemem(n)) {
        if (!strcmp(n->extra, "api_keys") || !strcmp(n->extra, "sources")) keys = true;
        else if (!strncmp(n->extra, PG_PURGED_NOTE, sizeof PG_PURGED_NOTE - 1)) {
          long long seq = strtoll(n->extra + sizeof PG_PURGED_NOTE - 1, NULL, 10);
          if (seq > 0) w->changed(w->arg, HOOKD_STORE_WATCH_PURGED, seq);
        } else {
          any = true;
        }
      }
      if (keys) w->changed(w->arg, HOOKD_STORE_WATCH_KEYS, 0);
      if (any) w->changed(w->arg, HOOKD_STORE_WATCH_CHANGE, 0);
    }
    PQfinish(pg);
    if (stop) break;
    w->changed(w->arg, HOOKD_STORE_WATCH_DOWN, 0);
    down_told = true;
    if (hookd_mono_ms() - up_at >= WATCH_STABLE_MS) {
      retry_ms = WATCH_RETRY_MIN_MS;
      continue; /* connected again at once */
    }
    if (wait_fd(w, -1, 0, retry_ms) < 0) break;
    retry_ms = retry_ms * 2 < WATCH_RETRY_MAX_MS ? retry_ms * 2 : WATCH_RETRY_MAX_MS;
  }
  return NULL;
}

int hookd_pg_watch_start(void *shared, void (*changed)(void *arg, int what, int64_t seq), void *arg,
                         hookd_pg_watch **out, char *err, size_t errlen) {
  *out = NULL;
  hookd_pg_watch *w = calloc(1, sizeof *w);
  if (!w || !(w->url = strdup(pg_shared_url(shared)))) {
    free(w);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  w->changed = changed;
  w->arg = arg;
  if (pipe(w->stop_pipe) != 0) {
    snprintf(err, errlen, "the change feed's pipe: %s", strerror(errno));
    free(w->url);
    free(w);
    return -1;
  }
  if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
    snprintf(err, errlen, "the change feed's thread could not start");
    close(w->stop_pipe[0]);
    close(w->stop_pipe[1]);
    free(w->url);
    free(w);
    return -1;
  }
  *out = w;
  return 0;
}

void hookd_pg_watch_stop(hookd_pg_watch *w) {
  if (!w) return;
  ssize_t k;
  do k = write(w->stop_pipe[1], "x", 1);
  while (k < 0 && errno == EINTR);
  pthread_join(w->thread, NULL);
  close(w->stop_pipe[0]);
  close(w->stop_pipe[1]);
  free(w->url);
  free(w);
}

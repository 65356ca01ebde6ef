/* pg_indexes.c — retention's indexes on a PostgreSQL store (docs/postgres.md "Retention's
 * indexes"). A walk (in the writer's transaction) that finds an index it needs missing or not
 * valid asks for it and does nothing; the main thread, which drives retention, builds what was
 * asked with CREATE INDEX CONCURRENTLY on a connection of its own, outside any transaction, a
 * bounded step at each round of its loop: no build holds a lock that stops the writers (a plain
 * CREATE INDEX in the walk's transaction held a SHARE lock on events, and the writer lock, for
 * the whole build). An INVALID index (a build that failed or was cut short) is dropped
 * concurrently and built again. The builders of all nodes take turns under a session advisory
 * lock, tried at each round, never waited for (a waiting statement holds a snapshot that the
 * other's build waits for). */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/postgres/pg_int.h"

#define RIX_STEP_MS 250     /* the most a step waits for the server (the main thread's) */
#define RIX_RETRY_MS 60000  /* after a failure: the next retention round */
#define RIX_CONNECT_MS 10000 /* the most the connection may take (over rounds) */
#define RIX_SHORT_MS 30000   /* the most a short statement may take (a build: no limit) */
/* The builders' lock: hookd's first key, "indx" in ASCII (left out of PG_NODE_LOCKS). */
#define RIX_TRY_LOCK "SELECT pg_try_advisory_lock(1752133476, 1768842360)"

static const struct {
  unsigned bit;
  const char *name, *create;
} defs[] = {
    {PG_RIX_EVENTS_OUTBOUND, "events_outbound",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS events_outbound ON events(seq, created_at)"
     " WHERE kind = 'outbound'"},
    {PG_RIX_KEYS_EVENT, "idempotency_keys_event",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_event"
     " ON idempotency_keys(event_seq)"},
    {PG_RIX_LANES_SEEN, "lane_versions_seen",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS lane_versions_seen ON lane_versions(seen_at)"},
    {PG_RIX_EVENTS_UNPURGED, "events_unpurged",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS events_unpurged ON events(seq)"
     " WHERE purged_at IS NULL AND kind = 'outbound'"},
};
#define N_DEFS (sizeof defs / sizeof defs[0])

/* What is in flight on the builder's connection: nothing, the connection being made, or one
 * statement (the session's settings, the lock tried, an index's state read, a drop, a build). */
enum {
  RIX_IDLE,
  RIX_CONNECTING,
  RIX_SETTING,
  RIX_LOCKING,
  RIX_CHECKING,
  RIX_DROPPING,
  RIX_CREATING
};

struct pg_rix {
  _Atomic unsigned wanted; /* asked for by the walks (the writer's thread), cleared once valid */
  PGconn *pg;              /* the builder's connection (the main thread's); NULL: none */
  bool locked;             /* it holds the builders' lock */
  int phase;               /* what is in flight on pg */
  PostgresPollingStatusType polling; /* RIX_CONNECTING: what PQconnectPoll last asked for */
  int64_t phase_until;     /* the connection or a short statement fails past it (monotonic) */
  char answer[8];          /* a short statement's one value ("" for NULL) */
  char failed[300];        /* the statement's error, once one of its results said it */
  size_t at;               /* the index of defs being built */
  bool built;              /* defs[at] was built by this connection: it must be valid now */
  int64_t retry_at;        /* after a failure, no connection before (monotonic ms) */
};

pg_rix *pg_rix_new(void) { return calloc(1, sizeof(pg_rix)); }

void pg_rix_free(pg_rix *x) {
  if (!x) return;
  if (x->pg && (x->phase == RIX_DROPPING || x->phase == RIX_CREATING)) {
    /* a stop during a build: the next one starts over */
    PGcancel *k = PQgetCancel(x->pg);
    char buf[256];
    if (k) PQcancel(k, buf, sizeof buf);
    PQfreeCancel(k);
  }
  PQfinish(x->pg);
  free(x);
}

int pg_rix_ready(hookd_store_conn *c, unsigned need, int64_t *after_seq) {
  pg_arr names;
  pg_arr_init(&names);
  for (size_t i = 0; i < N_DEFS; i++)
    if (need & defs[i].bit) pg_arr_text(&names, defs[i].name);
  const char *lit = pg_arr_done(&names);
  if (!lit) {
    pg_arr_free(&names);
    return pg_fail(c, "retention indexes: out of memory");
  }
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, lit);
  /* (a catalog read: no lock on the tables) */
  PGresult *r = pg_q(c,
                     "SELECT x.n FROM unnest($1::text[]) AS x(n) WHERE NOT EXISTS (SELECT 1"
                     " FROM pg_index i WHERE i.indexrelid = to_regclass(x.n) AND i.indisvalid)",
                     &p, "retention indexes");
  pg_arr_free(&names);
  if (!r) return -1;
  unsigned missing = 0;
  for (int row = 0; row < PQntuples(r); row++)
    for (size_t i = 0; i < N_DEFS; i++)
      if (!strcmp(PQgetvalue(r, row, 0), defs[i].name)) missing |= defs[i].bit;
  PQclear(r);
  if (!missing) return 1;
  atomic_fetch_or(&pg_shared_rix(c->sh)->wanted, missing);
  if (after_seq) *after_seq = 0;
  return 0;
}

/* Ends the builder's session (its lock with it); after a failure, none before the next round. */
static void rix_close(pg_rix *x, bool failed) {
  PQfinish(x->pg);
  x->pg = NULL;
  x->locked = x->built = false;
  x->phase = RIX_IDLE;
  if (failed) x->retry_at = hookd_mono_ms() + RIX_RETRY_MS;
}

/* A failure of the builder's: err says what (the server's words, on one line). */
static int rix_fail(pg_rix *x, const char *what, const char *msg, char *err, size_t errlen) {
  size_t n = strcspn(msg, "\n");
  snprintf(err, errlen, "%s: %.*s", what, (int)n, *msg ? msg : "the link failed");
  rix_close(x, true);
  return -1;
}

/* What a failure of the statement in flight is reported as. */
static const char *rix_what(const pg_rix *x) {
  return x->phase == RIX_DROPPING || x->phase == RIX_CREATING ? defs[x->at].name
                                                              : "retention indexes";
}

/* Waits (until `until` at most) for pg's socket to be ready for `events`: 1 ready, 0 not yet,
 * -1 failed (err set). */
static int rix_wait(pg_rix *x, short events, int64_t until, char *err, size_t errlen) {
  int64_t left = until - hookd_mono_ms();
  if (left <= 0) return 0;
  struct pollfd p = {.fd = PQsocket(x->pg), .events = events};
  if (p.fd < 0) return rix_fail(x, rix_what(x), "the link failed", err, errlen);
  int n = poll(&p, 1, (int)left);
  if (n < 0 && errno != EINTR) return rix_fail(x, rix_what(x), strerror(errno), err, errlen);
  return n > 0;
}

/* Starts the connection without waiting for it (the name's resolution excepted). */
static int rix_start(pg_rix *x, const char *url, char *err, size_t errlen) {
  const char *const keys[] = PG_LINK_KEYS;
  const char *vals[] = PG_LINK_VALS(url, "hookd-index");
  x->pg = PQconnectStartParams(keys, vals, 1);
  if (!x->pg) {
    snprintf(err, errlen, "retention indexes: out of memory");
    x->retry_at = hookd_mono_ms() + RIX_RETRY_MS;
    return -1;
  }
  if (PQstatus(x->pg) == CONNECTION_BAD)
    return rix_fail(x, "retention indexes: cannot connect", PQerrorMessage(x->pg), err, errlen);
  x->phase = RIX_CONNECTING;
  x->polling = PGRES_POLLING_WRITING; /* (what libpq's documentation says to start with) */
  x->phase_until = hookd_mono_ms() + RIX_CONNECT_MS;
  return 0;
}

/* The connection being made: 1 made, 0 not yet when `until` came, -1 failed (err set). */
static int rix_connect_poll(pg_rix *x, int64_t until, char *err, size_t errlen) {
  static const char *const what = "retention indexes: cannot connect";
  while (x->polling != PGRES_POLLING_OK) {
    if (x->polling == PGRES_POLLING_FAILED)
      return rix_fail(x, what, PQerrorMessage(x->pg), err, errlen);
    if (hookd_mono_ms() >= x->phase_until)
      return rix_fail(x, what, "no answer within 10 s", err, errlen);
    int64_t by = until < x->phase_until ? until : x->phase_until;
    short ev = x->polling == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    int ready = rix_wait(x, ev, by, err, errlen);
    if (ready < 0) return -1;
    if (ready) x->polling = PQconnectPoll(x->pg);
    else if (hookd_mono_ms() >= until) return 0;
  }
  PQsetNoticeProcessor(x->pg, pg_no_notices, NULL); /* (IF NOT EXISTS that found it) */
  PQsetErrorVerbosity(x->pg, PQERRORS_TERSE);
  if (PQsetnonblocking(x->pg, 1) != 0)
    return rix_fail(x, "retention indexes", PQerrorMessage(x->pg), err, errlen);
  return 1;
}

/* The statement in flight: 1 done (a short statement's value in x->answer), 0 still running
 * when `until` came, -1 failed (err set). Each result is taken once it is whole, never waited
 * for: PQgetResult blocks for a result (or the end) still to come, even on a non-blocking
 * connection — the settings' two statements answer twice. */
static int rix_poll(pg_rix *x, int64_t until, char *err, size_t errlen) {
  bool bounded = x->phase != RIX_DROPPING && x->phase != RIX_CREATING;
  for (;;) {
    int flushed = PQflush(x->pg); /* (non-blocking: what the socket did not take yet) */
    if (flushed < 0) return rix_fail(x, rix_what(x), PQerrorMessage(x->pg), err, errlen);
    if (!PQconsumeInput(x->pg)) return rix_fail(x, rix_what(x), PQerrorMessage(x->pg), err, errlen);
    while (!flushed && !PQisBusy(x->pg)) {
      PGresult *r = PQgetResult(x->pg);
      if (!r) /* the statement's end */
        return x->failed[0] ? rix_fail(x, rix_what(x), x->failed, err, errlen) : 1;
      ExecStatusType st = PQresultStatus(r);
      if (st == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 1)
        snprintf(x->answer, sizeof x->answer, "%s",
                 PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
      else if (st != PGRES_COMMAND_OK && !x->failed[0])
        snprintf(x->failed, sizeof x->failed, "%s", PQresultErrorMessage(r));
      PQclear(r);
    }
    if (bounded && hookd_mono_ms() >= x->phase_until)
      return rix_fail(x, rix_what(x), "no answer within 30 s", err, errlen);
    int64_t by = bounded && x->phase_until < until ? x->phase_until : until;
    int ready = rix_wait(x, flushed ? POLLIN | POLLOUT : POLLIN, by, err, errlen);
    if (ready < 0) return -1;
    if (!ready && hookd_mono_ms() >= until) return 0;
  }
}

/* Sends a statement (param: its one parameter, or NULL) without waiting for it. */
static int rix_send(pg_rix *x, const char *sql, const char *param, int phase, char *err,
                    size_t errlen) {
  x->phase = phase;
  x->phase_until = hookd_mono_ms() + RIX_SHORT_MS;
  x->answer[0] = x->failed[0] = '\0';
  int ok = param ? PQsendQueryParams(x->pg, sql, 1, NULL, &param, NULL, NULL, 0)
                 : PQsendQuery(x->pg, sql);
  if (!ok) return rix_fail(x, rix_what(x), PQerrorMessage(x->pg), err, errlen);
  return 0;
}

/* The next index asked for: its state read, or, none left, the session ended (1). */
static int rix_next(pg_rix *x, char *err, size_t errlen) {
  unsigned wanted = atomic_load(&x->wanted);
  size_t i = 0;
  while (i < N_DEFS && !(wanted & defs[i].bit)) i++;
  if (i == N_DEFS) { /* every index asked for is valid: the walks go on now */
    rix_close(x, false);
    return 1;
  }
  if (i != x->at) x->built = false;
  x->at = i;
  /* "": none; "false": INVALID (a build that failed, or was cut short); "true": valid */
  return rix_send(x,
                  "SELECT (SELECT i.indisvalid::text FROM pg_index i"
                  " WHERE i.indexrelid = to_regclass($1::text))",
                  defs[i].name, RIX_CHECKING, err, errlen);
}

int hookd_pg_indexes_step(void *shared, char *err, size_t errlen) {
  pg_rix *x = pg_shared_rix(shared);
  err[0] = '\0';
  if (!x->pg) {
    if (!atomic_load(&x->wanted) || hookd_mono_ms() < x->retry_at) return 0;
    if (rix_start(x, pg_shared_url(shared), err, errlen) != 0) return -1;
  }
  int64_t until = hookd_mono_ms() + RIX_STEP_MS;
  for (;;) {
    int done = x->phase == RIX_CONNECTING ? rix_connect_poll(x, until, err, errlen)
               : x->phase != RIX_IDLE     ? rix_poll(x, until, err, errlen)
                                          : 1;
    if (done <= 0) return done;
    int rc = 0;
    switch (x->phase) {
    case RIX_CONNECTING:
      /* a build takes as long as the table needs: no role's timeout cuts it short (into an
       * INVALID index, built again and cut short again) */
      rc = rix_send(x, "SET statement_timeout = 0; SET lock_timeout = 0", NULL, RIX_SETTING, err,
                    errlen);
      break;
    case RIX_DROPPING: /* the INVALID one gone: built again */
      rc = rix_send(x, defs[x->at].create, NULL, RIX_CREATING, err, errlen);
      break;
    case RIX_LOCKING:
      x->phase = RIX_IDLE;
      x->locked = !strcmp(x->answer, "t");
      if (!x->locked) return 0; /* another node builds: tried again at the next round */
      rc = rix_next(x, err, errlen);
      break;
    case RIX_CHECKING: {
      x->phase = RIX_IDLE;
      bool ok = !strcmp(x->answer, "true"), absent = !x->answer[0];
      if (ok) {
        atomic_fetch_and(&x->wanted, ~defs[x->at].bit);
        x->built = false;
        rc = rix_next(x, err, errlen);
        break;
      }
      if (x->built)
        return rix_fail(x, defs[x->at].name, "not valid after its build (dropped meanwhile?)", err,
                        errlen);
      if (hookd_mono_ms() >= until) return 0; /* (the next round reads its state again) */
      char drop[96];
      snprintf(drop, sizeof drop, "DROP INDEX CONCURRENTLY IF EXISTS %s", defs[x->at].name);
      rc = absent ? rix_send(x, defs[x->at].create, NULL, RIX_CREATING, err, errlen)
                  : rix_send(x, drop, NULL, RIX_DROPPING, err, errlen);
      break;
    }
    case RIX_CREATING:
      x->built = true; /* (its state is read next: it must be valid now) */
      /* fallthrough */
    default: /* RIX_SETTING, RIX_IDLE */
      x->phase = RIX_IDLE;
      rc = x->locked ? rix_next(x, err, errlen)
                     : rix_send(x, RIX_TRY_LOCK, NULL, RIX_LOCKING, err, errlen);
      break;
    }
    if (rc != 0) return rc; /* (1: every one valid, the session ended; -1 failed) */
  }
}

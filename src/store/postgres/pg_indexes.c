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

enum { RIX_IDLE, RIX_DROPPING, RIX_CREATING };

struct pg_rix {
  _Atomic unsigned wanted; /* asked for by the walks (the writer's thread), cleared once valid */
  PGconn *pg;              /* the builder's connection (the main thread's); NULL: none */
  bool locked;             /* it holds the builders' lock */
  int phase;               /* what is in flight on pg */
  size_t at;               /* the index of defs being built */
  bool built;              /* defs[at] was built by this connection: it must be valid now */
  int64_t retry_at;        /* after a failure, no connection before (monotonic ms) */
};

pg_rix *pg_rix_new(void) { return calloc(1, sizeof(pg_rix)); }

void pg_rix_free(pg_rix *x) {
  if (!x) return;
  if (x->pg && x->phase != RIX_IDLE) { /* a stop during a build: the next one starts over */
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

static int rix_connect(pg_rix *x, const char *url, char *err, size_t errlen) {
  const char *const keys[] = PG_LINK_KEYS;
  const char *vals[] = PG_LINK_VALS(url, "hookd-index");
  /* connect_timeout: this runs on the main thread (signals, reloads): a host that drops packets
   * holds it 2 s at most, not the store's 10 (the URL's own setting still wins) */
  vals[0] = "2";
  x->pg = PQconnectdbParams(keys, vals, 1);
  if (!x->pg) {
    snprintf(err, errlen, "retention indexes: out of memory");
    x->retry_at = hookd_mono_ms() + RIX_RETRY_MS;
    return -1;
  }
  if (PQstatus(x->pg) != CONNECTION_OK)
    return rix_fail(x, "retention indexes: cannot connect", PQerrorMessage(x->pg), err, errlen);
  PQsetNoticeProcessor(x->pg, pg_no_notices, NULL); /* (IF NOT EXISTS that found it) */
  PQsetErrorVerbosity(x->pg, PQERRORS_TERSE);
  /* a build takes as long as the table needs: no role's timeout cuts it short (into an
   * INVALID index, built again and cut short again) */
  PGresult *r = PQexec(x->pg, "SET statement_timeout = 0; SET lock_timeout = 0");
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) return rix_fail(x, "retention indexes", PQerrorMessage(x->pg), err, errlen);
  return 0;
}

/* A single-row, single-column answer of a short statement (blocking: a catalog read, a tried
 * lock), or NULL (the failure recorded in err, the session closed). */
static char *rix_one(pg_rix *x, const char *sql, const char *param, char *err, size_t errlen) {
  PGresult *r = PQexecParams(x->pg, sql, param ? 1 : 0, NULL, param ? &param : NULL, NULL, NULL,
                             0);
  char *v = NULL;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
    v = strdup(PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
  PQclear(r);
  if (!v) rix_fail(x, "retention indexes", PQerrorMessage(x->pg), err, errlen);
  return v;
}

/* The statement in flight: 1 done, 0 still running when `until` came, -1 failed (err set). */
static int rix_poll(pg_rix *x, int64_t until, char *err, size_t errlen) {
  for (;;) {
    if (!PQconsumeInput(x->pg))
      return rix_fail(x, defs[x->at].name, PQerrorMessage(x->pg), err, errlen);
    if (!PQisBusy(x->pg)) break;
    int64_t left = until - hookd_mono_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = PQsocket(x->pg), .events = POLLIN};
    if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
      return rix_fail(x, defs[x->at].name, strerror(errno), err, errlen);
  }
  char msg[300] = "";
  for (PGresult *r; (r = PQgetResult(x->pg)) != NULL; PQclear(r))
    if (PQresultStatus(r) != PGRES_COMMAND_OK && !msg[0])
      snprintf(msg, sizeof msg, "%s", PQresultErrorMessage(r));
  return msg[0] ? rix_fail(x, defs[x->at].name, msg, err, errlen) : 1;
}

static int rix_send(pg_rix *x, const char *sql, int phase, char *err, size_t errlen) {
  if (!PQsendQuery(x->pg, sql))
    return rix_fail(x, defs[x->at].name, PQerrorMessage(x->pg), err, errlen);
  x->phase = phase;
  return 0;
}

int hookd_pg_indexes_step(void *shared, char *err, size_t errlen) {
  pg_rix *x = pg_shared_rix(shared);
  err[0] = '\0';
  if (!x->pg) {
    if (!atomic_load(&x->wanted) || hookd_mono_ms() < x->retry_at) return 0;
    if (rix_connect(x, pg_shared_url(shared), err, errlen) != 0) return -1;
  }
  int64_t until = hookd_mono_ms() + RIX_STEP_MS;
  for (;;) {
    if (x->phase != RIX_IDLE) {
      int done = rix_poll(x, until, err, errlen);
      if (done <= 0) return done;
      if (x->phase == RIX_DROPPING) { /* the INVALID one gone: built again */
        if (rix_send(x, defs[x->at].create, RIX_CREATING, err, errlen) != 0) return -1;
        continue;
      }
      x->phase = RIX_IDLE;
      x->built = true; /* (checked below) */
    }
    if (!x->locked) {
      char *got = rix_one(x, RIX_TRY_LOCK, NULL, err, errlen);
      if (!got) return -1;
      x->locked = !strcmp(got, "t");
      free(got);
      if (!x->locked) return 0; /* another node builds: tried again at the next round */
    }
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
    char *valid = rix_one(x,
                          "SELECT (SELECT i.indisvalid::text FROM pg_index i"
                          " WHERE i.indexrelid = to_regclass($1::text))",
                          defs[i].name, err, errlen);
    if (!valid) return -1;
    bool ok = !strcmp(valid, "true"), absent = !valid[0];
    free(valid);
    if (ok) {
      atomic_fetch_and(&x->wanted, ~defs[i].bit);
      x->built = false;
      continue;
    }
    if (x->built)
      return rix_fail(x, defs[i].name, "not valid after its build (dropped meanwhile?)", err,
                      errlen);
    if (hookd_mono_ms() >= until) return 0; /* (the next round goes on) */
    char drop[96];
    snprintf(drop, sizeof drop, "DROP INDEX CONCURRENTLY IF EXISTS %s", defs[i].name);
    if (absent ? rix_send(x, defs[i].create, RIX_CREATING, err, errlen)
               : rix_send(x, drop, RIX_DROPPING, err, errlen))
      return -1;
  }
}
